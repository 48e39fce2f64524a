"""`just affinity-check`: does the lookahead affinity toward a target predict what leaving a
training task out does to it?

    just affinity-check preset=cpu-small tasks=nli,squad,experiments/tasks/sick_r.toml,experiments/tasks/stsb.toml \
        stsb.train=false affinity_every=20 budget=steps:300 seeds=5

Trains every training task together (`all`, measuring affinity toward the watching tasks) and,
for each training task k, the others without it (`without-k`), every run the same budget with
every seed (`just versus-single`'s machinery: a sweep, resumable, a run short of the budget left
out). For each (training task k, target t):

- predicted: the mean of Z(k -> t) over the `all` run's measurements (mtl/train/callbacks/affinity.py);
- measured: the target's score with k minus without it, in points (accuracy %, r x 100), on
  the target's test split where it has one (the affinity's held batches are from dev), else dev.

Spearman's rho between them over every pair (each the mean over seeds), with a 95% percentile
interval from resampling the seeds (the unit that varies) and a permutation p over the pairs (how
often an order this close comes by chance, which no number of seeds shrinks: three pairs have six
orders, so p is never below 1/3), and per target, in how many seeds each training task ranked
first. A verdict needs both: p at most 5% and a seeds' interval off 0. What it cannot tell: a
lookahead is one step's local effect, leaving a task out changes the mixture of the whole run;
the two need not agree, and a rho near 0 says so.

Every estimator the `all` runs measured (`affinity_estimators=`, all three unless given: the
lookahead on the target's loss, its scale-free form on the target's r, a k-step lookahead, the
gradients' alignment) is scored the same way, with its noise floor (the share of pairs whose
95% t interval over the held batches holds 0) and its cost (CPU seconds per measurement: the
lookahead's is the measurement's whole less the others', which reuse its gradients and losses).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from pathlib import Path

import numpy as np
from scipy import stats

from mtl.analysis.multitask import toward_targets
from mtl.errors import UserError
from mtl.files.schemas import DamagedFile
from mtl.jobs.configs import AffinityCheckConfig as AffinityCheckConfig
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.runs import RunFolder, read_affinity, read_summary
from mtl.studies.arms import left_out_line
from mtl.studies.groups import seed_scores, test_metric
from mtl.studies.study import Study, register_study
from mtl.studies.versus import subset_members
from mtl.train.config.command_line import config_from_args
from mtl.train.config.train_config import AFFINITY_ESTIMATORS

ALL = "all"
AFFINITY_KEYS = (
    "affinity_every", "run.affinity_every", "affinity_batches", "run.affinity_batches",
    "affinity_each", "run.affinity_each", "affinity_precision", "run.affinity_precision",
    "affinity_estimators", "run.affinity_estimators", "affinity_k", "run.affinity_k",
)  # fmt: skip
# Unless affinity_estimators= is given, the check measures every one of them
EVERY_ESTIMATOR = ("lookahead", *AFFINITY_ESTIMATORS)


def without(task: str) -> str:
    return f"without-{task}"


def members_of(
    train: list[str], training: list[str], budget: str, out: Path, seeds: list[int]
) -> list[Member]:
    """`all` (measuring affinity) and `without-<k>` for each training task (not measuring: the
    lookahead costs time and changes nothing they are scored on)."""
    arms = {ALL: training} | {without(k): [t for t in training if t != k] for k in training}
    found = subset_members(train, arms, budget, out, seeds)
    for member in found:
        if member.arm != ALL:
            member.overrides = [a for a in member.overrides if a.partition("=")[0] not in AFFINITY_KEYS]
    return found


def affinity_logs(kept: list[Member]) -> dict[int, list[dict]]:
    """Per seed of the `all` arm, its affinity.jsonl's measurements (read once for every estimator)."""
    found = {}
    for member in kept:
        if member.arm == ALL:
            try:
                found[member.seed] = read_affinity(RunFolder(member.run_dir).affinity)
            except DamagedFile as error:
                raise UserError(f"{member.name}: {error}") from None
    return found


def _summaries(logs: dict[int, list[dict]], training: list[str], targets: list[str], estimator: str) -> dict:
    """Per seed of the `all` arm: `estimator`'s AffinityMean over (training tasks x targets)."""
    found = {}
    for seed, rows in logs.items():
        toward = toward_targets(rows, estimator)
        if toward is None:
            continue
        summary, their_targets = toward
        order = [summary.tasks.index(t) for t in training]
        columns = [their_targets.index(t) for t in targets]
        half = summary.half_width[np.ix_(order, columns)] if summary.half_width is not None else None
        found[seed] = dataclasses.replace(
            summary, tasks=training, mean=summary.mean[np.ix_(order, columns)], half_width=half
        )
    return found


