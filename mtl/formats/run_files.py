"""The files of a run folder that mtl writes and reads back, each with its schema: config.json
(`RunRecord`, the readers' part of its config `RecordedConfig`), summary.json (`Summary`, its
`scored_on` and contamination `Ledger`), metrics.jsonl (`MetricsRow`, `read_metrics`) and
affinity.jsonl (`AffinityRow`, `read_affinity`); and how each is written: `write_config`,
`write_summary` (whole, atomically: a reader never sees half a file) and `log_line` (a line of
either log, appended by the run's callbacks as it goes: a kill cuts at most the last line, which
the readers leave out). The folder's paths, status and the lenient readers are `mtl.runs`'s."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from mtl.files import atomic, jsonfile
from mtl.files.schemas import RESTORE, Count, DamagedFile, Finite, Number, Record, is_number, read_json_lines


class TaskMetric(Record):
    metric: str
    higher_is_better: bool


class RunRecord(Record):
    """config.json: the resolved config, the command that started the run, its inputs."""

    config: dict[str, Any]
    command: str = ""
    metrics: dict[str, TaskMetric] | None = None
    plugins: list[Any] | None = None

    @field_validator("command")
    @classmethod
    def _splits_as_shell_words(cls, command: str) -> str:
        try:
            shlex.split(command)
        except ValueError as error:  # an unclosed quote
            raise ValueError(f"not a command line ({error})") from None
        return command


class TaskEntry(Record):
    kind: str | None = None
    steps: Count | None = None
    train_split: str | None = None
    max_train: Count | None = None


class HFShape(Record):
    hf_model: str | None = None


class ModelShape(Record):
    encoder: str
    hidden: Count | None = None
    options: HFShape | None = (
        None  # the encoder's own keys: what readers use of them is encoder=hf's hf_model
    )


class DataShape(Record):
    vectors: str | None = None
    max_eval: Count | None = None


class OptimShape(Record):
    optim: str | None = None
    stop: str | None = None
    max_steps: Count | None = None


class RunShape(Record):
    name: str | None = None
    group: str | None = None


class ScheduleShape(Record):
    schedule: str | None = None


class RecordedConfig(Record):
    """The keys of a recorded config (after `runs.upgrade`) that the readers of finished runs use;
    training reads the whole config back through its own dataclasses (`config.from_dict`)."""

    tasks: dict[str, TaskEntry]
    model: ModelShape
    optim: OptimShape = OptimShape()
    data: DataShape = DataShape()
    run: RunShape = RunShape()
    schedule: ScheduleShape = ScheduleShape()


SUMMARY_NUMBERS = ("best/", "steps/", "examples/", "params/", "recovery/")  # keys whose values are numbers


class ScoredOn(Record):
    """summary.json's `scored_on` of one task's dev or test split: what its scores were measured on."""

    examples: Count
    of: Count | None = None  # the whole split's size; None: a corpus read only as far as the part
    sampled: bool  # a part of the split (max_eval=), not the whole


class Summary(Record):
    """summary.json, written last: the stop reason, step counts and the best checkpoint's scores."""

    stop_reason: str | None = None
    global_step: Count | None = None
    train_seconds: Number = None
    scored_on: dict[str, ScoredOn] | None = None  # "task/split" -> ScoredOn (from 2026-11-29)

    @model_validator(mode="after")
    def _scores_are_numbers(self) -> Summary:
        for key, value in (self.model_extra or {}).items():
            if key.startswith(SUMMARY_NUMBERS) and not is_number(value):
                raise ValueError(f"{key} is {value!r:.40}, not a number")
        return self


class LedgerEntry(Record):
    """One test set of a contamination ledger: its distinct sentences, those the run trained on
    (exactly, or as near duplicates) and, from 2026-11-29, the seen ones' keys."""

    sentences: Count
    exact: Count
    near: Count
    seen: list[Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]] | None = None

    @model_validator(mode="after")
    def _keys_are_the_seen(self) -> LedgerEntry:
        # one key per seen sentence: two sentences differing only in case or punctuation share one
        if self.seen is not None and len(self.seen) != self.exact + self.near:
            raise ValueError(f"{len(self.seen)} keys for {self.exact + self.near} seen sentences")
        return self


class Ledger(Record):
    """summary.json's `contamination`: which test sentences of the transfer tasks the run trained
    on (mtl.eval.contamination), or why it was not kept (`skipped`)."""

    test_sets: dict[str, LedgerEntry] | None = None
    skipped: str | None = None


class MetricsRow(Record):
    """A line of metrics.jsonl: the step, then metric -> number (null: not finite); only an event's
    own values (`phase/...`: its name, task, reason) may be text."""

    global_step: Count

    @model_validator(mode="after")
    def _values_are_numbers(self) -> MetricsRow:
        for key, value in (self.model_extra or {}).items():
            text_allowed = key.startswith("phase/")
            if not (is_number(value) or isinstance(value, bool) or (text_allowed and isinstance(value, str))):
                raise ValueError(f"{key} is {value!r:.40}, not a number")
        return self


