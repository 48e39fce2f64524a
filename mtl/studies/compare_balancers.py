"""`just compare-balancers`: does a gradient balancer beat a tuned weighted sum, each given the same
tuning budget?

    just compare-balancers preset=cpu-small budget=steps:300 trials=4 seeds=3 transfer_tasks=MR,CR,TREC,STS14

Kurin et al. (2022, "In Defense of the Unitary Scalarization for Deep Multi-Task Learning") and
Xin et al. (2022, "Do Current Multi-Task Optimization Methods in Deep Learning Even Help?") found
that most balancers stop beating the weighted sum once the sum is tuned as carefully: here every
method gets the same budget.

- **Trials.** Each method of `methods=` (mtl's balancers by default) gets `trials=` configurations
  of its own space: the learning rate (`lr_factors=`, multiples of the configuration's lr) crossed
  with its own hyperparameters: for `sum` each training task's loss weight after the first
  (`weights=`), `gradnorm_alpha`, `famo_w_lr` x `famo_gamma`, `aligned_scale`, `nash_max_norm`; `uncertainty`,
  `pcgrad` and `upgrad` have the lr alone. The first trial is the method's defaults (the sum: equal
  weights), the others a seeded draw without repetition. Every trial trains `budget=` steps under
  schedule=mixed (every task every step: the same examples and forwards per step for every method)
  with the first seed, and is scored on dev by `score=` (its select= value by default).
- **Seeds.** Each method's best trial trains again with every other seed (the first seed's run is
  the trial itself), so every method has the same seeds and the same steps.
- **Verdicts.** Every run is transferred; each method is compared with the tuned sum by `just
  compare`'s studentized intervals (seeds, then test items), Holm over every method x transfer
  task: `beats the tuned sum`, `below the tuned sum`, or `no evidence`.
- **Parity.** Per method: the trials it had (fewer when its space is smaller: said), its seeds,
  and the seconds its runs trained (summary.json's train_seconds), tuning and seeds apart.

The runs are a resumable study (`just sweep`'s machinery, `launcher=slurm` too): run the same
command again to continue. Results: out/bench-balancers.md, .json and .html (each method's
difference from the tuned sum on every transfer task with its Holm interval, and what each method
was given), and W&B tables. The record files keep the command's first name, so that a folder of
before the rename resumes.
"""

from __future__ import annotations

import html
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtl.analysis.page import STYLE
from mtl.config import comma_list
from mtl.errors import UserError
from mtl.jobs.configs import BenchBalancersConfig
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.studies.arms import budget_keys, closing_lines, equal_compute, summary_seconds
from mtl.studies.compared import across_section, verdict_lines, verdicts_html
from mtl.studies.mixture import proxy_score
from mtl.studies.study import Study, register_study, table_of
from mtl.train.config.command_line import config_from_args
from mtl.train.config.resolve import resolve_settings
from mtl.train.optim.balancers import BALANCERS

BASELINE = "sum"
# Each method's own hyperparameters, around its authors' defaults (the first value of each).
OWN_SPACES: dict[str, dict[str, tuple]] = {
    "gradnorm": {"gradnorm_alpha": (1.5, 0.5, 1.0, 2.0, 3.0)},
    "famo": {"famo_w_lr": (0.025, 0.0125, 0.05), "famo_gamma": (0.01, 0.001)},
    "aligned": {"aligned_scale": ("min", "median", "rmse")},
    "nash": {"nash_max_norm": (1.0, 0.5, 2.0)},
}


def methods_of(text: str) -> list[str]:
    """The methods methods= names, `sum` (the baseline) first; one line for an unknown one."""
    methods = comma_list(text)
    if unknown := [m for m in methods if m not in BALANCERS]:
        raise UserError(f"methods={text}: {unknown[0]} is no balancer; choose among {', '.join(BALANCERS)}")
    if BASELINE not in methods or len(set(methods)) < 2:
        raise UserError(f"methods={text}: give sum (the tuned baseline) and at least one balancer to judge")
    return [BASELINE, *dict.fromkeys(m for m in methods if m != BASELINE)]


def numbers(text: str, key: str) -> list[float]:
    try:
        values = [float(v) for v in comma_list(text)]
    except ValueError:
        values = []
    if not values or any(not np.isfinite(v) or v <= 0 for v in values):
        raise UserError(f"{key}={text}: give positive numbers separated by commas (e.g. {key}=0.5,1,2)")
    return list(dict.fromkeys(values))


