"""`just train-groups`: does a task grouping beat training all tasks together, and each alone?

    just train-groups preset=cpu-small tasks=nli,sick,sickshuf groups=from:runs/<run> networks=2 \
        seeds=3 budget=steps:600

Closes the loop of TAG (Fifty et al. 2021): `groups=from:<run>` takes the grouping TAG's network
selection makes from that run's affinity (`selection=released`: the authors' notebook, where a
task alone scores -1e6 and so is served alone only when nothing covers it; `selection=self`:
mtl's variant, a task alone scored by its own lookahead, which can prefer a task alone) (`affinity_every=`; mtl/analysis/multitask.py, with
`networks=` groups, overlapping where that serves tasks better), or `groups=` names it
(`nli+sick,sickshuf`: groups split by commas, a group's tasks joined by +). Each group trains as a
network of its own, beside all the tasks in one network and each task alone, every network at
the same budget with every seed (`just versus-single`'s machinery: a sweep, resumable, equal
compute per network, a run short of the budget left out). Each training task is then scored by
the network that serves it: in the grouping, the group TAG's selection serves it by (groups
given by name: the group with its best dev score, mean over seeds, never its test score; a task
with no test split, ClassifSQuAD's, is scored on dev and said so); alone,
its own network; all-in-one, the one network. Per task the grouping's test score is compared with
all-in-one's and with the task alone's: just compare's studentized test over seeds
(significance.from_seed_scores; the training tasks' test predictions are not kept per item, so
their variance is the seeds': the verdicts speak of this test set), Holm over every comparison;
with one seed a side nothing varies, and the row says "no test" rather than a verdict.

Compute: every network trains the budget, so the grouping costs as many budgets as it has
groups, all-in-one one, the singles one per task: the table says so beside the verdicts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.analysis.multitask import check_selection_size, released_tag_selection, summarize, tag_selection
from mtl.analysis.significance import NO_TEST, SignificanceConfig, correct, from_seed_scores
from mtl.config import comma_list
from mtl.console import say
from mtl.errors import UserError
from mtl.files.schemas import DamagedFile
from mtl.jobs.configs import TrainGroupsConfig as TrainGroupsConfig
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.runs import RunFolder, read_affinity, read_summary
from mtl.studies.arms import left_out_line
from mtl.studies.study import Study, register_study
from mtl.studies.versus import subset_members
from mtl.train.config.command_line import config_from_args

ALL = "all"
# selection=: TAG's network selection as the authors released it, or mtl's self-affinity variant
SELECTIONS = {
    "released": (released_tag_selection, "TAG's selection as released (a task never alone)"),
    "self": (tag_selection, "TAG's selection, self-affinity variant (a task alone: its own lookahead)"),
}
PREFERRED_METRICS = ("acc", "pearson", "spearman", "f1")


@dataclass
class Grouping:
    groups: list[list[str]]
    served: dict[str, list[str]] | None  # TAG's serving group per task; None: chosen on dev scores
    source: str


def grouping(config: TrainGroupsConfig, training: list[str]) -> Grouping:
    """The groups to train: TAG's selection from a run's affinity, or named ones, checked against
    the configuration's training tasks."""
    if config.groups.startswith("from:"):
        folder = Path(config.groups.removeprefix("from:")).expanduser()
        try:
            rows = read_affinity(RunFolder(folder).affinity)
        except DamagedFile as error:
            raise UserError(f"groups={config.groups}: {error}") from None
        if not rows:
            raise UserError(
                f"groups={config.groups}: {folder} has no affinity measurements: train it with affinity_every=N"
            )
        summary = summarize(rows)
        if sorted(summary.tasks) != sorted(training):
            raise UserError(
                f"groups={config.groups}: its affinity is over {', '.join(summary.tasks)}, this configuration "
                f"trains {', '.join(training)}: give the same tasks="
            )
        select, named = SELECTIONS[config.selection]
        networks = min(config.networks, len(training))
        sets = check_selection_size(
            len(training), networks, f"groups={config.groups} networks={config.networks}"
        )
        if sets > 100_000:
            say(f"TAG's selection: {sets:,} sets of groups to try (about {sets / 150_000:.0f} s)")
        chosen, served, _ = select(summary, networks)
        return Grouping(chosen, served, f"{named} with {config.networks} networks from {folder}")
    groups = [[t for t in part.split("+") if t] for part in comma_list(config.groups)]
    named = {t for group in groups for t in group}
    if unknown := sorted(named - set(training)):
        raise UserError(
            f"groups={config.groups}: {', '.join(unknown)} is not a training task (training: {', '.join(training)})"
        )
    if missing := [t for t in training if t not in named]:
        raise UserError(
            f"groups={config.groups}: {', '.join(missing)} is in no group: every training task needs one"
        )
    if any(len(set(g)) != len(g) for g in groups) or len({tuple(sorted(g)) for g in groups}) != len(groups):
        raise UserError(f"groups={config.groups}: a group names a task twice, or two groups are the same")
    return Grouping(groups, None, f"groups={config.groups}")