def measured_estimators(logs: dict[int, list[dict]]) -> list[str]:
    """The estimators every `all` run measured, in EVERY_ESTIMATOR's order."""
    return [
        name
        for name in EVERY_ESTIMATOR
        if logs
        and all(
            rows and (name == "lookahead" or name in (rows[0].get("estimators") or {}))
            for rows in logs.values()
        )
    ]


def cost(logs: dict[int, list[dict]], estimator: str) -> float | None:
    """`estimator`'s mean CPU seconds per measurement over the `all` runs (None: not recorded)."""
    values = []
    for row in (row for rows in logs.values() for row in rows):
        spent = row.get("estimator_seconds") or {}
        if estimator != "lookahead":
            values += [spent[estimator]] if estimator in spent else []
        elif row.get("seconds") is not None:
            values.append(row["seconds"] - sum(spent.values()))
    return statistics.fmean(values) if values else None


def measured(
    kept: list[Member], training: list[str], targets: list[str]
) -> tuple[dict[int, np.ndarray], dict]:
    """Per seed with every arm: (training tasks x targets) score with the task minus without it,
    in points, and the split each target was scored on."""
    by_seed: dict[int, dict[str, Member]] = {}
    for member in kept:
        by_seed.setdefault(member.seed, {})[member.arm] = member
    first = next((m for m in kept if m.arm == ALL), None)
    summary = (read_summary(RunFolder(first.run_dir).summary) if first else None) or {}
    splits = {target: "test" if test_metric(summary, target, "test") else "dev" for target in targets}
    found = {}
    for seed, arms in by_seed.items():
        if set(arms) != {ALL, *(without(k) for k in training)}:
            continue
        effect = np.full((len(training), len(targets)), np.nan)
        for t, target in enumerate(targets):
            ours = seed_scores([arms[ALL]], ALL, target, splits[target])
            for k, task in enumerate(training):
                theirs = seed_scores([arms[without(task)]], without(task), target, splits[target])
                if ours and theirs:
                    effect[k, t] = ours[0] - theirs[0]
        if not np.isnan(effect).any():
            found[seed] = effect
    return found, splits


def spearman_over_seeds(
    predictions: dict[int, np.ndarray], effects: dict[int, np.ndarray], resamples: int, seed: int = 0
) -> dict:
    """Spearman's rho between the seed-mean predictions and effects over every (task, target)
    pair; its 95% percentile interval over seed resamples (None with fewer than 2 seeds, or where
    every resample's ranks tie); and the permutation p-value of the pairs (two-sided: a rho as
    far from 0 among every order of the effects), which the seeds cannot shrink: three pairs have
    six orders, so no rho of theirs is below 1/3."""
    seeds = sorted(set(predictions) & set(effects))
    if not seeds:
        return {"rho": None, "low": None, "high": None, "permutation_p": None, "seeds": [], "pairs": 0}
    stack_p = np.stack([predictions[s] for s in seeds])
    stack_e = np.stack([effects[s] for s in seeds])

    def rho(rows: np.ndarray) -> float:
        x, y = stack_p[rows].mean(axis=0).ravel(), stack_e[rows].mean(axis=0).ravel()
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return float("nan")
        return float(stats.spearmanr(x, y)[0])

    everything = rho(np.arange(len(seeds)))
    low = high = None
    if len(seeds) > 1 and not np.isnan(everything):  # no rho, no interval of it (it read [1, 1])
        draws = np.random.default_rng(seed).integers(0, len(seeds), size=(resamples, len(seeds)))
        values = np.array([rho(rows) for rows in draws])
        values = values[~np.isnan(values)]
        if len(values):
            low, high = (float(v) for v in np.percentile(values, [2.5, 97.5]))
    predicted_mean, measured_mean = stack_p.mean(axis=0).ravel(), stack_e.mean(axis=0).ravel()
    return {
        "rho": None if np.isnan(everything) else everything,
        "low": low,
        "high": high,
        "permutation_p": None if np.isnan(everything) else permutation_p(predicted_mean, measured_mean, seed),
        "seeds": seeds,
        "pairs": int(stack_p[0].size),
    }


EXACT_UP_TO = 8  # pairs whose every order is tried (8! = 40,320); more: 20,000 seeded random orders


