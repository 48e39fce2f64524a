"""train-multitask's command line without torch: its keys (a preset first, or a run to resume) to
the config a run trains, and the summary it prints at the end.

Kept apart from run.py so that the processes that only read keys and launch runs (a sweep, a
SLURM submission, train-distributed's launcher) start without the trainer, and the first two
without torch: a sweep's own process took 2.52 CPU-s before, 0.39 after (RESULTS.md, "Processes
that only launch runs start without torch").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mtl import metrics
from mtl.config import as_name
from mtl.errors import UserError
from mtl.runs import RunFolder
from mtl.train.config.presets import preset_name, preset_overrides, preset_path
from mtl.train.config.record import read_run_record
from mtl.train.config.train_config import TrainConfig, recorded_config, with_overrides


def config_from_args(args: Sequence[str]) -> TrainConfig:
    """`preset=NAME` first (wherever it stands), then every other key=value over it."""
    presets = [a.partition("=")[2] for a in args if a.startswith("preset=")]
    rest = [a for a in args if not a.startswith("preset=")]
    base = TrainConfig()
    if presets:
        values = preset_overrides(presets[-1])
        try:
            base = with_overrides(base, values)
        except UserError as error:
            raise UserError(f"preset file {preset_path(presets[-1])}: {error}") from None
    config = with_overrides(base, rest)
    if presets and not any(a.startswith(("name=", "run.name=")) for a in rest):
        config.run.name = as_name(preset_name(presets[-1]))
    return config


def resumed_run(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """The run folder `resume=` names (the last one given; None without one), and the other keys."""
    resumed = [a.partition("=")[2] for a in args if a.startswith("resume=")]
    return (resumed[-1] if resumed else None), [a for a in args if not a.startswith("resume=")]


def config_from_command(args: Sequence[str]) -> TrainConfig:
    """train-multitask's config; with resume=, the run's recorded one with the keys given over it."""
    run_dir, rest = resumed_run(args)
    return config_from_args(args) if run_dir is None else resumed_config(run_dir, rest)


def already_finished(folder: RunFolder) -> UserError:
    """What resume= of a finished run is told (by the run, and before that by a launcher)."""
    return UserError(f"{folder.path} has already finished: see {folder.summary}")


def check_resume_overrides(overrides: Sequence[str]) -> None:
    allowed = ("device=", "wandb=", "run.device=", "run.wandb=")
    if extra := [a for a in overrides if not a.startswith(allowed)]:
        raise UserError(
            f"resume continues the saved config: only device= and wandb= may change, not {extra[0]!r}"
        )


def resumed_config(run_dir: str | Path, overrides: Sequence[str]) -> TrainConfig:
    """The config `resume=run_dir` continues with: the recorded one, with device= and wandb= over it."""
    check_resume_overrides(overrides)
    run_dir = Path(run_dir).expanduser()
    recorded = recorded_config(read_run_record(run_dir)["config"], str(run_dir / "config.json"))
    return with_overrides(recorded, overrides)


def format_summary(run_dir: Path, summary: dict) -> str:
    """What `just train-multitask` prints when a run finishes."""
    results = ", ".join(
        f"{metrics.without_prefix(k)} {metrics.shown(k, v)}"
        for k, v in summary.items()
        if metrics.is_best_evaluation(k)
    )
    steps = ", ".join(
        f"{metrics.without_prefix(k)} {v}" for k, v in summary.items() if k.startswith(metrics.steps(""))
    )
    run = RunFolder(run_dir)
    if (run.pretrained_encoder / "config.json").is_file():  # encoder=hf: a transformers model folder
        exported = f"{run.pretrained_encoder} (Hugging Face and sentence-transformers format)"
    else:
        exported = f"{run.encoder} with its weights in {run.encoder.with_suffix('.safetensors').name}"
        if run.pretrained_encoder.is_dir():
            exported += f", and {run.pretrained_encoder} (sentence-transformers format)"
        elif why := summary.get("sentence_transformers"):
            exported += f" (no sentence-transformers folder: {why})"
    config = (read_run_record(run_dir) or {}).get("config", {})
    scored = metrics.scored_on(config, summary)
    if parts := [f"{split} on {how}" for split in scored if (how := metrics.sample_of(scored, split))]:
        # never a sampled score read as a whole dev or test set's
        results += f"\n  (max_eval={config['data']['max_eval']}: {'; '.join(parts)})"
    return (
        f"run {run_dir}: stopped by {summary['stop_reason']} after {summary['global_step']} steps ({steps})\n"
        f"  best checkpoint (step {summary[metrics.best('step')]}): {results}\n"
        f"  trainable parameters {summary['params/trainable']:,}; encoder exported to {exported}"
    )