def space(method: str, tasks: list[str], config: BenchBalancersConfig, lr: float) -> list[dict[str, object]]:
    """Every configuration of `method` the tuning may try, its defaults first: the lr crossed with
    its own hyperparameters (the sum's: each task's weight after the first)."""
    factors = numbers(config.lr_factors, "lr_factors")
    factors = sorted(factors, key=lambda f: (f != 1.0, factors.index(f)))  # x1 (the default) first
    if method == BASELINE:
        weights = numbers(config.weights, "weights")
        weights = sorted(weights, key=lambda w: (w != 1.0, weights.index(w)))
        own = [
            {f"{task}.weight": w for task, w in zip(tasks[1:], chosen, strict=True)}
            for chosen in itertools.product(weights, repeat=len(tasks) - 1)
        ]
    else:
        grid = OWN_SPACES.get(method, {})
        own = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())] or [{}]
    return [{"lr": _rounded(lr * f), **keys} for f in factors for keys in own]


def _rounded(value: float) -> float:
    return float(f"{value:.6g}")


def drawn(candidates: list[dict], trials: int, seed: int, method: str) -> list[dict]:
    """The defaults, then trials - 1 more drawn without repetition (seeded by the method's name, so
    adding a method to methods= changes no other method's trials)."""
    rng = np.random.default_rng([seed, *method.encode()])
    rest = rng.permutation(len(candidates) - 1)[: max(trials - 1, 0)] + 1
    return [candidates[0], *(candidates[i] for i in rest)]


def base_of(train: list[str]) -> tuple[list[str], float]:
    """The training tasks every run balances and the configuration's lr (what lr_factors multiply)."""
    base = config_from_args(train)
    tasks = base.training_tasks
    if len(tasks) < 2:
        raise UserError(
            f"compare-balancers balances tasks: {tasks[0]} trains alone; give tasks= with two or more"
        )
    return tasks, resolve_settings(base, torch.device("cpu"), None).optim.lr


def trial_members(
    train: list[str],
    methods: list[str],
    config: BenchBalancersConfig,
    seed: int,
    out: Path,
    tasks: list[str],
    lr: float,
) -> dict[str, list[tuple[dict, Member]]]:
    """Each method's trials at the budget with the first seed: {method: [(trial keys, member)]}."""
    found: dict[str, list[tuple[dict, Member]]] = {}
    for method in methods:
        chosen = drawn(space(method, tasks, config, lr), config.trials, config.search_seed, method)
        for index, keys in enumerate(chosen, 1):
            name = f"{method}-trial{index}"
            member_keys = [*train, f"balancer={method}", *(f"{k}={v}" for k, v in keys.items())]
            member_keys += [*budget_keys(config.budget), f"seed={seed}", f"name={name}", f"group={out.name}"]
            member_keys.append(f"out={out / 'trials' / name}")
            config_from_args(member_keys)  # a key that does not fit a trial stops everything before work
            found.setdefault(method, []).append(
                (keys, Member(name, member_keys, out / "trials" / name, arm=name, seed=seed))
            )
    return found


def seed_members(best: dict[str, tuple[dict, Member]], seeds: list[int], out: Path) -> list[Member]:
    """Each method's best trial with every seed: the first seed's run is the trial itself."""
    found = []
    for method, (_, trial) in best.items():
        found.append(Member(f"{method}-seed{seeds[0]}", trial.overrides, trial.run_dir, method, seeds[0]))
        for seed in seeds[1:]:
            name = f"{method}-seed{seed}"
            keys = [k for k in trial.overrides if not k.startswith(("seed=", "name=", "out="))]
            keys += [f"seed={seed}", f"name={name}", f"out={out / 'arms' / name}"]
            found.append(Member(name, keys, out / "arms" / name, method, seed))
    return found