def permutation_p(x: np.ndarray, y: np.ndarray, seed: int = 0) -> float:
    """Two-sided permutation p-value of Spearman's rho between `x` and `y`: the share of orders of
    `y` whose rho is at least as far from 0 (exact up to EXACT_UP_TO pairs)."""
    ranks_x, ranks_y = stats.rankdata(x), stats.rankdata(y)
    observed = abs(np.corrcoef(ranks_x, ranks_y)[0, 1])
    if len(x) <= EXACT_UP_TO:
        orders = np.array(list(itertools.permutations(ranks_y)))
    else:
        rng = np.random.default_rng(seed)
        orders = np.array([rng.permutation(ranks_y) for _ in range(20_000)])
    centred_x = ranks_x - ranks_x.mean()
    centred = orders - orders.mean(axis=1, keepdims=True)
    values = np.abs(centred @ centred_x) / (np.linalg.norm(centred, axis=1) * np.linalg.norm(centred_x))
    return float(np.mean(values >= observed - 1e-12))


def firsts(
    values: dict[int, np.ndarray], training: list[str], targets: list[str]
) -> dict[str, dict[str, int]]:
    """Per target, how many seeds each training task ranked first in (largest value)."""
    counts = {target: dict.fromkeys(training, 0) for target in targets}
    for matrix in values.values():
        for t, target in enumerate(targets):
            counts[target][training[int(np.argmax(matrix[:, t]))]] += 1
    return counts


def verdict_of(check: dict) -> str:
    """What one estimator's Spearman against the effects says."""
    if check["rho"] is None:
        return "no test: every prediction or every effect is the same (ties), or no seed has every arm"
    p = check["permutation_p"]
    if p > 0.05:
        return f"no evidence: over {check['pairs']} pairs an order this close comes by chance"
    if check["low"] is None:
        return "no test of the seeds (one seed)"
    if check["low"] > 0:
        return "predicts the order of the effects"
    if check["high"] < 0:
        return "predicts the opposite order"
    return "no evidence either way: the seeds' interval holds 0"


ESTIMATOR_TITLES = {
    "lookahead": "one-step lookahead, target's loss",
    "scale_free": "one-step lookahead, target's r (scale-free)",
    "lookahead_k": "k-step lookahead, target's loss",
    "alignment": "gradient alignment (cosine)",
}


def estimator_table(result: dict) -> list[str]:
    """One row per estimator: its Spearman against the effects, p, interval, floor and cost."""
    lines = [
        "| estimator | Spearman's rho | seeds' 95% interval | permutation p | pairs inside the floor | CPU s per measurement | verdict |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for name, row in result["estimators"].items():
        check = row["spearman"]
        rho = "-" if check["rho"] is None else f"{check['rho']:+.2f}"
        interval = "-" if check["low"] is None else f"[{check['low']:+.2f}, {check['high']:+.2f}]"
        p = "-" if check["permutation_p"] is None else f"{check['permutation_p']:.3g}"
        inside = "-" if row["inside_floor"] is None else f"{100 * row['inside_floor']:.0f}%"
        spent = "-" if row["cost_seconds"] is None else f"{row['cost_seconds']:.2f}"
        lines.append(
            f"| {ESTIMATOR_TITLES.get(name, name)} | {rho} | {interval} | {p} | {inside} | {spent} | {verdict_of(check)} |"
        )
    return lines


def markdown(result: dict) -> str:
    check = result["spearman"]
    if check["rho"] is None:
        said = "no Spearman: every prediction or every effect is the same (ties), or no seed has every arm"
    else:
        interval = (
            f" [{check['low']:+.2f}, {check['high']:+.2f}] (95%, {result['resamples']} seed resamples)"
            if check["low"] is not None
            else " (one seed: no interval)"
        )
        p = check["permutation_p"]
        verdict = (
            f"no evidence: over {check['pairs']} pairs an order this close comes by chance"
            if p > 0.05
            else "one seed: no verdict"
            if check["low"] is None
            else "the affinity predicts the order of the effects"
            if check["low"] > 0
            else "the affinity predicts the opposite order"
            if check["high"] < 0
            else "no evidence either way: the seeds' interval holds 0"
        )
        said = (
            f"Spearman's rho {check['rho']:+.2f}{interval}, permutation p {p:.2g} over {check['pairs']} "
            f"pairs: {verdict}"
        )
    estimators = estimator_table(result) + [""] if result.get("estimators") else []
    lines = [
        f"Leave-one-task-out check of the affinity toward {', '.join(result['targets'])}: every run "
        f"{result['budget']}, seeds {', '.join(map(str, result['seeds']))}. Predicted: mean Z(task → target) / lr "
        "over the all-task run's measurements (held batches of the target's dev split); measured: the "
        "target's score with the task minus without it, points (accuracy %, r x 100), on "
        + ", ".join(f"{t}'s {s} split" for t, s in result["splits"].items())
        + ". Each the mean over seeds. First: the seeds in which the task's value was the largest "
        "toward the target (the affinity's without its floor; the effect: the task whose removal cost most).",
        "",
        said + ".",
        "",
        *estimators,
        "| training task | target | predicted (mean ± sd) | measured, points (mean ± sd) | first by affinity | first by effect |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in result["pairs"]:
        lines.append(
            f"| {row['task']} | {row['target']} | {_mean_sd(row['predicted'], '.3g')} | "
            f"{_mean_sd(row['measured'], '+.2f')} | {row['first_by_affinity']} of {len(result['seeds'])} | "
            f"{row['first_by_effect']} of {len(result['seeds'])} |"
        )
    if result.get("left_out"):
        lines += ["", left_out_line(result["left_out"])]
    return "\n".join(lines) + "\n"


def _mean_sd(values: list[float], spec: str) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], spec)
    return f"{format(statistics.fmean(values), spec)} ± {statistics.stdev(values):.2g}"


