"""The files mtl writes and later reads back, each with its schema, checked when read.

A run folder travels (a colleague's `runs/`, a copied sweep), is cut by a kill, or edited by
hand: what mtl wrote is input like any other. Each format below is a pydantic model; `read_json`
and `read_json_lines` parse a file and check it, and a file that does not fit is one
`DamagedFile` error naming the file, the line (JSON Lines) and the field:

    runs/a/affinity.jsonl line 3, matrix: 3 tasks but 2 rows: restore the file, or remove it

`FORMATS` lists every format with its reader; `just fuzz` has a target for each (a test fails
when one is added without).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mtl.errors import UserError

# JSON numbers as mtl writes them: finite, or null where a value was not finite (jsonfile.dumps).
Number = float | None
Count = Annotated[int, Field(ge=0)]


class DamagedFile(UserError):
    """A file mtl wrote earlier that no longer fits its format."""


class Record(BaseModel):
    """A JSON object of a file mtl writes: types strict (a number written as text is damage), keys
    beyond those read kept (older and newer mtl versions write more)."""

    model_config = ConfigDict(strict=True, extra="allow")


# ---- the run folder --------------------------------------------------------------------------


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


class RunConfig(Record):
    """The keys of a recorded config (after `runs.upgrade`) that the readers of finished runs use;
    training reads the whole config back through its own dataclasses (`config.from_dict`)."""

    tasks: dict[str, TaskEntry]
    model: ModelShape
    optim: OptimShape = OptimShape()
    data: DataShape = DataShape()
    run: RunShape = RunShape()
    schedule: ScheduleShape = ScheduleShape()


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


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
            if key.startswith(SUMMARY_NUMBERS) and not _is_number(value):
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


def checked(model: type[Record], value: Any, where: str, fix: str) -> dict[str, Any]:
    """`value` (a part of a file read already) checked against `model`; DamagedFile names `where`."""
    return _checked(model, value, where, fix)


class MetricsRow(Record):
    """A line of metrics.jsonl: the step, then metric -> number (null: not finite); only an event's
    own values (`phase/...`: its name, task, reason) may be text."""

    global_step: Count

    @model_validator(mode="after")
    def _values_are_numbers(self) -> MetricsRow:
        for key, value in (self.model_extra or {}).items():
            text_allowed = key.startswith("phase/")
            if not (
                _is_number(value) or isinstance(value, bool) or (text_allowed and isinstance(value, str))
            ):
                raise ValueError(f"{key} is {value!r:.40}, not a number")
        return self


class AffinityRow(Record):
    """A line of affinity.jsonl (affinity_every=): at `step`, in `block` of `task`, entry (i, j) of
    `matrix` is what a step on tasks[i] did to tasks[j]'s loss."""

    step: Count
    block: Count = 0
    task: str = ""
    tasks: list[str] = Field(min_length=1)
    matrix: list[list[Number]]
    # Since the noise floor (absent in older logs): the standard error of each entry over `batches`
    # held batches, and the unit: "per_lr" ((1 - L_after / L_before) / lr); older: not divided.
    stderr: list[list[Number]] | None = None
    batches: Count | None = None
    unit: Literal["per_lr", "ratio"] = "ratio"
    # Since 2026-11-28: the matrix on each held batch (the floor's independent units: the same
    # batches at every measurement, so a batch's values over time are one unit, not many).
    per_batch: list[list[list[Number]]] | None = None
    # Since 2026-11-29, with watching tasks (`<task>.train=false`): entry (i, k) of `toward` is what
    # a step on tasks[i] did to targets[k]'s loss on its dev split, and on each held batch.
    targets: list[str] | None = None
    toward: list[list[Number]] | None = None
    toward_per_batch: list[list[list[Number]]] | None = None

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
        return self


class SeedPlan(Record):
    """plan-seeds-<time>.json (`just plan-seeds`): the seeds per arm each transfer task needs
    (None: more than `most`), read back by a study's plan= to warn when it has fewer."""

    seeds: dict[str, Annotated[int, Field(ge=2)] | None] = Field(min_length=1)
    most: Annotated[int, Field(ge=2)]


# ---- transfer reports ------------------------------------------------------------------------

# The entries of a task's result that readers take as numbers (headlines, averages, compare).
NUMERIC_RESULTS = (
    "acc",
    "dev_acc",
    "ndev",
    "ntest",
    "seconds",
    "pearson",
    "spearman",
    "f1",
    "mse",
    "main_score",
)


class Aggregate(Record):
    micro: Number = None
    macro: Number = None
    tasks: list[str] = []


class Decontaminated(Record):
    """A task's score on all its test items and on those holding no sentence the run trained on."""

    items: Count
    seen: Count
    score: Number = None
    unseen_score: Number = None
    subsets_left_out: list[str] | None = None  # STS subsets with too few unseen items to score


