"""Does the affinity floor of held batches taken in turn cover 95%? (mtl/analysis/held_batches.py)

    just train-multitask preset=cpu-small schedule=mixed hidden=256 max_steps=800 \\
        affinity_every=50 affinity_each=8 stop=max_steps out=runs/floor
    python -m tools.floor_coverage runs/floor/affinity.jsonl

From a run that measured every held batch at every measurement:

1. The floors `affinity_each=8, 4, 2, 1` would have given on it (the same values, the batches
   each would have taken).
2. Per entry, the run's variances (how the affinity moved over training, each batch's offset and
   the residual, fitted by the two-way model), and simulated runs drawn from them, 16 and 48
   measurements long, once with the fitted offsets' variance and once with it as large as the
   residual's: the share of the floors that hold the true mean, and their median width.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from mtl.analysis.multitask import summarize
from mtl.runs import read_affinity
from mtl.train.callbacks.affinity import held_in_turn

EACH = (8, 4, 2, 1)


def lines(values: np.ndarray, each: int, tasks: list[str]) -> list[dict]:
    """(M, B, ...) values as the affinity.jsonl lines a run taking `each` in turn writes."""
    taken = [held_in_turn(m, each, values.shape[1]) for m in range(1, len(values) + 1)]
    return [
        {
            "tasks": tasks,
            "matrix": values[m, held].mean(axis=0).tolist(),
            "per_batch": values[m, held].tolist(),
            "held": held,
            "unit": "per_lr",
        }  # fmt: skip
        for m, held in enumerate(taken)
    ]


def variances(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(M, B) one entry: the movement over the measurements, the offsets' and the residual's variances."""
    times, batches = values.shape
    movement, offsets = values.mean(axis=1), values.mean(axis=0) - values.mean()
    residual = values - movement[:, None] - offsets[None, :]
    noise = float(np.square(residual).sum() / ((times - 1) * (batches - 1)))
    return movement, max(float(offsets.var(ddof=1)) - noise / times, 0.0), noise


def coverage(movement: np.ndarray, offset: float, noise: float, each: int, times: int, sims: int, seed: int):
    rng = np.random.default_rng(seed)
    moving, covered, widths = np.resize(movement, times), [], []
    for _ in range(sims):
        values = (
            moving[:, None] + rng.normal(0, np.sqrt(offset), 8) + rng.normal(0, np.sqrt(noise), (times, 8))
        )
        summary = summarize(lines(values[:, :, None, None], each, ["a"]))
        covered.append(abs(summary.mean[0, 0] - moving.mean()) <= summary.half_width[0, 0])
        widths.append(summary.half_width[0, 0])
    return float(np.mean(covered)), float(np.median(widths)), summary.floor


def main(path: str, sims: int = 1000) -> None:
    rows = read_affinity(Path(path))
    tasks = list(rows[0]["tasks"])
    values = np.array([row["per_batch"] for row in rows])  # (M, B, T, T)
    if any(row.get("held") not in (None, list(range(values.shape[1]))) for row in rows):
        sys.exit(f"{path}: a run that measured every held batch each time is needed (affinity_each=8)")
    print(f"{path}: {len(rows)} measurements x {values.shape[1]} held batches")
    for each in EACH:
        summary = summarize(lines(values, each, tasks))
        cells = [
            f"{a}>{b} {summary.mean[i, j]:+.2f} ± {summary.half_width[i, j]:.2f}"
            + (" (~0)" if summary.within_noise()[i, j] else "")
            for i, a in enumerate(tasks)
            for j, b in enumerate(tasks)
        ]
        print(f"  affinity_each={each} ({summary.floor}): " + "; ".join(cells))
    for i, a in enumerate(tasks):
        for j, b in enumerate(tasks):
            movement, offset, noise = variances(values[:, :, i, j])
            for offsets, label in ((offset, "fitted offsets"), (noise, "offsets as the residual")):
                print(f"{a}>{b}, {label} (sd {np.sqrt(offsets):.2f}, residual sd {np.sqrt(noise):.2f}):")
                for times in (16, 48):
                    for each in EACH[:3]:
                        share, width, kind = coverage(movement, offsets, noise, each, times, sims, seed=each)
                        print(
                            f"    {times} measurements, affinity_each={each} ({kind}): covers {share:.3f}, width {width:.2f}"
                        )


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