@register_study
class CompareBalancers(Study):
    name = "compare-balancers"
    summary = (
        "every balancer and the tuned weighted sum at the same tuning budget and seeds, judged on transfer"
    )
    baseline = BASELINE
    config = BenchBalancersConfig
    above, below = "beats the tuned sum", "below the tuned sum"
    noun = "method"
    record = "bench-balancers"  # the command's first name: folders of before the rename resume
    folder = "balancers"
    equal_compute = "every run trained the whole budget with stop=max_steps under schedule=mixed"

    def training_keys(self, config: BenchBalancersConfig, train: list[str]) -> list[str]:
        if taken := [
            a for a in train if a.partition("=")[0] in ("balancer", "schedule.balancer", "lr", "optim.lr")
        ]:
            raise UserError(
                f"{taken[0]}: compare-balancers sets it for each trial; choose methods= and lr_factors="
            )
        methods_of(config.methods)
        numbers(config.lr_factors, "lr_factors")
        numbers(config.weights, "weights")
        return [*train, "schedule=mixed"]

    def fixed(self, config: BenchBalancersConfig, train: list[str]) -> list[str]:
        return [*train, f"budget={config.budget}", f"search_seed={config.search_seed}"]

    def train(
        self, config: BenchBalancersConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        """Each method's trials with the first seed, then its best trial with every other seed."""
        methods = methods_of(config.methods)
        self.tasks, self.lr = base_of(train)
        self.trials = trial_members(train, methods, config, seeds[0], out, self.tasks, self.lr)
        every_trial = [member for found in self.trials.values() for _, member in found]
        train_study(every_trial, self.fixed(config, train), out / "trials", launcher, "bench-balancers")
        self.best: dict[str, tuple[dict, Member]] = {}
        self.scores: dict[str, float] = {}
        for method, found in self.trials.items():
            scored = [(proxy_score(member, config.score), keys, member) for keys, member in found]
            scored = [s for s in scored if s[0] is not None and equal_compute([s[2]], config.budget)[0]]
            if not scored:
                raise UserError(f"{method}: no trial finished the budget with a {config.score} score")
            score, keys, member = max(scored, key=lambda s: s[0])  # the first of equals: the defaults
            self.best[method], self.scores[method] = (keys, member), score
        final = seed_members(self.best, seeds, out)
        arms = [m for m in final if m.run_dir.parent.name == "arms"]
        train_study(arms, self.fixed(config, train), out / "arms", launcher, "compare-balancers")
        return final

    def described(
        self, config: BenchBalancersConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        methods = methods_of(config.methods)
        parity = {
            method: {
                "trials": len(self.trials[method]),
                "space": len(space(method, self.tasks, config, self.lr)),
                "tried": [keys for keys, _ in self.trials[method]],
                "best": self.best[method][0],
                "best_score": self.scores[method],
                "seeds": len([m for m in found if m.arm == method]),
                "tuning_seconds": sum(summary_seconds(member) for _, member in self.trials[method]),
                "seed_seconds": sum(summary_seconds(m) for m in found if m.arm == method),
            }
            for method in methods
        }
        return {
            "tasks": self.tasks,
            "methods": methods,
            "trials": config.trials,
            "score": config.score,
            "base_lr": self.lr,
            "parity": parity,
        }

    def markdown(self, result: dict) -> str:
        return markdown(result)

    def tables(self, result: dict) -> dict[str, tuple[list[str], list[list[Any]]]]:
        return super().tables(result) | {
            "parity": table_of(
                result["parity"],
                "method",
                ["trials", "space", "best_score", "seeds", "tuning_seconds", "seed_seconds"],
            )
        }

    def wandb_config(self, result: dict) -> dict:
        return {k: result[k] for k in ("tasks", "methods", "budget", "trials", "score", "seeds")}

    def page(self, result: dict) -> str:
        return page(result)


def markdown(result: dict) -> str:
    lines = [
        f"Balancers at equal tuning budget over {', '.join(result['tasks'])} (schedule=mixed, {result['budget']} "
        f"each, stop=max_steps): {result['trials']} trials per method on the first seed, scored on dev by "
        f"{result['score']}; each method's best trial then with seeds {', '.join(map(str, result['seeds']))}.",
        "",
        "| method | trials | space | best trial | dev score | seeds | tuning s | seeds s |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for method, row in result["parity"].items():
        keys = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in row["best"].items())
        lines.append(
            f"| {method} | {row['trials']} | {row['space']} | {keys} | {row['best_score']:.4f} | {row['seeds']} | "
            f"{row['tuning_seconds']:.1f} | {row['seed_seconds']:.1f} |"
        )
    if short := [m for m, row in result["parity"].items() if row["trials"] < result["trials"]]:
        lines += ["", f"Unequal budget: {', '.join(short)} had fewer trials than trials={result['trials']}: "
                      "the space holds no more (give more lr_factors= to widen it)."]  # fmt: skip
    lines += verdict_lines(result["verdicts"], "method", "the tuned sum")
    lines += closing_lines(result)
    return "\n".join(lines) + "\n" + across_section(result.get("across_tasks") or [])


def page(result: dict) -> str:
    parity = "".join(
        f"<tr><td>{html.escape(method)}</td><td>{row['trials']}</td><td>{row['space']}</td>"
        f"<td>{html.escape(', '.join(f'{k}={v}' for k, v in row['best'].items()))}</td>"
        f"<td>{row['best_score']:.4f}</td><td>{row['seeds']}</td><td>{row['tuning_seconds']:.1f}</td>"
        f"<td>{row['seed_seconds']:.1f}</td></tr>"
        for method, row in result["parity"].items()
    )
    drawn, verdicts = verdicts_html(result["verdicts"], result["methods"][1:], "method", "the tuned sum")
    intro = markdown(result).split("\n\n")[0]
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>mtl balancer benchmark</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Balancers against a tuned weighted sum: {html.escape(', '.join(result['tasks']))}</h1>",
        f"<p>{html.escape(intro)}</p>",
        *drawn,
        "<h2>What each method was given</h2>",
        '<div class="wide"><table><tr><th>method</th><th>trials</th><th>space</th><th>best trial</th>'
        f"<th>dev score</th><th>seeds</th><th>tuning s</th><th>seeds s</th></tr>{parity}</table></div>",
        *verdicts,
        "</body></html>",
    ]) + "\n"  # fmt: skip