def arm_name(tasks: Sequence[str], training: list[str]) -> str:
    return ALL if sorted(tasks) == sorted(training) else "+".join(tasks)


def test_metric(summary: dict, task: str, split: str = "test") -> str | None:
    """The summary key of `task`'s score on `split` (its accuracy, else its correlation)."""
    keys = [k for k in summary if k.startswith(f"best/{task}/{split}/") and not k.endswith("/loss")]
    for metric in PREFERRED_METRICS:
        if f"best/{task}/{split}/{metric}" in keys:
            return f"best/{task}/{split}/{metric}"
    return sorted(keys)[0] if keys else None


def seed_scores(members: list[Member], arm: str, task: str, split: str = "test") -> list[float]:
    """Each seed's score of `task` on `split` from the arm's runs, in points (accuracy %, r x 100)."""
    found = []
    for member in members:
        if member.arm != arm:
            continue
        summary = read_summary(RunFolder(member.run_dir).summary) or {}
        key = test_metric(summary, task, split)
        if key is not None and isinstance(summary.get(key), int | float):
            found.append(100 * float(summary[key]))
    return found


def serving_groups(chosen: Grouping, kept: list[Member], training: list[str]) -> dict[str, str]:
    """Each task's serving arm in the grouping: TAG's, or (named groups) the group with its best
    mean dev score over seeds."""
    serving = {}
    for task in training:
        if chosen.served is not None:
            serving[task] = arm_name(chosen.served[task], training)
            continue
        holding = [arm_name(g, training) for g in chosen.groups if task in g]
        dev = {arm: seed_scores(kept, arm, task, "dev") for arm in holding}
        serving[task] = max(holding, key=lambda arm: statistics.fmean(dev[arm]) if dev[arm] else -math.inf)
    return serving


def verdicts(kept: list[Member], serving: dict[str, str], training: list[str]) -> list[dict]:
    """Per training task: the grouping's serving network against all-in-one and against the task
    alone, Welch over seeds, Holm over every comparison made."""
    settings = SignificanceConfig()
    compared, rows = [], []
    for task in training:
        split = "test" if seed_scores(kept, serving[task], task) else "dev"  # ClassifSQuAD has no test split
        ours = seed_scores(kept, serving[task], task, split)
        for other in (ALL, task):
            if other == serving[task]:
                rows.append(
                    {"task": task, "grouping": serving[task], "against": other, "same": True, "split": split}
                )
                continue
            theirs = seed_scores(kept, other, task, split)
            if len(ours) < 1 or len(theirs) < 1:
                continue
            comparison = from_seed_scores(task, (serving[task], ours), (other, theirs), settings)
            if comparison is not None:
                compared.append(comparison)
            rows.append({"task": task, "grouping": serving[task], "against": other, "same": False,
                         "comparison": comparison, "scores": (ours, theirs), "split": split})  # fmt: skip
    if compared:
        correct(compared)
    for row in rows:
        comparison = row.pop("comparison", None)
        if row["same"]:
            row["verdict"] = "the same network"
            continue
        if comparison is None:  # one seed a side, no per-item scores: nothing varies to test with
            ours, theirs = row["scores"]
            row.update(
                difference=statistics.fmean(ours) - statistics.fmean(theirs),
                verdict=f"{NO_TEST} (1 seed: train seeds=2 or more)",
            )
            continue
        decided = comparison.holm_p <= 1 - comparison.confidence
        verdict = ("helps" if comparison.difference > 0 else "hurts") if decided else "no evidence"
        row.update(
            difference=comparison.difference + 0.0, low=comparison.low + 0.0, high=comparison.high + 0.0,
            holm_p=comparison.holm_p, family=comparison.family, df=comparison.df, verdict=verdict,
        )  # fmt: skip
    return rows


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"


