"""Callbacks that see the run: a plugin's callback reads the live model, adds a result to each
evaluation that select= may name, asks for an evaluation and a stop, and sees each checkpoint,
through the same hooks the built-in ones (affinity, monitor=, the contamination ledger) use."""

import json
from dataclasses import dataclass

import pytest
import torch

from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.train.callbacks.base import CALLBACK_OPTIONS, CALLBACKS, Callback, register_callback
from mtl.train.run.training_run import TrainingRun

from .conftest import args_for, start_run, straight_and_resumed

NORM = "watcher/encoder_norm"


class Watcher(Callback):
    """Needs the model: the shared encoder's weight norm with every evaluation; asks for an
    evaluation after step 4 and a stop after step 7."""

    every_rank = True
    seen: list = []  # (hook, step, detail) of the last run, for the test to read

    def __init__(self, config, run_dir):
        Watcher.seen = []

    def on_train_begin(self, run: TrainingRun) -> None:
        self.seen.append(("begin", run.state.global_step, run.resumed))

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        step = run.state.global_step
        self.seen.append(("step", step, task))
        if step == 4:
            run.control.evaluate_now()
        if step == 7:
            run.control.stop("the watcher saw enough")

    def evaluation_keys(self) -> list[str]:
        return [NORM]

    def on_evaluate(self, run: TrainingRun) -> dict[str, float]:
        with torch.no_grad():
            norm = torch.cat([p.flatten() for p in run.model.encoder.parameters()]).norm().item()
        self.seen.append(("evaluate", run.state.global_step, norm))
        return {NORM: norm}

    def on_checkpoint(self, run: TrainingRun, best: bool) -> None:
        self.seen.append(("checkpoint", run.state.global_step, best))

    def on_train_end(self, run: TrainingRun) -> dict:
        return {"watcher": {"evaluations": sum(hook == "evaluate" for hook, *_ in self.seen)}}


@pytest.fixture
def watcher():
    register_callback("watcher")(Watcher)
    yield
    CALLBACKS.pop("watcher")


def test_a_callback_sees_the_model_adds_results_and_stops_the_run(watcher, tiny_data, tmp_path):
    run_dir, summary = start_run(
        tiny_data, tmp_path / "run", "callbacks=watcher", f"select={NORM}", "eval_every=1000", "max_steps=50"
    )
    seen = Watcher.seen
    assert seen[0] == ("begin", 0, False)
    assert [step for hook, step, _ in seen if hook == "step"] == list(range(1, 8))
    assert summary["stop_reason"] == "callback" and summary["stop_why"] == "the watcher saw enough"
    assert summary["global_step"] == 7
    # evaluated when asked (after step 4) and when the run ended (step 7): nothing else is due
    evaluations = [(step, norm) for hook, step, norm in seen if hook == "evaluate"]
    assert [step for step, _ in evaluations] == [4, 7]
    logged = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("phase/event") == "evaluation"]
    assert [(r["global_step"], r[NORM]) for r in logged] == evaluations
    # select= named the callback's key: the best checkpoint is the evaluation with the larger norm
    best_step = max(evaluations, key=lambda e: e[1])[0]
    assert summary["selection"] == {"step": best_step, "by": NORM, "value": max(n for _, n in evaluations)}
    assert ("checkpoint", 4, False) in seen and ("checkpoint", 7, False) in seen
    assert summary["watcher"] == {"evaluations": 2}
    assert json.loads((run_dir / "summary.json").read_text())["stop_why"] == "the watcher saw enough"


class EarlyStopper(Callback):
    """Stops the run from `on_evaluate`, as an early-stopping callback does: at the second evaluation."""

    seen: list = []  # (hook, step)

    def __init__(self, config, run_dir):
        EarlyStopper.seen = []

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        self.seen.append(("step", run.state.global_step))

    def on_evaluate(self, run: TrainingRun) -> dict[str, float]:
        self.seen.append(("evaluate", run.state.global_step))
        if sum(hook == "evaluate" for hook, _ in self.seen) == 2:
            run.control.stop("no gain")
        return {}


def test_a_stop_asked_for_in_on_evaluate_ends_the_run_before_another_step(tiny_data, tmp_path):
    register_callback("early_stopper")(EarlyStopper)
    try:
        _, summary = start_run(
            tiny_data, tmp_path / "run", "callbacks=early_stopper", "eval_every=3", "max_steps=50"
        )
    finally:
        CALLBACKS.pop("early_stopper")
    # evaluations after steps 3 and 6; the second asks to stop: no step 7, no evaluation of it
    assert EarlyStopper.seen[-2:] == [("step", 6), ("evaluate", 6)]
    assert summary["global_step"] == 6 and summary["stop_reason"] == "callback"


def test_the_runs_control_stops_for_the_first_reason_of_its_order_whoever_asked_first():
    from mtl.runtime.distributed import Distributed
    from mtl.train.run.state import StopReason
    from mtl.train.run.training_run import Control

    for asked in ([StopReason.MAX_STEPS, StopReason.CALLBACK], [StopReason.CALLBACK, StopReason.MAX_STEPS]):
        control = Control()
        for reason in asked:
            control.stop(f"{reason.value} asked", reason)
        control.evaluate_now()
        assert control.read(Distributed(), from_every_rank=False) == (True, False, StopReason.CALLBACK)
        assert control.stop_why == "callback asked"
        # an evaluation is asked once; a stop holds until the loop acts on it
        assert control.read(Distributed(), from_every_rank=False) == (False, False, StopReason.CALLBACK)
    with pytest.raises(ValueError, match="interrupted"):
        Control().stop("Ctrl-C", StopReason.INTERRUPTED)  # the process's signal, not a part's request


