"""`just mixture-search`: the mixture of the training tasks that small proxy runs predict best
(RegMix: Liu et al. 2024, "RegMix: Data Mixture as Regression for Language Model Pre-training"),
trained at the target budget with seeds against the usual mixtures, with verdicts.

    just mixture-search preset=cpu-small tasks=nli,squad,qt trials=16 seeds=3 transfer_tasks=MR,TREC,STS14

1. `trials` mixtures of the training tasks are drawn from a Dirichlet(`alpha`) over their
   probabilities; each trains as a proxy run at `proxy_budget` (schedule=proportional with each
   task's `<task>.prob=`), one seed, and is scored by `score=` (select: the run's select= value,
   the first task's dev metric unless select= says; or any key of its summary.json).
2. A regression from mixture to score (scikit-learn: ridge on the mixture and, when it predicts
   held-out proxies better, its pairwise products; RegMix fits LightGBM on hundreds of proxies,
   a dozen need fewer parameters) is checked by leave-one-out: its held-out error is reported.
3. The mixture it predicts best among `candidates` Dirichlet draws is trained at `budget` with
   `seeds`, beside the baselines: size-proportional sampling, temperature sampling (T =
   `temperature`) and the best proxy's mixture; every arm runs the whole budget (stop=max_steps).
4. Each arm is transferred and `just compare` gives the studentized interval (seeds, then items)
   of the predicted mixture against each baseline, Holm-corrected over the transfer tasks.

Everything trains as a sweep: an interrupted search resumes, a finished proxy or arm is never
trained again. It writes mixture-search.md and .json, logs its tables to W&B in the search's
group, and `just mixture-search` adds a page (mtl/analysis/mixture_page.py: predicted against
observed, the mixtures' weights, the verdicts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtl.config import apply_overrides, paths_and_keys
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.files.locks import FolderLock
from mtl.formats.comparison import method_of
from mtl.jobs.arms import (
    budget_amount,
    check_transfer_keys,
    equal_compute,
    short_of_budget,
    study_folder,
    transfer_and_compare,
)

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.jobs.configs import MixtureSearchConfig as MixtureSearchConfig
from mtl.jobs.launchers import launcher_from, split_launcher_keys
from mtl.jobs.member import Member
from mtl.jobs.seeds import seed_list
from mtl.jobs.sweep import Sweep, check_same_fixed_keys, train_members
from mtl.runs import RunFolder, read_summary
from mtl.tracking.tracker import log_tables
from mtl.train.command_line import config_from_args
from mtl.train.data import prepare
from mtl.train.resolve import resolve_inputs

SEARCH_KEYS = (
    "trials", "proxy_budget", "budget", "seeds", "seed", "score", "alpha", "candidates", "temperature",
    "transfer_tasks", "transfer_mode", "transfer_data", "out", "search_seed",
)  # fmt: skip
PREDICTED = "predicted"


def parse(args: Sequence[str]) -> tuple[MixtureSearchConfig, list[str]]:
    named, keys = paths_and_keys(list(args))
    if named:
        raise UserError(
            f"{named[0]}: mixture-search takes key=value arguments only (preset=NAME for a preset)"
        )
    own = [a for a in keys if a.partition("=")[0] in SEARCH_KEYS]
    train = [a for a in keys if a.partition("=")[0] not in SEARCH_KEYS]
    if taken := [
        a
        for a in train
        if a.partition("=")[0]
        in ("max_steps", "max_minutes", "out", "name", "group", "resume", "schedule", "stop")
        or a.partition("=")[0].endswith(".prob")
    ]:
        raise UserError(
            f"{taken[0]}: mixture-search sets it for each run (give budgets with proxy_budget= and budget=)"
        )
    config = apply_overrides(MixtureSearchConfig(), own)
    check_transfer_keys(config.transfer_tasks, config.transfer_mode)
    budget_amount(config.proxy_budget)
    budget_amount(config.budget)
    if budget_amount(config.proxy_budget)[0] == "examples" or budget_amount(config.budget)[0] == "examples":
        raise UserError("mixture-search samples tasks by probability: give steps:N or minutes:N budgets")
    seed_list(str(config.seeds) if config.seeds is not None else None, config.seed)
    return config, train


def training_tasks(train: list[str]) -> list[str]:
    tasks = config_from_args(train).training_tasks
    if len(tasks) < 2:
        raise UserError(f"mixture-search mixes training tasks: {tasks[0]} trains alone; give tasks=a,b,...")
    return tasks


def draw_mixtures(count: int, tasks: int, alpha: float, seed: int) -> np.ndarray:
    """(count, tasks) Dirichlet draws, each share at least 0.005 (a task a proxy never sees says
    nothing about it), rounded so a run's keys stay readable, then normalised."""
    rng = np.random.default_rng([seed, 0x5EA12C])
    drawn = np.maximum(rng.dirichlet(np.full(tasks, alpha), size=count), 0.005)
    drawn = np.round(drawn / drawn.sum(axis=1, keepdims=True), 4)
    return drawn / drawn.sum(axis=1, keepdims=True)


