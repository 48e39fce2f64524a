"""`just bench-verdicts`: how often `just compare`'s verdicts are wrong, measured on real runs.

    just bench-verdicts                       # 12 seeds of one CPU-sized config, 3 with shuffled labels

1. False positives: `seeds` runs of one configuration differ in their seed alone, so any verdict
   between two groups of them is wrong. `trials` times, two disjoint groups of `group` seeds are
   drawn and compared as `just compare` compares (studentized intervals, Holm over the transfer
   tasks); the share of task comparisons that say "no evidence" should be at least 95%. Beside
   it, the same draws judged as before seeds were an axis (one seed per encoder, an interval over
   the test items only, no correction): what a one-seed verdict costs.
   The synthetic part adds arms a study often has (2 v 8, 2 v 6 with one arm 4x noisier, 2 v 5
   with collapsing seeds, 3 v 8, heavy-tailed seeds) with their power against a planted 2-sd
   difference, the guarded degrees of freedom beside plain Welch's (tools/calibration.py).
2. Power: `group` runs of the same configuration trained on shuffled labels (`nli.shuffle_labels=
   true`: a degraded encoder, planted) against `group` normal ones; the share of tasks called
   "hurts" for the planted arm.

Every run trains through `just sweep` (finished runs are kept; an interrupted bench resumes) and
is transferred once with the protocol; the trials resample the same scores. Trials overlap in
their seeds (12 seeds give C(12,3) x C(9,3) / 2 = 9,240 pairs of groups): the rates are
averages over draws, not independent experiments.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mtl.analysis import significance
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.transfer import suite
from mtl.files import atomic, jsonfile
from mtl.files.locks import FolderLock
from mtl.formats.transfer_report import ITEMS_SUFFIX, read_items, read_report
from mtl.jobs.sweep import Sweep, train_members
from mtl.transfer_tasks.registry import TRANSFER_TASKS
from tools import calibration

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import BenchVerdictsConfig as BenchVerdictsConfig


def train(config: BenchVerdictsConfig, out: Path) -> tuple[list[Path], list[Path]]:
    """The normal and the planted runs, trained (or kept) as two sweeps over seed=."""
    base = [f"preset={config.preset}", *config.keys.split()]
    normal = Sweep("null", {"seed": [str(s) for s in range(1, config.seeds + 1)]}, base, out / "null")
    planted = Sweep(
        "planted",
        {"seed": [str(s) for s in range(1, config.planted + 1)]},
        [*base, "nli.shuffle_labels=true"],
        out / "planted",
    )
    folders = []
    for sweep in (normal, planted):
        members = sweep.members()
        with FolderLock(sweep.out, "sweep folder", "out"):
            outcomes = train_members(sweep, members)
        if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
            raise UserError(f"{', '.join(failed)} failed: see its output above, then run the bench again")
        folders.append([m.run_dir for m in members])
    return folders[0], folders[1]


def transferred(config: BenchVerdictsConfig, folder: Path) -> dict[str, significance.Items]:
    """The run's per-item transfer results, transferring it once."""
    keys = [f"run={folder}", f"tasks={config.tasks}", f"mode={config.mode}", "wandb=disabled"]
    transfer = apply_overrides(
        suite.TransferConfig(), [*keys, *([f"data={config.data}"] if config.data else [])]
    )
    name = suite.report_name(transfer)
    report = read_report(folder / f"{name}.json", damaged_is_missing=True)
    if report is None or any(task not in report["results"] for task in transfer.task_names):
        suite.run(transfer)
    return read_items(folder / f"{name}{ITEMS_SUFFIX}", dict.fromkeys(TRANSFER_TASKS))


def trial_verdicts(
    per_seed: dict[str, np.ndarray],
    full: dict[str, np.ndarray],
    first: np.ndarray,
    second: np.ndarray,
    settings: significance.SignificanceConfig,
) -> list[significance.Comparison]:
    """One comparison as `just compare` makes it: rows `first` against rows `second` of each task's
    (seeds, replicates) scores, Holm-corrected over the tasks."""
    family = [
        significance.from_scores(
            task,
            ("A", per_seed[task][first], list(full[task][first])),
            ("B", per_seed[task][second], list(full[task][second])),
            settings,
        )
        for task in per_seed
    ]
    significance.correct(family)
    return family


