"""What a finished optimizer step hands the run's state: each task's figures, and what the
balancer decided when several tasks shared the update (`schedule=mixed`). One type for every
step strategy (strategy.py's single task, mixed.py's every task at once), so the state, the log
and the callbacks take a step whole without asking which kind it was."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TaskResult:
    """One task's part of a finished step, summed over every rank."""

    examples: int  # the global batch
    loss: float  # mean over the global batch
    score: float  # mean of the task's metric (accuracy) over the global batch
    grad_norm: float  # of the task's gradient (under schedule=mixed: on the shared encoder)


@dataclass
class StepOutcome:
    """A finished optimizer step of one task, or of every task at once, summed over every rank."""

    tasks: dict[str, TaskResult]
    loss: float  # what the update minimised: the task's mean loss, or the balancer's weighted sum
    grad_norm: float  # of the whole update, before clipping
    seconds: float = 0.0  # from the batches drawn to the step's result read back
    weights: dict[str, float] = field(
        default_factory=dict
    )  # each task loss's weight (the balancer's decision)
    cosines: dict[tuple[str, str], float] = field(default_factory=dict)  # of two tasks' encoder gradients

    @property
    def balanced(self) -> bool:
        """Whether a balancer combined several tasks' gradients into this update."""
        return bool(self.weights)
