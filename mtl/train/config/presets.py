"""Presets: `experiments/<name>.toml`, key = value overrides; a table `[task]` holds a task's keys."""

from __future__ import annotations

import difflib
import tomllib
from importlib import resources
from pathlib import Path

from mtl.errors import UserError


def preset_dir() -> Path:
    return Path(str(resources.files("experiments")))


def preset_names(folder: Path | None = None) -> list[str]:
    return sorted(path.stem for path in (folder or preset_dir()).glob("*.toml"))


def build_preset_dir() -> Path:
    """Presets of `just build-classifsquad`."""
    return preset_dir() / "builds"


def preset_path(name: str, folder: Path | None = None) -> Path:
    """`<folder>/<name>.toml` (training presets by default), or `name` itself when it is a TOML file's
    path (`preset=./mine.toml`): a preset of one's own needs no copy inside mtl."""
    folder = folder or preset_dir()
    if name.endswith(".toml") or "/" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise UserError(f"preset file {path} does not exist: give a TOML file of key = value lines")
        return path
    path = folder / f"{name}.toml"
    if not path.is_file():
        names = preset_names(folder)
        if near := difflib.get_close_matches(name, names, n=3, cutoff=0.75):
            raise UserError(f"unknown preset {name!r}: did you mean {' or '.join(near)}?")
        raise UserError(
            f"unknown preset {name!r}: choose one of {', '.join(names)}, or give a file (preset=./mine.toml)"
        )
    return path


def preset_name(name: str) -> str:
    """What a run started from the preset is called: the preset's name, or its file's stem."""
    return Path(name).stem if name.endswith(".toml") else name


def preset_overrides(name: str, folder: Path | None = None) -> list[str]:
    """The key=value overrides of preset `name` (see `preset_path`)."""
    path = preset_path(name, folder)
    folder = path.parent
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"preset file {path} is not valid TOML ({error}): fix or remove it") from None
    overrides = []
    for key, value in values.items():
        # `[nli]` then `steps = 1000` is `nli.steps=1000`: the keys of one task, one level deep.
        inner = value.items() if isinstance(value, dict) else [("", value)]
        for name, leaf in inner:
            if isinstance(leaf, dict | list):
                raise UserError(
                    f"preset file {path}: {key!r} must hold plain key = value pairs, not tables or lists"
                )
            if key == "tasks":
                leaf = _tasks_beside(str(leaf), folder)
            overrides.append(f"{key}.{name}={_text(leaf)}" if name else f"{key}={_text(leaf)}")
    return overrides


def _tasks_beside(tasks: str, folder: Path) -> str:
    """A preset's task files are named relative to the preset's folder (`tasks/sst.toml`), so the
    preset runs from any directory."""
    entries = [entry.strip() for entry in tasks.replace("+", ",").split(",")]
    return ",".join(
        str(folder / entry) if entry.endswith(".toml") and (folder / entry).is_file() else entry
        for entry in entries
    )


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
