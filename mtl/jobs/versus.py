"""`just versus-single`: does the mixture beat each of its tasks alone at the same compute?

    just versus-single preset=cpu-small budget=steps:600 transfer_tasks=MR,CR,TREC,STS14

Trains every training task of the configuration alone and the configuration itself (its
mixture), each at the same budget (`steps:N` optimizer steps; `examples:N` training examples,
turned into each run's steps by its examples per step; `minutes:N` of training steps), with the
same seed, encoder and vectors, and the configuration's watching tasks (train=false) and select=
in every run. The runs are a sweep (`just sweep`'s machinery: finished runs are kept, interrupted
ones resumed), then each is transferred (`just transfer`), then `just compare` gives the paired
bootstrap interval of every difference; per transfer task the mixture is set against the best
single-task run, with a verdict: helps (the interval above 0), hurts (below), no evidence.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.config import Range, apply_overrides, paths_and_keys, read_number
from mtl.errors import UserError
from mtl.eval.transfer.suite import TransferConfig, report_name
from mtl.eval.transfer.suite import run as transfer
from mtl.eval.transfer.tasks import TransferDataError
from mtl.files import atomic, jsonfile
from mtl.files.atomic import check_output_dir
from mtl.files.locks import FolderLock
from mtl.jobs.launchers import LauncherConfig, launcher_from, split_launcher_keys
from mtl.jobs.member import Member
from mtl.jobs.sweep import Sweep, check_same_fixed_keys, train_members
from mtl.runs import RunFolder, read_summary
from mtl.tasks import named_config
from mtl.train.config import TrainConfig, legacy_keys
from mtl.train.run import config_from_args

VERSUS_KEYS = ("budget", "transfer_tasks", "transfer_mode", "transfer_data", "out")
MIXTURE = "mixture"


@dataclass
class VersusConfig(LauncherConfig):
    """versus-single's own keys (for --help); every other key goes to train-multitask."""

    budget: str = ""  # steps:N, examples:N or minutes:N: what every run gets
    transfer_tasks: str = "MR,CR,SUBJ,MPQA,SST2,TREC,MRPC,SICK-E,SICK-R,STS14"  # scored on every run
    transfer_mode: str = "fast"  # the transfer protocol (just transfer mode=)
    transfer_data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    out: str | None = None  # where the runs and the verdict go; None: runs/versus-<time>


def parse(args: Sequence[str]) -> tuple[VersusConfig, list[str]]:
    named, keys = paths_and_keys(list(args))
    if named:
        raise UserError(
            f"{named[0]}: versus-single takes key=value arguments only (preset=NAME for a preset)"
        )
    own = {k: v for k, _, v in (a.partition("=") for a in keys) if k in VERSUS_KEYS}
    train = [a for a in keys if a.partition("=")[0] not in VERSUS_KEYS]
    if taken := [
        a
        for a in train
        if a.partition("=")[0] in ("max_steps", "max_minutes", "out", "name", "group", "resume")
    ]:
        raise UserError(f"{taken[0]}: versus-single sets it for each run; give the budget with budget=")
    config = VersusConfig(**own)
    # the transfer keys, checked before any training
    apply_overrides(TransferConfig(), [f"tasks={config.transfer_tasks}", f"mode={config.transfer_mode}"])
    if len([a for a in keys if a.partition("=")[0] in VERSUS_KEYS]) > len(own):
        raise UserError("a versus-single key is given twice: give it once")
    budget_amount(config.budget)
    return config, train


def budget_amount(budget: str) -> tuple[str, float]:
    """(kind, amount) of `budget=`: steps and examples whole numbers from 1, minutes above 0; a
    one-line error naming budget= otherwise."""
    kind, _, amount = budget.partition(":")
    if kind not in ("steps", "examples", "minutes") or not amount:
        raise UserError(f"budget={budget!r}: give steps:N, examples:N or minutes:N (e.g. budget=steps:600)")
    if kind == "minutes":
        return kind, read_number(
            "budget", amount, float, Range(0, low_open=True), f"budget={budget}: {amount}"
        )
    return kind, read_number("budget", amount, int, Range(1), f"budget={budget}: {amount}")


