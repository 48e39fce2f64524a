"""`just bench-affinity`: is affinity's noise floor the right width?

    MTL_DATA_DIR=../shared/data just bench-affinity seeds=5 draws=20

Two checks of mtl/analysis/multitask.py's floor (each held batch's mean over the run one unit,
B - 1 degrees of freedom), on runs of SNLI, SICK-E and `sickshuf` (SICK-E with its training
labels shuffled: a planted noise task whose affinity with the real tasks should be ~0):

1. Each of `seeds` runs measures affinity every `every` steps; the share of the shuffled copy's
   entries with every real task (both ways) that its floor calls ~0 (should be >= 95%).
2. At the first run's final weights, `draws` fresh draws of held batches (each `affinity_batches`
   of them, the same optimizer state): the share of their 95% intervals that cover the mean over
   all draws (the value the floor is about), per entry and overall (should be 95 +- 3%).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from mtl.analysis.multitask import summarize
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.runs import RunFolder, read_affinity
from mtl.train.callbacks.affinity import Affinity
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs
from mtl.train.loop.trainer import Trainer
from tools.configs import BenchAffinityConfig

SHUFFLED = "sickshuf"


def task_files(out: Path) -> list[str]:
    """SICK-E's task file, and its shuffled-label copy `sickshuf` beside the runs."""
    sick = Path(__file__).resolve().parents[1] / "experiments" / "tasks" / "sick.toml"
    if not sick.is_file():
        raise UserError(f"{sick} is missing: bench-affinity trains SICK-E from it")
    out.mkdir(parents=True, exist_ok=True)
    shuffled = out / f"{SHUFFLED}.toml"
    atomic.write_text(shuffled, sick.read_text(encoding="utf-8") + "\nshuffle_labels = true\n", "task file")
    return [str(sick), str(shuffled)]


def train(config: BenchAffinityConfig, seed: int, out: Path, files: list[str]):  # noqa: ANN201
    """One run with affinity measured, trained here (the trainer kept: its weights and optimizer)."""
    keys = [
        f"preset={config.preset}", *config.keys.split(), f"tasks=nli,{files[0]},{files[1]}",
        f"affinity_every={config.every}", f"seed={seed}", f"out={out}", f"name={out.name}",
    ]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(resolve_inputs(config_from_args(keys)), out)  # task files' $MTL_DATA_DIR made concrete
    trainer.fit()
    return trainer


def inside_share(rows: list[dict]) -> tuple[int, int]:
    """(entries of the shuffled copy with a real task, both ways, inside the floor; all of them)."""
    summary = summarize(rows)
    within = summary.within_noise()
    noise = summary.tasks.index(SHUFFLED)
    pairs = [(noise, j) for j in range(len(summary.tasks)) if j != noise]
    pairs += [(i, noise) for i in range(len(summary.tasks)) if i != noise]
    return sum(bool(within[i, j]) for i, j in pairs), len(pairs)


def coverage(trainer, config: BenchAffinityConfig) -> np.ndarray:  # noqa: ANN001
    """(T, T): the share of fresh held-batch draws whose 95% t interval covers the mean of all."""
    tasks = trainer.run.setup.scheduler.tasks
    batches = trainer.run.config.run.affinity_batches
    from tqdm import tqdm

    draws = []
    for draw in tqdm(range(config.draws), desc="fresh held batches", unit="draw"):
        affinity = Affinity(
            trainer.run.data,
            trainer.run.setup,
            tasks,
            10_000 + draw,
            trainer.run.device,
            batches,
            trainer.run.config.optim.max_grad_norm,
        )
        draws.append(affinity.measure().per_batch)
    per_batch = np.stack(draws)  # (draws, B, T, T)
    means = per_batch.mean(axis=1)
    half = stats.t.ppf(0.975, batches - 1) * per_batch.std(axis=1, ddof=1) / np.sqrt(batches)
    truth = means.mean(axis=0)
    return (np.abs(means - truth) <= half).mean(axis=0)


def run(config: BenchAffinityConfig) -> dict:
    out = Path(config.out).expanduser()
    files = task_files(out)
    inside, entries, covered = [], 0, None
    for seed in range(1, config.seeds + 1):
        folder = out / f"seed{seed}"
        trainer = train(config, seed, folder, files)
        found, total = inside_share(read_affinity(RunFolder(folder).affinity))
        inside.append(found)
        entries = total
        if seed == 1:
            covered = coverage(trainer, config)
            tasks = list(trainer.run.setup.scheduler.tasks)
        del trainer
    assert covered is not None
    result = {
        "config": config.__dict__,
        "tasks": tasks,
        "shuffled_inside": inside,
        "shuffled_entries": entries,
        "shuffled_inside_share": sum(inside) / (entries * config.seeds),
        "coverage": covered.tolist(),
        "coverage_overall": float(covered.mean()),
        "threads": os.cpu_count(),
    }
    atomic.write_text(out / "affinity-floor.json", jsonfile.dumps(result, indent=2) + "\n", "bench result")
    atomic.write_text(out / "affinity-floor.md", markdown(result), "bench result")
    return result


def markdown(result: dict) -> str:
    config, tasks = result["config"], result["tasks"]
    per_seed = ", ".join(f"{n}/{result['shuffled_entries']}" for n in result["shuffled_inside"])
    lines = [
        f"Affinity's floor ({config['preset']} {config['keys']}, tasks {', '.join(tasks)}, affinity every "
        f"{config['every']} steps):",
        f"- the shuffled copy's entries with the real tasks (both ways) inside the floor: "
        f"{100 * result['shuffled_inside_share']:.1f}% ({per_seed} over {config['seeds']} seeds)",
        f"- {config['draws']} fresh held-batch draws at the first run's final weights: their 95% intervals cover "
        f"the mean of all draws {100 * result['coverage_overall']:.1f}% of the time; per entry (row stepped, column helped):",
        "",
        "| stepped | " + " | ".join(f"→ {t}" for t in tasks) + " |",
        "|---|" + "---:|" * len(tasks),
        *(
            f"| {t} | " + " | ".join(f"{100 * v:.0f}%" for v in row) + " |"
            for t, row in zip(tasks, result["coverage"], strict=True)
        ),
    ]
    return "\n".join(lines) + "\n"


def command(args: Sequence[str]) -> None:
    config = apply_overrides(BenchAffinityConfig(), list(args))
    result = run(config)
    print(markdown(result) + f"\nwritten to {Path(config.out) / 'affinity-floor.md'}")