class TransferReport(Record):
    """<run>/transfer*.json: the suite's results, task -> metric -> value."""

    results: dict[str, dict[str, Any]]
    dim: Count | None = None
    encoder: str = ""
    mode: str = ""
    pooling: str | None = None
    seconds: Number = None
    aggregate: Aggregate | None = None
    evaluated: list[dict[str, Any]] | None = None
    decontaminated: dict[str, Decontaminated] | None = None

    @field_validator("results")
    @classmethod
    def _metrics_are_numbers(cls, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for task, result in results.items():
            for key, value in result.items():
                if (key in NUMERIC_RESULTS or key.startswith("all/")) and not _is_number(value):
                    raise ValueError(f"{task}.{key} is {value!r:.40}, not a number")
        return results


class MergeParent(Record):
    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class MergeRecord(Record):
    """encoder.json's `merged` (just merge-encoders): its method and parents; the rest kept as written."""

    method: str
    parents: list[MergeParent]


# ---- jobs and fetched data -------------------------------------------------------------------

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _below(path: str) -> str:
    if not path or path.startswith("/") or "\\" in path or "\x00" in path or ".." in path.split("/"):
        raise ValueError(f"{path!r:.60} is not a path below its folder")
    return path


# a path below the folder it is read in: never absolute, never through `..`
RELATIVE_PATH = Annotated[str, AfterValidator(_below)]


class SlurmJob(Record):
    """<run>/slurm.json: the SLURM job that trains the run, and how to know it again. `cluster` and
    `comment` (since jobs are checked before they are acted on; absent in older records) tell this
    job from another that got the same id: another cluster's, or one after ids were reused."""

    job_id: Annotated[str, Field(pattern=r"^[0-9]+(_[0-9]+)?$")]
    stdout: str = ""
    stderr: str = ""
    run: str = ""
    submitted: str = ""
    cluster: str | None = None
    comment: str | None = None


class FetchedFile(Record):
    size: Count
    sha256: SHA256
    verified: bool | None = None


class FetchedTask(Record):
    files: dict[RELATIVE_PATH, FetchedFile]


class SentEvalManifest(Record):
    """<out>/get-senteval.json: task -> the files written for it, their sizes and SHA-256."""

    @model_validator(mode="after")
    def _tasks(self) -> SentEvalManifest:
        for task, entry in (self.model_extra or {}).items():
            try:
                FetchedTask.model_validate(entry)
            except ValidationError as error:
                where = "." if error.errors()[0]["loc"] else ": "
                raise ValueError(f"{task}{where}{described(error)}") from None
        return self


# ---- reading ---------------------------------------------------------------------------------


def described(error: ValidationError) -> str:
    """pydantic's first complaint as `field: what is wrong`."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _checked(model: type[Record], value: Any, where: str, fix: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DamagedFile(f"{where} holds {type(value).__name__}, not a JSON object: {fix}")
    try:
        return model.model_validate(value).model_dump(exclude_unset=True)
    except ValidationError as error:
        raise DamagedFile(f"{where}, {described(error)}: {fix}") from None


def _json(text: str, where: str, fix: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise DamagedFile(f"{where} is nested too deeply: {fix}") from None
    except ValueError as error:
        raise DamagedFile(f"{where} is not JSON ({error}): {fix}") from None
    return value


def read_json(path: Path, model: type[Record], fix: str) -> dict[str, Any] | None:
    """The file at `path` checked against `model`; None when there is none. `fix` ends the error."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise DamagedFile(f"{path} cannot be read ({error.strerror or error}): {fix}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DamagedFile(f"{path} is not UTF-8 text: {fix}") from None
    return _checked(model, _json(text, str(path), fix), str(path), fix)


def read_json_lines(path: Path, model: type[Record], fix: str) -> list[dict[str, Any]]:
    """Every line of the JSON Lines file at `path`, each checked against `model`; none when there is
    no file. Only the last line may be cut short (a kill mid-write): it is left out."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise DamagedFile(f"{path} cannot be read ({error.strerror or error}): {fix}") from None
    # Split at line feeds only: U+2028 and the like are text inside a JSON string.
    lines = [line.removesuffix("\r") for line in data.decode("utf-8", errors="surrogateescape").split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        # Every write ends its line: a last line without its line feed is one a kill cut short.
        cut_short = number == len(lines) and not data.endswith(b"\n")
        if any("\udc80" <= character <= "\udcff" for character in line):
            if cut_short:
                continue
            raise DamagedFile(f"{where} is not UTF-8 text: {fix}")
        try:
            value = json.loads(line)
        except ValueError as error:
            if cut_short:
                continue
            raise DamagedFile(f"{where} is not JSON ({error}): {fix}") from None
        except RecursionError:
            raise DamagedFile(f"{where} is nested too deeply: {fix}") from None
        rows.append(_checked(model, value, where, fix))
    return rows


RESTORE = "restore it from a copy, or remove it"

# Every format mtl writes and reads back, with the reader that checks it: `just fuzz` has a
# target for each (tests/test_fuzz.py fails for a format added here without one).
READ_BACK = {
    "config.json": "runs.Run.read, train.record.read_run_record (RunRecord, RunConfig)",
    "summary.json": "runs.Run.read, runs.read_summary (Summary)",
    "metrics.jsonl": "runs.read_metrics (MetricsRow)",
    "affinity.jsonl": "runs.read_affinity (AffinityRow)",
    "transfer report": "formats.transfer_report.read_report (TransferReport)",
    "published figures": "analysis.reproduce.recorded_figures (a run's copy of its paper's figures)",
    "encoder file": "eval.loading.load_encoder",
    "W&B run file": "tracking.wandb_file.records",
    "contamination cache": "eval.contamination.read_cached",
    "token cache": "text.token_cache.read_entry",
    "slurm.json": "jobs.status.job_of (SlurmJob)",
    "get-senteval manifest": "dataset_builders.senteval.read_manifest (SentEvalManifest)",
    "transfer items": "formats.transfer_report.read_items",
    "seed plan": "analysis.power.read_plan (SeedPlan)",
}
