"""Where a training run stands: everything besides weights and optimizers that a resume needs."""

from __future__ import annotations

import enum
import os
import secrets
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mtl import metrics
from mtl.train.run.phases import Phases

if TYPE_CHECKING:
    from mtl.train.loop.selection import Selection
    from mtl.train.step.outcome import StepOutcome


class StopReason(enum.Enum):
    MAX_STEPS = "max_steps"  # optim.max_steps reached
    MAX_MINUTES = "max_minutes"  # optim.max_minutes of training steps spent
    MIN_LR = "min_lr"  # stop=min_lr: the main task's lr fell under optim.min_lr
    PATIENCE = "patience"  # stop=patience: too many evaluations not above the best
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM on any process: checkpointed, resumable
    CALLBACK = "callback"  # a callback asked the run to stop (run.control.stop(why))


@dataclass
class Block:
    """The block of one task's steps under way (phase records are per block)."""

    index: int = 0
    start_step: int = 0
    examples: int = 0
    balance: dict[str, float] = field(default_factory=dict)  # schedule=mixed: sums of the balancer's values


@dataclass
class TrainState:
    global_step: int = 0
    task_steps: dict[str, int] = field(default_factory=dict)
    block: Block = field(default_factory=Block)
    best_dev: dict[str, float] = field(default_factory=dict)  # task -> its best dev metric so far
    stalls: int = 0  # evaluations whose main-task dev metric was not above the best (stop=patience)
    epoch_best: dict[str, float] = field(
        default_factory=dict
    )  # task -> its best dev metric at its epoch ends (lr_schedule=infersent)
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

    def end_block(self, task: str, seconds: float) -> dict[str, Any]:
        """Close the block under way (`task`'s, `seconds` long) and start the next: its record's
        values (the phase row, and per step the means of a mixed block's balancer values)."""
        block = self.block
        row = self.phases.end_block(
            task, block.index, block.start_step, self.global_step, block.examples, seconds
        )
        steps = max(1, self.global_step - block.start_step)
        balance = {key: total / steps for key, total in block.balance.items()}
        self.block = Block(index=block.index + 1, start_step=self.global_step)
        return {**row, **balance}

    def record_epoch_dev(self, task: str, value: float) -> bool:
        """Keep `task`'s best dev metric at its epoch ends (higher is better); whether `value` is above it."""
        best = self.epoch_best.get(task)
        if best is None or value > best:
            self.epoch_best[task] = value
            return True
        return False

    def after_step(
        self,
        outcome: StepOutcome,
        task_metrics: dict[str, str],
        lrs: dict[str, float],
        train_sizes: dict[str, int],
        task_ids: dict[str, int],
    ) -> dict[str, Any]:
        """Count a finished step of each task in `outcome` (`task_metrics`: each task's metric,
        `lrs` its lr); its record, the row metrics.jsonl and W&B get: each task's figures, and for
        a balanced step (schedule=mixed) what the balancer decided (grad_norm: of each task's
        gradient on the shared encoder), for one task's step which task it was."""
        self.global_step += 1
        self.train_seconds += outcome.seconds
        self.phases.step(outcome.loss)
        record: dict[str, Any] = {metrics.GLOBAL_STEP: self.global_step}
        for task, done in outcome.tasks.items():
            self.task_steps[task] += 1
            self.task_examples[task] = self.task_examples.get(task, 0) + done.examples
            record.update(
                {
                    metrics.of_task(task, "step"): self.task_steps[task],
                    metrics.train(task, "loss"): done.loss,
                    metrics.train(task, task_metrics[task]): done.score,
                    metrics.of_task(task, "lr"): lrs[task],
                    metrics.of_task(task, "grad_norm"): done.grad_norm,
                    metrics.of_task(task, "examples_per_s"): done.examples / outcome.seconds,
                    # passes over the task's training data so far (fractional), for epoch-based comparisons
                    metrics.of_task(task, "epoch"): self.task_examples[task] / train_sizes[task],
                }
            )
            if outcome.balanced:
                record[metrics.balance_weight(task)] = outcome.weights[task]
        if not outcome.balanced:
            [task] = outcome.tasks
            record[metrics.TASK_ID] = task_ids[task]  # which block a step is in, on any chart
            return record
        record[metrics.train(metrics.MIXED, "loss")] = outcome.loss
        record[metrics.of_task(metrics.MIXED, "grad_norm")] = outcome.grad_norm
        record.update({metrics.balance_cosine(a, b): value for (a, b), value in outcome.cosines.items()})
        for key, value in record.items():  # per block, their means go into its block_end record
            if metrics.is_balance(key):
                self.block.balance[key] = self.block.balance.get(key, 0.0) + value
        return record

    def after_evaluation(
        self, results: dict[str, float], tasks: dict[str, Any], selection: Selection
    ) -> tuple[dict[str, bool], bool]:
        """Record a dev evaluation: which tasks improved on their best (by their own metric: the lr
        shrink and patience read it), and whether `selection` makes this the best checkpoint (then
        `best` holds its results)."""
        # Signed so that higher is better for every task (a perplexity counts negated).
        dev = {
            name: metrics.signed(task.metric, results[metrics.evaluation(name, "dev", task.metric)])
            for name, task in tasks.items()
        }
        improved = self.record_evaluation(dev, next(iter(tasks)))
        new_best = selection.is_better(results, self.best)
        if new_best:
            self.best = {"step": self.global_step, **results}
        return improved, new_best

    def summary(
        self, reason: StopReason, results: dict[str, Any], counts: dict[str, int], selection: Selection
    ) -> dict[str, Any]:
        """A finished run's summary.json: why it stopped, its steps, examples and time per task,
        the best checkpoint's `results` and what chose it, its phases and parameter `counts`."""
        chosen = {"step": self.best["step"], "by": selection.expression, "value": selection.value(self.best)}
        return {
            "stop_reason": reason.value,
            metrics.GLOBAL_STEP: self.global_step,
            **{metrics.steps(task): n for task, n in self.task_steps.items()},
            **{metrics.examples(task): n for task, n in self.task_examples.items()},
            "train_seconds": self.train_seconds,
            **results,
            "selection": chosen,
            **self.phases.summary(),
            **counts,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain values, so checkpoints stay loadable without mtl."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainState:
        phases = Phases(**values["phases"]) if "phases" in values else Phases()
        return cls(**{**values, "block": Block(**values["block"]), "phases": phases})
