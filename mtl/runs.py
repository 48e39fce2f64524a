"""A run folder, read and written: every path in it, where its run stands, its lock, and what a
finished or stopped run holds (its upgraded config, records, summary, transfer reports, each
task's metric and direction), found by folder, sweep or W&B group. The one place that knows the
layout: training, resume and sweeps write through it; report, compare and the other analyses
read runs only through it.

    <run>/config.json        the resolved config, the command and the inputs' fingerprints
    <run>/metrics.jsonl      one record per step and event, cut to the checkpoint on resume
    <run>/checkpoints/       latest.pt (previous-latest.pt), best.pt, evaluated-step-<N>.pt (keep_evaluated=)
    <run>/wandb/             the offline W&B run
    <run>/summary.json       written last: the run has finished
    <run>/encoder.json       the exported encoder, with encoder.safetensors (older runs: encoder.pt)
    <run>/encoder/           the same encoder for sentence-transformers (encoder=hf: its model folder)
"""

from __future__ import annotations

import contextlib
import copy
import enum
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.config import flattened
from mtl.errors import UserError
from mtl.files import schemas
from mtl.files.digest import file_sha256
from mtl.files.locks import FolderLock
from mtl.formats import run_files
from mtl.formats.merge_record import merge_record
from mtl.formats.run_files import read_affinity, read_metrics
from mtl.formats.transfer_report import headline, read_report, report_paths
from mtl.tasks import KINDS, config_classes, task_title


class RunStatus(enum.Enum):
    EMPTY = "empty"  # no folder, or nothing in it
    NEVER_CHECKPOINTED = "never checkpointed"  # stopped before its first checkpoint: safe to start again
    INTERRUPTED = "interrupted"  # has a checkpoint to resume from
    FINISHED = "finished"  # has its summary
    NOT_A_RUN = "not a run"  # holds something else


@dataclass(frozen=True)
class RunFolder:
    path: Path

    # What a run writes before it finishes: a folder of these alone, without a checkpoint,
    # is a run that died early.
    STARTED_FILES = ("config.json", "metrics.jsonl", "checkpoints", "wandb")
    # What a launcher writes before the run starts (launcher=slurm: the job that trains it).
    LAUNCHER_FILES = ("slurm.json", "slurm-jobs.json", "slurm")

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path).expanduser())

    @property
    def record(self) -> Path:
        return self.path / "config.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def affinity(self) -> Path:
        """affinity_every=: one line per measurement (step, block, tasks, matrix)."""
        return self.path / "affinity.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def latest(self) -> Path:
        return self.checkpoints / "latest.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    def evaluated(self, step: int) -> Path:
        """keep_evaluated=: the model as it was evaluated at `step` (a checkpoint soup's ingredient)."""
        return self.checkpoints / f"evaluated-step-{step}.pt"

    def evaluated_checkpoints(self) -> list[Path]:
        """keep_evaluated='s checkpoints, by step."""
        found = []
        for path in self.checkpoints.glob("evaluated-step-*.pt") if self.checkpoints.is_dir() else ():
            step = path.stem.removeprefix("evaluated-step-")
            if step.isdigit():
                found.append((int(step), path))
        return [path for _, path in sorted(found)]

    @property
    def encoder(self) -> Path:
        return self.path / "encoder.json"

    @property
    def legacy_encoder(self) -> Path:
        """What runs exported before encoder.json: a torch.save dict."""
        return self.path / "encoder.pt"

    @property
    def pretrained_encoder(self) -> Path:
        """The encoder for sentence-transformers; encoder=hf: its fine-tuned model folder, which
        encoder.json names."""
        return self.path / "encoder"

    def status(self) -> RunStatus:
        if not self.path.is_dir() or not any(p.name not in self.LAUNCHER_FILES for p in self.path.iterdir()):
            return RunStatus.EMPTY
        if self.summary.is_file():
            return RunStatus.FINISHED
        if self.checkpoints.is_dir() and any(p.suffix == ".pt" for p in self.checkpoints.iterdir()):
            return RunStatus.INTERRUPTED
        names = {entry.name for entry in self.path.iterdir()} - set(self.LAUNCHER_FILES)
        if "config.json" in names and names <= set(self.STARTED_FILES):
            return RunStatus.NEVER_CHECKPOINTED
        return RunStatus.NOT_A_RUN

    def lock(self, key: str) -> FolderLock:
        """The folder's one-writer lock; `key` is the option a refusal names (`out`, `resume`)."""
        return FolderLock(self.path, "run folder", key)

    def remove_partial_files(self) -> None:
        """The temporary files of writes a killed process never finished (call with the lock held)."""
        for folder in (self.path, self.checkpoints):
            if folder.is_dir():
                for leftover in folder.glob(".*.partial"):
                    leftover.unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove what a run that died before its first checkpoint wrote (call with the lock held)."""
        for name in self.STARTED_FILES:
            path = self.path / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def run_folder_of(path: Path) -> Path | None:
    """The run folder that holds `path` (a checkpoint, an encoder file), or None."""
    return next((p for p in Path(path).resolve().parents if RunFolder(p).record.is_file()), None)


def _recorded_config(path: str | Path) -> dict[str, Any]:
    """The config a run recorded, for the run folder `path` is or sits in; {} when there is none."""
    given = Path(path).expanduser()
    folder = given if RunFolder(given).record.is_file() else run_folder_of(given)
    record = read_record(RunFolder(folder).record) if folder is not None else None
    config = record.get("config") if isinstance(record, dict) else None
    return config if isinstance(config, dict) else {}


def _snli_of(config: dict[str, Any]) -> str | None:
    """The local SNLI folder a recorded config's nli task read, when it is here."""
    nli = (config.get("tasks") or {}).get("nli")
    source = nli.get("source") if isinstance(nli, dict) else None
    return source if isinstance(source, str) and Path(source).is_dir() else None


