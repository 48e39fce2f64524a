"""The arms of a study (versus-single, mixture-search), once trained: each run held to the whole
budget and transferred with one protocol (`mtl.studies.compared` then compares them, with `just
compare`'s statistics, a layer above)."""

from __future__ import annotations

import time
from pathlib import Path

from mtl.config import Range, apply_overrides, paths_and_keys, read_number
from mtl.errors import UserError
from mtl.eval.transfer.suite import TransferConfig, report_name
from mtl.eval.transfer.suite import run as transfer
from mtl.files.atomic import check_output_dir
from mtl.formats.transfer_report import read_report
from mtl.jobs.member import Member
from mtl.runs import RunFolder, read_summary, stale
from mtl.train.config.command_line import config_from_args
from mtl.transfer_tasks.tasks import TransferDataError


def check_transfer_keys(tasks: str, mode: str) -> None:
    """A study's transfer_tasks= and transfer_mode=, checked as `just transfer` checks its tasks=
    and mode= before any training, and named in an error as the study's keys."""
    try:
        apply_overrides(TransferConfig(), [f"tasks={tasks}", f"mode={mode}"])
    except UserError as error:
        text = str(error)
        for key in ("tasks", "mode"):
            if text.startswith((f"{key}=", f"{key} ")):
                text = f"transfer_{text}"
        raise UserError(text) from None


