"""Tasks as plugins: one file per task kind, registered by name; a run's tasks are `tasks=a,b,...`.

A name in `tasks=` is a registered kind (`nli`, `squad`, or one a plugin registered with
`register`) or the path of a task file (`./sick.toml`): a flat TOML table of the keys of a
kind (`kind = "pairs"` and its columns), naming the task after the file's stem.

This package's own names read and check configurations without loading any task's code (or
torch); `Task`, the contract a kind implements, is in `mtl.tasks.base`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.tasks.configs import SPLITS, TaskConfig, task_key
from mtl.tasks.kinds import (
    KINDS,
    config_class_for,
    config_class_of,
    config_classes,
    kind_of,
    register,
    seed_indices,
    title_of,
)

if TYPE_CHECKING:
    from mtl.tasks.base import Task  # the tasks' code loads torch: imported where a run needs it

DEFAULT_TASKS = ("nli", "squad")  # Liu et al. 2018: SNLI and ClassifSQuAD

__all__ = [
    "DEFAULT_TASKS",
    "KINDS",
    "SPLITS",
    "TaskConfig",
    "build_task",
    "config_class_for",
    "config_class_of",
    "config_classes",
    "default_tasks",
    "kind_of",
    "named_config",
    "register",
    "seed_indices",
    "task_title",
    "title_of",
]


def task_title(name: str, recorded: object) -> str:
    """How reports name a task recorded as `recorded` (its config as a dict): see `title_of`."""
    if not isinstance(recorded, dict):
        return name
    display = recorded.get("display")
    return title_of(name, str(recorded.get("kind", "")), display if isinstance(display, str) else "")


def build_task(name: str, config: TaskConfig) -> Task:
    return kind_of(config.kind)(name, config)


def default_tasks() -> dict[str, TaskConfig]:
    return dict(named_config(name) for name in DEFAULT_TASKS)


def named_config(entry: str) -> tuple[str, TaskConfig]:
    """(task name, its config) for an entry of `tasks=`: a registered kind, or a task file."""
    if entry.endswith(".toml"):
        return _from_file(Path(entry).expanduser())
    if "/" in entry or "." in entry:
        raise UserError(
            f"tasks= entry {entry!r} is neither a registered task ({', '.join(KINDS)}) nor a .toml file"
        )
    return entry, config_class_of(entry)()


def _from_file(path: Path) -> tuple[str, TaskConfig]:
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"task file {path} does not exist: fix the path in tasks=") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"task file {path} is not valid TOML ({error}): fix it") from None
    kind = values.pop("kind", None)
    if not isinstance(kind, str):
        raise UserError(f'task file {path} has no kind = "...": name one of {", ".join(KINDS)} (e.g. pairs)')
    if nested := [key for key, value in values.items() if isinstance(value, dict | list)]:
        raise UserError(f"task file {path}: {nested[0]!r} must be a plain key = value, not a table or list")
    text = {key: ("true" if v is True else "false" if v is False else str(v)) for key, v in values.items()}
    config_class = config_class_of(kind)
    try:
        keys = [f"{task_key(config_class, k, v)}={v}" for k, v in text.items()]
        config = apply_overrides(config_class(), keys)
    except UserError as error:
        raise UserError(f"task file {path}: {error}") from None
    if not path.stem.isidentifier():
        raise UserError(f"task file {path}: its stem names the task, so it must be a name such as sick_e")
    return path.stem, config