class AffinityRow(Record):
    """A line of affinity.jsonl (affinity_every=): at `step`, in `block` of `task`, entry (i, j) of
    `matrix` is what a step on tasks[i] did to tasks[j]'s loss. Every value finite (`Finite`): TAG's
    groups and affinity-check's ranks are chosen from them, and a null once changed the groups
    with no word."""

    step: Count
    block: Count = 0
    task: str = ""
    tasks: list[str] = Field(min_length=1)
    matrix: list[list[Finite]]
    # Since the noise floor (absent in older logs): the standard error of each entry over `batches`
    # held batches, and the unit: "per_lr" ((1 - L_after / L_before) / lr); older: not divided.
    stderr: list[list[Finite]] | None = None
    batches: Count | None = None
    unit: Literal["per_lr", "ratio"] = "ratio"
    # Since 2026-11-28: the matrix on each held batch (the floor's independent units: the same
    # batches at every measurement, so a batch's values over time are one unit, not many).
    per_batch: list[list[list[Finite]]] | None = None
    # Since 2026-11-29, with watching tasks (`<task>.train=false`): entry (i, k) of `toward` is what
    # a step on tasks[i] did to targets[k]'s loss on its dev split, and on each held batch.
    targets: list[str] | None = None
    toward: list[list[Finite]] | None = None
    toward_per_batch: list[list[list[Finite]]] | None = None
    # Since 2026-12-02, with affinity_estimators=: each other estimator's values toward the targets
    # on each held batch (shaped as toward_per_batch), and the CPU seconds it added to the measurement.
    estimators: dict[str, list[list[list[Finite]]]] | None = None
    estimator_seconds: dict[str, Finite] | None = None
    seconds: Finite | None = None  # since 2026-12-02: the whole measurement's CPU seconds
    # Since 2026-12-02 (affinity_each=): which held batches per_batch holds (absent: 0, 1, ..., all)
    held: list[Count] | None = None
    # Since 2026-12-02 (affinity_precision=): the lookahead's step and losses' precision (absent:
    # float64); mixed: some batches' steps too small for float32, measured in float64
    precision: Literal["float32", "float64", "mixed"] = "float64"

    @model_validator(mode="after")
    def _toward_the_targets(self) -> AffinityRow:
        if (self.targets is None) != (self.toward is None):
            raise ValueError("targets and toward come together (a watching task's column each)")
        if self.targets is None:
            return self
        if (
            not self.targets
            or len(set(self.targets)) != len(self.targets)
            or set(self.targets) & set(self.tasks)
        ):
            raise ValueError(f"targets {self.targets}: distinct watching tasks, none of them a training task")
        columns = len(self.targets)
        matrices = [("toward", self.toward or [])]
        matrices += [(f"toward_per_batch[{b}]", m) for b, m in enumerate(self.toward_per_batch or [])]
        for name, matrix in matrices:
            if len(matrix) != len(self.tasks) or any(len(row) != columns for row in matrix):
                raise ValueError(f"{name}: {len(self.tasks)} training tasks x {columns} targets needed")
        batches = (self.toward_per_batch, self.per_batch)
        if None not in batches and len(self.toward_per_batch or []) != len(self.per_batch or []):
            raise ValueError("toward_per_batch and per_batch hold different numbers of batches")
        for name, values in (self.estimators or {}).items():
            if len(values) != len(self.toward_per_batch or []):
                raise ValueError(f"estimators.{name}: one matrix per held batch, as toward_per_batch")
            for matrix in values:
                if len(matrix) != len(self.tasks) or any(len(row) != columns for row in matrix):
                    raise ValueError(
                        f"estimators.{name}: {len(self.tasks)} training tasks x {columns} targets needed"
                    )
        if set(self.estimator_seconds or {}) != set(self.estimators or {}):
            raise ValueError("estimators and estimator_seconds name the same estimators")
        return self

    @model_validator(mode="after")
    def _square_over_tasks(self) -> AffinityRow:
        size = len(self.tasks)
        if len(set(self.tasks)) != size:
            raise ValueError(f"tasks {self.tasks} names a task twice")
        square = [[0] * size] * size
        matrices = [("matrix", self.matrix), ("stderr", self.stderr or square)]
        matrices += [(f"per_batch[{b}]", m) for b, m in enumerate(self.per_batch or [])]
        for name, matrix in matrices:
            if len(matrix) != size or any(len(row) != size for row in matrix):
                shape = f"{len(matrix)} rows of {sorted({len(row) for row in matrix})} entries"
                raise ValueError(f"{name}: {size} tasks need {size} rows of {size}, found {shape}")
        if self.per_batch is not None and self.batches is not None and len(self.per_batch) != self.batches:
            raise ValueError(f"per_batch holds {len(self.per_batch)} batches, batches says {self.batches}")
        if self.held is not None and (
            self.per_batch is None
            or len(self.held) != len(self.per_batch)
            or len(set(self.held)) != len(self.held)
        ):
            raise ValueError("held names each batch of per_batch once, in its order")
        return self


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """A run's metrics.jsonl: one record per step and event (a last line a kill cut short left out)."""
    return read_json_lines(path, MetricsRow, RESTORE)


def read_affinity(path: Path) -> list[dict[str, Any]]:
    """A run's affinity.jsonl (affinity_every=): its measurements, each {step, block, task, tasks,
    matrix; with watching tasks, targets and toward), all over the same tasks and targets; none
    when the run measured none."""
    rows = read_json_lines(path, AffinityRow, RESTORE)
    for number, row in enumerate(rows[1:], start=2):
        if row["tasks"] != rows[0]["tasks"] or row.get("targets") != rows[0].get("targets"):
            raise DamagedFile(
                f"{path}: measurement {number} is over tasks {row['tasks']} (targets {row.get('targets')}), "
                f"the first over {rows[0]['tasks']} (targets {rows[0].get('targets')}): {RESTORE}"
            )
    return rows


def write_config(path: Path, record: dict[str, Any]) -> None:
    """A run's config.json (`RunRecord`)."""
    atomic.write_text(path, jsonfile.dumps(record, indent=2) + "\n", "run config")


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """A run's summary.json (`Summary`)."""
    atomic.write_text(path, jsonfile.dumps(summary, indent=2) + "\n", "summary")


def log_line(record: dict[str, Any]) -> str:
    """One line of metrics.jsonl (`MetricsRow`) or affinity.jsonl (`AffinityRow`)."""
    return jsonfile.dumps(record) + "\n"
