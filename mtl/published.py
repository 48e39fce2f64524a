"""The figures the papers publish for the rows the paper-* and infersent-* presets reproduce
(experiments/published/figures.toml), looked up by preset: a run records its row's when it
starts, `just reproduce` and `just report` set runs beside them."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any


def figures_file() -> Path:
    return Path(str(resources.files("experiments"))) / "published" / "figures.toml"


def row_model(preset: str) -> dict[str, str]:
    """The model keys (encoder, pooling) the row's preset sets: what a run must have trained to
    stand for the row (its size alone may match another model's). Empty for no such preset."""
    if not preset or "/" in preset or preset.startswith("."):
        return {}
    try:
        table = tomllib.loads((figures_file().parent.parent / f"{preset}.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return {key: str(table[key]) for key in ("encoder", "pooling") if key in table}


def published(preset: str) -> dict[str, Any] | None:
    """The published figures of `preset`'s row (with `cite` and the `tolerance`), or None."""
    table = tomllib.loads(figures_file().read_text(encoding="utf-8"))
    entry = table.get(preset)
    if entry is None:
        return None
    return {"preset": preset, **entry, "tolerance": table["tolerance"], "comparable": table["comparable"]}


def comparability() -> dict[str, Any]:
    """What every published row assumes (figures.toml [comparable]): for runs that recorded their
    figures before the file said."""
    return tomllib.loads(figures_file().read_text(encoding="utf-8"))["comparable"]


def published_for_command(args: Sequence[str]) -> dict[str, Any] | None:
    """The figures for the preset a train-multitask command line names, if it names one."""
    presets = [arg.partition("=")[2] for arg in args if arg.startswith("preset=")]
    return published(Path(presets[-1]).stem) if presets else None  # a preset's name, or its file's stem