class StopsAtTheStart(Callback):
    def __init__(self, config, run_dir):
        pass

    def on_train_begin(self, run: TrainingRun) -> None:
        run.control.stop("nothing to train")


def test_a_stop_asked_for_at_the_start_ends_the_run_before_its_first_step(tiny_data, tmp_path):
    """The loop reads the control after the run's start too: no step, one evaluation, a summary."""
    register_callback("stops_at_the_start")(StopsAtTheStart)
    try:
        _, summary = start_run(tiny_data, tmp_path / "run", "callbacks=stops_at_the_start")
    finally:
        CALLBACKS.pop("stops_at_the_start")
    assert (summary["global_step"], summary["stop_reason"]) == (0, "callback")
    assert summary["stop_why"] == "nothing to train"
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["global_step"] for r in records if r.get("phase/event") == "evaluation"] == [0]


class StepCounter(Callback):
    """Counts the steps it saw: its count is its own state, carried over a resume."""

    def __init__(self, config, run_dir):
        self.steps = 0

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        self.steps += 1

    def on_train_end(self, run: TrainingRun) -> dict:
        return {"counter": {"steps": self.steps}}

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state) -> None:
        self.steps = state["steps"]


class Chatty(Callback):
    """Returns text where numbers go."""

    def __init__(self, config, run_dir):
        pass

    def on_evaluate(self, run: TrainingRun) -> dict:
        return {"chatty/mood": "good"}


@pytest.fixture
def counter_and_chatty():
    register_callback("counter")(StepCounter)
    register_callback("chatty")(Chatty)
    yield
    CALLBACKS.pop("counter")
    CALLBACKS.pop("chatty")


def test_a_callbacks_state_is_in_the_checkpoint_and_resumes_with_it(counter_and_chatty, tiny_data, tmp_path):
    _, straight, resumed = straight_and_resumed(tiny_data, tmp_path, "callbacks=counter", "max_steps=12")
    assert straight["counter"] == {"steps": 12}
    assert resumed["counter"] == {"steps": 12}  # not the 5 steps of the resumed process alone


def test_a_callback_returning_text_where_numbers_go_is_refused_at_the_callback(
    counter_and_chatty, tiny_data, tmp_path
):
    with pytest.raises(
        UserError, match=r"callback chatty: on_evaluate returned 'chatty/mood': 'good', not a number"
    ):
        start_run(tiny_data, tmp_path / "run", "callbacks=chatty", "max_steps=3")


@dataclass
class NormLimitOptions:
    norm_limit: float = 1e9  # stop once the encoder's weight norm is above this


@dataclass
class SeenEveryOptions:
    seen_every: int = 1  # steps between notes


class NormLimit(Callback):
    """A callback with a key of its own: stops the run once the encoder's norm passes norm_limit."""

    def __init__(self, config, run_dir):
        self.limit = config.run.callback_options.norm_limit

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        norm = torch.cat([p.flatten() for p in run.model.encoder.parameters()]).norm().item()
        if norm > self.limit:
            run.control.stop(f"norm {norm:.3f} > norm_limit={self.limit}")


@pytest.fixture
def limited():
    register_callback("norm_stop", options=NormLimitOptions)(NormLimit)
    register_callback("note_steps", options=SeenEveryOptions)(lambda config, run_dir: Callback())
    yield
    for name in ("norm_stop", "note_steps"):
        CALLBACKS.pop(name)
        CALLBACK_OPTIONS.pop(name)


def test_a_callback_owns_its_keys_flat_on_the_command_line_and_recorded_under_its_section(
    limited, tiny_data, tmp_path
):
    from mtl.train.config.command_line import config_from_args
    from mtl.train.config.train_config import recorded_config

    run_dir, summary = start_run(tiny_data, tmp_path / "run", "callbacks=norm_stop", "norm_limit=0.5")
    assert summary["stop_reason"] == "callback" and summary["global_step"] == 1
    assert summary["stop_why"].endswith("> norm_limit=0.5")
    recorded = json.loads((run_dir / "config.json").read_text())["config"]
    assert recorded["run"]["callback_options"] == {"norm_limit": 0.5}
    assert recorded_config(recorded, "config.json").run.callback_options.norm_limit == 0.5
    _, untouched = start_run(tiny_data, tmp_path / "default", "callbacks=norm_stop")  # its default: no stop
    assert untouched["stop_reason"] != "callback"
    # two callbacks with keys: each its own, in one section
    both = config_from_args(
        args_for(tiny_data, tmp_path / "x", "callbacks=note_steps,norm_stop", "seen_every=3")
    )
    assert (both.run.callback_options.seen_every, both.run.callback_options.norm_limit) == (3, 1e9)
    with pytest.raises(
        UserError, match=r"^norm_limit=3: a key of callbacks=norm_stop, which this run does not add"
    ):
        config_from_args(args_for(tiny_data, tmp_path / "y", "norm_limit=3"))
    with pytest.raises(UserError, match=r"norm_limit='many' is not a number"):
        config_from_args(args_for(tiny_data, tmp_path / "z", "callbacks=norm_stop", "norm_limit=many"))


def test_the_bar_shows_each_tasks_loss_of_a_mixed_step_and_labels_the_balanced_objective():
    """A balanced sum of 94.7 once read 'mixed loss 94.700' beside tasks at 1.1 and 0.69."""
    from mtl.train.callbacks.run_logs import ProgressBar

    record = {"nli/train/loss": 1.1, "squad/train/loss": 0.69, "mixed/train/loss": 94.7, "nli/train/acc": 0.5}
    assert ProgressBar.losses("mixed", record) == "loss nli 1.100, squad 0.690 (balanced objective 94.700)"
    assert ProgressBar.losses("nli", {"nli/train/loss": 1.1}) == "nli loss 1.100"