def recorded_snli(path: str | Path) -> str | None:
    """The local SNLI folder the run at `path` trained on (its nli task's source), when it is here."""
    return _snli_of(_recorded_config(path))


def recorded_transfer_data(path: str | Path) -> str | None:
    """SentEval's downstream folder as the run at `path` knew it: the one it watched (monitor_data=),
    else the one beside its recorded SNLI copy (<data>/senteval/downstream, as MTL_DATA_DIR lays
    them out); None when neither is here."""
    config = _recorded_config(path)
    run = config.get("run") if isinstance(config.get("run"), dict) else {}
    candidates = [run.get("monitor_data")]
    if snli := _snli_of(config):
        candidates.append(str(Path(snli).parent / "senteval" / "downstream"))
    return next((c for c in candidates if isinstance(c, str) and Path(c).is_dir()), None)


def read_json(path: Path) -> Any:
    """A JSON file, or None when missing or damaged."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def read_summary(path: Path) -> dict[str, Any] | None:
    """A run's summary.json, checked; None when there is none yet or it is damaged (for what only
    decorates its output with the scores: `checked_summary` where the scores are the answer)."""
    try:
        return schemas.read_json(path, run_files.Summary, schemas.RESTORE)
    except schemas.DamagedFile:
        return None


def read_record(path: Path) -> dict[str, Any] | None:
    """A run's config.json, checked; None when missing or damaged."""
    try:
        return schemas.read_json(path, run_files.RunRecord, schemas.RESTORE)
    except schemas.DamagedFile:
        return None