def run(config: BenchVerdictsConfig) -> dict:
    out = Path(config.out).expanduser()
    synthetic = synthetic_part(config)
    if config.synthetic_only:
        result = {"config": config.__dict__, "synthetic": synthetic}
        atomic.write_text(out / "verdicts.json", jsonfile.dumps(result, indent=2) + "\n", "bench result")
        atomic.write_text(out / "verdicts.md", markdown(result), "bench result")
        return result
    normal, planted = train(config, out)
    folders = normal + planted
    items = [transferred(config, folder) for folder in folders]
    tasks = [t for t in suite.TransferConfig(tasks=config.tasks).task_names if all(t in i for i in items)]
    settings = significance.SignificanceConfig(resamples=config.resamples)
    rng = np.random.default_rng(0)
    per_seed, full = {}, {}
    for task in tasks:  # every run's score on the same item resamples: a trial picks rows
        runs = [i[task] for i in items]
        per_seed[task] = significance.item_resampled_scores(runs, config.resamples, rng)
        everything = significance.everything(significance.item_counts(runs[0]))
        full[task] = np.array([float(significance.scores(i, everything)) for i in runs])
    null_rows, planted_rows = np.arange(len(normal)), len(normal) + np.arange(len(planted))
    if len(normal) < 2 * config.group:
        raise UserError(
            f"seeds={config.seeds}: two disjoint groups of group={config.group} need {2 * config.group}"
        )
    false_calls = false_families = one_seed_calls = comparisons = 0
    for _ in range(config.trials):
        drawn = rng.permutation(null_rows)[: 2 * config.group]
        verdicts = trial_verdicts(per_seed, full, drawn[: config.group], drawn[config.group :], settings)
        false_calls += sum(c.verdict != "no evidence" for c in verdicts)
        false_families += any(c.verdict != "no evidence" for c in verdicts)
        comparisons += len(verdicts)
        # as before seeds were an axis: one seed each, items only, each task at its own 95%
        alone = [
            significance.from_scores(
                task,
                ("A", per_seed[task][drawn[:1]], [full[task][drawn[0]]]),
                (
                    "B",
                    per_seed[task][drawn[config.group : config.group + 1]],
                    [full[task][drawn[config.group]]],
                ),
                settings,
            )
            for task in tasks
        ]
        one_seed_calls += sum(c.low > 0 or c.high < 0 for c in alone)
    hurts: dict[str, int] = dict.fromkeys(tasks, 0)
    power_trials = min(config.trials, 50)
    for _ in range(power_trials):
        chosen = rng.permutation(null_rows)[: config.group]
        for c in trial_verdicts(per_seed, full, planted_rows[: config.group], chosen, settings):
            hurts[c.task] += c.verdict == "B better"
    result = {
        "config": config.__dict__,
        "runs": {"null": [str(f) for f in normal], "planted": [str(f) for f in planted]},
        "tasks": tasks,
        "scores": {
            task: {"null": full[task][null_rows].tolist(), "planted": full[task][planted_rows].tolist()}
            for task in tasks
        },
        "no_evidence_share": 1 - false_calls / comparisons,
        "family_wise_false_share": false_families / config.trials,  # what Holm holds at 5%
        "synthetic": synthetic,
        "one_seed_items_only_false_share": one_seed_calls / comparisons,
        "comparisons": comparisons,
        "planted_called_hurts": {task: hurts[task] / power_trials for task in tasks},
        "power_trials": power_trials,
    }
    atomic.write_text(out / "verdicts.json", jsonfile.dumps(result, indent=2) + "\n", "bench result")
    atomic.write_text(out / "verdicts.md", markdown(result), "bench result")
    return result


