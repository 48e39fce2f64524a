"""`just versus-single`: does the mixture beat each of its tasks alone at the same compute?

    just versus-single preset=cpu-small seeds=3 budget=steps:600 transfer_tasks=MR,CR,TREC,STS14

Trains every training task of the configuration alone and the configuration itself (its
mixture), each at the same budget (`steps:N` optimizer steps; `examples:N` training examples,
turned into each run's steps by its examples per step; `minutes:N` of training steps) with each
of the seeds (`seeds=K` or `seed=1,2,3`), the same encoder and vectors, and the configuration's
watching tasks (train=false) and select= in every run. Equal compute is enforced: every run
trains with stop=max_steps (no early stopping), and a run that ended short of the budget is
said and left out, never compared. The runs are a sweep (`just sweep`'s machinery: finished
runs are kept, interrupted ones resumed), then each is transferred (`just transfer`), then
`just compare` gives the studentized interval (seeds, then test items) of every
difference; the mixture's comparisons with every single-task arm on every transfer task are one
family, Holm-corrected together. Per transfer task, a verdict: helps (above every single arm),
hurts (below one), no evidence. The best single arm is never picked on the test items and then
compared on them: "helps" must beat each. With one seed an arm's seed variance is unknown: the verdict says "(1 seed)".

`merge=average,task_arithmetic,ties` adds merge arms at the same total compute: each training
task alone at budget/n (`<task>-part`, from the seed's initialisation, so one seed's parts share
their start), merged per seed by `just merge-encoders` (its lam chosen on STS-B and SICK-R dev
pairs, never on test) into `merge-<method>`; each merge is compared with the mixture on every
transfer task, in the same Holm family as the mixture's comparisons with the single arms.

`merge=bagging` (with `bags=K`, 3) adds a bagging merge at the same total compute: per seed, K
mixtures (`mixture-bag<k>`) from the seed's initialisation, each at budget/K on its own seeded
63.2% of every training set (`<task>.subsample=`, the distinct share of a bootstrap sample),
averaged into `merge-bagging` and compared with the mixture as the other merges are.

`merge=soup` (with `soup_checkpoints=N`, 5) adds checkpoint soups at no compute beyond the
mixture's: the mixture keeps the models of its last N evaluations (`keep_evaluated=`), averaged
uniformly into `merge-soup` and greedily (Wortsman et al. 2022: each kept only where the average
does not lower the dev score on STS-B and SICK-R dev pairs) into `merge-greedy_soup`.

`merge=incremental` adds BOOM's incremental update at the same total compute: per seed, every
training task but the last mixed (`incremental-base`, (n-1)/n of the budget), then the last alone
starting from it (`incremental-added`, `start_from=`, 1/n), the two averaged into
`merge-incremental` (the added one's share chosen on dev pairs); versus.json's `incremental` says
what adding the task cost against retraining every task.

`regimes=sequential,two_stage` adds training-regime arms (`regime-<schedule>`): the mixture's
tasks and keys under `schedule=sequential` (task after task, each its share of the budget) or
`schedule=two_stage` (every task, then the first alone), at the same budget, each compared with
the mixture as the merge arms are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from mtl.analysis.significance import correct_study
from mtl.config import comma_list
from mtl.errors import UserError
from mtl.eval.merge import MergeConfig, merge_encoders
from mtl.formats.comparison import method_of

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.jobs.configs import VersusConfig as VersusConfig
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.runs import RunFolder, read_summary
from mtl.studies.arms import (
    budget_amount,
    closing_lines,
    equal_compute,
    left_out_line,
    summary_seconds,
)
from mtl.studies.compared import across_by_arm, across_section, transfer_and_compare
from mtl.studies.study import Study, register_study
from mtl.tasks import named_config
from mtl.train.config.command_line import config_from_args
from mtl.train.config.train_config import TrainConfig, legacy_keys
from mtl.train.data.scheduler import schedule_key_owners, trains_every_task
from mtl.train.optim.balancers import balancer_key_owners

MIXTURE = "mixture"
PART = "-part"  # a merge's ingredient: one task alone at budget / n, so the merge's total is the budget
MERGE = "merge-"  # a merge arm: merge-average, merge-task_arithmetic, merge-ties
# with_base: LM-Cocktail's merge (Xiao et al. 2023): the mixture with the encoder it started from,
# base + lam (mixture - base), lam on dev pairs; the others merge the single-task parts
WITH_BASE = "with_base"
# bagging (Breiman 1996; BOOM, arXiv 2602.05787): per seed, bags= mixtures from the seed's
# initialisation, each at budget / bags on its own draw of every training set, averaged
BAGGING = "bagging"
BAG = "-bag"  # a bagging merge's ingredient: mixture-bag<k>
# A bag's share of each training set: what a bootstrap sample of n holds of distinct examples on
# average (1 - 1/e); drawn without replacement, so no example counts twice in a bag
BAG_SHARE = 0.632
# soup: the mixture's last evaluated models (keep_evaluated=), averaged uniformly (merge-soup) and
# greedily (merge-greedy_soup: Wortsman et al. 2022), no training besides the mixture's (KaLM-Embedding's averaged checkpoints)
SOUP = "soup"
# incremental (BOOM's incremental update): per seed, every training task but the last mixed
# (incremental-base, (n-1)/n of the budget), then the last alone from it (incremental-added,
# start_from=, 1/n), the two merged back (an average, the added one's share lam chosen on dev pairs)
INCREMENTAL = "incremental"
INCREMENTAL_LAMS = "0.2,0.4,0.6,0.8"
MERGE_METHODS = ("average", "task_arithmetic", "ties", WITH_BASE, BAGGING, SOUP, INCREMENTAL)
WITH_BASE_LAMS = "0.2,0.4,0.6,0.8,1"  # a weight of the fine-tuned model in [0, 1], as LM-Cocktail's
REGIME = "regime-"  # a training-regime arm: the mixture's tasks under another schedule
REGIMES = ("sequential", "two_stage")


def regime_schedules(text: str) -> list[str]:
    """The regime arms regimes= asks for, checked before any training."""
    chosen = comma_list(text)
    if unknown := [r for r in chosen if r not in REGIMES]:
        raise UserError(f"regimes={text}: {unknown[0]} is no regime; choose among {', '.join(REGIMES)}")
    return list(dict.fromkeys(chosen))


def merge_methods(text: str) -> list[str]:
    """The merge arms merge= asks for, checked before any training."""
    methods = comma_list(text)
    if unknown := [m for m in methods if m not in MERGE_METHODS]:
        raise UserError(
            f"merge={text}: {unknown[0]} is no merge method; choose among {', '.join(MERGE_METHODS)}"
        )
    return list(dict.fromkeys(methods))


def budget_share(budget: str, parts: int) -> str:
    """One of `parts` equal shares of `budget` (steps and examples rounded down: the parts' total
    is at most the budget)."""
    kind, amount = budget_amount(budget)
    share = amount / parts if kind == "minutes" else math.floor(amount / parts)
    if share <= 0:
        raise UserError(f"budget={budget} cannot be shared by {parts} merge parts: give a larger budget")
    return f"{kind}:{share:g}"


def examples_per_step(config: TrainConfig) -> float:
    """The training examples one optimizer step of `config` takes, on average over its schedule."""
    training = {name: config.tasks[name] for name in config.training_tasks}
    kind = config.schedule.schedule
    if trains_every_task(kind):
        return float(sum(task.batch for task in training.values()))
    if kind == "blocks" or len(training) == 1:
        return sum(t.steps * t.batch for t in training.values()) / sum(t.steps for t in training.values())
    if kind == "round_robin":
        return sum(t.batch for t in training.values()) / len(training)
    raise UserError(
        f"budget=examples with schedule={kind}: its tasks are drawn by data size, so its examples per step "
        "are not fixed ahead; give budget=steps:N or minutes:N"
    )


def members(
    train: list[str],
    budget: str,
    out: Path,
    seeds: Sequence[int] = (1,),
    merge: bool = False,
    regimes: Sequence[str] = (),
    bags: int = 0,
    soup: int = 0,
    incremental: bool = False,
) -> list[Member]:
    """Each training task alone, then the mixture, each with every seed; every run with the budget
    made concrete and no early stopping; with `merge`, each task alone at budget / n too (the
    merges' parts); each of `regimes`, the mixture under that schedule; `bags` mixtures at budget /
    bags, each on its own draw of every training set (a bagging merge's parts); `soup`: the mixture
    keeps the models of its last that many evaluations (a soup's ingredients); `incremental`: every
    task but the last mixed for (n-1)/n of the budget, then the last alone from it for 1/n. One seed: the members are
    named by their arm alone (as before seeds were an axis, so such folders still resume);
    several: `<arm>-seed<N>`."""
    training = config_from_args(train).training_tasks
    if len(training) < 2:
        raise UserError(
            f"versus-single compares a mixture with its tasks alone: {training[0]} trains alone already"
        )
    found = subset_members(train, {task: [task] for task in training}, budget, out, seeds)
    kept = [f"keep_evaluated={soup}"] if soup else []  # its training unchanged: the bits are the same
    found += subset_members(train, {MIXTURE: training}, budget, out, seeds, extra=kept)
    if merge:
        parts = {f"{task}{PART}": [task] for task in training}
        found += subset_members(train, parts, budget_share(budget, len(training)), out, seeds)
    # the mixture's keys but its schedule's, the schedule's own and a balancer's (a regime trains
    # one task a step: nothing for a balancer to combine)
    replaced = {"schedule", "balancer", *schedule_key_owners(), *balancer_key_owners()}
    for regime in regimes:
        keys = [a for a in train if a.partition("=")[0].removeprefix("schedule.") not in replaced]
        arm = {f"{REGIME}{regime}": training}
        found += subset_members(keys, arm, budget, out, seeds, extra=[f"schedule={regime}"])
    if incremental:
        found += incremental_members(train, training, budget, out, seeds)
    for bag in range(1, bags + 1):
        drawn = [
            key
            for task in training
            for key in (f"{task}.subsample={BAG_SHARE}", f"{task}.subsample_seed={bag}")
        ]
        arm = {f"{MIXTURE}{BAG}{bag}": training}
        found += subset_members(train, arm, budget_share(budget, bags), out, seeds, extra=drawn)
    return found


def merged_arms(
    parts: list[Member], methods: list[str], out: Path, data: str | None, arm: str | None = None
) -> list[Member]:
    """Per seed, its parts merged by each method (`just merge-encoders`, lam on dev): encoder
    folders, named as the runs of an arm are (`merge-<method>`, or `merge-<arm>`: bagging's
    average). A merge already written is kept."""
    by_seed: dict[int | None, list[Member]] = {}
    for part in parts:
        by_seed.setdefault(part.seed, []).append(part)
    found = []
    for seed, members_of_seed in by_seed.items():
        seeded = members_of_seed[0].name != members_of_seed[0].arm  # several seeds: runs named -seed<k>
        for method in methods:
            name = f"{MERGE}{arm or method}" + (f"-seed{seed}" if seeded else "")
            folder = out / name
            if not (folder / "encoder.json").is_file():
                print(f"merge {', '.join(m.name for m in members_of_seed)} ({method})", flush=True)
                if method == WITH_BASE:  # one parent: task arithmetic from its start is its merge with it
                    config = MergeConfig(
                        out=str(folder), method="task_arithmetic", lam=WITH_BASE_LAMS, data=data
                    )
                else:
                    config = MergeConfig(out=str(folder), method=method, data=data)  # type: ignore[arg-type]
                merge_encoders(config, [str(m.run_dir) for m in members_of_seed])
            found.append(Member(name, [], folder, f"{MERGE}{arm or method}", seed))
    return found


def incremental_budgets(budget: str, tasks: int) -> tuple[str, str]:
    """(incremental-base's budget, incremental-added's): a share of budget / tasks for the added
    task, the rest for the others' mixture, their total the budget."""
    kind, amount = budget_amount(budget)
    added = budget_share(budget, tasks)
    return f"{kind}:{int(amount) - int(budget_amount(added)[1])}", added


def incremental_members(
    train: list[str], training: list[str], budget: str, out: Path, seeds: Sequence[int]
) -> list[Member]:
    """incremental-base (every training task but the last, budget minus a share) and
    incremental-added (the last alone, a share of budget / n, starting from its seed's base)."""
    base_budget, added = incremental_budgets(budget, len(training))
    found = subset_members(train, {f"{INCREMENTAL}-base": training[:-1]}, base_budget, out, seeds)
    for base in list(found):
        start = [f"start_from={base.run_dir}"]
        arm = {f"{INCREMENTAL}-added": training[-1:]}
        found += subset_members(train, arm, added, out, [base.seed], extra=start, seeded=len(seeds) > 1)
    return found


def incremental_arms(
    stages: list[Member], budget: str, tasks: int, out: Path, data: str | None
) -> tuple[list[Member], dict]:
    """Per seed, incremental-base and incremental-added (which started from it) merged back into
    merge-incremental (an average, the added one's share chosen on dev pairs), and what the added
    task cost: its steps against the whole budget's (retraining every task) and its seconds."""
    bases = {m.seed: m for m in stages if m.arm.endswith("-base")}
    added = {m.seed: m for m in stages if m.arm.endswith("-added")}
    base_budget, share = incremental_budgets(budget, tasks)
    for stage, wanted in ((list(bases.values()), base_budget), (list(added.values()), share)):
        if short := equal_compute(stage, wanted)[1]:  # a merge of a stage short of its share is not the arm
            raise UserError(f"incremental stages short of their share ({wanted}): {left_out_line(short)}")
    found = []
    for seed, base in bases.items():
        name = f"{MERGE}{INCREMENTAL}" + (f"-seed{seed}" if base.name != base.arm else "")
        folder = out / name
        if not (folder / "encoder.json").is_file():
            print(f"merge {base.name} and {added[seed].name} ({INCREMENTAL})", flush=True)
            config = MergeConfig(out=str(folder), method="average", lam=INCREMENTAL_LAMS, data=data)
            merge_encoders(config, [str(base.run_dir), str(added[seed].run_dir)])
        found.append(Member(name, [], folder, f"{MERGE}{INCREMENTAL}", seed))
    seconds = [summary_seconds(m) for m in added.values()]
    cost = {
        "added_task": config_added_task(added),
        "added_task_budget": share,
        "budget": budget,
        "share_of_retraining": budget_amount(share)[1]
        / budget_amount(budget)[1],  # its steps over every task's
        "added_train_seconds": statistics.mean(seconds) if seconds else None,
    }
    return found, cost


def config_added_task(added: dict[int, Member]) -> str | None:
    """The task incremental-added trained (the configuration's last training task)."""
    first = next(iter(added.values()), None)
    return config_from_args(first.overrides).training_tasks[0] if first else None


def soup_arms(mixtures: list[Member], out: Path, data: str | None) -> list[Member]:
    """Per seed, its mixture's evaluated models (keep_evaluated=) averaged uniformly (merge-soup)
    and greedily (merge-greedy_soup, on dev pairs), each an encoder folder. Kept once written."""
    found = []
    for mixture in mixtures:
        ingredients = [str(path) for path in RunFolder(mixture.run_dir).evaluated_checkpoints()]
        if len(ingredients) < 2:
            raise UserError(
                f"{mixture.name} kept {len(ingredients)} evaluated model(s): a soup needs two or more; give "
                "eval_every= smaller than the budget (the mixture is evaluated there)"
            )
        seeded = mixture.name != mixture.arm
        for arm, greedy in ((SOUP, False), (f"greedy_{SOUP}", True)):
            name = f"{MERGE}{arm}" + (f"-seed{mixture.seed}" if seeded else "")
            folder = out / name
            if not (folder / "encoder.json").is_file():
                print(f"merge {mixture.name}'s last {len(ingredients)} evaluations ({arm})", flush=True)
                config = MergeConfig(out=str(folder), method="average", greedy=greedy, data=data)
                merge_encoders(config, ingredients)
            found.append(Member(name, [], folder, f"{MERGE}{arm}", mixture.seed))
    return found


def subset_members(
    train: list[str],
    arms: dict[str, list[str]],
    budget: str,
    out: Path,
    seeds: Sequence[int],
    extra: Sequence[str] = (),
    seeded: bool | None = None,
) -> list[Member]:
    """A run of each arm's training tasks (the configuration's others left out, its watching
    tasks and their keys kept), each with every seed, at the budget made concrete, stop=max_steps;
    `extra`: keys of every arm's runs, given after the budget (a schedule that needs max_steps);
    `seeded`: whether names carry the seed (by default where there are several seeds)."""
    seeded = len(seeds) > 1 if seeded is None else seeded
    config = config_from_args(train)
    training = config.training_tasks
    watching = [name for name in config.tasks if name not in training]
    entries = _task_entries(train)
    legacy = legacy_keys()
    kind, amount = budget_amount(budget)
    found = []
    for arm, chosen in arms.items():
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
        keys.append("stop=max_steps")  # equal compute: no arm stops early (patience, min_lr)
        keys += extra
        for seed in seeds:
            name = f"{arm}-seed{seed}" if seeded else arm
            run_dir = out / name
            member_keys = [*keys, f"seed={seed}", f"name={name}", f"group={out.name}", f"out={run_dir}"]
            config_from_args(member_keys)  # a key that does not fit a member stops everything before work
            found.append(Member(name, member_keys, run_dir, arm, seed))
    return found


def _task_entries(train: list[str]) -> dict[str, str]:
    """task name -> how tasks= named it (a task file's path), from the arguments' tasks=."""
    given = [a.partition("=")[2] for a in train if a.startswith("tasks=")]
    entries = {}
    for text in given:
        for entry in comma_list(text.replace("+", ",")):
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


def verdicts(
    compared: dict,
    scores: dict[str, dict[str, float]],
    singles: list[str],
    spreads: dict | None = None,
    merges: Sequence[str] = (),
) -> list[dict]:
    """Per transfer task: each arm's score (mean over its seeds; `spreads`: each seed's), and the
    mixture against every single-task arm, Holm-corrected over all those comparisons of every task
    (the study's whole family). The mixture helps when it beats every single arm (an
    intersection-union test: no arm is picked on the test items it is then compared on), hurts
    when some single arm beats it; the row shows the comparison that decides (helps: the closest
    single arm; hurts: the one furthest ahead; no evidence: the best single arm it does not
    separate from). Each of `merges` (the merge and regime arms) against the mixture joins the
    family; its rows follow, one per arm and task (recorded under "merge", "against": the mixture)."""
    pairs: dict[str, dict[str, dict]] = {}
    for c in compared["comparisons"]:
        if MIXTURE in (c["first"], c["second"]) and c["task"] in scores:
            other = c["second"] if c["first"] == MIXTURE else c["first"]
            if other in singles or other in merges:
                pairs.setdefault(c["task"], {})[other] = dict(c)
    family = [pair for by_arm in pairs.values() for pair in by_arm.values()]
    restudied = correct_study(family)
    rows = []
    for task, by_run in scores.items():
        present = [s for s in singles if s in by_run]
        if MIXTURE not in by_run or not present or any(s not in pairs.get(task, {}) for s in present):
            continue
        oriented = {single: _oriented(pairs[task][single]) for single in present}
        helps = all(o["decided"] and o["difference"] > 0 for o in oriented.values())
        behind = [s for s, o in oriented.items() if o["decided"] and o["difference"] < 0]
        if helps:
            against, verdict = min(present, key=lambda s: oriented[s]["low"]), "helps"
        elif behind:
            against, verdict = min(behind, key=lambda s: oriented[s]["high"]), "hurts"
        else:
            open_ = [s for s, o in oriented.items() if not o["decided"]] or present
            against, verdict = max(open_, key=lambda s: by_run[s]), "no evidence"
        decisive = oriented[against]
        if verdict != "no evidence" and decisive["seeds"] < 2:
            verdict += " (1 seed)"
        rows.append(
            {
                "task": task,
                "scores": by_run,
                "seed_scores": {arm: (spreads or {}).get(arm, {}).get(task) for arm in by_run},
                "best_single": max(present, key=lambda s: by_run[s]),
                "against": against,
                "difference": decisive["difference"],
                "low": decisive["low"],
                "high": decisive["high"],
                "holm_p": decisive["holm_p"],
                "family": len(family) if restudied else decisive["family"],
                "seeds": decisive["seeds"],
                "verdict": verdict,
                "method": method_of(pairs[task][against]),  # older studies: the bootstrap's verdicts
            }  # fmt: skip
        )
    for merge in merges:
        rows += [
            merge_row(task, merge, pairs[task][merge], by_run, len(family) if restudied else None)
            for task, by_run in scores.items()
            if merge in pairs.get(task, {}) and merge in by_run
        ]
    return rows


def merge_row(task: str, merge: str, pair: dict, by_run: dict[str, float], family: int | None) -> dict:
    """A merge arm against the mixture on one task, oriented merge - mixture."""
    oriented = _oriented(pair)  # mixture - merge
    decided, seeds = oriented["decided"], oriented["seeds"]
    ahead = merge if -oriented["difference"] > 0 else MIXTURE
    verdict = f"{ahead} better" if decided else "no evidence"
    return {
        "task": task,
        "merge": merge,
        "scores": by_run,
        "against": MIXTURE,
        "difference": -oriented["difference"] + 0.0,
        "low": -oriented["high"] + 0.0,
        "high": -oriented["low"] + 0.0,
        "holm_p": oriented["holm_p"],
        "family": family or oriented["family"],
        "seeds": seeds,
        "verdict": verdict + (" (1 seed)" if decided and seeds < 2 else ""),
        "method": method_of(pair),
    }


def _oriented(pair: dict) -> dict:
    """A recorded comparison as mixture - single: its difference, interval, p and decision."""
    sign = 1 if pair["first"] == MIXTURE else -1
    low, high = sorted((sign * pair["low"] + 0.0, sign * pair["high"] + 0.0))  # (+ 0.0: no -0.00)
    if pair.get("holm_p") is None:  # a comparison of before the correction: its interval decides
        decided = low > 0 or high < 0
    else:
        decided = pair["holm_p"] <= 1 - pair.get("confidence", 0.95)
    return {
        "difference": sign * (pair["first_score"] - pair["second_score"]) + 0.0,
        "low": low,
        "high": high,
        "holm_p": pair.get("holm_p"),
        "family": pair.get("family", 1),
        "decided": decided,
        "seeds": min(pair.get("first_seeds", 1), pair.get("second_seeds", 1)),
    }


def _cell(row: dict, arm: str) -> str:
    values = row.get("seed_scores", {}).get(arm) or []
    mean = row["scores"].get(arm, float("nan"))
    if len(values) > 1:
        return f"{mean:.2f} ± {statistics.stdev(values):.2f}"
    return f"{mean:.2f}"


def markdown(rows: list[dict], runs: list[str], budget: str, confidence: float, seeds: int = 1) -> str:
    family = max((row.get("family") or 1 for row in rows), default=1)
    head = [
        "transfer task",
        *runs,
        "best alone",
        "against",
        "mixture - against",
        f"{100 * confidence:g}% interval (Holm)",
        "verdict",
    ]
    spread = " (mean ± sd over seeds)" if seeds > 1 else ""
    lines = [
        f"Equal compute ({budget}, every run the whole budget): each training task alone and the mixture, "
        f"{seeds} seed{'s' * (seeds > 1)} each{spread}; points: accuracy in %, Pearson r x 100 (STS: mean over "
        "subsets). The mixture is compared with every single-task arm: studentized intervals (seeds, then "
        f"test items), Holm-corrected over all {family} comparisons. helps: it beats every single arm; hurts: "
        "a single arm beats it; 'against' is the arm that decides (helps: the closest; hurts: the one "
        "furthest ahead; no evidence: the best arm it does not separate from). No evidence is not evidence "
        "of no effect.",
        "",
        f"| {' | '.join(head)} |",
        "|---|" + "---:|" * len(runs) + "---|---|---:|---:|---|",
    ]
    if seeds < 2:
        lines[0] += (
            " One seed per arm: the variance between training seeds is unknown, so a verdict says "
            "'(1 seed)' and speaks of these runs, not of the configurations: give seeds=3."
        )
    for row in rows:
        if "merge" in row:
            continue
        cells = [_cell(row, r) for r in runs]
        interval = f"[{row['low']:+.2f}, {row['high']:+.2f}]"
        against = row.get("against", row["best_single"])
        lines.append(
            f"| {row['task']} | {' | '.join(cells)} | {row['best_single']} | {against} | "
            f"{row['difference']:+.2f} | {interval} | {row['verdict']} |"
        )
    if merged := [row for row in rows if "merge" in row]:
        lines += [
            "",
            "Mix, train in another order, or merge, at the same total compute, each arm compared with the "
            f"mixture in the same Holm family of {family}: a merge arm merges its seed's single-task parts "
            "(each task alone at budget / n, from one initialisation; lam chosen on dev pairs), "
            "merge-with_base the mixture with the encoder it started from (LM-Cocktail's merge); "
            "merge-bagging the average of the seed's bags (mixtures at budget / bags, each on its own "
            f"{100 * BAG_SHARE:.1f}% of every training set, from the seed's initialisation); "
            "merge-soup the average of the mixture's last evaluated models, merge-greedy_soup those of them "
            "that do not lower the dev score (Wortsman et al.'s greedy soup); "
            "merge-incremental every task but the last mixed for (n-1)/n of the budget, the last alone from "
            "it for 1/n, the two averaged (the added one's share on dev pairs); "
            "regime-sequential trains the tasks one after the other (each its blocks' share of the budget), "
            "regime-two_stage every task for half the budget, then the first alone.",
            "",
            f"| transfer task | arm | arm's score | mixture | arm - mixture | {100 * confidence:g}% interval (Holm) | verdict |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| {row['task']} | {row['merge']} | {_cell(row, row['merge'])} | {_cell(row, MIXTURE)} | "
            f"{row['difference']:+.2f} | [{row['low']:+.2f}, {row['high']:+.2f}] | {row['verdict']} |"
            for row in merged
        ]
    return "\n".join(lines) + "\n"


@register_study
class VersusSingle(Study):
    name = "versus-single"
    summary = "each training task alone and the mixture at one budget, transferred, with verdicts"
    baseline = MIXTURE  # (its verdicts: the mixture against every single arm, every other arm against it)
    config = VersusConfig
    record = folder = "versus"
    runs = "arm"
    equal_compute = "every compared run trained the whole budget with stop=max_steps"

    def training_keys(self, config: VersusConfig, train: list[str]) -> list[str]:
        methods = merge_methods(config.merge)
        if INCREMENTAL in methods and budget_amount(config.budget)[0] == "minutes":
            raise UserError(
                f"merge={config.merge}: incremental divides the budget's steps between its two stages: give "
                f"budget=steps:N or examples:N, not {config.budget}"
            )
        if regime_schedules(config.regimes) and budget_amount(config.budget)[0] == "minutes":
            raise UserError(
                f"regimes={config.regimes} divide the run's steps between stages: give budget=steps:N or "
                f"examples:N, not {config.budget}"
            )
        return train

    def train(
        self, config: VersusConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        """Every arm with every seed, and the ingredients of the merges asked for (kept apart: each
        holds a share of the budget); the arms are what is judged."""
        methods = merge_methods(config.merge)
        self.of_parts = [
            method for method in methods if method not in (WITH_BASE, BAGGING, SOUP, INCREMENTAL)
        ]
        found = members(
            train,
            config.budget,
            out,
            seeds,
            merge=bool(self.of_parts),
            regimes=regime_schedules(config.regimes),
            bags=config.bags if BAGGING in methods else 0,
            soup=config.soup_checkpoints if SOUP in methods else 0,
            incremental=INCREMENTAL in methods,
        )
        # The budget is a fixed key of every run: a folder trained with another budget is refused,
        # not resumed under its old one. incremental-added starts from its base: trained after it.
        added = [m for m in found if m.arm == f"{INCREMENTAL}-added"]
        train_study([m for m in found if m not in added], self.fixed(config, train), out, launcher, "versus")
        if added:
            train_study(added, self.fixed(config, train), out, launcher, "versus")
        self.parts = [m for m in found if m.arm.endswith(PART)]
        self.bagged = [m for m in found if m.arm.startswith(f"{MIXTURE}{BAG}")]
        self.stages = [m for m in found if m.arm.startswith(f"{INCREMENTAL}-")]
        self.seeds = seeds
        return [m for m in found if m not in self.parts + self.bagged + self.stages]

    def merged(self, config: VersusConfig, train: list[str], kept: list[Member], out: Path) -> list[Member]:
        """The merge arms: of the single-task parts, the bags, the incremental stages, the
        mixture's evaluations (soups) and the mixture with its start."""
        methods, data, made = merge_methods(config.merge), config.transfer_data, []
        if self.parts:
            share = budget_share(config.budget, len(self.parts) // len(self.seeds))
            kept_parts, short_parts = equal_compute(self.parts, share)
            if short_parts:  # a merge of fewer parts, or of a part short of its share, is not the arm
                raise UserError(f"merge parts short of their share ({share}): {left_out_line(short_parts)}")
            made += merged_arms(kept_parts, self.of_parts, out, data)
        if self.bagged:
            share = budget_share(config.budget, config.bags)
            kept_bags, short_bags = equal_compute(self.bagged, share)
            if short_bags:  # an average of fewer bags, or of a bag short of its share, is not the arm
                raise UserError(f"bags short of their share ({share}): {left_out_line(short_bags)}")
            made += merged_arms(kept_bags, ["average"], out, data, arm=BAGGING)
        self.incremental = None
        if self.stages:
            tasks = len(config_from_args(train).training_tasks)
            merges, self.incremental = incremental_arms(self.stages, config.budget, tasks, out, data)
            made += merges
        mixtures = [m for m in kept if m.arm == MIXTURE]
        if SOUP in methods:
            made += soup_arms(mixtures, out, data)
        if WITH_BASE in methods:
            made += merged_arms(mixtures, [WITH_BASE], out, data)
        return made

    def described(
        self, config: VersusConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        arms = list(dict.fromkeys(m.arm for m in found))
        if missing := [arm for arm in arms if not any(m.arm == arm for m in kept)]:
            raise UserError(
                f"no run of {', '.join(missing)} used the whole budget: see the lines above, then resume its "
                "runs or choose another budget"
            )
        mixtures = [m for m in kept if m.arm == MIXTURE]
        return {
            "arms": arms,
            # task parts at budget / n, bags at budget / bags, the incremental arm's two stages
            "merge_parts": {m.name: str(m.run_dir) for m in self.parts + self.bagged + self.stages},
            "incremental": self.incremental,  # the added task's share of the compute of retraining every task
            "starved": sorted(
                {task for m in mixtures for task in _starved(m)}
            ),  # tasks the mixture never saw
        }

    def judge(self, config: VersusConfig, train: list[str], kept: list[Member], out: Path) -> dict:
        """The mixture against every single arm (helps only above each), every other arm against
        the mixture, Holm over them all."""
        compared, names, report = transfer_and_compare(
            kept, config.transfer_tasks, config.transfer_mode, config.transfer_data, out
        )
        for c in compared["comparisons"]:
            c["first"], c["second"] = names[c["first"]], names[c["second"]]
        spreads = {names[e]: by_task for e, by_task in compared.get("seed_scores", {}).items()}
        scores: dict[str, dict[str, float]] = {}
        for c in compared["comparisons"]:
            scores.setdefault(c["task"], {}).update(
                {c["first"]: c["first_score"], c["second"]: c["second_score"]}
            )
        arms = list(dict.fromkeys(m.arm for m in kept))
        others = [arm for arm in arms if arm.startswith((MERGE, REGIME))]  # each against the mixture
        singles = [arm for arm in arms if arm != MIXTURE and arm not in others]
        return {
            "report": report,
            "confidence": compared["config"]["confidence"],
            "verdicts": verdicts(compared, scores, singles, spreads, others),
            "across_tasks": across_by_arm(compared, names),
        }

    def markdown(self, result: dict) -> str:
        text = markdown(
            result["verdicts"], result["arms"], result["budget"], result["confidence"], len(result["seeds"])
        )
        text += across_section(result["across_tasks"])
        if incremental := result.get("incremental"):
            text += (
                f"\nmerge-incremental added {incremental['added_task']} to the others' mixture in "
                f"{incremental['added_task_budget']}: {100 * incremental['share_of_retraining']:.1f}% of the "
                f"compute of retraining every task ({result['budget']}).\n"
            )
        if starved := result["starved"]:
            text += (
                f"\nThe mixture saw no {', '.join(starved)} example within {result['budget']}: it is not a mixture "
                "(blocks longer than the budget?); give a larger budget or shorter <task>.steps.\n"
            )
        return text + "".join(f"{line}\n" for line in closing_lines(result))
