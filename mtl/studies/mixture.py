"""`just mixture-search`: the mixture of the training tasks that small proxy runs predict best
(RegMix: Liu et al. 2024, "RegMix: Data Mixture as Regression for Language Model Pre-training"),
trained at the target budget with seeds against the usual mixtures, with verdicts.

    just mixture-search preset=cpu-small tasks=nli,squad,qt trials=16 seeds=3 transfer_tasks=MR,TREC,STS14

1. `trials` mixtures are drawn as RegMix draws its proxies (its synthesize_mixture.py):
   Dirichlet(prior x strength), the prior each task's size**(1/`prior_temperature`), the strength
   one of 15 log-spaced from 0.1 (one task or two) to 5 (near the prior), shares under
   `min_share` set to 0 (the task sits that proxy out: `<task>.prob=0`). Each trains as a proxy
   run at `proxy_budget` (schedule=proportional with each task's `<task>.prob=`), one seed, and is
   scored by `score=` (select: the run's select= value, the first task's dev metric unless select=
   says; or any key of its summary.json; higher is better). With steps budgets the proxies are
   repetition-matched (`repetition_matched=true`): each task's training set is cut to
   proxy_budget / budget of it, so at any share a task repeats as many epochs in a proxy as at the
   target budget.
2. A regression from mixture to score (scikit-learn: ridge on the mixture and, when it predicts
   held-out proxies better, its pairwise products; RegMix fits LightGBM on hundreds of proxies,
   a dozen need fewer parameters) is checked by leave-one-out, and gated: its held-out rank
   correlation (Spearman) must reach `min_spearman`, be beaten by at most 5% of
   `skill_permutations` shuffles of the scores through the same fit (so pure noise passes at most
   5% of the time, whatever the number of proxies: 5 at least), and its held-out error beat a
   constant's (each proxy predicted by the others' mean). Below that the search says "no skill" and trains
   no predicted arm (unless `train_without_skill=true`): the proxies cannot rank mixtures at
   this budget, and an arm trained on an argmax of noise would be read as a finding.
3. The optimum is RegMix's: the mean of the `top_k` best-predicted of `candidates` mixtures drawn
   as the proxies are, with each share's 90% range over `bootstrap` resamples of the proxies
   refitted. It is trained at `budget` with `seeds`, beside the baselines: size-proportional
   sampling, temperature sampling (T = `temperature`) and the best proxy's mixture; every arm runs
   the whole budget (stop=max_steps).
4. Each arm is transferred and `just compare` gives the studentized interval (seeds, then items)
   of the predicted mixture against each baseline; the verdicts are Holm-corrected over all of
   them at once (baselines x transfer tasks).

A search begun before 2026-11-28 (its proxies' sweep.json without proxies=) resumes as it began:
uniform Dirichlet proxies and the fit's argmax; `proxies=uniform` starts such a search anew.

Everything trains as a sweep: an interrupted search resumes, a finished proxy or arm is never
trained again. It writes mixture-search.md and .json, logs its tables to W&B in the search's
group, and its page (mtl/studies/mixture_page.py: predicted against observed, the mixtures'
weights, the verdicts). It is a `Study` (mtl/studies/study.py) whose proxies and fit come before its
arms, and whose verdicts are the predicted mixture's against each usual one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtl.errors import UserError
from mtl.files.locks import FolderLock

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.jobs.configs import MixtureSearchConfig as MixtureSearchConfig
from mtl.jobs.launchers import Launcher, check_outcomes
from mtl.jobs.member import Member
from mtl.jobs.sweep import Sweep, check_same_fixed_keys, train_members
from mtl.runs import RunFolder, read_summary
from mtl.studies.arms import (
    arm_members,
    budget_amount,
    budget_keys,
    closing_lines,
    short_of_budget,
)
from mtl.studies.compared import across_by_arm, across_section, against, transfer_and_compare
from mtl.studies.mixture_page import page
from mtl.studies.study import Study, register_study
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs
from mtl.train.data.training_data import prepare

PREDICTED = "predicted"


def training_tasks(train: list[str]) -> list[str]:
    tasks = config_from_args(train).training_tasks
    if len(tasks) < 2:
        raise UserError(f"mixture-search mixes training tasks: {tasks[0]} trains alone; give tasks=a,b,...")
    return tasks


# RegMix's strengths (synthesize_mixture.py: MIN_STRENGH 0.1, MAX_STRENGH 5, 15 log-spaced): a
# small one draws sparse mixtures (one task or two), a large one mixtures near the prior.
STRENGTHS = np.logspace(np.log10(0.1), np.log10(5.0), 15)


def draw_regmix(count: int, prior: np.ndarray, min_share: float, seed: int, salt: int) -> np.ndarray:
    """(count, tasks) distinct mixtures drawn as RegMix draws its proxies: Dirichlet(prior x
    strength), a strength from STRENGTHS per draw; shares under `min_share` set to 0 (the task sits
    that mixture out), the rest renormalised and rounded to 4 places. A draw whose every share
    underflows is one task alone, drawn by the prior (the Dirichlet's limit as strength -> 0)."""
    rng = np.random.default_rng([seed, salt])
    pool = max(count * 20, count)  # RegMix draws 100x and keeps distinct ones; 20x is plenty here
    strengths = rng.choice(STRENGTHS, size=pool)
    drawn = rng.gamma(np.outer(strengths, prior))
    totals = drawn.sum(axis=1)
    for row in np.flatnonzero(totals <= 0):
        drawn[row] = np.eye(len(prior))[rng.choice(len(prior), p=prior)]
    drawn /= drawn.sum(axis=1, keepdims=True)
    drawn = np.where(drawn < min_share, 0.0, drawn)
    drawn = np.round(drawn / drawn.sum(axis=1, keepdims=True), 4)
    drawn /= drawn.sum(axis=1, keepdims=True)
    _, first = np.unique(drawn, axis=0, return_index=True)
    distinct = drawn[np.sort(first)]
    if len(distinct) >= count:
        return distinct[:count]
    return np.concatenate([distinct, drawn[: count - len(distinct)]])


def draw_mixtures(count: int, tasks: int, alpha: float, seed: int) -> np.ndarray:
    """proxies=uniform (searches before 2026-11-28): (count, tasks) Dirichlet(alpha) draws, each
    share at least 0.005, rounded so a run's keys stay readable, then normalised."""
    rng = np.random.default_rng([seed, 0x5EA12C])
    drawn = np.maximum(rng.dirichlet(np.full(tasks, alpha), size=count), 0.005)
    drawn = np.round(drawn / drawn.sum(axis=1, keepdims=True), 4)
    return drawn / drawn.sum(axis=1, keepdims=True)


def mixture_keys(tasks: list[str], mixture: np.ndarray) -> list[str]:
    """The keys of a mixture: each task's prob= but the last drawn one's, which takes what is left
    (so rounding never makes the shares add up to other than 1); a task with share 0 is never drawn."""
    last = max(i for i, share in enumerate(mixture) if share > 0)
    shares = [(task, share) for i, (task, share) in enumerate(zip(tasks, mixture, strict=True)) if i != last]
    return ["schedule=proportional", *(f"{task}.prob={share:.4f}" for task, share in shares)]


def repetition_keys(tasks: list[str], sizes: np.ndarray, proxy_budget: str, budget: str) -> list[str]:
    """Each task's training set cut to proxy_budget / budget of it (`max_train=`, its first
    examples): at any share a task then repeats as many epochs in a proxy as at the target budget
    (a small task a proxy sees under once would be seen many times by the arm trained on its
    mixture, and the proxies would rank mixtures for a regime the arm is not in)."""
    fraction = budget_amount(proxy_budget)[1] / budget_amount(budget)[1]
    if fraction >= 1:
        return []
    return [
        f"{task}.max_train={max(1, math.ceil(size * fraction))}"
        for task, size in zip(tasks, sizes, strict=True)
    ]


def proxies(
    train: list[str], tasks: list[str], mixtures: np.ndarray, budget: str, out: Path, matched: list[str]
) -> list[Member]:
    found = []
    for number, mixture in enumerate(mixtures, start=1):
        name = f"proxy{number:02d}"
        keys = [*train, *matched, *mixture_keys(tasks, mixture), *budget_keys(budget), "seed=1"]
        keys += [f"name={name}", f"group={out.name}", f"out={out / 'proxies' / name}"]
        found.append(Member(name, keys, out / "proxies" / name, seed=1))
    return found


def proxy_score(member: Member, score: str) -> float | None:
    summary = read_summary(RunFolder(member.run_dir).summary)
    if not isinstance(summary, dict):
        return None
    if score == "select":
        value = (summary.get("selection") or {}).get("value")
    else:
        value = summary.get(score)
        if value is None and score not in summary:
            known = ", ".join(sorted(k for k in summary if k.startswith("best/"))[:8])
            raise UserError(f"score={score}: {member.run_dir}/summary.json has no such key; e.g. {known}")
    return float(value) if isinstance(value, int | float) else None


@dataclass
class Fit:
    model: Any
    kind: str  # linear or quadratic
    loo_mae: float  # mean absolute error of each proxy's score predicted without it
    loo_predicted: np.ndarray  # (M,)

    def predict(self, mixtures: np.ndarray) -> np.ndarray:
        return self.model.predict(mixtures)


def _model(kind: str) -> Any:
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    ridge = RidgeCV(alphas=np.logspace(-4, 2, 13))
    return ridge if kind == "linear" else make_pipeline(PolynomialFeatures(2, include_bias=False), ridge)


def fit(mixtures: np.ndarray, scores: np.ndarray) -> Fit:
    """Ridge on the mixture, or on it and its pairwise products: whichever predicts held-out
    proxies better (leave-one-out), refitted on all of them."""
    from sklearn.model_selection import LeaveOneOut, cross_val_predict

    best = None
    for kind in ("linear", "quadratic"):
        predicted = cross_val_predict(_model(kind), mixtures, scores, cv=LeaveOneOut())
        error = float(np.mean(np.abs(predicted - scores)))
        if best is None or error < best.loo_mae:
            best = Fit(_model(kind).fit(mixtures, scores), kind, error, predicted)
    assert best is not None
    return best


GATE_LEVEL = 0.05  # the skill gate's false-pass rate on proxies whose scores carry no signal
# 4 proxies have 24 orderings: a permutation p of 1/24 at best, reached only by the one ordering;
# with ties among the orderings' Spearman, never. From 5 (120 orderings) the gate can pass honestly.
FEWEST_PROXIES = 5


@dataclass
class Skill:
    """Whether the proxies can rank mixtures: the fit's held-out predictions against the scores."""

    spearman: float  # rank correlation of each proxy's held-out prediction with its score
    p: float  # its two-sided p (no rank correlation; the textbook reference, not the gate's)
    fit_mae: float  # the fit's leave-one-out mean absolute error
    constant_mae: float  # the same for predicting each proxy by the mean of the others
    permutation_p: float | None = None  # the gate's: the same fit on shuffled scores (`gated_skill`)
    permutations: int = 0

    def enough(self, min_spearman: float) -> bool:
        passes = self.spearman >= min_spearman and self.fit_mae < self.constant_mae
        return passes and (self.permutation_p is None or self.permutation_p <= GATE_LEVEL)

    def said(self) -> str:
        reference = (
            f"; permutation p {self.permutation_p:.3f} over {self.permutations} shuffles of the scores "
            f"(the gate passes pure noise at most {100 * GATE_LEVEL:g}% of the time)"
            if self.permutation_p is not None
            else ""
        )
        return (
            f"leave-one-out Spearman {self.spearman:+.2f} (p {self.p:.2f}); held-out error {self.fit_mae:.4f} "
            f"against {self.constant_mae:.4f} for a constant (the other proxies' mean){reference}"
        )


def gated_skill(mixtures: np.ndarray, scores: np.ndarray, fitted: Fit, permutations: int, seed: int) -> Skill:
    """`skill`, with the permutation p the gate needs: the leave-one-out Spearman of the whole
    procedure (the fit choosing linear or quadratic by its own held-out error, then ranking) on
    `permutations` shuffles of the scores among the proxies. Spearman's own p assumes one fixed
    predictor; choosing the better of two fits on the same proxies inflates it, so the gate passed
    pure noise 13-14% of the time with 8 proxies and 5.7% with 16 (issue 100). Shuffled scores are
    noise by construction, so p <= GATE_LEVEL passes noise at most GATE_LEVEL of the time."""
    found = skill(fitted, scores)
    rng = np.random.default_rng([seed, 0x5C0E])
    at_least = 0
    for _ in range(permutations):
        shuffled = rng.permutation(scores)
        at_least += skill(fit(mixtures, shuffled), shuffled).spearman >= found.spearman
    return dataclasses.replace(
        found, permutation_p=(1 + at_least) / (1 + permutations), permutations=permutations
    )


def skill(fitted: Fit, scores: np.ndarray) -> Skill:
    from scipy import stats

    count = len(scores)
    constant = np.abs(scores - (scores.sum() - scores) / (count - 1))
    if np.ptp(fitted.loo_predicted) == 0 or np.ptp(scores) == 0:
        rho, p = 0.0, 1.0  # a flat prediction ranks nothing
    else:
        rho, p = stats.spearmanr(fitted.loo_predicted, scores)
    return Skill(float(rho), float(p), fitted.loo_mae, float(constant.mean()))


def optimum(model: Any, candidates: np.ndarray, top_k: int) -> np.ndarray:
    """RegMix's optimum: the mean of the `top_k` candidates predicted best (the argmax of a fitted
    surface sits on a vertex the proxies never reached; the mean stays among them)."""
    predicted = model.predict(candidates)
    best = np.argsort(-predicted, kind="stable")[:top_k]
    return candidates[best].mean(axis=0)


def optimum_spread(
    mixtures: np.ndarray,
    scores: np.ndarray,
    kind: str,
    candidates: np.ndarray,
    top_k: int,
    resamples: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The 5th and 95th percentiles of each task's optimal share over `resamples` bootstrap
    resamples of the proxies, each refitted (the fit's kind kept); None with no resamples."""
    if resamples == 0:
        return None
    rng = np.random.default_rng([seed, 0xB007])
    subset = candidates[: min(len(candidates), 20_000)]  # enough for a top-k mean; 200 refits stay seconds
    optima = []
    for _ in range(resamples):
        drawn = rng.integers(0, len(scores), size=len(scores))
        if len(np.unique(drawn)) < 3:
            continue
        optima.append(optimum(_model(kind).fit(mixtures[drawn], scores[drawn]), subset, top_k))
    if not optima:  # every resample of so few proxies held fewer than 3 of them
        return None
    low, high = np.percentile(np.array(optima), [5, 95], axis=0)
    return low, high


def arms(
    train: list[str], tasks: list[str], predicted: np.ndarray | None, best_proxy: np.ndarray, config: MixtureSearchConfig,
    seeds: list[int], out: Path,
) -> list[Member]:  # fmt: skip
    """The predicted mixture (None: not trained) and the baselines, each with every seed, at the
    target budget."""
    schedules = {
        **({PREDICTED: mixture_keys(tasks, predicted)} if predicted is not None else {}),
        "best-proxy": mixture_keys(tasks, best_proxy),
        "proportional": ["schedule=proportional"],
        "temperature": ["schedule=temperature", f"temperature={config.temperature:g}"],
    }
    return arm_members(schedules, train, config.budget, seeds, out)


def _train(sweep: Sweep, members: list[Member]) -> None:
    for member in members:  # a wrong key stops everything before work
        config_from_args(member.overrides)
    with FolderLock(sweep.out, "mixture-search folder", "out"):
        check_same_fixed_keys(sweep, members)
        outcomes = train_members(sweep, members)
    check_outcomes(outcomes)


def verdict_rows(compared: dict, names: dict[str, str], baselines: list[str]) -> list[dict]:
    """Per transfer task and baseline: the predicted mixture's difference, its interval and verdict,
    Holm-corrected over every one of these comparisons (baselines x transfer tasks: the search's
    whole family)."""
    rows = []
    for row in against(compared, names, PREDICTED, baselines):
        decided = row["decided"]
        verdict = ("helps" if row["difference"] > 0 else "hurts") if decided else "no evidence"
        if decided and row["seeds"] < 2:
            verdict += " (1 seed)"
        rows.append({"task": row["task"], "baseline": row["other"], "difference": row["difference"],
                     "low": row["low"], "high": row["high"], "holm_p": row["holm_p"], "family": row["family"],
                     "verdict": verdict, "method": row["method"]})  # fmt: skip
    return rows


def markdown(result: dict) -> str:
    tasks = result["tasks"]
    fitted, gate = result["fit"], result.get("skill")
    lines = [
        f"Mixture search over {', '.join(tasks)}: {len(result['proxies'])} proxies at {result['proxy_budget']} "
        f"({result.get('proxies_drawn', 'uniform Dirichlet')}), scored by {result['score']}; regression: "
        f"{fitted['kind']} ridge, held-out error {fitted['loo_mae']:.4f} (leave-one-out mean absolute error; "
        f"the scores' sd {fitted['score_sd']:.4f}).",
    ]
    if result.get("repetition_matched"):
        lines.append(f"Repetition-matched proxies: {', '.join(result['repetition_matched'])}.")
    if gate:
        permuted = f", permutation p <= {GATE_LEVEL:g}" if gate.get("permutation_p") is not None else ""
        lines += ["", f"Skill: {gate['said']}: {'enough' if gate['enough'] else 'NO SKILL'}"
                  f" (the gate: Spearman >= {gate['min_spearman']:g}{permuted} and below the constant's error)."]  # fmt: skip
        if not gate["enough"]:
            lines.append(
                "No skill: the proxies cannot rank mixtures at this budget"
                + (", so no predicted mixture was trained (train_without_skill=true trains it anyway; more "
                   "trials= or a larger proxy_budget= may find a signal)." if PREDICTED not in result["mixtures"]
                   else "; the predicted mixture was trained because train_without_skill=true.")
            )  # fmt: skip
    spread = result.get("optimum_spread")
    lines += [
        "",
        "| mixture | " + " | ".join(tasks) + " |",
        "|---|" + "---:|" * len(tasks),
        *(
            f"| {name} | " + " | ".join(f"{share:.3f}" for share in mixture) + " |"
            for name, mixture in result["mixtures"].items()
        ),
    ]
    if spread and PREDICTED in result["mixtures"]:
        lines.append(
            f"| predicted, 90% over {spread['resamples']} proxy resamples | "
            + " | ".join(
                f"{low:.3f}-{high:.3f}" for low, high in zip(spread["low"], spread["high"], strict=True)
            )
            + " |"
        )
    if result["verdicts"]:
        family = max(r.get("family", 1) for r in result["verdicts"])
        lines += [
            "",
            f"At {result['budget']} with seeds {', '.join(map(str, result['seeds']))}: the predicted mixture against "
            f"each baseline, studentized intervals (seeds, then test items), Holm over all {family} comparisons "
            "(baselines x transfer tasks).",
            "",
            "| transfer task | baseline | predicted - baseline | 95% interval (Holm) | verdict |",
            "|---|---|---:|---:|---|",
            *(
                f"| {r['task']} | {r['baseline']} | {r['difference']:+.2f} | [{r['low']:+.2f}, {r['high']:+.2f}] | {r['verdict']} |"
                for r in result["verdicts"]
            ),
        ]
    lines += closing_lines(result)
    return "\n".join(lines) + "\n" + across_section(result.get("across_tasks") or [])


def training_sizes(train: list[str], tasks: list[str]) -> np.ndarray:
    """Each training task's number of training examples (what size-driven schedules sample by)."""
    data = prepare(resolve_inputs(config_from_args([*train, "max_steps=1"])), progress=False)
    return np.array([len(data.examples[task]["train"]) for task in tasks], dtype=float)


def by_size(sizes: np.ndarray, power: float) -> np.ndarray:
    """The shares of sampling by size**power (proportional: 1; temperature T: 1 / T)."""
    weights = np.exp(power * np.log(sizes) - (power * np.log(sizes)).max())
    return weights / weights.sum()


def legacy_proxies(out: Path) -> bool:
    """Whether `out` holds a search begun before RegMix's proxies (its proxies' sweep.json has no
    proxies= among its fixed keys): it resumes with the draws and the argmax it began with."""
    path = out / "proxies" / "sweep.json"
    if not path.is_file():
        return False
    try:
        fixed = json.loads(path.read_text(encoding="utf-8"))["fixed"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return False  # check_same_fixed_keys names the damage
    return isinstance(fixed, list) and not any(str(k).startswith("proxies=") for k in fixed)


@register_study
class MixtureSearch(Study):
    name = "mixture-search"
    summary = "proxy runs of sampled task mixtures, a regression to the best one, then it against the usual mixtures"
    baseline = PREDICTED  # (its verdicts: the predicted mixture against each usual one, BASELINES)
    config = MixtureSearchConfig
    folder = "mixture"
    equal_compute = "every compared arm trained the whole budget with stop=max_steps"

    def training_keys(self, config: MixtureSearchConfig, train: list[str]) -> list[str]:
        if taken := [
            a
            for a in train
            if a.partition("=")[0] in ("schedule", "stop") or a.partition("=")[0].endswith(".prob")
        ]:
            raise UserError(
                f"{taken[0]}: mixture-search sets it for each run (give budgets with proxy_budget= and budget=)"
            )
        budget_amount(config.proxy_budget)
        if (
            budget_amount(config.proxy_budget)[0] == "examples"
            or budget_amount(config.budget)[0] == "examples"
        ):
            raise UserError("mixture-search samples tasks by probability: give steps:N or minutes:N budgets")
        if config.trials < FEWEST_PROXIES:
            raise UserError(
                f"trials={config.trials}: the skill gate needs {FEWEST_PROXIES} proxies at least (with fewer, no "
                f"ordering of their scores reaches a permutation p of {GATE_LEVEL:g}); 16 or more give it power"
            )
        return train

    def train(
        self, config: MixtureSearchConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        """The proxies trained and fitted, then (where the fit has skill, or train_without_skill=)
        the predicted mixture and the usual ones at the target budget with every seed."""
        tasks = training_tasks(train)
        sizes = training_sizes(train, tasks)
        legacy = legacy_proxies(out)
        fixed = [*train, f"proxy_budget={config.proxy_budget}", f"search_seed={config.search_seed}"]
        matched: list[str] = []
        if legacy or config.proxies == "uniform":
            # (a new uniform search says so: only a folder without proxies= is one begun before them)
            fixed += [f"alpha={config.alpha:g}"] + ([] if legacy else ["proxies=uniform"])
            mixtures = draw_mixtures(config.trials, len(tasks), config.alpha, config.search_seed)
            candidates = np.random.default_rng([config.search_seed, 0xCA11]).dirichlet(
                np.full(len(tasks), config.alpha), size=config.candidates
            )
            drawn = f"Dirichlet({config.alpha:g}), every share >= 0.005"
        else:
            prior = by_size(sizes, 1.0 / config.prior_temperature)
            fixed += [
                "proxies=regmix",
                f"prior_temperature={config.prior_temperature:g}",
                f"min_share={config.min_share:g}",
            ]
            mixtures = draw_regmix(config.trials, prior, config.min_share, config.search_seed, 0x5EA12C)
            candidates = draw_regmix(config.candidates, prior, config.min_share, config.search_seed, 0xCA11)
            drawn = (
                f"RegMix: Dirichlet(prior x strength 0.1-5), prior size^(1/{config.prior_temperature:g}), "
                f"shares under {config.min_share:g} set to 0"
            )
            both_steps = budget_amount(config.proxy_budget)[0] == budget_amount(config.budget)[0] == "steps"
            if config.repetition_matched and both_steps:
                matched = repetition_keys(tasks, sizes, config.proxy_budget, config.budget)
                fixed.append("repetition_matched=true")
            elif config.repetition_matched:
                print(
                    "repetition_matched: minutes budgets give no steps ratio; the proxies use whole training sets"
                )
        found = proxies(train, tasks, mixtures, config.proxy_budget, out, matched)
        _train(Sweep(out.name, {}, fixed, out / "proxies", launcher), found)
        scores = [proxy_score(member, config.score) for member in found]
        kept = [
            i
            for i, s in enumerate(scores)
            if s is not None and short_of_budget(found[i], config.proxy_budget) is None
        ]
        if len(kept) < FEWEST_PROXIES:
            raise UserError(
                f"{len(kept)} proxies finished with a {config.score} score: the skill gate needs "
                f"{FEWEST_PROXIES} at least (fewer cannot pass a permutation test at {100 * GATE_LEVEL:g}%)"
            )
        observed = np.array([scores[i] for i in kept])
        fitted = fit(mixtures[kept], observed)
        if legacy:  # a search begun before 2026-11-28 resumes with the gate it had
            gate = skill(fitted, observed)
        else:
            gate = gated_skill(
                mixtures[kept], observed, fitted, config.skill_permutations, config.search_seed
            )
        enough = gate.enough(config.min_spearman)
        if legacy:  # a search begun before 2026-11-28 resumes as it began: the argmax, no spread
            predicted = candidates[int(np.argmax(fitted.predict(candidates)))]
            predicted = np.round(
                np.maximum(predicted, 0.005) / np.maximum(predicted, 0.005).sum(), 4
            )  # as then
            spread = None
        else:
            predicted = optimum(fitted.model, candidates, config.top_k)
            spread = optimum_spread(
                mixtures[kept],
                observed,
                fitted.kind,
                candidates,
                config.top_k,
                config.bootstrap,
                config.search_seed,
            )
            predicted = np.round(predicted, 4)
            predicted = predicted / predicted.sum()
        best_proxy = mixtures[kept[int(np.argmax(observed))]]
        print(
            f"regression ({fitted.kind} ridge): {gate.said()}; predicted best mixture "
            + ", ".join(f"{t} {p:.3f}" for t, p in zip(tasks, predicted, strict=True)),
            flush=True,
        )
        trains_predicted = enough or config.train_without_skill
        if not enough:
            print(
                "no skill: the proxies cannot rank mixtures at this budget"
                + ("; training the predicted mixture because train_without_skill=true" if trains_predicted else
                   ": no predicted mixture is trained (train_without_skill=true trains it anyway)"),
                flush=True,
            )  # fmt: skip
        final = []
        if trains_predicted:
            final = arms(train, tasks, predicted, best_proxy, config, seeds, out)
            _train(Sweep(out.name, {}, [*fixed, f"budget={config.budget}"], out / "arms", launcher), final)
        self.proxies, self.kept, self.observed, self.fitted = found, kept, observed, fitted
        self.search = {
            "tasks": tasks,
            "proxy_budget": config.proxy_budget,
            "score": config.score,
            "proxies_drawn": drawn,
            "repetition_matched": matched,
            "proxies": {found[i].name: {"mixture": mixtures[i].tolist(), "score": scores[i]} for i in range(len(found))},
            "fit": {"kind": fitted.kind, "loo_mae": fitted.loo_mae, "score_sd": float(np.std(observed, ddof=1)),
                    "loo_predicted": dict(zip([found[i].name for i in kept], fitted.loo_predicted.tolist(), strict=True))},
            "skill": {"spearman": gate.spearman, "p": gate.p, "fit_mae": gate.fit_mae, "constant_mae": gate.constant_mae,
                      "permutation_p": gate.permutation_p, "permutations": gate.permutations,
                      "min_spearman": config.min_spearman, "enough": enough, "said": gate.said()},
            "optimum": "argmax of the fit (before 2026-11-28)" if legacy else f"mean of the top {config.top_k} of {len(candidates)} candidates",
            "optimum_spread": None if spread is None else {"resamples": config.bootstrap, "low": spread[0].tolist(), "high": spread[1].tolist()},
            "mixtures": {
                **({PREDICTED: predicted.tolist()} if trains_predicted else {}),
                "best-proxy": best_proxy.tolist(),
                "proportional": by_size(sizes, 1.0).tolist(),
                "temperature": by_size(sizes, 1.0 / config.temperature).tolist(),
            },
            "fitted_optimum": predicted.tolist(),
        }  # fmt: skip
        return final

    def described(
        self, config: MixtureSearchConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        return self.search

    def judge(self, config: MixtureSearchConfig, train: list[str], kept: list[Member], out: Path) -> dict:
        """The predicted mixture against each usual one (none trained: no verdicts)."""
        if not kept:
            return {"verdicts": [], "across_tasks": []}
        compared, names, _ = transfer_and_compare(
            kept, config.transfer_tasks, config.transfer_mode, config.transfer_data, out
        )
        return {
            "verdicts": verdict_rows(compared, names, BASELINES),
            "across_tasks": across_by_arm(compared, names),
        }

    def markdown(self, result: dict) -> str:
        return markdown(result)

    def tables(self, result: dict) -> dict[str, tuple[list[str], list[list[Any]]]]:
        tasks, found, kept = result["tasks"], self.proxies, self.kept
        return {
            "proxies": (
                ["proxy", *tasks, "score", "held-out prediction"],
                [
                    [found[i].name, *result["proxies"][found[i].name]["mixture"], result["proxies"][found[i].name]["score"],
                     float(self.fitted.loo_predicted[n])]
                    for n, i in enumerate(kept)
                ],
            ),
            "verdicts": (
                ["task", "baseline", "difference", "low", "high", "verdict"],
                [[r["task"], r["baseline"], r["difference"], r["low"], r["high"], r["verdict"]] for r in result["verdicts"]],
            ),
        }  # fmt: skip

    def wandb_config(self, result: dict) -> dict:
        return {k: v for k, v in result.items() if k in ("tasks", "proxy_budget", "budget", "score", "seeds")}

    def page(self, result: dict) -> str:
        intro = markdown(result).split("\n\n|")[0]
        return page(result, self.observed, self.fitted.loo_predicted, intro)


BASELINES = ["best-proxy", "proportional", "temperature"]
