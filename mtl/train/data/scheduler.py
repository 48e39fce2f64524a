"""Which task trains at each global step: a pure function of the step, so resuming is exact.

`blocks` (Liu et al. 2018, Section 4): `steps_nli` NLI steps, then `steps_squad` SQuAD
steps, repeated. `round_robin` alternates every step. `proportional` and `temperature`
draw each step's task with probability proportional to dataset size, or to size**(1/T)
(as in T5 and jiant), from a generator seeded by (seed, step); a size counts at most `cap`
examples (T5's examples-proportional mixing), `<task>.prob=` fixes a task's share outright,
and T may move linearly to `temperature_end` over the run (MT-DNN, jiant). `mixed` trains
every task at every step (`tasks_at`), its losses combined by a balancer. `sequential` trains
one task after the other, each once, for its share of max_steps; `two_stage` trains the blocks
of every task for `first_stage` of max_steps, then the first training task alone (the regimes
BOOM compares with shuffled mixing for embedding models, 2026).

The online schedules (`aioli`, `doremi`, `transfer`: mtl/train/callbacks/online_mixing.py) draw each step's
task from shares that change during the run. The draw is still a pure function of the step and of
the shares in force, and the shares are part of the scheduler's checkpointed state
(`state_dict`), so a resumed run draws the same tasks as one never stopped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from mtl.config import AtLeast1, PositiveFloat, Range, key_owners_of
from mtl.errors import UserError
from mtl.plugins import adds_to

# A schedule's rule: the task (of `scheduler.tasks`) that trains at global step `step`; a pure
# function of the step (and the scheduler's seed), so a resumed run draws the same tasks.
ScheduleRule = Callable[["Scheduler", int], str]
SCHEDULES: dict[str, ScheduleRule] = {}
# The schedules whose every step trains every task at once (one update from all their gradients:
# the mixed step, its balancers, one shared optimizer) rather than one task a step.
EVERY_TASK_EACH_STEP: set[str] = set()
# The schedules whose shares move during the run (`Scheduler.live`, set by the online mixing).
ADAPTIVE: set[str] = set()
# The schedules drawing each step's task from fixed shares (<task>.prob= sets some)
DRAWS: set[str] = set()
# What a schedule needs of the rest of the config: name -> its check (config -> None or UserError)
SCHEDULE_CHECKS: dict[str, Callable[[Any], None]] = {}
# A schedule's own keys (register_schedule(options=)): name -> the dataclass of them. One given
# with another schedule is refused, not silently unused.
SCHEDULE_OPTIONS: dict[str, type] = {}


@dataclass
class TwoStageOptions:
    first_stage: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = (
        0.5  # schedule=two_stage: the share of max_steps of the first stage (every task, as blocks)
    )


@dataclass
class ProportionalOptions:
    cap: AtLeast1 | None = None  # schedule=proportional/temperature: a task's size counts at most this (T5)


@dataclass
class TemperatureOptions:
    temperature: PositiveFloat = 2.0  # schedule=temperature: sample tasks by size**(1/T)
    temperature_end: PositiveFloat | None = (
        None  # schedule=temperature: T moves linearly from temperature= to this over max_steps (MT-DNN, jiant)
    )
    cap: AtLeast1 | None = None  # schedule=proportional/temperature: a task's size counts at most this (T5)


# The online schedules (aioli, doremi, transfer: mtl/train/callbacks/online_mixing.py) move the tasks'
# shares every mix_every= steps from evidence measured on held dev batches of every task.
@dataclass
class OnlineOptions:
    mix_every: AtLeast1 = 100  # schedule=aioli/doremi/transfer: steps between updates of the shares
    mix_eta: PositiveFloat | None = (
        None  # schedule=aioli/doremi/transfer: the update's step size; None: the authors' (aioli 0.2, doremi 1, transfer 0.2)
    )
    mix_batches: AtLeast1 = (
        2  # schedule=aioli/doremi/transfer: held dev batches per task the evidence is measured on
    )


@dataclass
class LookaheadMixingOptions(OnlineOptions):
    # Aioli's normalization of the mixing law: shift (the authors': its minimum moved to 0, then
    # divided by its sum) or abs (divided by the sum of absolute values: a harmful task keeps its sign)
    mix_normalize: Literal["shift", "abs"] = (
        "shift"  # schedule=aioli/transfer: shift (the authors') or abs (signs kept)
    )
    # The losses the online mixture lowers: aioli's training tasks (empty: every one, the authors'
    # average over all groups), transfer's watching tasks (empty: every one)
    mix_target: str = (
        ""  # schedule=aioli/transfer: the tasks (comma-separated) whose dev losses steer the shares
    )


@dataclass
class DoReMiOptions(OnlineOptions):
    mix_smoothing: Annotated[float, Range(0, 1, high_open=True)] = (
        1e-3  # schedule=doremi: each update's shares mixed with equal ones by this much (DoReMi's c)
    )
    mix_reference: str = (
        ""  # schedule=doremi: the reference run folder (same tasks and vocabulary; {seed}: this run's seed)
    )


def register_schedule(
    name: str,
    every_task_each_step: bool = False,
    adaptive: bool = False,
    options: type | None = None,
    draws: bool = False,
    check: Callable[[Any], None] | None = None,
) -> Callable[[ScheduleRule], ScheduleRule]:
    """Make a rule available to schedule=NAME (a decorator); `every_task_each_step`: its steps
    train every task together (schedule=mixed's kind), its rule naming the task a step counts for;
    `adaptive`: it draws from `Scheduler.live`, shares that a callback moves during the run;
    `draws`: it draws each step's task from fixed shares (`<task>.prob=` sets them); `check`: what
    it needs of the rest of the run's config, called with it (a one-line UserError when missing);
    `options`: a dataclass of keys of its own (`warmup_steps: AtLeast1 = 100`, each with its comment), flat on the command
    line once the schedule is chosen, recorded as schedule.schedule_options, read by the rule as
    `scheduler.options.warmup_steps`."""
    if options is not None:
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"schedule {name!r}: register_schedule(options=) takes a dataclass of its keys")
        SCHEDULE_OPTIONS[name] = options
    if every_task_each_step:
        EVERY_TASK_EACH_STEP.add(name)
    if adaptive:
        ADAPTIVE.add(name)
    if draws:
        DRAWS.add(name)
    if check is not None:
        SCHEDULE_CHECKS[name] = check
    return adds_to(SCHEDULES, name)


def draws_from_shares(schedule: str) -> bool:
    """Whether `schedule` draws each step's task from fixed shares (see DRAWS)."""
    return schedule in DRAWS


def check_schedule(schedule: str, config: Any) -> None:
    """What `schedule` needs of the run's `config` (its registered check), refused in one line."""
    if (check := SCHEDULE_CHECKS.get(schedule)) is not None:
        check(config)


def schedule_key_owners() -> dict[str, list[str]]:
    """Each key of a schedule's own (its options) -> the schedules that read it."""
    return key_owners_of(SCHEDULE_OPTIONS)


def trains_every_task(schedule: str) -> bool:
    """Whether `schedule`'s steps train every task at once (see EVERY_TASK_EACH_STEP)."""
    return schedule in EVERY_TASK_EACH_STEP


def adapts(schedule: str) -> bool:
    """Whether `schedule`'s shares move during the run (see ADAPTIVE)."""
    return schedule in ADAPTIVE


class Scheduler:
    def __init__(
        self,
        steps: dict[str, int],
        kind: str = "blocks",
        sizes: dict[str, int] | None = None,
        seed: int = 0,
        shares: dict[str, float] | None = None,
        total_steps: int | None = None,
        options: Any = None,
    ):
        """`shares`: fixed probabilities (`<task>.prob=`) of some tasks, the others sharing the
        rest by size; `total_steps`: the run's length, over which temperature= moves to
        temperature_end=; `options`: the schedule's own keys (its register_schedule(options=)
        dataclass; None: its defaults), read by its rule as `scheduler.options`."""
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {kind!r}: choose one of {', '.join(SCHEDULES)}")
        if options is None and kind in SCHEDULE_OPTIONS:
            options = SCHEDULE_OPTIONS[kind]()
        self.kind, self.seed, self.options, self.total_steps = kind, seed, options, total_steps
        self.tasks = [task for task, count in steps.items() if count > 0]
        self.steps = {task: steps[task] for task in self.tasks}
        cap = getattr(options, "cap", None)  # the sampling schedules' (ProportionalOptions)
        self.sizes = {task: min(size, cap) if cap else size for task, size in (sizes or {}).items()}
        self.shares = {task: p for task, p in (shares or {}).items() if task in self.tasks}
        self.cycle = sum(self.steps.values())
        self._probabilities: dict[float, np.ndarray] = {}
        # An online schedule's shares in force (the `<task>.prob=` given, else equal: stratified,
        # as Aioli and DoReMi start), and the log-weights its updates accumulate.
        self.live: np.ndarray | None = None
        self.log_weights: np.ndarray | None = None
        self.evidence_seconds = 0.0  # spent measuring the evidence of its updates, this run in all
        if adapts(kind):
            left = max(0.0, 1.0 - sum(self.shares.values()))
            free = [task for task in self.tasks if task not in self.shares]
            start = np.array(
                [self.shares.get(task, left / len(free) if free else 0.0) for task in self.tasks]
            )
            self.live = start / start.sum()
            self.log_weights = np.log(np.maximum(self.live, 1e-300))

    @property
    def mixed(self) -> bool:
        """Whether every task trains at every step (schedule=mixed)."""
        return trains_every_task(self.kind)

    def task_at(self, step: int) -> str:
        """The task that trains at `step` (under schedule=mixed: the first, which trains at every step)."""
        if len(self.tasks) == 1:
            return self.tasks[0]
        return SCHEDULES[self.kind](self, step)

    def tasks_at(self, step: int) -> list[str]:
        """Every task that trains at `step`: one, or under schedule=mixed all of them."""
        return list(self.tasks) if self.mixed else [self.task_at(step)]

    def probabilities(self, power: float) -> np.ndarray:
        """Each task's share when drawn by size**power; a task with a `prob=` has that share,
        the others share what is left in proportion to size**power."""
        if power not in self._probabilities:
            # size**power in log space: a small temperature would overflow the powers themselves.
            logs = power * np.log([float(self.sizes[task]) for task in self.tasks])
            weights = np.exp(logs - logs.max())
            probabilities = weights / weights.sum()
            if self.shares:
                free = np.array([task not in self.shares for task in self.tasks])
                left = 1.0 - sum(self.shares.values()) if free.any() else 0.0
                by_size = probabilities * free
                shares = by_size / by_size.sum() * left if free.any() else np.zeros(len(self.tasks))
                shares += [self.shares.get(task, 0.0) for task in self.tasks]
                probabilities = shares / shares.sum()
            if getattr(self.options, "temperature_end", None) is not None:  # one power a step:
                return probabilities  # not worth keeping
            self._probabilities[power] = probabilities
        return self._probabilities[power]

    def drawn(self, step: int, power: float) -> str:
        """A task drawn for `step` with probability proportional to its size**power, from a
        generator seeded by (seed, step)."""
        return self.drawn_from(step, self.probabilities(power))

    def drawn_from(self, step: int, probabilities: np.ndarray) -> str:
        """A task drawn for `step` with `probabilities` (one per task), from a generator seeded by
        (seed, step)."""
        draw = np.random.default_rng([self.seed, step]).random()
        cumulative = np.cumsum(probabilities)
        # (a draw above a last cumulative share rounded under 1 is the last task's)
        return self.tasks[min(int(np.searchsorted(cumulative, draw, side="right")), len(self.tasks) - 1)]

    def block_ends_after(self, step: int) -> bool:
        """Whether `step` is the last of a block: a run of steps of one task.

        A single task's run is cut into blocks of its configured length, so phase records
        still come at a steady rhythm.
        """
        if self.mixed:  # no task switches: a block is a cycle of the steps
            return self.is_cycle_end(step)
        if self.kind == "blocks" or len(self.tasks) == 1:
            offset = step % self.cycle + 1
            return offset in np.cumsum([self.steps[task] for task in self.tasks])
        return self.task_at(step + 1) != self.task_at(step)

    def is_cycle_end(self, step: int) -> bool:
        return (step + 1) % self.cycle == 0

    def move_to(self, shares: np.ndarray, log_weights: np.ndarray) -> None:
        """An online schedule's new shares (one per task, adding up to 1), in force from the next
        draw, and the log-weights they came from."""
        self.live = np.asarray(shares, dtype=np.float64)
        self.log_weights = np.asarray(log_weights, dtype=np.float64)

    def state_dict(self) -> dict[str, Any] | None:
        """What a checkpoint must hold for an exact resume: an online schedule's shares (floats,
        which a checkpoint keeps bit for bit); None for a schedule that is a function of the step."""
        if self.live is None or self.log_weights is None:
            return None
        return {
            "shares": self.live.tolist(),
            "log_weights": self.log_weights.tolist(),
            "evidence_seconds": self.evidence_seconds,
        }

    def load_state_dict(self, saved: dict[str, Any] | None) -> None:
        if saved is not None and self.live is not None:
            self.move_to(np.array(saved["shares"]), np.array(saved["log_weights"]))
            self.evidence_seconds = float(saved.get("evidence_seconds", 0.0))


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


@register_schedule("proportional", options=ProportionalOptions, draws=True)
def proportional(scheduler: Scheduler, step: int) -> str:
    return scheduler.drawn(step, 1.0)


def _annealed_over_max_steps(config: Any) -> None:
    if config.schedule.schedule_options.temperature_end is not None and config.optim.max_steps is None:
        raise UserError("temperature_end= anneals T over max_steps=: give max_steps=")


def _has_a_reference(config: Any) -> None:
    if not config.schedule.schedule_options.mix_reference:
        raise UserError(
            "schedule=doremi weighs tasks by their excess loss over a reference run: give "
            "mix_reference=<run folder> (a run of the same tasks, e.g. with schedule=proportional)"
        )


def temperature_at(scheduler: Scheduler, step: int) -> float:
    """schedule=temperature's T at `step`: temperature=, or moving linearly to temperature_end=
    over the run."""
    start, end = scheduler.options.temperature, scheduler.options.temperature_end
    if end is None or not scheduler.total_steps:
        return start
    progress = min(1.0, step / max(1, scheduler.total_steps - 1))
    return start + (end - start) * progress


@register_schedule("temperature", options=TemperatureOptions, draws=True, check=_annealed_over_max_steps)
def temperature(scheduler: Scheduler, step: int) -> str:
    """size**(1/T), as in T5 and jiant; T annealed when temperature_end= is given."""
    return scheduler.drawn(step, 1.0 / temperature_at(scheduler, step))


@register_schedule("mixed", every_task_each_step=True)
def mixed(scheduler: Scheduler, step: int) -> str:
    """Every task at every step (`tasks_at`); the first is the one that step counts for."""
    return scheduler.tasks[0]


def _live(scheduler: Scheduler, step: int) -> str:
    assert scheduler.live is not None, "an online schedule starts with shares"
    return scheduler.drawn_from(step, scheduler.live)


@register_schedule("aioli", adaptive=True, options=LookaheadMixingOptions)
def aioli(scheduler: Scheduler, step: int) -> str:
    """Drawn from shares that a linear mixing law, fitted online to lookahead losses, moves
    (Aioli: Chen et al. 2025); mtl/train/callbacks/online_mixing.py updates them."""
    return _live(scheduler, step)


@register_schedule("doremi", adaptive=True, options=DoReMiOptions, check=_has_a_reference)
def doremi(scheduler: Scheduler, step: int) -> str:
    """Drawn from shares that the excess loss over a reference run moves (DoReMi: Xie et al. 2023)."""
    return _live(scheduler, step)


@register_schedule("transfer", adaptive=True, options=LookaheadMixingOptions)
def transfer(scheduler: Scheduler, step: int) -> str:
    """Drawn from shares that each task's lookahead affinity toward watched tasks moves."""
    return _live(scheduler, step)


def _over_max_steps(config: Any) -> None:
    if config.optim.max_steps is None:
        raise UserError(
            f"schedule={config.schedule.schedule} divides the run's steps between its stages: give max_steps="
        )


def _stage_ends(scheduler: Scheduler) -> np.ndarray:
    """sequential's stages: where each task's stretch ends, its share of the run as blocks gives
    it (`<task>.steps` of the cycle), rounded so the stretches add up to the run."""
    assert scheduler.total_steps, "a staged schedule knows the run's length (checked: max_steps=)"
    shares = np.cumsum([scheduler.steps[task] for task in scheduler.tasks]) / scheduler.cycle
    return np.round(shares * scheduler.total_steps).astype(int)


@register_schedule("sequential", check=_over_max_steps)
def sequential(scheduler: Scheduler, step: int) -> str:
    """Each task once, in turn, for its share of max_steps: task after task (sequential training)."""
    ends = _stage_ends(scheduler)
    return scheduler.tasks[min(int(np.searchsorted(ends, step, side="right")), len(scheduler.tasks) - 1)]


@register_schedule("two_stage", options=TwoStageOptions, check=_over_max_steps)
def two_stage(scheduler: Scheduler, step: int) -> str:
    """Every task's blocks for first_stage of max_steps, then the first training task alone (the
    target: trained on everything, then specialised)."""
    assert scheduler.total_steps, "a staged schedule knows the run's length (checked: max_steps=)"
    if step < round(scheduler.options.first_stage * scheduler.total_steps):
        return blocks(scheduler, step)
    return scheduler.tasks[0]
