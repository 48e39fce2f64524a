"""Work around the training loop that is not the loop itself, as callbacks (after HF's
`TrainerCallback`): the trainer calls their hooks at fixed points of a run and they see the run
whole (`TrainingRun`, training_run.py: its config, data, model, state, device and process
group), so a new
training-time feature is a callback in a file of its own, not an edit of the trainer.

Two kinds of hooks:

- **The run's hooks** (`on_train_begin`, `on_step_begin`, `on_step_end`, `on_evaluate`, `on_checkpoint`,
  `on_train_end`) see the run and may act on it: score the model, add results to an evaluation
  or the summary, and ask the loop to stop or evaluate now (`run.control`). The affinity
  measurements, the transfer monitor and the contamination ledger are such callbacks.
- **The record hooks** (`on_step`, `on_event`, `on_finish`, `close`) receive the rows the run
  logs, as the run log and the progress bar do.

A callback runs on rank 0 alone unless its class sets `every_rank = True`; one that runs a
collective (every process scores its share, a broadcast) must, and must then do the same on
every rank. Plugins register theirs with `register_callback(name)` and a run names them with
`callbacks=a,b`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from mtl.config import comma_list, key_owners_of, type_hints
from mtl.errors import UserError
from mtl.formats.run_files import SUMMARY_NUMBERS
from mtl.plugins import adds_to

if TYPE_CHECKING:  # (the run imports this module)
    from mtl.train.config.train_config import TrainConfig
    from mtl.train.run.training_run import TrainingRun


class Callback:
    """Every hook is optional. `every_rank`: built and called on every process, not rank 0 alone."""

    every_rank: ClassVar[bool] = False

    # ---- the run's hooks ----------------------------------------------------------------

    def on_train_begin(self, run: TrainingRun) -> None:
        """Before the first step of this process (`run.resumed`: after the checkpoint was restored)."""

    def on_step_begin(self, run: TrainingRun, tasks: list[str]) -> None:
        """The step `run.state.global_step` (counted from 0) of `tasks` is about to train: their
        batches are drawn, nothing of the step is done yet."""

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        """An optimizer step of `task` (metrics.MIXED for schedule=mixed) ended and was counted:
        `run.state.global_step` steps are done."""

    def evaluation_keys(self) -> list[str]:
        """The keys `on_evaluate` adds, known before training (select= may name them)."""
        return []

    def on_evaluate(self, run: TrainingRun) -> dict[str, float]:
        """Extra results of a dev evaluation, logged with it (every rank must return the same)."""
        return {}

    def on_checkpoint(self, run: TrainingRun, best: bool) -> None:
        """A checkpoint was written: the best one (`best`) or checkpoints/latest.pt."""

    def on_train_end(self, run: TrainingRun) -> dict[str, Any]:
        """The best checkpoint is loaded and scored on test: what to add to the run's summary."""
        return {}

    # ---- its state, in the run's checkpoint ---------------------------------------------

    def state_dict(self) -> Any:
        """What the callback must carry over a resume (counts, a running best, its own clock), as
        JSON values (numbers, text, lists, tables); None: nothing. Saved in checkpoints/latest.pt
        under its callbacks= name, given back to `load_state_dict` when the run resumes."""
        return None

    def load_state_dict(self, state: Any) -> None:
        """The state `state_dict` gave at the checkpoint the run resumes from."""

    # ---- the record hooks ---------------------------------------------------------------

    def on_step(self, task: str, record: dict[str, Any]) -> None:
        """A step of `task` ended; `record` is its row of metrics."""

    def on_event(self, record: dict[str, Any]) -> None:
        """A block, epoch, evaluation, checkpoint, divergence or the end; `record[metrics.EVENT]` says which."""

    def on_finish(self, summary: dict[str, Any], phases: list[dict[str, Any]]) -> None:
        """The run finished: its summary and the rows of its phases table (one per block)."""

    def close(self, exit_code: int) -> None:
        """The run stops: 0 finished, 1 failed, 130 interrupted (resumable)."""


