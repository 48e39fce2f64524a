"""Where a training run stands: everything besides weights and optimizers that a resume needs."""

from __future__ import annotations

import enum
import os
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from mtl.train.phases import Phases


class StopReason(enum.Enum):
    MAX_STEPS = "max_steps"  # optim.max_steps reached
    MAX_MINUTES = "max_minutes"  # optim.max_minutes of training steps spent
    MIN_LR = "min_lr"  # stop=min_lr: the main task's lr fell under optim.min_lr
    PATIENCE = "patience"  # stop=patience: too many evaluations not above the best
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM on any process: checkpointed, resumable


@dataclass
class Block:
    """The block of one task's steps under way (phase records are per block)."""

    index: int = 0
    start_step: int = 0
    examples: int = 0


@dataclass
class TrainState:
    global_step: int = 0
    task_steps: dict[str, int] = field(default_factory=dict)
    block: Block = field(default_factory=Block)
    best_dev: dict[str, float] = field(default_factory=dict)  # task -> its best dev metric so far
    stalls: int = 0  # evaluations whose main-task dev metric was not above the best (stop=patience)
    best: dict[str, float] | None = None  # {"step", "<task>/dev/<metric>", ...} of the best checkpoint
    # A W&B sweep agent names the run it starts; otherwise a fresh id.
    wandb_id: str = field(default_factory=lambda: os.environ.get("WANDB_RUN_ID") or secrets.token_hex(4))
    metrics_bytes: int = 0  # length of metrics.jsonl when the checkpoint was written
    phases: Phases = field(default_factory=Phases)  # finished blocks and the loss recovery in each
    train_seconds: float = 0.0  # spent in training steps (evaluation and checkpoints not counted)
    task_examples: dict[str, int] = field(default_factory=dict)  # training examples seen per task

    @classmethod
    def for_tasks(cls, tasks: list[str]) -> TrainState:
        return cls(task_steps=dict.fromkeys(tasks, 0))

    def record_evaluation(self, dev: dict[str, float], main_task: str) -> dict[str, bool]:
        """Keep each task's best dev metric and count the main task's stalls; whether each improved."""
        improved = {}
        for task, value in dev.items():
            best = self.best_dev.get(task)
            improved[task] = best is None or value > best
            if improved[task]:
                self.best_dev[task] = value
            elif task == main_task:
                self.stalls += 1
        return improved

    def to_dict(self) -> dict[str, Any]:
        """Plain values, so checkpoints stay loadable without mtl."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainState:
        phases = Phases(**values["phases"]) if "phases" in values else Phases()
        return cls(**{**values, "block": Block(**values["block"]), "phases": phases})
