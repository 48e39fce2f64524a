"""`just mteb run=R tasks=STSBenchmark,Banking77Classification`: MTEB tasks on a run's encoder,
beside SentEval's.

The results are written as a transfer report of the run (`<run>/transfer-mteb.json` and
`.md`: each task's MTEB main score, x 100 as MTEB's leaderboard shows it), so `just report`
shows them in the run's row and `just compare` lists them; a W&B run in the training run's
group holds them as a table and summary. MTEB keeps no per-item outputs, so `just compare`
cannot resample them (it says so). Tasks run as MTEB gives them: its datasets come from the
Hugging Face Hub or its local cache; a task whose data cannot be had is named, not skipped
silently. `data=local` builds MTEB's STS tasks from SentEval's copies instead (mteb_local.py),
into `<run>/transfer-mteb-local.json`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mtl.config import apply_overrides
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import MTEBConfig as MTEBConfig
from mtl.eval.mteb import MTEBEncoder  # imports mteb: a one-line error when it is missing
from mtl.eval.mteb_local import LOCAL_TASKS, canonical, check_local, senteval_root, with_local_data
from mtl.eval.transfer.provenance import evaluated
from mtl.files import atomic, jsonfile
from mtl.files.hub import offline_unless_reachable
from mtl.runs import RunFolder, wandb_group
from mtl.tracking.tracker import Tracker

REPORT = "transfer-mteb"  # a transfer report's name: `just report` reads transfer*.json


def resolve_tasks(names: list[str]) -> list[Any]:
    """MTEB's task objects for `names`, or a one-line error naming an unknown one."""
    import mteb

    # Every task MTEB knows by name, superseded ones too (STSBenchmark: MTEB also has a v2)
    known = {task.metadata.name for task in mteb.get_tasks(exclude_superseded=False)}
    if unknown := [name for name in names if name not in known]:
        import difflib

        hints = [
            f"{name} (did you mean {close[0]}?)"
            if (close := difflib.get_close_matches(name, known, 1))
            else name
            for name in unknown
        ]
        raise UserError(f"tasks=: MTEB has no task {', '.join(hints)}; names as in mteb.get_tasks()")
    return list(mteb.get_tasks(tasks=names))


def evaluate(config: MTEBConfig) -> dict:
    """Run the tasks; write the report; return it."""
    names = [canonical(name.strip()) for name in config.tasks.split(",") if name.strip()]
    if not config.run or not names:
        raise UserError("mteb needs run=<run folder> and tasks=<MTEB task names, comma-separated>")
    local = config.data != "hub"
    if local:
        check_local(names)
        root = senteval_root(config.data)
        tasks = with_local_data(resolve_tasks(names), root)
    else:
        tasks = resolve_tasks(names)
    model = MTEBEncoder(config.run, config.device, config.batch_size, show_progress_bar=True)
    out = report_folder(config)
    started = time.perf_counter()
    import mteb

    with offline_unless_reachable() as offline:  # out of reach: the cache at once, not minutes of retries
        result = mteb.evaluate(model, tasks, cache=None, raise_error=False, show_progress_bar=True)
    failed = {error.task_name: error.exception for error in result.exceptions or []}
    if failed:
        if offline:
            local = [name for name in failed if name in LOCAL_TASKS]
            instead = f", score {', '.join(local)} from SentEval's copies with data=local" if local else ""
            raise UserError(
                f"MTEB could not run {', '.join(failed)}: the Hugging Face Hub is out of reach from here and "
                f"its data is not in the local cache (HF_HOME); run it once with the network{instead}, or leave "
                "it out of tasks="
            )
        reasons = "; ".join(f"{name}: {_first_line(why)}" for name, why in failed.items())
        raise UserError(
            f"MTEB could not run {', '.join(failed)} ({reasons}): its data comes from the Hugging Face "
            "Hub or the local cache (HF_HOME); run it once with the network, or leave it out of tasks="
        )
    metric = {task.metadata.name: task.metadata.main_score for task in tasks}
    results = {
        task.task_name: {"main_score": float(task.get_score()), "metric": metric[task.task_name]}
        | ({"data": LOCAL_TASKS[task.task_name].note} if local else {})
        for task in result.task_results
    }
    report = {
        "encoder": model.model.name,
        "source": config.run,
        "vectors": model.model.vectors,
        "dim": model.model.dim,
        "pooling": None,
        "mode": "mteb",
        "mteb_version": mteb.__version__,
        "data": str(root) if local else "hub",  # where the tasks' pairs came from
        "seconds": round(time.perf_counter() - started, 1),
        "evaluated": [evaluated(config.run)],  # so a report of an early checkpoint is flagged
        "results": results,
    }
    name = report_name(config)
    atomic.write_text(out / f"{name}.json", jsonfile.dumps(report, indent=2) + "\n", "MTEB report")
    atomic.write_text(out / f"{name}.md", markdown(report), "MTEB report")
    _track(config, out, report)
    return report


def report_folder(config: MTEBConfig) -> Path:
    """out=, or the run folder of run= (a checkpoint or encoder file names its run's folder)."""
    return Path(config.out).expanduser() if config.out else RunFolder(Path(config.run)).path


def report_name(config: MTEBConfig) -> str:
    """transfer-mteb, or transfer-mteb-local for tasks built from SentEval's copies: the two
    never share a report (`just report` shows them as two columns)."""
    return REPORT if config.data == "hub" else f"{REPORT}-local"


def markdown(report: dict) -> str:
    rows = "".join(
        f"| {task} | {values['metric']} | {100 * values['main_score']:.2f} |"
        + (f" {values['data']} |" if "data" in values else "")
        + "\n"
        for task, values in report["results"].items()
    )
    local = report.get("data", "hub") != "hub"
    header = (
        "| task | metric | score | data |\n|---|---|---:|---|"
        if local
        else "| task | metric | score |\n|---|---|---:|"
    )
    source = f" on SentEval's copies in {report['data']}" if local else ""
    return (
        f"MTEB {report['mteb_version']} on {report['encoder']} ({report['dim']} dimensions){source}, "
        f"{report['seconds']:.0f} s; main score x 100.\n\n{header}\n{rows}"
    )


def _track(config: MTEBConfig, out: Path, report: dict) -> None:
    """A W&B run in the training run's group: the scores as a table and in the summary."""
    kind = report_name(config).removeprefix("transfer-")  # mteb, or mteb-local
    tracker = Tracker.start(
        job_type="mteb-eval",
        config={**asdict(config), "dim": report["dim"], "mteb_version": report["mteb_version"]},
        project=config.wandb_project,
        directory=out / kind,  # its own wandb/ folder, as transfer's
        mode=config.wandb,
        name=f"{kind}-{report['encoder']}",
        group=wandb_group(out),
        tags=["mteb", *(["local-data"] if kind != "mteb" else [])],
    )
    tracker.table(
        kind,
        ["task", "metric", "main_score"],
        [[task, values["metric"], values["main_score"]] for task, values in report["results"].items()],
    )
    tracker.summary(
        {f"{kind}/{task}/main_score": values["main_score"] for task, values in report["results"].items()}
    )
    tracker.finish()


def _first_line(text: object) -> str:
    lines = str(text).strip().splitlines()
    return lines[-1][:160] if lines else "no message"


def command(args: Sequence[str]) -> None:
    config = apply_overrides(MTEBConfig(), args)
    report = evaluate(config)
    print(markdown(report))
    out, name = report_folder(config), report_name(config)
    print(f"written to {out / name}.json and {out / name}.md")
