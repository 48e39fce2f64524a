"""Checkpoints written atomically: a crash mid-write never replaces the last good one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch


def save(state: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save(state, partial)
    os.replace(partial, path)


def load(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    return torch.load(path, map_location=device, weights_only=False)
