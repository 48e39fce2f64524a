"""When a run stops: `max_steps=` and `max_minutes=` always; then the rule of `stop=`. A rule reads the state, never writes it."""

from __future__ import annotations

from mtl.train.config import OptimConfig
from mtl.train.state import StopReason, TrainState


def stop_reason(config: OptimConfig, state: TrainState, main_lr: float) -> StopReason | None:
    """Why the run stops before step `state.global_step`, or None; `main_lr`: the main task's lr now."""
    if config.max_steps is not None and state.global_step >= config.max_steps:
        return StopReason.MAX_STEPS
    if config.max_minutes is not None and state.train_seconds >= 60 * config.max_minutes:
        return StopReason.MAX_MINUTES
    if config.stop == "min_lr" and main_lr < config.min_lr:  # InferSent: lr under 1e-5
        return StopReason.MIN_LR
    if config.stop == "patience" and state.stalls >= config.patience:
        return StopReason.PATIENCE
    return None