# name -> what makes the callback for a run: (the run's config, its folder) -> Callback.
CallbackFactory = Callable[["TrainConfig", Path], Callback]
CALLBACKS: dict[str, CallbackFactory] = {}
CALLBACK_OPTIONS: dict[str, type] = {}  # name -> the dataclass of its own keys


def register_callback(name: str, options: type | None = None) -> Callable[[CallbackFactory], CallbackFactory]:
    """Make a callback available to callbacks=NAME (a decorator on a Callback class or factory);
    `options`: a dataclass of its own keys (`norm_limit: float = 3.0`, each with its comment), flat
    on the command line once the callback is chosen (`callbacks=encoder_norm norm_limit=5`) and
    recorded under `run.callback_options`; the factory reads `config.run.callback_options.norm_limit`."""
    if options is not None:
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"callback {name!r}: register_callback(options=) takes a dataclass of its keys")
        CALLBACK_OPTIONS[name] = options
    return adds_to(CALLBACKS, name)


class ChosenCallbackOptions:
    """The options class of a `callbacks=a,b` value (what `options_field` asks of a registry): the
    one callback's that has keys, or one dataclass holding the keys of each chosen callback."""

    def items(self) -> list[tuple[str, type]]:
        return list(CALLBACK_OPTIONS.items())

    def get(self, names: str | None) -> type | None:
        chosen = [name for name in comma_list(names) if name in CALLBACK_OPTIONS]
        if not chosen:
            return None
        if len(chosen) == 1:
            return CALLBACK_OPTIONS[chosen[0]]
        return _combined(tuple(sorted(set(chosen))))


@functools.cache  # one class per combination: a config's options keep their type
def _combined(names: tuple[str, ...]) -> type:
    fields, owner = [], {}
    for name in names:
        hints = type_hints(CALLBACK_OPTIONS[name], extras=True)
        for field in dataclasses.fields(CALLBACK_OPTIONS[name]):
            if field.name in owner:
                raise UserError(
                    f"callbacks={','.join(names)}: {owner[field.name]} and {name} both take the key "
                    f"{field.name}: use one of them"
                )
            owner[field.name] = name
            default = (
                {"default_factory": field.default_factory}
                if field.default_factory is not dataclasses.MISSING
                else {"default": field.default}
            )
            fields.append(
                (field.name, hints[field.name], dataclasses.field(**default, metadata=field.metadata))
            )
    combined = dataclasses.make_dataclass("CallbackOptions", fields)
    combined.__doc__ = f"The keys of callbacks {', '.join(names)}."
    return combined


def callback_key_owners() -> dict[str, list[str]]:
    """Each callback-specific key -> the callbacks that take it."""
    return key_owners_of(CALLBACK_OPTIONS)


def callback_names(names: str) -> list[str]:
    """The names of callbacks=a,b, each registered (else a one-line error with the choices)."""
    chosen = comma_list(names)
    if unknown := [n for n in chosen if n not in CALLBACKS]:
        known = ", ".join(CALLBACKS) or "none yet: a plugin registers them (plugins=)"
        raise UserError(f"callbacks={names}: unknown {', '.join(unknown)}; registered: {known}")
    return chosen


def named_callbacks(config: TrainConfig, run_dir: Path, is_main: bool) -> list[Callback]:
    """The callbacks=a,b of a run this process builds: every one on rank 0, those that run on every
    rank elsewhere."""
    made = []
    for name in callback_names(config.run.callbacks):
        make = CALLBACKS[name]
        if is_main or getattr(make, "every_rank", False):
            callback = make(config, run_dir)
            callback.registered_name = name  # its state's key in the checkpoint
            made.append(callback)
    return made