@dataclass
class Run:
    """What a run folder holds: config, metrics, summary, transfer results."""

    folder: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    transfer: dict[str, dict[str, str]]  # transfer report (transfer, transfer-fast, ...) -> task -> headline
    sizes: dict[str, tuple[int, float]]  # transfer report -> (embedding dim, micro average of dev accuracies)
    stale: dict[str, str]  # transfer report -> why it is not a result of the run's final encoder
    recorded_metrics: dict[str, Any]  # task -> {metric, higher_is_better}, as the run recorded them
    affinity: list[dict[str, Any]] = field(default_factory=list)  # affinity.jsonl's measurements
    damaged: list[str] = field(default_factory=list)  # files left out, each with why (one line)
    # transfer report -> task -> its score on all test items and on those holding no sentence
    # the run trained on (mtl.eval.decontaminate), where the report keeps both
    decontaminated: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def is_baseline(self) -> bool:
        """A folder `just transfer baseline=...` wrote: transfer reports, no training."""
        return "baseline" in self.config

    @property
    def tasks(self) -> list[str]:
        return list(self.config["tasks"])

    def title(self, task: str) -> str:
        """The task's dataset name (`SNLI`), or the task's name."""
        return task_title(task, self.config["tasks"][task])

    def trains(self, task: str) -> bool:
        """Whether the task trained (a `train=false` task only watched the run)."""
        entry = self.config["tasks"].get(task)
        return not isinstance(entry, dict) or entry.get("train", True) is not False

    @property
    def mixed(self) -> bool:
        """Whether every step trained every task at once (schedule=mixed): no blocks."""
        return self.config.get("schedule", {}).get("schedule") == "mixed"

    @property
    def schedule_cell(self) -> str:
        """The run's schedule in a few words: `nli 1000 / squad 500`, `mixed: nli + squad`, and
        the tasks that only watched."""
        trained = [task for task in self.tasks if self.trains(task)]
        watched = [task for task in self.tasks if not self.trains(task)]
        if self.mixed:
            text = "mixed: " + " + ".join(trained)
        else:
            text = " / ".join(f"{task} {self.block_steps(task)}" for task in trained)
        return text + (f"; watching {', '.join(watched)}" if watched else "")

    def block_steps(self, task: str) -> int | None:
        entry = self.config["tasks"].get(task)
        return entry.get("steps") if isinstance(entry, dict) else None

    @property
    def encoder(self) -> str:
        """`bilstm 2048`, or the pretrained model's name (`all-MiniLM-L6-v2`) for encoder=hf; a
        baseline's name as its report gives it."""
        if self.is_baseline:
            return str(self.config["baseline"])
        model = self.config["model"]
        if model["encoder"] == "hf" and (hf_model := (model.get("options") or {}).get("hf_model")):
            return Path(str(hf_model).rstrip("/")).name
        return f"{model['encoder']} {model['hidden']}"

    def metric(self, task: str) -> str | None:
        """The task's metric (`acc`, `ppl`): as the run recorded it; for a run from before that
        record, its kind's; else the first its records hold."""
        entry = self.recorded_metrics.get(task)
        if isinstance(entry, dict) and isinstance(entry.get("metric"), str):
            return entry["metric"]
        kind = self.config["tasks"].get(task, {}).get("kind", task)
        if kind in KINDS:
            return KINDS[kind].metric
        prefix = f"{task}/dev/"
        return next((k.rsplit("/", 1)[1] for r in self.records for k in r if k.startswith(prefix)), None)

    def dev_metric(self, task: str) -> str | None:
        """The key of the task's dev metric (`nli/dev/acc`), when its records hold it."""
        metric = self.metric(task)
        key = metrics.evaluation(task, "dev", metric) if metric else None
        return key if key is not None and any(key in r for r in self.records) else None

    @classmethod
    def of_baseline(cls, folder: Path) -> Run:
        """A folder `just transfer baseline=...` wrote (runs/baseline-<name>): its transfer
        reports as a row beside the runs; no tasks trained, no curves."""
        damaged: list[str] = []
        decontaminated: dict[str, dict[str, dict[str, Any]]] = {}
        transfer, sizes, stale_reports = _transfer_results(folder, damaged, decontaminated)
        name, dim = Path(folder).name.removeprefix("baseline-"), None
        for path in report_paths(folder):  # what the first readable report says it evaluated
            with contextlib.suppress(schemas.DamagedFile):
                if report := read_report(path):
                    name, dim = str(report.get("encoder") or name), report.get("dim")
                    break
        config = {"baseline": name, "tasks": {}, "model": {"encoder": name, "hidden": dim}}
        return cls(folder, config, [], {}, transfer, sizes, stale_reports, {}, [], damaged, decontaminated)

    @classmethod
    def read(cls, folder: Path) -> Run:
        run = RunFolder(folder)
        record_path = run.record
        if not record_path.is_file() or not run.metrics.is_file():
            if merge_record(Path(folder)) is not None:  # a merge is read by its transfer reports
                raise UserError(
                    f"{folder} is a merged encoder (just merge-encoders) with no transfer report yet: run "
                    f"`just transfer run={folder}` first, then compare or report it"
                )
            raise UserError(
                f"{folder} is not a run folder (no config.json and metrics.jsonl): pass runs/<run>"
            )
        record = schemas.read_json(record_path, run_files.RunRecord, schemas.RESTORE)
        try:
            config = upgrade(record["config"])
        except (KeyError, TypeError, AttributeError) as error:
            raise schemas.DamagedFile(
                f"{record_path}, config: not a run's config ({type(error).__name__}: {error}): {schemas.RESTORE}"
            ) from None
        try:
            run_files.RecordedConfig.model_validate(config)
        except schemas.ValidationError as error:
            raise schemas.DamagedFile(
                f"{record_path}, config.{schemas.described(error)}: {schemas.RESTORE}"
            ) from None
        recorded = record.get("metrics") or {}
        records = read_metrics(run.metrics)
        summary = schemas.read_json(run.summary, run_files.Summary, schemas.RESTORE) or {}
        damaged: list[str] = []
        try:
            affinity = read_affinity(run.affinity)
        except schemas.DamagedFile as error:  # what the run measured on the side: the rest still reads
            affinity = []
            damaged.append(str(error))
        decontaminated: dict[str, dict[str, dict[str, Any]]] = {}
        return cls(
            folder,
            config,
            records,
            summary,
            *_transfer_results(folder, damaged, decontaminated),
            recorded,
            affinity,
            damaged,
            decontaminated,
        )


