"""`just compare-mixing`: do mixtures that adapt during training beat the static ones, at equal
compute and with seeds?

    just compare-mixing preset=cpu-small hidden=128 budget=steps:300 seeds=3 transfer_tasks=MR,CR,TREC,STS14

- **Arms** (`arms=`): the static mixtures, `stratified` (every task an equal share, as Aioli's and
  DoReMi's baseline), `proportional` (by size) and `temperature` (size**(1/T), `temperature=`),
  `searched` (the best static mixture of a `just mixture-search` folder, `mixture=`), and the
  online schedules (mtl/train/callbacks/online_mixing.py): `aioli` (the authors' normalization),
  `aioli-abs` (mix_normalize=abs), `aioli-target` (the law's rows every task's dev loss but the
  planted noise task's, `mix_target=`: a user judges a task they doubt by what it does to the
  tasks they chose; Aioli's own objective counts every task's loss, and a noise task's steps lower
  its own: they pull its head back to the label marginal), `doremi` (its reference: the
  stratified arm's run of the same seed) and `transfer` (it needs a watching task among tasks=).
  The online arms share `mix_every=` and `mix_batches=`; each its authors' step size unless
  `mix_eta=` gives them one (a sensitivity check: the shares' swings grow with it).
- **A planted noise task** (`noise=true`): a copy of SICK-E whose training labels are shuffled
  (`shuffle_labels`; its dev and test keep theirs) joins every arm's tasks. Nothing but its label
  marginal can be learned from it, so a good mixture starves it: the benchmark records each arm's
  noise share at mid-run (the shares in force at half the budget) and the fraction of steps it
  trained on noise.
- **Equal compute.** Every run trains the whole budget (`stop=max_steps`): the same steps, each
  of one task. The online arms spend evidence measurements besides (their seconds are recorded,
  and doremi's reference run is the stratified arm's, said in the arms' table).
- **Verdicts.** Every run is transferred; every arm is compared with stratified by `just
  compare`'s studentized intervals (seeds, then test items), Holm over every arm x transfer task.

The runs are a resumable study (`launcher=slurm` too): run the same command again to continue.
Results: out/bench-mixing.md, .json, W&B tables, and the page (mtl/studies/mixing_page.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtl.config import apply_overrides, comma_list
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.jobs.configs import BenchMixingConfig
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.runs import RunFolder, read_metrics, read_summary
from mtl.studies.arms import (
    budget_amount,
    budget_keys,
    check_transfer_keys,
    closing_lines,
    equal_compute,
    refuse_run_keys,
    study_arguments,
    study_folder,
    summary_seconds,
    wandb_mode,
)
from mtl.studies.compared import across_by_arm, across_section, transfer_and_compare, verdict_lines
from mtl.studies.mixture import by_size, mixture_keys, training_sizes, verdicts_against
from mtl.studies.opening import open_study
from mtl.tracking.tracker import log_tables
from mtl.train.config.command_line import config_from_args

BASELINE = "stratified"
STATIC = ("stratified", "proportional", "temperature", "searched")
ONLINE = {  # arm -> its schedule keys
    "aioli": ["schedule=aioli"],
    "aioli-abs": ["schedule=aioli", "mix_normalize=abs"],
    "aioli-target": ["schedule=aioli"],  # and mix_target= every task but the noise (members)
    "doremi": ["schedule=doremi"],
    "transfer": ["schedule=transfer"],
}
NOISE = "noise"  # the planted task's name: a copy of SICK-E with shuffled training labels
SCHEDULE_KEYS = (
    "schedule", "schedule.schedule", "temperature", "mix_every", "mix_eta", "mix_reference", "mix_normalize",
    "mix_target",
)  # fmt: skip


def parse(args: Sequence[str]) -> tuple[BenchMixingConfig, list[str]]:
    own, train = study_arguments(list(args), "compare-mixing", tuple(BenchMixingConfig.__dataclass_fields__))
    refuse_run_keys(train, "compare-mixing", "run")
    if taken := [a for a in train if a.partition("=")[0] in SCHEDULE_KEYS or ".prob=" in a]:
        raise UserError(f"{taken[0]}: compare-mixing sets each arm's schedule; choose arms= (and mix_every=)")
    config = apply_overrides(BenchMixingConfig(), own)
    check_transfer_keys(config.transfer_tasks, config.transfer_mode)
    budget_amount(config.budget)
    arms_of(config)
    return config, train


def arms_of(config: BenchMixingConfig) -> list[str]:
    """The arms arms= names, stratified (the baseline) first; searched needs mixture=."""
    arms = comma_list(config.arms)
    if unknown := [a for a in arms if a not in (*STATIC, *ONLINE)]:
        raise UserError(
            f"arms={config.arms}: {unknown[0]} is no arm; choose among {', '.join([*STATIC, *ONLINE])}"
        )
    if BASELINE not in arms or len(set(arms)) < 2:
        raise UserError(f"arms={config.arms}: give stratified (the baseline) and at least one arm to judge")
    if "aioli-target" in arms and not config.noise:
        raise UserError(
            f"arms={config.arms}: aioli-target judges the tasks by every loss but the planted noise "
            "task's: give noise=true (or leave the arm out)"
        )
    if "searched" in arms and not config.mixture:
        raise UserError("arms= has searched: give mixture=<a just mixture-search folder> (its best mixture)")
    if config.mixture and "searched" not in arms:
        arms.append("searched")
    return [BASELINE, *dict.fromkeys(a for a in arms if a != BASELINE)]


def noise_task(out: Path) -> str:
    """SICK-E's task file with shuffled training labels, written beside the runs as noise.toml."""
    sick = Path(__file__).resolve().parents[2] / "experiments" / "tasks" / "sick.toml"
    if not sick.is_file():
        raise UserError(
            f"{sick} is missing: compare-mixing plants its noise task from it (or give noise=false)"
        )
    out.mkdir(parents=True, exist_ok=True)
    planted = out / f"{NOISE}.toml"
    text = sick.read_text(encoding="utf-8").replace(
        'display = "SICK-E"', 'display = "noise (SICK-E, shuffled)"'
    )
    atomic.write_text(planted, text + "\nshuffle_labels = true\n", "task file")
    return str(planted)


