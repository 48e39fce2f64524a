"""Which task trains at each global step: a pure function of the step, so resuming is exact.

`blocks` (Liu et al. 2018, Section 4): `steps_nli` NLI steps, then `steps_squad` SQuAD
steps, repeated. `round_robin` alternates every step. `proportional` and `temperature`
draw each step's task with probability proportional to dataset size, or to size**(1/T)
(as in T5 and jiant), from a generator seeded by (seed, step).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mtl.plugins import adds_to

# A schedule's rule: the task (of `scheduler.tasks`) that trains at global step `step`; a pure
# function of the step (and the scheduler's seed), so a resumed run draws the same tasks.
ScheduleRule = Callable[["Scheduler", int], str]
SCHEDULES: dict[str, ScheduleRule] = {}


def register_schedule(name: str) -> Callable[[ScheduleRule], ScheduleRule]:
    """Make a rule available to schedule=NAME (a decorator)."""
    return adds_to(SCHEDULES, name)


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
        self.kind, self.seed, self.temperature = kind, seed, temperature
        self.tasks = [task for task, count in steps.items() if count > 0]
        self.steps = {task: steps[task] for task in self.tasks}
        self.sizes = sizes or {}
        self.cycle = sum(self.steps.values())
        self._probabilities: dict[float, np.ndarray] = {}

    def task_at(self, step: int) -> str:
        if len(self.tasks) == 1:
            return self.tasks[0]
        return SCHEDULES[self.kind](self, step)

    def probabilities(self, power: float) -> np.ndarray:
        """Each task's share when drawn by size**power."""
        if power not in self._probabilities:
            # size**power in log space: a small temperature would overflow the powers themselves.
            logs = power * np.log([float(self.sizes[task]) for task in self.tasks])
            weights = np.exp(logs - logs.max())
            self._probabilities[power] = weights / weights.sum()
        return self._probabilities[power]

    def drawn(self, step: int, power: float) -> str:
        """A task drawn for `step` with probability proportional to its size**power, from a
        generator seeded by (seed, step)."""
        draw = np.random.default_rng([self.seed, step]).random()
        cumulative = np.cumsum(self.probabilities(power))
        return self.tasks[int(np.searchsorted(cumulative, draw, side="right"))]

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


@register_schedule("blocks")
def blocks(scheduler: Scheduler, step: int) -> str:
    """`<task>.steps` of each task in turn, the cycle repeated (Liu et al. 2018, Section 4)."""
    offset = step % scheduler.cycle
    for task in scheduler.tasks:
        if offset < scheduler.steps[task]:
            return task
        offset -= scheduler.steps[task]
    raise AssertionError("an offset within the cycle falls in one of its blocks")


@register_schedule("round_robin")
def round_robin(scheduler: Scheduler, step: int) -> str:
    return scheduler.tasks[step % len(scheduler.tasks)]


@register_schedule("proportional")
def proportional(scheduler: Scheduler, step: int) -> str:
    return scheduler.drawn(step, 1.0)


@register_schedule("temperature")
def temperature(scheduler: Scheduler, step: int) -> str:
    """size**(1/T), as in T5 and jiant."""
    return scheduler.drawn(step, 1.0 / scheduler.temperature)