def _transfer_results(
    folder: Path, damaged: list[str], decontaminated: dict[str, dict[str, dict[str, Any]]]
) -> tuple[dict[str, dict[str, str]], dict[str, tuple[int, float]], dict[str, str]]:
    """Report -> task -> the number Table 2 shows, from every transfer report of the run
    (`transfer.json`, `transfer-fast.json`, `transfer-fast-pool-mean.json`, ...); report ->
    (embedding dimension, micro average of dev accuracies) where the report has both; and report ->
    why it did not evaluate the run's final encoder, for those that did not. A damaged report is
    left out, and why is added to `damaged`: the others still show. Each report's scores without
    the seen test items go to `decontaminated`."""
    found, sizes, stale_reports = {}, {}, {}
    for path in report_paths(folder):
        try:
            report = read_report(path)
        except schemas.DamagedFile as error:
            damaged.append(str(error))
            continue
        if report is None:
            continue
        found[path.stem] = {task: headline(task, values) for task, values in report["results"].items()}
        if report.get("decontaminated"):
            decontaminated[path.stem] = report["decontaminated"]
        if reason := stale(report, path, folder):
            stale_reports[path.stem] = reason
        if report.get("dim") and (report.get("aggregate") or {}).get("micro") is not None:
            sizes[path.stem] = (int(report["dim"]), float(report["aggregate"]["micro"]))
    return found, sizes, stale_reports


def is_baseline_folder(folder: Path) -> bool:
    """A folder `just transfer baseline=...` wrote (runs/baseline-<name>): reports, no run."""
    return not RunFolder(folder).record.is_file() and bool(report_paths(folder))


