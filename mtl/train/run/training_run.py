"""The run as one object (after torchtune's recipe): what a training run trains with (config,
data, setup, model), where it stands (state), and the parts that keep it (the callbacks, the run
log, the checkpointer, the selection of the best model, the lr schedule). The loop
(`trainer.py`), the evaluations and checkpoints (`evaluation.py`), the ending (`ending.py`) and
every callback work on this one object; none of them holds the trainer.

`Control` is what the parts may ask of the loop between two steps: stop (a rule of `stop=`, a
budget, a callback), evaluate now, checkpoint now. The loop reads it after every event that may
ask (the run's start, a step's end, an evaluation) and every process reads the same answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from mtl import metrics
from mtl.runs import RunFolder
from mtl.train.callbacks.base import Callbacks, checked_values
from mtl.train.data.evaluate import evaluate_tasks
from mtl.train.run.log import NullLog, RunLog
from mtl.train.run.state import StopReason, TrainState

if TYPE_CHECKING:
    from mtl.runtime.distributed import Distributed
    from mtl.train.config.train_config import TrainConfig
    from mtl.train.data.training_data import TrainingData
    from mtl.train.loop.selection import Selection
    from mtl.train.optim.lr_schedules import LrSchedule
    from mtl.train.run.checkpointer import Checkpointer
    from mtl.train.run.setup import Setup

# The reasons a part may give for a stop, in the order one is chosen when several are asked at once
# (a callback's first: it came with a why)
STOPS = (
    StopReason.CALLBACK,
    StopReason.MAX_STEPS,
    StopReason.MAX_MINUTES,
    StopReason.MIN_LR,
    StopReason.PATIENCE,
)


class Requests(NamedTuple):
    """What the run's parts asked since the loop last read them, agreed by every process."""

    evaluate: bool
    checkpoint: bool
    stop: StopReason | None


@dataclass
class Control:
    """What a callback may ask of the loop, decided after the step under way: stop the run
    (it finishes as a run does, with `stop_reason` "callback" and `stop_why` in its summary), or
    evaluate now (a dev evaluation and checkpoint outside eval_every='s rhythm). mtl's own rules
    ask through it too (the stop rules with their own reason, the eval_every= and
    checkpoint_every= rhythm). Every rank's requests count: one rank asking is enough."""

    stop_why: str | None = None
    asked: StopReason | None = None  # the stop this process's parts asked for, not yet read
    reason: StopReason | None = None  # the stop every rank agreed on when the loop last read
    evaluate: bool = False
    checkpoint: bool = False

    def stop(self, why: str, reason: StopReason = StopReason.CALLBACK) -> None:
        """End the run after this step (asked for several reasons at once, it stops for the first
        of `STOPS`: whatever the order the parts asked in, every rank gives the same one)."""
        if reason not in STOPS:
            raise ValueError(f"run.control.stop: {reason.value} is not a reason a part of the run gives")
        if self.asked is None or STOPS.index(reason) < STOPS.index(self.asked):
            self.stop_why, self.asked = why, reason

    def evaluate_now(self) -> None:
        self.evaluate = True

    def checkpoint_now(self) -> None:
        self.checkpoint = True

    def read(self, dist: Distributed, from_every_rank: bool) -> Requests:
        """What was asked since the last read: any rank's where `from_every_rank` (a collective, so
        paid only where ranks may ask differently: callbacks=, a clock's budget); the requests to
        evaluate and checkpoint are cleared, a stop stays (as `reason`, which every rank agreed on:
        the loop acts on that one, never on a request only this process has seen)."""
        asked = [float(self.evaluate), float(self.checkpoint)]
        asked += [float(self.asked is reason) for reason in STOPS]
        if from_every_rank:
            asked = dist.sum(asked)
        self.evaluate = self.checkpoint = False
        stops = [reason for reason, count in zip(STOPS, asked[2:], strict=True) if count > 0]
        if stops:
            if self.asked is not stops[0]:  # another rank's stop, or a reason chosen over ours
                self.stop_why = None
            self.asked = self.reason = stops[0]
        return Requests(asked[0] > 0, asked[1] > 0, self.reason)


class TrainingRun:
    """One training run, owned whole: the callbacks see it (`run.config`, `run.model`,
    `run.state`, `run.dist`, `run.control`, ...), the loop, the evaluation and the ending work on
    it. `model` and `state` are replaced during a run (the state when a checkpoint is restored,
    the model when a sharded run gathers its weights to export): read them from the run."""

    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        data: TrainingData,
        setup: Setup,
        dist: Distributed,
        device: Any,
        lr_schedule: LrSchedule,
        checkpointer: Checkpointer,
        progress: bool,
    ):
        self.config = config
        self.run_dir, self.files = Path(run_dir), RunFolder(Path(run_dir))
        self.data = data
        self.setup = setup  # the optimizers, the scheduler, each task's batch stream
        self.model = setup.model  # mtl.models.heads.MultitaskModel, possibly sharded (strategy=fsdp)
        self.dist = dist  # the process group: rank, world size, broadcast, any
        self.device = device  # a torch.device
        self.lr_schedule = lr_schedule
        self.checkpointer = checkpointer
        self.progress = progress  # progress bars and printed lines (rank 0's)
        self.state = TrainState.for_tasks(config.training_tasks)
        self.callbacks = Callbacks()  # the trainer builds them with the run (they see it)
        self.selection: Selection | None = None  # select=: over the dev metrics and the callbacks' keys
        self.run_log: RunLog | NullLog = NullLog()  # rank 0's metrics.jsonl, once the logs open
        self.resumed = False  # this process continues a checkpointed run
        self.control = Control()

    def log(self, event: str, values: dict[str, Any]) -> None:
        """A record of this step into the run's log (metrics.jsonl; its numbers to W&B): `values`
        under their own keys, with the step and `event` as its name. Rank 0's are written."""
        checked_values("(run.log)", "run.log", values)
        self.callbacks.on_event({metrics.GLOBAL_STEP: self.state.global_step, metrics.EVENT: event, **values})

    def event(self, name: str, **values: Any) -> None:
        """An event of the run (a block's start, a checkpoint, ...) to the callbacks: the run log, W&B."""
        record = {metrics.GLOBAL_STEP: self.state.global_step, metrics.EVENT: name}
        self.callbacks.on_event({**record, **{metrics.phase(k): v for k, v in values.items()}})

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Each task's metric on `split`; each rank scores its share of the examples."""
        return evaluate_tasks(
            self.model, self.data, split, self.config.run, self.dist, self.device, progress=self.progress
        )