def budget_keys(budget: str) -> list[str]:
    kind, amount = budget_amount(budget)
    return [f"max_minutes={amount}" if kind == "minutes" else f"max_steps={amount}", "stop=max_steps"]


def mixture_keys(tasks: list[str], mixture: np.ndarray) -> list[str]:
    """The keys of a mixture: each task's prob= but the last's, which takes what is left (so
    rounding never makes the shares add up to other than 1)."""
    shares = zip(tasks[:-1], mixture[:-1], strict=True)
    return ["schedule=proportional", *(f"{task}.prob={share:.4f}" for task, share in shares)]


def proxies(train: list[str], tasks: list[str], mixtures: np.ndarray, budget: str, out: Path) -> list[Member]:
    found = []
    for number, mixture in enumerate(mixtures, start=1):
        name = f"proxy{number:02d}"
        keys = [*train, *mixture_keys(tasks, mixture), *budget_keys(budget), "seed=1"]
        keys += [f"name={name}", f"group={out.name}", f"out={out / 'proxies' / name}"]
        found.append(Member(name, keys, out / "proxies" / name))
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


def fit(mixtures: np.ndarray, scores: np.ndarray) -> Fit:
    """Ridge on the mixture, or on it and its pairwise products: whichever predicts held-out
    proxies better (leave-one-out), refitted on all of them."""
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import LeaveOneOut, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    alphas = np.logspace(-4, 2, 13)
    models = {
        "linear": lambda: RidgeCV(alphas=alphas),
        "quadratic": lambda: make_pipeline(PolynomialFeatures(2, include_bias=False), RidgeCV(alphas=alphas)),
    }
    best = None
    for kind, make in models.items():
        predicted = cross_val_predict(make(), mixtures, scores, cv=LeaveOneOut())
        error = float(np.mean(np.abs(predicted - scores)))
        if best is None or error < best.loo_mae:
            best = Fit(make().fit(mixtures, scores), kind, error, predicted)
    assert best is not None
    return best


def arms(
    train: list[str], tasks: list[str], predicted: np.ndarray, best_proxy: np.ndarray, config: MixtureSearchConfig,
    seeds: list[int], out: Path,
) -> list[Member]:  # fmt: skip
    """The predicted mixture and the baselines, each with every seed, at the target budget."""
    schedules = {
        PREDICTED: mixture_keys(tasks, predicted),
        "best-proxy": mixture_keys(tasks, best_proxy),
        "proportional": ["schedule=proportional"],
        "temperature": ["schedule=temperature", f"temperature={config.temperature:g}"],
    }
    found = []
    for arm, keys in schedules.items():
        for seed in seeds:
            name = f"{arm}-seed{seed}"
            member_keys = [*train, *keys, *budget_keys(config.budget), f"seed={seed}"]
            member_keys += [f"name={name}", f"group={out.name}", f"out={out / 'arms' / name}"]
            found.append(Member(name, member_keys, out / "arms" / name))
    return found


def arm_of(member: Member) -> str:
    return member.name.rsplit("-seed", 1)[0]