def synthetic_part(config: BenchVerdictsConfig) -> dict | None:
    """The synthetic calibration grid (tools/calibration.py): family-wise rates by seeds per
    group and seed-to-item variance ratio, for the studentized verdicts and the earlier ones."""
    if not config.synthetic_families:
        return None
    tasks = 3
    cells = calibration.grid(families=config.synthetic_families, tasks=tasks)
    powered = calibration.power_check(trials=config.synthetic_families // 2)
    arms = calibration.arms_grid(families=config.synthetic_families, tasks=tasks)
    across = calibration.across_grid(families=config.synthetic_families)
    plans = calibration.plan_check(trials=5 * config.synthetic_families)
    gates = calibration.gate_check(searches=config.gate_searches) if config.gate_searches else []
    return {
        "tasks": tasks,
        "families": config.synthetic_families,
        "cells": [
            {"seeds": c.seeds, "ratio": c.ratio, "rate": c.rate, "earlier_rate": c.bootstrap_rate}
            for c in cells
        ],
        "power": [
            {
                "ratio": c.ratio,
                "difference": c.difference,
                "trials": c.trials,
                "planned": c.planned,
                "power": {basis: c.power(basis) for basis in calibration.BASES},
            }
            for c in powered
        ],  # fmt: skip
        "arms": [
            {
                "design": c.design.label,
                "size": {test: c.size(test) for test in calibration.TESTS},
                "power": {test: c.power(test) for test in calibration.TESTS},
            }
            for c in arms
        ],
        "skill_gate": [
            {
                "proxies": c.proxies,
                "searches": c.searches,
                "passed_before": c.passed_before,
                "passed_now": c.passed_now,
            }
            for c in gates
        ],
        "plan_check": [
            {"seeds": c.seeds, "difference": c.difference, "printed": c.printed, "measured": c.measured}
            for c in plans
        ],
        "across_tasks": [
            {"tasks": c.tasks, "seeds": c.seeds, "correlation": c.correlation, "rate": c.false / c.families}
            for c in across
        ],
        "table": calibration.markdown(cells, tasks)
        + "\n"
        + calibration.arms_markdown(arms)
        + "\n"
        + calibration.across_markdown(across)
        + "\n"
        + calibration.power_markdown(powered)
        + "\n"
        + calibration.plan_markdown(plans)
        + ("\n" + calibration.gate_markdown(gates) if gates else ""),
    }


def markdown(result: dict) -> str:
    config = result["config"]
    synthetic = result.get("synthetic")
    if "comparisons" not in result:  # synthetic_only
        return synthetic["table"] if synthetic else "nothing measured\n"
    lines = [
        f"Same configuration ({config['preset']} {config['keys']}), {config['seeds']} seeds: "
        f"{config['trials']} draws of {config['group']} seeds "
        f"against {config['group']} others, {len(result['tasks'])} transfer tasks each "
        f"({result['comparisons']} task comparisons):",
        f"- families (a draw's {len(result['tasks'])} tasks) with any verdict (wrong; nominal 5%): "
        f"{100 * result['family_wise_false_share']:.1f}%",
        f"- no evidence (right): {100 * result['no_evidence_share']:.1f}% with seeds, studentized "
        f"and Holm; one seed each, items only: {100 * result['one_seed_items_only_false_share']:.1f}% "
        "of comparisons called a difference",
        f"- planted ({config['planted']} runs on shuffled NLI labels) called worse, per task, over "
        f"{result['power_trials']} draws:",
        "",
        "| task | seeds' scores (mean ± sd) | planted (mean) | called worse |",
        "|---|---:|---:|---:|",
    ]
    for task in result["tasks"]:
        null, planted = result["scores"][task]["null"], result["scores"][task]["planted"]
        lines.append(
            f"| {task} | {np.mean(null):.2f} ± {np.std(null, ddof=1):.2f} | {np.mean(planted):.2f} | "
            f"{100 * result['planted_called_hurts'][task]:.0f}% |"
        )
    if synthetic:
        lines += ["", synthetic["table"]]
    return "\n".join(lines) + "\n"


def command(args: Sequence[str]) -> None:
    config = apply_overrides(BenchVerdictsConfig(), list(args))
    result = run(config)
    print(markdown(result) + f"\nwritten to {Path(config.out) / 'verdicts.json'}")
