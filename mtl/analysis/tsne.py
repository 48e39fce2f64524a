"""`just tsne`: a transfer task's sentences as a run embeds them, laid out in two dimensions by
t-SNE (van der Maaten and Hinton 2008, scikit-learn's `TSNE`) and coloured by label, as
Skip-Thought's Figure 2 (Kiros et al. 2015, Section 3.6): TREC by question type, SUBJ by
subjectivity, and SICK's sentence pairs, each as [|u - v|, u * v], on a colour gradient by
relatedness.

The points are the task's test split (a cross-validated task's only one), at most `limit` of
them drawn with `seed`; the page is one self-contained HTML file (the plot as SVG).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import TsneConfig as TsneConfig
from mtl.analysis.page import STYLE, pyplot, svg_base64
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.transfer.features import relatedness_features
from mtl.eval.transfer.protocols import protocol_of
from mtl.eval.transfer.suite import TransferConfig, data_root, make_encoder
from mtl.files import atomic
from mtl.runs import recorded_transfer_data
from mtl.transfer_tasks.tasks import CLASS_NAMES, TransferTask, read_task


def drawn(task: TransferTask, limit: int, seed: int) -> tuple[list[list[str]], np.ndarray]:
    """The sentence columns and labels of the task's test split (or only split), `limit` at most."""
    split = task.splits.get("test") or task.splits.get("all")
    if split is None:
        raise UserError(f"{task.name} has no test split to draw: choose a classification or relatedness task")
    rows = np.arange(len(split))
    if len(rows) > limit:
        rows = np.sort(np.random.default_rng(seed).choice(len(rows), limit, replace=False))
    return [[column[i] for i in rows] for column in split.sentences], np.asarray(split.labels)[rows]


def usable_perplexity(perplexity: float, points: int) -> float:
    """`perplexity` capped below the number of points, as t-SNE requires."""
    if points < 3:
        raise UserError(f"t-SNE needs 3 points at least: the task gave {points}")
    return min(perplexity, (points - 1) / 3)


def layout(points: np.ndarray, perplexity: float, seed: int) -> np.ndarray:
    """(N, D) -> (N, 2) by t-SNE at a `usable_perplexity`."""
    from sklearn.manifold import TSNE

    return TSNE(2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(points)


def page(xy: np.ndarray, labels: np.ndarray, task: str, title: str, graded: bool) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 7))
    if graded:  # relatedness: a score per pair, on a gradient
        scatter = axes.scatter(xy[:, 0], xy[:, 1], c=labels, cmap="viridis", s=8)
        figure.colorbar(scatter, ax=axes, label="relatedness")
    else:
        names = CLASS_NAMES.get(task, ())
        for index, label in enumerate(np.unique(labels)):
            chosen = labels == label
            name = names[int(label)] if int(label) < len(names) else f"label {label}"
            axes.scatter(xy[chosen, 0], xy[chosen, 1], s=8, color=f"C{index % 10}", label=name)
        axes.legend(markerscale=2, fontsize="small")
    axes.set_xticks([])
    axes.set_yticks([])  # (no plot title: the page says `title` above the plot)
    figure.tight_layout()
    image = svg_base64(figure)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>t-SNE: {html.escape(task)}</h1>"
        f"<p>{html.escape(title)}</p><img alt='t-SNE of {html.escape(task)}' "
        f"src='data:image/svg+xml;base64,{image}'></body></html>\n"
    )


def run(config: TsneConfig) -> Path:
    if not config.run:
        raise UserError("just tsne needs run=runs/<run> (and task=TREC, SUBJ, SICK-R, ...)")
    # the transfer data the run recorded (watched, or beside its SNLI), before $MTL_DATA_DIR's:
    # as resume= finds the run's data
    data = config.data or recorded_transfer_data(config.run.split(",")[0].strip())
    transfer = TransferConfig(
        run=config.run, tasks=config.task, data=data, vectors=config.vectors, device=config.device
    )
    task = read_task(config.task, data_root(transfer))
    protocol = protocol_of(task)
    if not protocol.fitted:  # nothing is fitted to its labels: nothing to colour the points by
        raise UserError(
            f"{config.task} is scored without labels per sentence: choose a labelled task (TREC, SICK-R)"
        )
    columns, labels = drawn(task, config.limit, config.seed)
    encoder = make_encoder(transfer)
    embedded = [encoder.encode(column, batch_size=config.batch_size) for column in columns]
    points = embedded[0] if len(embedded) == 1 else relatedness_features(*embedded)  # a pair: [|u-v|, u*v]
    perplexity = usable_perplexity(config.perplexity, len(labels))
    xy = layout(points.astype(np.float64), perplexity, config.seed)
    what = "sentence pairs as [|u-v|, u*v]" if len(embedded) == 2 else "sentences"
    title = f"{encoder.name}: {len(labels):,} {config.task} {what}, perplexity {perplexity:g}"
    out = (
        Path(config.out).expanduser()
        if config.out
        else Path(config.run.split(",")[0]).expanduser() / f"tsne-{config.task}.html"
    )
    text = page(xy, labels, config.task, title, graded=protocol.graded)
    with atomic.atomic_path(out, "t-SNE page") as partial:
        partial.write_text(text, encoding="utf-8")
    return out


def command(args: Sequence[str]) -> None:
    out = run(apply_overrides(TsneConfig(), args))
    print(f"written to {out}")
