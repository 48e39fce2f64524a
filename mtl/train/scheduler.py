"""Which task trains at each global step: a pure function of the step, so resuming is exact.

`blocks` (Liu et al. 2018, Section 4): `steps_nli` NLI steps, then `steps_squad` SQuAD
steps, repeated. `round_robin` alternates every step. `proportional` and `temperature`
draw each step's task with probability proportional to dataset size, or to size**(1/T)
(as in T5 and jiant), from a generator seeded by (seed, step).
"""

from __future__ import annotations

import numpy as np

SCHEDULES = ("blocks", "round_robin", "proportional", "temperature")


class Scheduler:
    def __init__(
        self,
        steps: dict[str, int],
        kind: str = "blocks",
        sizes: dict[str, int] | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ):
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r}: choose one of {', '.join(SCHEDULES)}")
        self.kind, self.seed = kind, seed
        self.tasks = [task for task, count in steps.items() if count > 0]
        self.steps = {task: steps[task] for task in self.tasks}
        self.cycle = sum(self.steps.values())
        if kind in ("proportional", "temperature"):
            sizes = sizes or {}
            power = 1.0 if kind == "proportional" else 1.0 / temperature
            # size**power in log space: a small temperature would overflow the powers themselves.
            logs = power * np.log([float(sizes[task]) for task in self.tasks])
            weights = np.exp(logs - logs.max())
            self.probabilities = weights / weights.sum()

    def task_at(self, step: int) -> str:
        if len(self.tasks) == 1:
            return self.tasks[0]
        if self.kind == "blocks":
            offset = step % self.cycle
            for task in self.tasks:
                if offset < self.steps[task]:
                    return task
                offset -= self.steps[task]
        if self.kind == "round_robin":
            return self.tasks[step % len(self.tasks)]
        draw = np.random.default_rng([self.seed, step]).random()
        return self.tasks[int(np.searchsorted(np.cumsum(self.probabilities), draw, side="right"))]

    def block_ends_after(self, step: int) -> bool:
        """Whether `step` is the last of a block: a run of steps of one task.

        A single task's run is cut into blocks of its configured length, so phase records
        still come at a steady rhythm.
        """
        if self.kind == "blocks" or len(self.tasks) == 1:
            offset = step % self.cycle + 1
            return offset in np.cumsum([self.steps[task] for task in self.tasks])
        return self.task_at(step + 1) != self.task_at(step)

    def is_cycle_end(self, step: int) -> bool:
        return (step + 1) % self.cycle == 0