def find_runs(paths: list[str], group: str | None, root: Path = Path("runs")) -> list[Path]:
    """Run folders from `paths` (a sweep folder stands for its runs) and from `group`."""
    folders: list[Path] = []
    for text in paths:
        path = Path(text).expanduser()
        if records := sweep_records(path):
            folders += [run for record in records for run in _sweep_members(record)]
        elif path.is_dir():
            folders.append(path)
        else:
            raise UserError(f"{path} is not a folder: pass run folders (runs/<run>) or a sweep folder")
    if group:
        folders += [
            record.parent
            for record in sorted(root.glob("**/config.json"))
            # a run that has started training, as a sweep's members are taken: not the copy of its
            # config.json among its W&B run's files, nor an exported model's config
            if RunFolder(record.parent).metrics.is_file() and wandb_group(record.parent) == group
        ]
    if not folders:
        raise UserError("no runs to report: pass run folders, a sweep folder, or group=NAME")
    return list(dict.fromkeys(folders))


def sweep_records(folder: Path) -> list[Path]:
    """A study's records of its runs: its sweep.json, or, for a study that trains them one level
    down (`just study`'s arms/, a tuning's trials/), theirs; none for a run folder or another."""
    if (folder / "sweep.json").is_file():
        return [folder / "sweep.json"]
    if RunFolder(folder).record.is_file():
        return []
    return sorted(folder.glob("*/sweep.json"))


