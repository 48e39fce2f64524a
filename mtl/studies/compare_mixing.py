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
Results: out/bench-mixing.md, .json and .html (the noise task's share over the run for every
arm, each arm's difference from stratified on every transfer task with its Holm interval, what each
arm cost), and W&B tables. The record files keep the command's first name, so that a folder of
before the rename resumes.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from mtl.analysis.page import STYLE, pyplot, svg_base64
from mtl.config import comma_list
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.jobs.configs import BenchMixingConfig
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.runs import RunFolder, read_metrics, read_summary
from mtl.studies.arms import budget_amount, budget_keys, closing_lines, summary_seconds, with_task
from mtl.studies.compared import across_section, verdict_lines, verdicts_html
from mtl.studies.mixture import by_size, mixture_keys, training_sizes
from mtl.studies.study import Study, register_study, table_of
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
    if noise is not None:
        train = with_task(train, noise)
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


@register_study
class CompareMixing(Study):
    name = "compare-mixing"
    summary = "online mixing schedules against static mixtures at equal compute, with a planted noise task"
    baseline = BASELINE
    config = BenchMixingConfig
    above, below = "beats stratified", "below stratified"
    record = "bench-mixing"  # the command's first name: folders of before the rename resume
    folder = "mixing"
    equal_compute = "every run trained the whole budget with stop=max_steps, one task a step"

    def training_keys(self, config: BenchMixingConfig, train: list[str]) -> list[str]:
        if taken := [a for a in train if a.partition("=")[0] in SCHEDULE_KEYS or ".prob=" in a]:
            raise UserError(
                f"{taken[0]}: compare-mixing sets each arm's schedule; choose arms= (and mix_every=)"
            )
        arms_of(config)
        return train

    def prepare(self, config: BenchMixingConfig, train: list[str], out: Path) -> list[str]:
        """The planted noise task's file written beside the runs and added to tasks=."""
        train, self.tasks = tasks_of(train, noise_task(out) if config.noise else None)
        return train

    def fixed(self, config: BenchMixingConfig, train: list[str]) -> list[str]:
        return [*train, f"budget={config.budget}", f"mix_every={config.mix_every}"]

    def train(
        self, config: BenchMixingConfig, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        found = members(train, arms_of(config), self.tasks, config, seeds, out)
        static = [m for m in found if m.arm in STATIC]  # first: doremi's references are among them
        train_study(static, self.fixed(config, train), out / "arms", launcher, "bench-mixing")
        rest = [m for m in found if m not in static]
        train_study(rest, self.fixed(config, train), out / "arms", launcher, "bench-mixing")
        return found

    def described(
        self, config: BenchMixingConfig, train: list[str], found: list[Member], kept: list[Member]
    ) -> dict:
        """Each arm's noise share at mid-run and its steps on noise, and its seconds."""
        arms, tasks = arms_of(config), self.tasks
        noise = NOISE if config.noise else None
        static_shares = mixtures(train, tasks, arms, config) if noise else {}
        per_arm = {}
        for arm in arms:
            runs = [m for m in kept if m.arm == arm]
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
        return {
            "tasks": tasks,
            "arms": per_arm,
            "noise": noise,
            "mix_every": config.mix_every,
            "mix_eta": config.mix_eta,
        }

    def markdown(self, result: dict) -> str:
        return markdown(result)

    def tables(self, result: dict) -> dict[str, tuple[list[str], list[list[Any]]]]:
        return super().tables(result) | {
            "arms": table_of(
                result["arms"],
                "arm",
                ["seeds", "noise_mid_run", "noise_steps", "train_seconds", "evidence_seconds"],
            )
        }

    def wandb_config(self, result: dict) -> dict:
        return {k: result[k] for k in ("tasks", "budget", "mix_every", "mix_eta", "seeds", "noise")}

    def page(self, result: dict) -> str:
        return page(result)


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def share_curves(result: dict) -> dict[str, tuple[list[int], list[float]]]:
    """Per online arm, the noise task's share in force at each update its seeds all logged, the
    mean over them (the benchmark's `noise_per_seed` curves)."""
    curves = {}
    for arm, row in result["arms"].items():
        logged = [dict(seed["curve"]) for seed in row["noise_per_seed"] if seed.get("curve")]
        steps = sorted(set.intersection(*(set(found) for found in logged))) if logged else []
        if steps:
            curves[arm] = (steps, [float(np.mean([found[s] for found in logged])) for s in steps])
    return curves


def noise_plot(result: dict) -> str | None:
    curves = share_curves(result)
    if not result["noise"] or not curves:
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    last = max(steps[-1] for steps, _ in curves.values())
    for arm, (steps, shares) in curves.items():
        axis.plot(steps, [100 * s for s in shares], marker=".", label=arm)
    for arm, row in result["arms"].items():
        if arm in STATIC and row["noise_mid_run"] is not None:
            axis.plot(
                [0, last],
                [100 * row["noise_mid_run"]] * 2,
                linestyle="--",
                linewidth=1,
                label=f"{arm} (fixed)",
            )
    axis.axhline(5, color="black", linewidth=0.6, linestyle=":")
    axis.axvline(last / 2, color="grey", linewidth=0.6)
    axis.set_xlabel("step")
    axis.set_ylabel(f"{result['noise']}'s share (%)")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=8, loc="upper right")
    return svg_base64(figure)


def page(result: dict) -> str:
    def share(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    costs = "".join(
        f"<tr><td>{html.escape(arm)}</td><td>{row['seeds']}</td><td>{share(row['noise_mid_run'])}</td>"
        f"<td>{share(row['noise_steps'])}</td><td>{row['train_seconds']:.1f}</td><td>{row['evidence_seconds']:.1f}</td></tr>"
        for arm, row in result["arms"].items()
    )
    notes = "; ".join(
        f"{html.escape(arm)}: {html.escape(row['note'])}" for arm, row in result["arms"].items()
    )
    drawn, verdicts = verdicts_html(result["verdicts"], list(result["arms"])[1:], "arm", "stratified")
    intro = markdown(result).split("\n\n")[0]
    plotted = noise_plot(result)
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>mtl mixing benchmark</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Mixing schedules at equal compute: {html.escape(', '.join(result['tasks']))}</h1>",
        f"<p>{html.escape(intro)}</p>",
        *([f'<img src="data:image/svg+xml;base64,{plotted}" alt="the noise task\'s share over the run, per arm">',
           f"<p>{html.escape(result['noise'])}'s share in force at each update (online arms, the mean over seeds; "
           "dashed: a static arm's fixed share). Dotted: 5%; the vertical line: mid-run.</p>"] if plotted else []),
        *drawn,
        "<h2>Arms</h2>",
        '<div class="wide"><table><tr><th>arm</th><th>seeds</th><th>noise share at mid-run</th><th>steps on noise</th>'
        f"<th>train s (mean)</th><th>evidence s (mean)</th></tr>{costs}</table></div>",
        f"<p>{notes}.</p>",
        *verdicts,
        "</body></html>",
    ]) + "\n"  # fmt: skip
