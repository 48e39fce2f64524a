"""The registry of task kinds: a name in `tasks=` -> the `Task` class that reads, trains and scores it.

mtl's own kinds are imported when a run first uses them (their code loads torch); what a
configuration needs of them, their keys, comes from `configs.py` without that import.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from mtl.errors import UserError
from mtl.plugins import Registry, adds_to
from mtl.tasks.configs import (
    DistillConfig,
    NLIConfig,
    PairsConfig,
    QTConfig,
    RankingConfig,
    SkipThoughtConfig,
    SquadConfig,
    SquadRankingConfig,
    STSConfig,
    TaskConfig,
)

if TYPE_CHECKING:
    from mtl.tasks.base import Task
    from mtl.tasks.inputs import TaskInputs

# kind -> (the module whose import registers it, its config class, its input side in inputs.py)
BUILTIN: dict[str, tuple[str, type[TaskConfig], str]] = {
    "nli": ("mtl.tasks.nli", NLIConfig, "NLIInputs"),
    "pairs": ("mtl.tasks.pairs", PairsConfig, "PairsInputs"),
    "qt": ("mtl.tasks.qt", QTConfig, "QTInputs"),
    "mnrl": ("mtl.tasks.ranking", RankingConfig, "RankingInputs"),
    "skipthought": ("mtl.tasks.skipthought", SkipThoughtConfig, "SkipThoughtInputs"),
    "squad": ("mtl.tasks.squad", SquadConfig, "SquadInputs"),
    "squad_ranking": ("mtl.tasks.ranking", SquadRankingConfig, "SquadRankingInputs"),
    "sts": ("mtl.tasks.sts", STSConfig, "STSInputs"),
    "distill": ("mtl.tasks.distill", DistillConfig, "DistillInputs"),
}

KINDS: Registry[type[Task]] = Registry({kind: module for kind, (module, *_) in BUILTIN.items()})


def register(cls: type[Task]) -> type[Task]:
    """Make a task kind available to `tasks=` under `cls.kind` (a test or a plugin may add its own)."""
    return adds_to(KINDS, cls.kind)(cls)  # a name taken by another kind is refused


def kind_of(name: str) -> type[Task]:
    if name not in KINDS:
        raise UserError(
            f"unknown task {name!r}: choose one of {', '.join(KINDS)}, or give a task file (.toml) "
            "(a plugin's own kind: load it with plugins=)"
        )
    return KINDS[name]


def config_class_of(kind: str) -> type[TaskConfig]:
    """The keys of task kind `kind`: a built-in kind's without importing its code."""
    if kind in BUILTIN and kind not in KINDS.loaded():
        return BUILTIN[kind][1]
    return kind_of(kind).config_class


def inputs_of(kind: str) -> type[TaskInputs]:
    """What checks task kind `kind`'s keys and finds its inputs: a built-in kind's without
    importing its code (or torch); a plugin's kind is its `Task` class."""
    if kind in BUILTIN:
        from mtl.tasks import inputs  # its readers (pyarrow: 0.3 s) only where inputs are found

        return getattr(inputs, BUILTIN[kind][2])
    return kind_of(kind)


def config_class_for(name: str, values: dict[str, Any]) -> type[TaskConfig]:
    """The config class of the task entry `name` read back from a run's record."""
    kind = values.get("kind") if isinstance(values, dict) else None
    return config_class_of(kind if isinstance(kind, str) and kind else name)


def config_classes() -> dict[str, type[TaskConfig]]:
    """Every known kind's config class: the built-in ones, and those of kinds registered so far."""
    return {kind: config_class_of(kind) for kind in KINDS}


def title_of(name: str, kind: str, display: str = "") -> str:
    """How reports name a task: the `display` its config gives, else its kind's dataset name when
    the task is that kind under its own name (`nli`: SNLI), else the task's name."""
    if display:
        return display
    registered = KINDS.get(kind)
    return registered.display if registered is not None and registered.display and name == kind else name


def seed_indices(tasks: dict[str, TaskConfig]) -> dict[str, int]:
    """The number that seeds each task's data order: fixed for the built-in tasks (so runs keep
    their data order across versions), a stable number from its name for any other."""
    indices = {}
    for name, config in tasks.items():
        fixed = kind_of(config.kind).fixed_index
        indices[name] = fixed if fixed is not None and name == config.kind else _stable_index(name)
    return indices


def _stable_index(name: str) -> int:
    return 1000 + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")