def sweep_members(record: Path) -> dict[str, Path]:
    """Every run a study's record (sweep.json) lists, by member name. Members are recorded relative
    to the study folder; an older record's absolute path is resolved inside this study's folder
    first (the longest tail of the path found there: `<old place>/<study>/proxies/<member>` is
    `proxies/<member>` here, whatever the copy is called), so a moved, copied or renamed study never
    reads another study's runs. Only a path none of whose tails is inside stays where it was."""
    try:
        members = json.loads(record.read_text(encoding="utf-8"))["members"]
        listed = {str(name): Path(path) for name, path in members.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise UserError(
            f"{record} is damaged ({type(error).__name__}): pass the sweep's run folders themselves"
        ) from None
    study = record.parent
    found = {}
    for name, path in listed.items():
        if not path.is_absolute():
            found[name] = study / path
        elif (inside := inside_study(study, path)) is not None:
            found[name] = inside
        elif study.name in path.parts[:-1]:  # <old place>/<study>/proxies/<member>, not trained yet
            inside_at = len(path.parts) - path.parts[::-1].index(study.name)
            found[name] = study.joinpath(*path.parts[inside_at:])
        else:  # nothing of it inside the study: where it was trained
            found[name] = path
    return found


def inside_study(study: Path, path: Path) -> Path | None:
    """The folder inside `study` that an absolute member path names: its longest tail that is a
    folder there (the study's own name left out of the tails); None when no tail is."""
    tails = [Path(*path.parts[start:]) for start in range(1, len(path.parts))]
    return next((study / tail for tail in tails if (study / tail).is_dir()), None)


def _sweep_members(record: Path) -> list[Path]:
    """The run folders a sweep's record lists that have started training."""
    return [folder for folder in sweep_members(record).values() if RunFolder(folder).metrics.is_file()]


# Keys that name or place a run, or only pace its bookkeeping: not what a comparison varies.
NOT_COMPARED = ("run.name", "run.out", "run.group", "run.wandb", "run.checkpoint_every", "run.eval_batch")


def differing_keys(runs: list[Run], ignored: tuple[str, ...] = ()) -> set[str]:
    """The config keys whose values are not the same in every run (a key one run lacks differs),
    but those of NOT_COMPARED and `ignored`."""
    configs = [flattened(run.config) for run in runs]
    keys = set().union(*configs) if configs else set()
    return {
        key
        for key in keys
        if not key.startswith((*NOT_COMPARED, *ignored))
        and len({json.dumps(c.get(key)) for c in configs}) > 1
    }


def weights_digest(file: Path) -> str:
    """The SHA-256 an exported encoder records for its weights; a checkpoint's: of its bytes."""
    if file.suffix == ".json":
        try:
            recorded = json.loads(file.read_text(encoding="utf-8")).get("weights_sha256")
        except (OSError, ValueError, AttributeError, RecursionError):
            recorded = None
        if isinstance(recorded, str):
            return recorded
    return file_sha256(file)


def stale(report: dict, report_path: Path, folder: Path) -> str | None:
    """Why the transfer report `report` (read from `report_path` in run folder `folder`) is not a
    result of the run's final encoder, or None when it is (or the run has no final encoder yet)."""
    final = RunFolder(folder).encoder
    if not final.is_file():
        return None
    entries = report.get("evaluated")
    if not isinstance(entries, list) or not entries:  # a report written before reports said
        try:
            older = report_path.stat().st_mtime < final.stat().st_mtime
        except OSError:
            return None
        return "written before the run exported its final encoder" if older else None
    ours = [e for e in entries if isinstance(e, dict) and _names_this_run(e, folder)]
    if not ours:
        return None
    if any(e.get("weights_sha256") == weights_digest(final) for e in ours):
        return None
    entry = ours[0]
    step = f" at step {entry['step']}" if entry.get("step") is not None else ""
    return f"evaluated {entry.get('file')}{step}, not the run's final encoder"


def _names_this_run(entry: dict, folder: Path) -> bool:
    file = str(entry.get("file", ""))
    return not Path(file).is_absolute() or Path(file).resolve().is_relative_to(folder.resolve())


# The keys of one encoder each, which every run recorded in `model` before they became that
# encoder's own (EncoderTraits.options, recorded in model.options).
OWN_KEYS_BEFORE = {
    "hf": (
        "hf_model",
        "max_seq_length",
        "hf_freeze_embeddings",
        "hf_freeze_layers",
        "gradient_checkpointing",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "lora_targets",
        "compile",
    ),
    "gru": ("bidirectional", "gru_init"),
    "gatedconv": ("gatedconv_layers",),
    "transformer": ("transformer_layers", "transformer_heads", "transformer_ffn"),
}


# The keys of one schedule each, which every run recorded in `schedule` before they became that
# schedule's own (register_schedule(options=), recorded in schedule.schedule_options).
_ONLINE_BEFORE = ("mix_every", "mix_eta", "mix_batches")
SCHEDULE_KEYS_BEFORE = {
    "proportional": ("cap",),
    "temperature": ("temperature", "temperature_end", "cap"),
    "aioli": (*_ONLINE_BEFORE, "mix_normalize", "mix_target"),
    "transfer": (*_ONLINE_BEFORE, "mix_normalize", "mix_target"),
    "doremi": (*_ONLINE_BEFORE, "mix_smoothing", "mix_reference"),
}


def upgraded(values: Any, source: str) -> dict[str, Any]:
    """`upgrade(values)`, or a one-line error naming `source` where `values` is not a config mtl wrote."""
    if not isinstance(values, dict):
        raise UserError(f"{source}: the config must be a table of keys, found {values!r:.40}")
    try:
        return upgrade(values)
    except (AttributeError, TypeError, KeyError, ValueError) as error:  # a section that is not a table
        raise UserError(
            f"{source}: the config is not in a layout mtl wrote ({type(error).__name__}: {error})"
        ) from None


def upgrade(values: dict[str, Any]) -> dict[str, Any]:
    """A recorded config (config.json, a checkpoint, encoder.pt) in today's layout.

    Before tasks were plugins a run's tasks were those of the two with steps above 0, and
    their keys lived in `data` and `schedule`; the optimizer alone implied the lr schedule
    and the stopping rule.
    """
    values = copy.deepcopy(values)
    if "tasks" not in values:
        tasks = {}
        for name, config_class in config_classes().items():
            found = {}
            for old, new in config_class.legacy_keys.items():
                group, _, key = old.partition(".")
                if key in values.get(group, {}):
                    found[new] = values[group].pop(key)
            if found and found.get("steps", 0) > 0:
                tasks[name] = {"kind": name, **found}
        values = {"tasks": tasks, **values}
    for entry in values["tasks"].values() if isinstance(values.get("tasks"), dict) else []:
        if isinstance(entry, dict) and isinstance(
            entry.get("train"), str
        ):  # a file, before train= was a flag
            entry["train_file"] = entry.pop("train")
    optim = values.get("optim", {})
    if "adam_patience" in optim:
        optim["patience"] = optim.pop("adam_patience")
    implied = {
        "sgd": ("infersent", "min_lr"),
        "adam": ("constant", "patience"),
        "adamw": ("linear", "max_steps"),
    }
    if isinstance(optim, dict) and "lr_shrink_at" not in optim:  # recorded before the epoch rule
        optim["lr_shrink_at"] = "evaluation"
    data = values.get("data")
    if isinstance(data, dict) and "sample_test" not in data:  # max_eval= sampled test too, before
        data["sample_test"] = True
    schedule = values.get("schedule")
    if isinstance(schedule, dict) and "no_duplicates" not in schedule:  # before in-batch dedup
        schedule["no_duplicates"] = False
    model = values.get("model")
    if isinstance(model, dict):  # before encoders had keys of their own
        moved = {key: model.pop(key) for keys in OWN_KEYS_BEFORE.values() for key in keys if key in model}
        mine = OWN_KEYS_BEFORE.get(model.get("encoder"), ())  # the other encoders' did nothing
        if moved and isinstance(model.setdefault("options", {}), dict):
            model["options"] = {key: value for key, value in moved.items() if key in mine} | model["options"]
    if isinstance(schedule, dict) and "gradnorm_alpha" in schedule:  # before balancers had own keys
        alpha = schedule.pop("gradnorm_alpha")  # every run recorded it; only gradnorm read it
        if schedule.get("balancer") == "gradnorm":
            schedule["balancer_options"] = {"gradnorm_alpha": alpha}
    if isinstance(schedule, dict):  # before schedules had keys of their own
        every = {key for keys in SCHEDULE_KEYS_BEFORE.values() for key in keys}
        moved = {key: schedule.pop(key) for key in sorted(every) if key in schedule}
        mine = SCHEDULE_KEYS_BEFORE.get(schedule.get("schedule"), ())  # the others' did nothing
        if moved and isinstance(schedule.setdefault("schedule_options", {}), dict):
            kept = {key: value for key, value in moved.items() if key in mine}
            schedule["schedule_options"] = kept | schedule["schedule_options"]
    if optim.get("optim") in implied and "lr_schedule" not in optim:
        optim["lr_schedule"], optim["stop"] = implied[optim["optim"]]
        optim["warmup_steps"] = optim.get("warmup_steps") or 0
    return values


def beside(folders: Sequence[Path]) -> Path:
    """The folder that holds all of `folders` (their parents' common path): where what is made
    from several runs goes (a comparison, a combined encoder's transfer), next to what it read,
    whatever the current directory."""
    return Path(os.path.commonpath([Path(folder).expanduser().absolute().parent for folder in folders]))


def wandb_group(folder: Path) -> str | None:
    """The W&B group of the run in `folder` (its group=, else its name), or None when unreadable."""
    record = read_json(RunFolder(folder).record)
    try:
        run = record["config"]["run"]
        return run.get("group") or run.get("name")
    except (KeyError, TypeError, AttributeError):
        return None


def encoder_artifact(folder: Path) -> str:
    """The W&B artifact the training run logged its encoder as (summary.json says; older runs:
    named after the folder)."""
    summary = read_summary(RunFolder(folder).summary)
    try:
        return summary["wandb_artifacts"]["encoder"]
    except (KeyError, TypeError):
        return f"{Path(folder).name}-encoder"