def study_arguments(args: list[str], study: str, own_keys: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A study's arguments split into its own keys and the training keys every run gets; a path
    among them (the studies take key=value only) is one line."""
    named, keys = paths_and_keys(args)
    if named:
        raise UserError(f"{named[0]}: {study} takes key=value arguments only (preset=NAME for a preset)")
    own = [a for a in keys if a.partition("=")[0] in own_keys]
    return own, [a for a in keys if a.partition("=")[0] not in own_keys]


def refuse_run_keys(train: list[str], study: str, runs: str) -> None:
    """A study at equal compute sets each run's budget, name and folder, and trains every one the
    whole budget: those keys among `train`, and a stop= other than max_steps, are refused."""
    if taken := [
        a
        for a in train
        if a.partition("=")[0] in ("max_steps", "max_minutes", "out", "name", "group", "resume")
    ]:
        raise UserError(f"{taken[0]}: {study} sets it for each run; give the budget with budget=")
    if stops := [
        a
        for a in train
        if a.partition("=")[0] in ("stop", "optim.stop") and a.partition("=")[2] != "max_steps"
    ]:
        raise UserError(
            f"{stops[0]}: {study} trains every {runs} the whole budget (equal compute): leave stop= out"
        )


def left_out_line(short: dict[str, str]) -> str:
    """The line a study's .md ends with for its runs short of the budget."""
    return "Left out (short of the budget): " + "; ".join(f"{name}: {why}" for name, why in short.items())


def closing_lines(result: dict) -> list[str]:
    """The lines a study's .md ends with: fewer seeds than its plan asks, the runs left out."""
    lines = []
    if result.get("below_plan"):
        said = result["below_plan"].removeprefix("warning: ")
        lines += ["", said[:1].upper() + said[1:] + "."]
    if result.get("left_out"):
        lines += ["", left_out_line(result["left_out"])]
    return lines


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


def short_of_budget(member: Member, budget: str) -> str | None:
    """Why a finished run did not use the whole budget, or None: it trained max_steps= steps (a
    steps or examples budget) or until max_minutes= (a minutes budget)."""
    summary = read_summary(RunFolder(member.run_dir).summary)
    if not isinstance(summary, dict):
        return "its summary.json is missing or damaged"
    kind, _ = budget_amount(budget)
    if kind == "minutes":
        if summary.get("stop_reason") != "max_minutes":
            return f"stopped by {summary.get('stop_reason')} before {budget}"
        return None
    wanted = next(int(k.partition("=")[2]) for k in member.overrides if k.startswith("max_steps="))
    if summary.get("global_step") != wanted:
        return f"trained {summary.get('global_step')} of its {wanted} steps (stopped by {summary.get('stop_reason')})"
    return None


def summary_seconds(member: Member, key: str = "train_seconds") -> float:
    """A finished run's seconds under `key` of its summary.json (`train_seconds`: its steps; an
    online schedule's `mixing_seconds`: its measurements); 0 when it has none."""
    summary = read_summary(RunFolder(member.run_dir).summary)
    value = summary.get(key) if isinstance(summary, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


def study_folder(out: str | None, kind: str) -> Path:
    """Where a study's runs and results go: `out=`, else runs/<kind>-<time>; checked as out=."""
    chosen = Path(out).expanduser() if out else Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    if RunFolder(chosen).record.is_file():  # a run's own folder: its sweep.json would hide the run
        raise UserError(
            f"out={out}: {chosen} is a run's folder (its config.json); give the study a folder of its own"
        )
    return check_output_dir(chosen, "out")


def equal_compute(members: list[Member], budget: str) -> tuple[list[Member], dict[str, str]]:
    """The runs that trained the whole budget, and why each other one did not (said here): a run
    that ended short is left out, never compared."""
    short = {m.name: why for m in members if (why := short_of_budget(m, budget))}
    for name, why in short.items():
        print(f"left out {name}: {why}; equal compute needs the whole budget", flush=True)
    return [m for m in members if m.name not in short], short


def wandb_mode(members: list[Member]) -> str:
    """The W&B mode the study's runs train with (wandb= or run.wandb= among their keys; auto)."""
    given = [
        value
        for key, _, value in (arg.partition("=") for arg in (members[0].overrides if members else []))
        if key in ("wandb", "run.wandb")
    ]
    return given[-1] if given else "auto"


def transfer_members(members: list[Member], tasks: str, mode: str, data: str | None) -> str:
    """Transfer each run (`transfer_tasks=`, `transfer_mode=`, `transfer_data=`) that has no
    report of its final encoder on those tasks yet; the report's name (transfer-fast, ...)."""
    keys = [f"tasks={tasks}", f"mode={mode}", f"data={data or ''}"]
    report = report_name(apply_overrides(TransferConfig(), keys))
    keys.append(f"wandb={wandb_mode(members)}")  # the study's wandb= reaches its transfers too
    wanted = apply_overrides(TransferConfig(), keys).task_names
    for member in members:
        path = member.run_dir / f"{report}.json"
        done = read_report(path, damaged_is_missing=True)
        if (
            done is not None
            and all(t in done["results"] for t in wanted)
            and not stale(done, path, member.run_dir)
        ):
            continue  # transferred already, its final encoder: a resumed study does not transfer it again
        print(f"transfer {member.name} ({report})", flush=True)
        try:
            transfer(apply_overrides(TransferConfig(), [*keys, f"run={member.run_dir}"]))
        except TransferDataError as error:  # said with the key the study takes
            raise error.naming("transfer_data") from None
    return report


def budget_keys(budget: str) -> list[str]:
    """The keys that hold a run to the study's budget, with no early stop (equal compute)."""
    kind, amount = budget_amount(budget)
    return [f"max_minutes={amount}" if kind == "minutes" else f"max_steps={amount}", "stop=max_steps"]


def arm_members(
    arms: dict[str, list[str]], train: list[str], budget: str, seeds: list[int], out: Path
) -> list[Member]:
    """Every arm (its name -> the training keys that make it) with every seed at the budget,
    named `<arm>-seed<N>` under out/arms, each member carrying its arm and seed."""
    found = []
    for arm, keys in arms.items():
        for seed in seeds:
            name = f"{arm}-seed{seed}"
            member_keys = [*train, *keys, *budget_keys(budget), f"seed={seed}"]
            member_keys += [f"name={name}", f"group={out.name}", f"out={out / 'arms' / name}"]
            found.append(Member(name, member_keys, out / "arms" / name, arm, seed))
    return found


def with_task(train: list[str], task: str) -> list[str]:
    """The training keys with `task` (a task file) added to tasks= (the given list, or the
    configuration's tasks where none is given)."""
    given = [a for a in train if a.partition("=")[0] in ("tasks", "run.tasks")]
    listed = given[-1].partition("=")[2] if given else ",".join(config_from_args(train).tasks)
    return [a for a in train if a not in given] + [f"tasks={listed},{task}"]