def _train(sweep: Sweep, members: list[Member]) -> None:
    for member in members:  # a wrong key stops everything before work
        config_from_args(member.overrides)
    with FolderLock(sweep.out, "mixture-search folder", "out"):
        check_same_fixed_keys(sweep, members)
        outcomes = train_members(sweep, members)
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{', '.join(failed)} failed: see its output above, then run the same command again")


def verdict_rows(compared: dict, names: dict[str, str], baselines: list[str]) -> list[dict]:
    """Per transfer task and baseline: the predicted mixture's difference, corrected interval, verdict."""
    rows = []
    for c in compared["comparisons"]:
        first, second = names[c["first"]], names[c["second"]]
        if PREDICTED not in (first, second):
            continue
        other = second if first == PREDICTED else first
        if other not in baselines:
            continue
        sign = 1 if first == PREDICTED else -1
        low, high = sorted((sign * c["low"] + 0.0, sign * c["high"] + 0.0))
        difference = sign * (c["first_score"] - c["second_score"]) + 0.0
        decided = c["holm_p"] <= 1 - c["confidence"]
        verdict = ("helps" if difference > 0 else "hurts") if decided else "no evidence"
        if decided and min(c["first_seeds"], c["second_seeds"]) < 2:
            verdict += " (1 seed)"
        rows.append({"task": c["task"], "baseline": other, "difference": difference, "low": low, "high": high,
                     "holm_p": c["holm_p"], "verdict": verdict,
                     "method": method_of(c)})  # fmt: skip
    return rows


def markdown(result: dict) -> str:
    tasks = result["tasks"]
    lines = [
        f"Mixture search over {', '.join(tasks)}: {len(result['proxies'])} proxies at {result['proxy_budget']}, "
        f"scored by {result['score']}; regression: {result['fit']['kind']} ridge, held-out error "
        f"{result['fit']['loo_mae']:.4f} (leave-one-out mean absolute error; the scores' sd "
        f"{result['fit']['score_sd']:.4f}).",
        "",
        "| mixture | " + " | ".join(tasks) + " |",
        "|---|" + "---:|" * len(tasks),
        *(
            f"| {name} | " + " | ".join(f"{share:.3f}" for share in mixture) + " |"
            for name, mixture in result["mixtures"].items()
        ),
        "",
        f"At {result['budget']} with seeds {', '.join(map(str, result['seeds']))}: the predicted mixture against each "
        "baseline, studentized intervals (seeds, then test items), Holm over the transfer tasks.",
        "",
        "| transfer task | baseline | predicted - baseline | 95% interval (Holm) | verdict |",
        "|---|---|---:|---:|---|",
        *(
            f"| {r['task']} | {r['baseline']} | {r['difference']:+.2f} | [{r['low']:+.2f}, {r['high']:+.2f}] | {r['verdict']} |"
            for r in result["verdicts"]
        ),
    ]
    if result.get("left_out"):
        lines += [
            "",
            "Left out (short of the budget): "
            + "; ".join(f"{k}: {v}" for k, v in result["left_out"].items()),
        ]
    return "\n".join(lines) + "\n"


def training_sizes(train: list[str], tasks: list[str]) -> np.ndarray:
    """Each training task's number of training examples (what size-driven schedules sample by)."""
    data = prepare(resolve_inputs(config_from_args([*train, "max_steps=1"])), progress=False)
    return np.array([len(data.examples[task]["train"]) for task in tasks], dtype=float)


def by_size(sizes: np.ndarray, power: float) -> np.ndarray:
    """The shares of sampling by size**power (proportional: 1; temperature T: 1 / T)."""
    weights = np.exp(power * np.log(sizes) - (power * np.log(sizes)).max())
    return weights / weights.sum()


