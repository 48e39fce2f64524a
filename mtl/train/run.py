"""Start a run in a new folder, or resume one exactly where its last checkpoint left it."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtl.config import apply_overrides, to_dict
from mtl.errors import UserError
from mtl.train.config import TrainConfig
from mtl.train.presets import preset_overrides
from mtl.train.trainer import Trainer, load_config


def config_from_args(args: Sequence[str]) -> TrainConfig:
    """`preset=NAME` first (wherever it stands), then every other key=value over it."""
    presets = [a.partition("=")[2] for a in args if a.startswith("preset=")]
    rest = [a for a in args if not a.startswith("preset=")]
    base = apply_overrides(TrainConfig(), preset_overrides(presets[-1])) if presets else TrainConfig()
    config = apply_overrides(base, rest)
    if presets and not any(a.startswith(("name=", "run.name=")) for a in rest):
        config.run.name = presets[-1]
    return config


def start(
    config: TrainConfig,
    command: Sequence[str] = (),
    stop_after_step: int | None = None,
    progress: bool = True,
) -> tuple[Path, dict[str, Any]]:
    run_dir = Path(config.run.out or f"runs/{config.run.name}-{time.strftime('%Y%m%d-%H%M%S')}").expanduser()
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UserError(f"run folder {run_dir} already exists: choose another out= or resume={run_dir}")
    trainer = Trainer(config, run_dir, progress=progress)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(
        json.dumps(
            {
                "config": to_dict(config),
                "command": shlex.join(["just", "train-multitask", *command]),
                "python": sys.version.split()[0],
            },
            indent=2,
        )
        + "\n"
    )
    return run_dir, trainer.fit(stop_after_step=stop_after_step)


def resume(
    run_dir: str | Path,
    stop_after_step: int | None = None,
    progress: bool = True,
    overrides: Sequence[str] = (),
) -> tuple[Path, dict[str, Any]]:
    run_dir = Path(run_dir).expanduser()
    config = load_config(run_dir)
    allowed = ("device=", "wandb=", "run.device=", "run.wandb=")
    if extra := [a for a in overrides if not a.startswith(allowed)]:
        raise UserError(
            f"resume continues the saved config: only device= and wandb= may change, not {extra[0]!r}"
        )
    config = apply_overrides(config, overrides)
    if not (run_dir / "checkpoints" / "latest.pt").is_file():
        raise UserError(f"{run_dir} has no checkpoint yet (checkpoints/latest.pt): start it again instead")
    if (run_dir / "summary.json").is_file():
        raise UserError(f"{run_dir} has already finished: see {run_dir / 'summary.json'}")
    trainer = Trainer(config, run_dir, progress=progress)
    trainer.restore()
    print(f"resuming {run_dir} at step {trainer.state['global_step']}")
    return run_dir, trainer.fit(resume=True, stop_after_step=stop_after_step)