def tasks_of(train: list[str], noise: str | None) -> tuple[list[str], list[str]]:
    """(the training keys with the noise task added to tasks=, the training tasks in order)."""
    given = [a for a in train if a.partition("=")[0] in ("tasks", "run.tasks")]
    if noise is not None:
        listed = given[-1].partition("=")[2] if given else ",".join(config_from_args(train).tasks)
        train = [a for a in train if a not in given] + [f"tasks={listed},{noise}"]
    tasks = config_from_args(train).training_tasks
    if len(tasks) < 2:
        raise UserError(f"compare-mixing mixes tasks: {tasks[0]} trains alone; give tasks= with two or more")
    return train, tasks


def searched_mixture(folder: str, tasks: list[str]) -> np.ndarray:
    """The best static mixture of a `just mixture-search` folder (its predicted one, else its best
    proxy), over `tasks`: a task it did not mix gets 0."""
    path = Path(folder) / "mixture-search.json"
    try:
        result = jsonfile.loads(path.read_text(encoding="utf-8"))
        mixtures, searched = result["mixtures"], result["tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(
            f"mixture={folder}: no readable mixture-search.json there: give a just mixture-search folder"
        ) from None
    chosen = mixtures.get("predicted") or mixtures["best-proxy"]
    if unknown := [t for t in searched if t not in tasks]:
        raise UserError(f"mixture={folder}: it mixed {unknown[0]}, which is not a training task here")
    shares = np.array([dict(zip(searched, chosen, strict=True)).get(t, 0.0) for t in tasks], dtype=float)
    return shares / shares.sum()


def mixtures(
    train: list[str], tasks: list[str], arms: list[str], config: BenchMixingConfig
) -> dict[str, np.ndarray]:
    """Each static arm's shares of the training tasks (proportional and temperature by size, as the
    scheduler draws them without cap=: the sizes are read only for those arms)."""
    found = {"stratified": np.full(len(tasks), 1.0 / len(tasks))}
    if {"proportional", "temperature"} & set(arms):
        sizes = training_sizes(train, tasks)
        found |= {
            "proportional": by_size(sizes, 1.0),
            "temperature": by_size(sizes, 1.0 / config.temperature),
        }
    if "searched" in arms:
        found["searched"] = searched_mixture(config.mixture or "", tasks)
    return {arm: shares for arm, shares in found.items() if arm in arms}


