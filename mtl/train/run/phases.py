"""The blocks of a run, and how each task's loss recovers after the other task's block.

Liu et al. (2018, Section 5) note that a task's training loss jumps when its block starts
after the other task's block and recovers within about 100 steps. Per block this records
the loss before the switch (the mean of the task's last `WINDOW` losses in its previous
block), the jump (the mean of the first `WINDOW` losses of the block minus that level) and
the recovery: the first step of the block at which the mean of the last `WINDOW` losses
(fewer at the block's start) is back at or under the level, or None if it never is.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from mtl.metrics import LOSS_WINDOW as WINDOW

COLUMNS = (
    "task",
    "block",
    "start_step",
    "end_step",
    "steps",
    "examples",
    "seconds",
    "loss_before",
    "loss_after",
    "jump",
    "recovery_steps",
)


def recovery(losses: list[float], level: float | None) -> tuple[float | None, int | None]:
    """(jump, steps to recover) of a block's `losses` against the pre-switch `level`."""
    if level is None or not losses:
        return None, None
    jump = statistics.fmean(losses[:WINDOW]) - level
    for k in range(1, len(losses) + 1):
        if statistics.fmean(losses[max(0, k - WINDOW) : k]) <= level:
            return jump, k
    return jump, None


@dataclass
class Phases:
    """The finished blocks' rows, and the losses of the block under way; saved in checkpoints."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # this block's training losses so far
    levels: dict[str, float] = field(default_factory=dict)  # task -> smoothed loss at its last block's end
    previous_task: str | None = None  # the task of the block before this one

    def step(self, loss: float) -> None:
        self.losses.append(loss)

    def end_block(
        self, task: str, block: int, start_step: int, end_step: int, examples: int, seconds: float
    ) -> dict[str, Any]:
        # Only a switch from the other task makes a jump (a single task's blocks follow each other).
        level = self.levels.get(task) if self.previous_task not in (None, task) else None
        jump, recovered = recovery(self.losses, level)
        after = statistics.fmean(self.losses[-WINDOW:]) if self.losses else None
        row = dict(
            zip(
                COLUMNS,
                (
                    task,
                    block,
                    start_step,
                    end_step,
                    end_step - start_step,
                    examples,
                    seconds,
                    level,
                    after,
                    jump,
                    recovered,
                ),
                strict=True,
            )
        )
        self.rows.append(row)
        if after is not None:
            self.levels[task] = after
        self.losses, self.previous_task = [], task
        return row

    def summary(self) -> dict[str, float | int | None]:
        """Per task: the median jump and recovery over blocks that followed the other task's."""
        result: dict[str, float | int | None] = {}
        for task in dict.fromkeys(row["task"] for row in self.rows):
            switched = [r for r in self.rows if r["task"] == task and r["jump"] is not None]
            if not switched:
                continue
            result[f"recovery/{task}/median_jump"] = statistics.median(r["jump"] for r in switched)
            recovered = [r["recovery_steps"] for r in switched if r["recovery_steps"] is not None]
            result[f"recovery/{task}/median_steps"] = statistics.median(recovered) if recovered else None
            result[f"recovery/{task}/blocks_not_recovered"] = len(switched) - len(recovered)
        return result