def examples_per_step(config: TrainConfig) -> float:
    """The training examples one optimizer step of `config` takes, on average over its schedule."""
    training = {name: config.tasks[name] for name in config.training_tasks}
    kind = config.schedule.schedule
    if kind == "mixed":
        return float(sum(task.batch for task in training.values()))
    if kind == "blocks" or len(training) == 1:
        return sum(t.steps * t.batch for t in training.values()) / sum(t.steps for t in training.values())
    if kind == "round_robin":
        return sum(t.batch for t in training.values()) / len(training)
    raise UserError(
        f"budget=examples with schedule={kind}: its tasks are drawn by data size, so its examples per step "
        "are not fixed ahead; give budget=steps:N or minutes:N"
    )


def members(train: list[str], budget: str, out: Path) -> list[Member]:
    """Each training task alone, then the mixture; every run with the budget made concrete."""
    config = config_from_args(train)
    training = config.training_tasks
    if len(training) < 2:
        raise UserError(
            f"versus-single compares a mixture with its tasks alone: {training[0]} trains alone already"
        )
    watching = [name for name in config.tasks if name not in training]
    entries = _task_entries(train)
    legacy = legacy_keys()
    kind, amount = budget_amount(budget)
    found = []
    for chosen in [*([task] for task in training), training]:
        name = chosen[0] if len(chosen) == 1 else MIXTURE
        left_out = set(training) - set(chosen)
        keys = [
            a
            for a in train
            if _task_of(a.partition("=")[0], legacy) not in left_out and not a.startswith("tasks=")
        ]
        names = [n for n in config.tasks if n in chosen or n in watching]
        keys.append("tasks=" + ",".join(entries.get(n, n) for n in names))
        if kind == "minutes":
            keys.append(f"max_minutes={amount}")
        elif kind == "steps":
            keys.append(f"max_steps={amount}")
        else:
            keys.append(f"max_steps={math.ceil(amount / examples_per_step(config_from_args(keys)))}")
        run_dir = out / name
        keys += [f"name={name}", f"group={out.name}", f"out={run_dir}"]
        config_from_args(keys)  # a key that does not fit a member stops everything before work
        found.append(Member(name, keys, run_dir))
    return found


def _task_entries(train: list[str]) -> dict[str, str]:
    """task name -> how tasks= named it (a task file's path), from the arguments' tasks=."""
    given = [a.partition("=")[2] for a in train if a.startswith("tasks=")]
    entries = {}
    for text in given:
        for entry in filter(None, (e.strip() for e in text.replace("+", ",").split(","))):
            entries[named_config(entry)[0]] = entry
    return entries


def _task_of(key: str, legacy: dict[str, tuple[str, str]]) -> str | None:
    """The task a key belongs to (`squad.weight`, `steps_squad`: squad), or None."""
    if key in legacy:
        return legacy[key][0]
    return key.split(".", 1)[0] if "." in key else None


def _starved(member: Member) -> list[str]:
    """The training tasks a finished run saw no example of."""
    summary = read_summary(RunFolder(member.run_dir).summary)
    if not isinstance(summary, dict):
        return []
    steps = [key.removeprefix("steps/") for key in summary if key.startswith("steps/")]
    return [task for task in steps if not summary.get(f"examples/{task}")]


def verdicts(compared: dict, scores: dict[str, dict[str, float]], singles: list[str]) -> list[dict]:
    """Per transfer task: each run's score, the best single-task run, the mixture's difference to
    it with its interval, and the verdict."""
    rows = []
    for task, by_run in scores.items():
        if MIXTURE not in by_run or not any(s in by_run for s in singles):
            continue
        best = max((s for s in singles if s in by_run), key=lambda s: by_run[s])
        pair = next(
            (
                c
                for c in compared["comparisons"]
                if c["task"] == task and {c["first"], c["second"]} == {MIXTURE, best}
            ),
            None,
        )
        if pair is None:
            continue
        sign = 1 if pair["first"] == MIXTURE else -1
        low, high = sorted((sign * pair["low"] + 0.0, sign * pair["high"] + 0.0))  # (+ 0.0: no -0.00)
        verdict = "helps" if low > 0 else "hurts" if high < 0 else "no evidence"
        rows.append(
            {
                "task": task,
                "scores": by_run,
                "best_single": best,
                "difference": sign * pair["difference"] + 0.0,
                "low": low,
                "high": high,
                "verdict": verdict,
            }  # fmt: skip
        )
    return rows