def members(
    train: list[str],
    arms: list[str],
    tasks: list[str],
    config: BenchMixingConfig,
    seeds: list[int],
    out: Path,
) -> list[Member]:
    """Every arm with every seed at the budget; doremi's reference is the stratified run of its seed."""
    static = {
        "stratified": mixture_keys(tasks, np.full(len(tasks), 1.0 / len(tasks))),
        "proportional": ["schedule=proportional"],
        "temperature": ["schedule=temperature", f"temperature={config.temperature:g}"],
    }
    if "searched" in arms:
        static["searched"] = mixture_keys(tasks, searched_mixture(config.mixture or "", tasks))
    found = []
    for arm in arms:
        for seed in seeds:
            name = f"{arm}-seed{seed}"
            keys = list(static[arm]) if arm in static else [*ONLINE[arm], f"mix_every={config.mix_every}"]
            if arm not in static and config.mix_eta is not None:
                keys.append(f"mix_eta={config.mix_eta}")
            if arm == "doremi":  # each seed's reference: the stratified run of that seed ({seed})
                keys.append(f"mix_reference={out / 'arms' / BASELINE}-seed{{seed}}")
            if arm == "aioli-target":  # the losses a user judges by: the tasks they chose
                keys.append(f"mix_target={','.join(t for t in tasks if t != NOISE)}")
            keys = [
                *train,
                *keys,
                *budget_keys(config.budget),
                f"seed={seed}",
                f"name={name}",
                f"group={out.name}",
            ]
            keys.append(f"out={out / 'arms' / name}")
            config_from_args(keys)  # a key that does not fit an arm stops everything before work
            found.append(Member(name, keys, out / "arms" / name, arm, seed))
    return found