def check(kept: list[Member], training: list[str], targets: list[str], resamples: int) -> dict:
    effects, splits = measured(kept, training, targets)
    scored, logs = {}, affinity_logs(kept)
    for estimator in measured_estimators(logs) or ["lookahead"]:
        summaries = _summaries(logs, training, targets, estimator)
        predictions = {seed: summary.mean for seed, summary in summaries.items()}
        inside = [summary.within_noise() for summary in summaries.values() if summary.half_width is not None]
        scored[estimator] = {
            "spearman": spearman_over_seeds(predictions, effects, resamples),
            "cost_seconds": cost(logs, estimator),
            "inside_floor": float(np.mean(inside)) if inside else None,
            "predictions": predictions,
        }
    lookahead = scored.get("lookahead") or next(iter(scored.values()))
    predictions = lookahead["predictions"]
    seeds = sorted(set(predictions) & set(effects))
    by_affinity = firsts({s: predictions[s] for s in seeds}, training, targets)
    by_effect = firsts({s: effects[s] for s in seeds}, training, targets)
    pairs = [
        {
            "task": task,
            "target": target,
            "predicted": [float(predictions[s][k, t]) for s in seeds],
            "measured": [float(effects[s][k, t]) for s in seeds],
            "first_by_affinity": by_affinity[target][task],
            "first_by_effect": by_effect[target][task],
            "by_estimator": {
                name: [float(row["predictions"][s][k, t]) for s in seeds if s in row["predictions"]]
                for name, row in scored.items()
            },
        }
        for t, target in enumerate(targets)
        for k, task in enumerate(training)
    ]
    return {
        "splits": splits,
        "spearman": lookahead["spearman"],
        "estimators": {
            name: {key: value for key, value in row.items() if key != "predictions"}
            for name, row in scored.items()
        },
        "pairs": pairs,
    }


@register_study
class AffinityCheck(Study):
    name = "affinity-check"
    summary = "the affinity toward watching tasks against leaving each training task out"
    baseline = ALL
    config = AffinityCheckConfig
    runs = "arm"

    def training_keys(self, config: AffinityCheckConfig, train: list[str]) -> list[str]:
        """The configuration checked (a watching target, affinity_every=), every estimator asked for
        unless affinity_estimators= names some."""
        run_config = config_from_args(train)
        training = run_config.training_tasks
        if len(training) < 2:
            raise UserError(
                f"affinity-check leaves each training task out: {training[0]} trains alone already"
            )
        if not [name for name in run_config.tasks if name not in training]:
            raise UserError(
                "affinity-check needs a target: a watching task, e.g. tasks=...,experiments/tasks/stsb.toml stsb.train=false"
            )
        if not run_config.run.affinity_every:
            raise UserError(
                "affinity-check predicts from the affinity: give affinity_every=N (e.g. affinity_every=20)"
            )
        if not any(
            arg.partition("=")[0] in ("affinity_estimators", "run.affinity_estimators") for arg in train
        ):
            train = [*train, f"affinity_estimators={','.join(AFFINITY_ESTIMATORS)}"]
        return train

    def train(
        self, config: AffinityCheckConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        run_config = config_from_args(train)
        self.training = run_config.training_tasks
        self.targets = [name for name in run_config.tasks if name not in self.training]
        found = members_of(train, self.training, config.budget, out, seeds)
        train_study(found, self.fixed(config, train), out, launcher, "affinity-check")
        return found

    def described(
        self, config: AffinityCheckConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        return {"tasks": self.training, "targets": self.targets, "resamples": config.resamples}

    def judge(self, config: AffinityCheckConfig, train: list[str], kept: list[Member], out: Path) -> dict:
        """Every estimator's predicted effects against the measured ones (the runs' own test scores)."""
        return check(kept, self.training, self.targets, config.resamples)

    def markdown(self, result: dict) -> str:
        return markdown(result)