def search(args: Sequence[str]) -> tuple[Path, dict, np.ndarray, np.ndarray]:
    """The whole search (resumed where it stopped): its folder, its result, and the proxies'
    observed scores with their held-out predictions (for the page)."""
    launcher_args, args = split_launcher_keys(args)
    launcher = launcher_from(launcher_args)
    config, train = parse(args)
    tasks = training_tasks(train)
    seeds = seed_list(str(config.seeds) if config.seeds is not None else None, config.seed)
    out = study_folder(config.out, "mixture")
    mixtures = draw_mixtures(config.trials, len(tasks), config.alpha, config.search_seed)
    fixed = [
        *train,
        f"proxy_budget={config.proxy_budget}",
        f"search_seed={config.search_seed}",
        f"alpha={config.alpha:g}",
    ]
    found = proxies(train, tasks, mixtures, config.proxy_budget, out)
    _train(Sweep(out.name, {}, fixed, out / "proxies", launcher), found)
    scores = [proxy_score(member, config.score) for member in found]
    kept = [
        i
        for i, s in enumerate(scores)
        if s is not None and short_of_budget(found[i], config.proxy_budget) is None
    ]
    if len(kept) < 4:
        raise UserError(
            f"{len(kept)} proxies finished with a {config.score} score: a regression needs 4 at least"
        )
    observed = np.array([scores[i] for i in kept])
    fitted = fit(mixtures[kept], observed)
    candidates = np.random.default_rng([config.search_seed, 0xCA11]).dirichlet(
        np.full(len(tasks), config.alpha), size=config.candidates
    )
    predicted = candidates[int(np.argmax(fitted.predict(candidates)))]
    predicted = np.round(np.maximum(predicted, 0.005) / np.maximum(predicted, 0.005).sum(), 4)
    best_proxy = mixtures[kept[int(np.argmax(observed))]]
    print(
        f"regression ({fitted.kind} ridge): held-out error {fitted.loo_mae:.4f}; predicted best mixture "
        + ", ".join(f"{t} {p:.3f}" for t, p in zip(tasks, predicted, strict=True)),
        flush=True,
    )
    final = arms(train, tasks, predicted, best_proxy, config, seeds, out)
    _train(Sweep(out.name, {}, [*fixed, f"budget={config.budget}"], out / "arms", launcher), final)
    compared_runs, short = equal_compute(final, config.budget)
    compared, names, _ = transfer_and_compare(
        compared_runs, config.transfer_tasks, config.transfer_mode, config.transfer_data, out, arm_of
    )
    baselines = ["best-proxy", "proportional", "temperature"]
    sizes = training_sizes(train, tasks)
    result = {
        "tasks": tasks,
        "proxy_budget": config.proxy_budget,
        "budget": config.budget,
        "score": config.score,
        "seeds": seeds,
        "proxies": {found[i].name: {"mixture": mixtures[i].tolist(), "score": scores[i]} for i in range(len(found))},
        "fit": {"kind": fitted.kind, "loo_mae": fitted.loo_mae, "score_sd": float(np.std(observed, ddof=1)),
                "loo_predicted": dict(zip([found[i].name for i in kept], fitted.loo_predicted.tolist(), strict=True))},
        "mixtures": {
            PREDICTED: predicted.tolist(),
            "best-proxy": best_proxy.tolist(),
            "proportional": by_size(sizes, 1.0).tolist(),
            "temperature": by_size(sizes, 1.0 / config.temperature).tolist(),
        },
        "runs": {m.name: str(m.run_dir) for m in final},
        "left_out": short,
        "equal_compute": "every compared arm trained the whole budget with stop=max_steps",
        "verdicts": verdict_rows(compared, names, baselines),
    }  # fmt: skip
    text = markdown(result)
    atomic.write_text(out / "mixture-search.md", text, "mixture search")
    atomic.write_text(out / "mixture-search.json", jsonfile.dumps(result, indent=2) + "\n", "mixture search")
    log_tables(
        job_type="mixture-search",
        name=out.name,
        config={k: v for k, v in result.items() if k in ("tasks", "proxy_budget", "budget", "score", "seeds")},
        tables={
            "proxies": (["proxy", *tasks, "score", "held-out prediction"],
                        [[found[i].name, *mixtures[i].tolist(), scores[i], float(fitted.loo_predicted[n])] for n, i in enumerate(kept)]),
            "verdicts": (["task", "baseline", "difference", "low", "high", "verdict"],
                         [[r["task"], r["baseline"], r["difference"], r["low"], r["high"], r["verdict"]] for r in result["verdicts"]]),
        },
        directory=out,
        mode="auto",
        group=out.name,
    )  # fmt: skip
    return out, result, observed, fitted.loo_predicted