def noise_shares(member: Member, noise: str, budget: str, fixed_share: float | None) -> dict[str, Any]:
    """The noise task's share in force at mid-run (online arms: the shares logged then; a static
    arm: its `fixed_share`), the fraction of the run's steps it trained, and (online arms) its
    share at each update, [step, share] pairs, which the page draws."""
    summary = read_summary(RunFolder(member.run_dir).summary)
    if not isinstance(summary, dict):
        return {"mid_run": None, "steps": None, "curve": []}
    total = int(summary.get("global_step") or 0)
    trained = summary.get(f"steps/{noise}")
    steps = float(trained) / total if isinstance(trained, int | float) and total else None
    kind, amount = budget_amount(budget)
    mid = int(amount) // 2 if kind == "steps" else total // 2
    curve = [
        [row["global_step"], row.get(f"mixing/share/{noise}")]
        for row in read_metrics(RunFolder(member.run_dir).metrics)
        if row.get("phase/event") == "mixing"
    ]
    if not curve:
        return {"mid_run": fixed_share, "steps": steps, "curve": []}
    before = [share for step, share in curve if step <= mid]
    return {"mid_run": before[-1] if before else None, "steps": steps, "curve": curve}


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def markdown(result: dict) -> str:
    noise = result["noise"]
    lines = [
        f"Mixing schedules at equal compute over {', '.join(result['tasks'])} ({result['budget']} each, "
        f"stop=max_steps), seeds {', '.join(map(str, result['seeds']))}; online arms update every "
        f"{result['mix_every']} steps"
        + (f" with step size mix_eta={result['mix_eta']:g}." if result.get("mix_eta") is not None
           else ", each with its authors' step size.")
        + (f" {noise} is a planted noise task (SICK-E with shuffled training labels): a good mixture starves it."
           if noise else ""),
        "",
        "| arm | seeds | noise share at mid-run | steps on noise | train s (mean) | evidence s (mean) | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    for arm, row in result["arms"].items():
        lines.append(
            f"| {arm} | {row['seeds']} | {_share(row['noise_mid_run'])} | {_share(row['noise_steps'])} | "
            f"{row['train_seconds']:.1f} | {row['evidence_seconds']:.1f} | {row['note']} |"
        )
    lines += verdict_lines(result["verdicts"], "arm", "stratified")
    lines += closing_lines(result)
    return "\n".join(lines) + "\n" + across_section(result.get("across_tasks") or [])


NOTES = {
    "stratified": "equal shares (the baseline)",
    "proportional": "by training-set size",
    "temperature": "size**(1/T)",
    "searched": "the mixture-search's best mixture",
    "aioli": "lookahead mixing law, the authors' normalization",
    "aioli-abs": "lookahead mixing law, mix_normalize=abs",
    "aioli-target": "lookahead mixing law, the noise task's own loss not among its rows (mix_target=)",
    "doremi": "excess loss over the stratified run of its seed (that run's compute not counted)",
    "transfer": "lookahead toward the watching tasks",
}


def bench(args: Sequence[str]) -> tuple[Path, dict]:
    """The whole benchmark (resumed where it stopped): its folder and its result."""
    launcher, config, train, seeds, below_plan = open_study(args, parse)
    arms = arms_of(config)
    out = study_folder(config.out, "mixing")
    train, tasks = tasks_of(train, noise_task(out) if config.noise else None)
    found = members(train, arms, tasks, config, seeds, out)
    fixed = [*train, f"budget={config.budget}", f"mix_every={config.mix_every}"]
    static = [m for m in found if m.arm in STATIC]  # first: doremi's references are among them
    train_study(static, fixed, out / "arms", launcher, "bench-mixing")
    train_study([m for m in found if m not in static], fixed, out / "arms", launcher, "bench-mixing")
    compared_runs, short = equal_compute(found, config.budget)
    compared, names, _ = transfer_and_compare(
        compared_runs, config.transfer_tasks, config.transfer_mode, config.transfer_data, out
    )
    noise = NOISE if config.noise else None
    static_shares = mixtures(train, tasks, arms, config) if noise else {}
    per_arm = {}
    for arm in arms:
        runs = [m for m in compared_runs if m.arm == arm]
        share = float(static_shares[arm][tasks.index(noise)]) if noise and arm in static_shares else None
        measured = [noise_shares(m, noise, config.budget, share) for m in runs] if noise else []

        per_arm[arm] = {
            "seeds": len(runs),
            "noise_mid_run": _mean([m["mid_run"] for m in measured]),
            "noise_steps": _mean([m["steps"] for m in measured]),
            "noise_per_seed": measured,
            "train_seconds": float(np.mean([summary_seconds(m, "train_seconds") for m in runs]))
            if runs
            else 0.0,
            "evidence_seconds": float(np.mean([summary_seconds(m, "mixing_seconds") for m in runs]))
            if runs
            else 0.0,
            "note": NOTES[arm],
        }
    result = {
        "across_tasks": across_by_arm(compared, names),
        "tasks": tasks,
        "arms": per_arm,
        "noise": noise,
        "budget": config.budget,
        "mix_every": config.mix_every,
        "mix_eta": config.mix_eta,
        "seeds": seeds,
        "runs": {m.name: str(m.run_dir) for m in found},
        "left_out": short,
        "equal_compute": "every run trained the whole budget with stop=max_steps, one task a step",
        "verdicts": verdicts_against(
            compared, names, BASELINE, arms[1:], "beats stratified", "below stratified", "arm"
        ),
        "below_plan": below_plan,
    }
    atomic.write_text(out / "bench-mixing.md", markdown(result), "mixing benchmark")
    atomic.write_text(out / "bench-mixing.json", jsonfile.dumps(result, indent=2) + "\n", "mixing benchmark")
    log_tables(
        job_type="bench-mixing",
        name=out.name,
        config={k: result[k] for k in ("tasks", "budget", "mix_every", "mix_eta", "seeds", "noise")},
        tables={
            "arms": (["arm", "seeds", "noise_mid_run", "noise_steps", "train_seconds", "evidence_seconds"],
                     [[a, r["seeds"], r["noise_mid_run"], r["noise_steps"], r["train_seconds"], r["evidence_seconds"]]
                      for a, r in per_arm.items()]),

            "verdicts": (["task", "arm", "difference", "low", "high", "verdict"],
                         [[r["task"], r["arm"], r["difference"], r["low"], r["high"], r["verdict"]]
                          for r in result["verdicts"]]),
        },
        directory=out,
        mode=wandb_mode(found),
        group=out.name,
    )  # fmt: skip
    return out, result


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None