def markdown(rows: list[dict], runs: list[str], budget: str, confidence: float) -> str:
    head = [
        "transfer task",
        *runs,
        "best alone",
        "mixture - best",
        f"{100 * confidence:g}% interval",
        "verdict",
    ]
    lines = [
        f"Equal compute ({budget}): each training task alone and the mixture; points: accuracy in %, "
        "Pearson r x 100 (STS: mean over subsets); paired bootstrap over the test items.",
        "",
        f"| {' | '.join(head)} |",
        "|---|" + "---:|" * (len(runs) + 3) + "---|",
    ]
    for row in rows:
        cells = [f"{row['scores'].get(r, float('nan')):.2f}" for r in runs]
        interval = f"[{row['low']:+.2f}, {row['high']:+.2f}]"
        lines.append(
            f"| {row['task']} | {' | '.join(cells)} | {row['best_single']} | {row['difference']:+.2f} | {interval} | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def command(args: Sequence[str]) -> None:
    launcher_args, args = split_launcher_keys(args)
    launcher = launcher_from(launcher_args)
    config, train = parse(args)
    out = check_output_dir(
        Path(config.out).expanduser()
        if config.out
        else Path("runs") / f"versus-{time.strftime('%Y%m%d-%H%M%S')}",
        "out",
    )
    found = members(train, config.budget, out)
    # The budget is a fixed key of every run: a folder trained with another budget is refused,
    # not resumed under its old one.
    sweep = Sweep(out.name, {}, [*train, f"budget={config.budget}"], out, launcher)
    with FolderLock(out, "versus folder", "out"):
        check_same_fixed_keys(sweep, found)
        outcomes = train_members(sweep, found)
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{', '.join(failed)} failed: see its output above, then run the same command again")
    keys = [
        f"tasks={config.transfer_tasks}",
        f"mode={config.transfer_mode}",
        f"data={config.transfer_data or ''}",
    ]
    report = report_name(apply_overrides(TransferConfig(), keys))
    for member in found:
        print(f"transfer {member.name} ({report})", flush=True)
        try:
            transfer(apply_overrides(TransferConfig(), [*keys, f"run={member.run_dir}"]))
        except TransferDataError as error:  # said with the key this command takes
            raise error.naming("transfer_data") from None
    compared_path = out / "compare.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtl",
            "compare",
            *(str(m.run_dir) for m in found),
            f"report={report}",
            f"out={compared_path}",
            "wandb=disabled",
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise UserError(
            f"just compare failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
        )
    compared = json.loads(compared_path.with_suffix(".json").read_text(encoding="utf-8"))
    # compare names an encoder by the keys its runs differ in (tasks=nli): here, by member
    member_of = {str(m.run_dir): m.name for m in found}
    names = {encoder: member_of[paths[0]] for encoder, paths in compared["encoders"].items()}
    for c in compared["comparisons"]:
        c["first"], c["second"] = names[c["first"]], names[c["second"]]
    scores: dict[str, dict[str, float]] = {}
    for c in compared["comparisons"]:
        scores.setdefault(c["task"], {}).update(
            {c["first"]: c["first_score"], c["second"]: c["second_score"]}
        )
    singles = [m.name for m in found if m.name != MIXTURE]
    rows = verdicts(compared, scores, singles)
    confidence = compared["config"]["confidence"]
    text = markdown(rows, [m.name for m in found], config.budget, confidence)
    if starved := _starved(found[-1]):  # the mixture is the last member
        text += (
            f"\nThe mixture saw no {', '.join(starved)} example within {config.budget}: it is not a mixture "
            "(blocks longer than the budget?); give a larger budget or shorter <task>.steps.\n"
        )
    atomic.write_text(out / "versus.md", text, "verdict")
    record = {
        "budget": config.budget,
        "report": report,
        "runs": {m.name: str(m.run_dir) for m in found},
        "verdicts": rows,
        "starved": starved,  # the training tasks the mixture saw no example of
    }
    atomic.write_text(out / "versus.json", jsonfile.dumps(record, indent=2) + "\n", "verdict")
    print(text + f"\nwritten to {out / 'versus.md'} (every pair: {compared_path})")