def markdown(result: dict) -> str:
    groups = " | ".join(" + ".join(g) for g in result["groups"])
    tasks = len(result["tasks"])
    lines = [
        f"Grouping {groups} ({result['source']}) against all {tasks} tasks in one network and each alone: "
        f"every network {result['budget']} (the grouping {len(result['groups'])} networks, all-in-one 1, "
        f"alone {tasks}), seeds {', '.join(map(str, result['seeds']))}. Each task scored on its test set by the "
        "network that serves it; points: accuracy in %, r x 100. Welch over seeds (the test items are not kept "
        f"per item: the verdicts speak of this test set), Holm over all {result['family']} comparisons.",
        "",
        "| task | served by | grouping | against | theirs | grouping - theirs | 95% interval (Holm) | verdict |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for row in result["verdicts"]:
        if row["same"]:
            lines.append(
                f"| {row['task']} | {row['grouping']} | | {row['against']} | | | | the same network |"
            )
            continue
        ours, theirs = row["scores"]
        task = row["task"] + (" (dev: no test split)" if row.get("split") == "dev" else "")
        if "low" not in row:  # no test: the difference alone, no interval
            lines.append(
                f"| {task} | {row['grouping']} | {_mean_sd(ours)} | {row['against']} | {_mean_sd(theirs)} | "
                f"{row['difference']:+.2f} | - | {row['verdict']} |"
            )
            continue
        lines.append(
            f"| {task} | {row['grouping']} | {_mean_sd(ours)} | {row['against']} | {_mean_sd(theirs)} | "
            f"{row['difference']:+.2f} | [{row['low']:+.2f}, {row['high']:+.2f}] | {row['verdict']} |"
        )
    if result.get("left_out"):
        lines += ["", left_out_line(result["left_out"])]
    return "\n".join(lines) + "\n"


@register_study
class TrainGroups(Study):
    name = "train-groups"
    summary = "a task grouping against all tasks in one network and each alone, with seeds and verdicts"
    baseline = ALL
    config = TrainGroupsConfig
    record = "groups"  # (groups.md and .json, as before it was a Study)
    equal_compute = "every network trained the whole budget with stop=max_steps"
    runs = "network"

    def training_keys(self, config: TrainGroupsConfig, train: list[str]) -> list[str]:
        if not config.groups:
            raise UserError(
                "groups= is missing: give groups=from:runs/<run> (TAG's selection) or groups=nli+sick,sickshuf"
            )
        return train

    def train(
        self, config: TrainGroupsConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        """Each group as a network, all tasks in one, each task alone: every one with every seed."""
        self.training = config_from_args(train).training_tasks
        if len(self.training) < 2:
            raise UserError(f"train-groups groups training tasks: {self.training[0]} trains alone already")
        self.chosen = grouping(config, self.training)
        arms = {task: [task] for task in self.training}
        arms |= {arm_name(g, self.training): g for g in self.chosen.groups if len(g) > 1}
        arms[ALL] = self.training
        found = subset_members(train, arms, config.budget, out, seeds)
        train_study(found, self.fixed(config, train), out, launcher, "train-groups")
        return found

    def described(
        self, config: TrainGroupsConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        return {
            "tasks": self.training,
            "groups": self.chosen.groups,
            "source": self.chosen.source,
            "networks": {"grouping": len(self.chosen.groups), "all": 1, "alone": len(self.training)},
        }

    def judge(self, config: TrainGroupsConfig, train: list[str], kept: list[Member], out: Path) -> dict:
        """Each task scored by the network that serves it, against all-in-one and alone (its test
        scores over seeds: the runs' own, no transfer)."""
        serving = serving_groups(self.chosen, kept, self.training)
        rows = verdicts(kept, serving, self.training)
        return {
            "serving": serving,
            "family": max((r.get("family", 0) for r in rows), default=0),
            "method": "studentized over seeds (Welch, guarded degrees of freedom), Holm over the study's "
            "comparisons; test items not kept per item; one seed a side: no test",
            "verdicts": rows,
        }

    def markdown(self, result: dict) -> str:
        return markdown(result)