def checked_values(name: str, hook: str, values: Any, text_allowed: bool = False) -> dict[str, Any]:
    """What a callback's hook returned, when it is a table of numbers (None: not finite; with
    `text_allowed`, the summary's own text too): a value mtl's readers would refuse later (the
    run's log, its resume) is refused here, naming the callback."""
    if not isinstance(values, dict):
        raise UserError(
            f"callback {name}: {hook} returned {type(values).__name__}, not a table of key: number"
        )
    for key, value in values.items():
        number = value is None or (isinstance(value, int | float) and not isinstance(value, bool))
        if not isinstance(key, str) or not (
            number or isinstance(value, bool) or (text_allowed and _summary_value(key, value))
        ):
            raise UserError(
                f"callback {name}: {hook} returned {key!r}: {value!r:.40}, not a number: return numbers "
                "(log text with run.log or print it)"
            )
    return values


def _name(callback: Callback) -> str:
    return getattr(callback, "registered_name", type(callback).__name__)


def _summary_value(key: str, value: Any) -> bool:
    """A value the summary may hold besides numbers: text, or JSON tables and lists, under a key no
    reader takes as a score."""
    return not key.startswith(SUMMARY_NUMBERS) and _is_json(value)


def _is_json(value: Any, depth: int = 0) -> bool:
    if depth > 32:
        return False
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int | float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


class Callbacks(Callback):
    """The run's callbacks, called in order (closed in reverse)."""

    def __init__(self, *callbacks: Callback):
        self.callbacks = list(callbacks)

    def on_train_begin(self, run: TrainingRun) -> None:
        for callback in self.callbacks:
            callback.on_train_begin(run)

    def on_step_begin(self, run: TrainingRun, tasks: list[str]) -> None:
        for callback in self.callbacks:
            callback.on_step_begin(run, tasks)

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        for callback in self.callbacks:
            callback.on_step_end(run, task)

    def evaluation_keys(self) -> list[str]:
        return [key for callback in self.callbacks for key in callback.evaluation_keys()]

    def on_evaluate(self, run: TrainingRun) -> dict[str, float]:
        results: dict[str, float] = {}
        for callback in self.callbacks:
            results.update(checked_values(_name(callback), "on_evaluate", callback.on_evaluate(run)))
        return results

    def on_checkpoint(self, run: TrainingRun, best: bool) -> None:
        for callback in self.callbacks:
            callback.on_checkpoint(run, best)

    def on_train_end(self, run: TrainingRun) -> dict[str, Any]:
        added: dict[str, Any] = {}
        for callback in self.callbacks:
            added.update(
                checked_values(_name(callback), "on_train_end", callback.on_train_end(run), text_allowed=True)
            )
        return added

    def state_dict(self) -> dict[str, str]:
        """Each named callback's state (callbacks=), as JSON text: a checkpoint holds no object a
        load would have to rebuild."""
        states = {}
        for callback in self.callbacks:
            name = getattr(callback, "registered_name", None)
            if name is None or (state := callback.state_dict()) is None:
                continue
            if not _is_json(state):
                raise UserError(
                    f"callback {name}: state_dict returned {type(state).__name__} holding other than JSON values "
                    "(numbers, text, lists, tables): it cannot go into the checkpoint"
                )
            states[name] = json.dumps(state)
        return states

    def load_state_dict(self, states: dict[str, str]) -> None:
        for callback in self.callbacks:
            name = getattr(callback, "registered_name", None)
            if name is not None and isinstance(states.get(name), str):
                callback.load_state_dict(json.loads(states[name]))

    def on_step(self, task: str, record: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.on_step(task, record)

    def on_event(self, record: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.on_event(record)

    def on_finish(self, summary: dict[str, Any], phases: list[dict[str, Any]]) -> None:
        for callback in self.callbacks:
            callback.on_finish(summary, phases)

    def close(self, exit_code: int) -> None:
        for callback in reversed(self.callbacks):  # last opened, first closed: the bar before W&B's last line
            callback.close(exit_code)
