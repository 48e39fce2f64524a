"""`just decompose`: where a run's transfer accuracy comes from, item by item.

Liu et al. (2018, Section 6) leave as future work "a decomposition analysis on the set of
transfer/SentEval tasks ... by sentence length, OOV rate": here, for each transfer task
scored by accuracy, the test items' accuracy by sentence length (tokens, both sentences of a
pair together), by OOV rate (the share of their tokens without a pretrained vector in the
run's vectors file, or outside its vocabulary when the file is not at hand) and by gold
label. It reads the per-item results a transfer report keeps (`<report>.items.npz`) and the
task's data, so it costs no encoding or training.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import DecomposeConfig as DecomposeConfig
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.loading import load_encoder
from mtl.eval.transfer.protocols import protocol_of
from mtl.eval.transfer.suite import TransferConfig, data_root
from mtl.formats.transfer_report import ITEMS_SUFFIX, read_items
from mtl.runs import wandb_group
from mtl.text.vectors import vector_store
from mtl.tracking.tracker import log_tables
from mtl.transfer_tasks.registry import TRANSFER_TASKS
from mtl.transfer_tasks.tasks import CLASS_NAMES, read_task

LENGTH_BINS = ((0, 10), (11, 20), (21, 30), (31, None))  # tokens, inclusive
OOV_BINS = ((0.0, 0.0), (0.0, 0.05), (0.05, 0.15), (0.15, 1.0))  # (low, high]: the first is exactly 0


def test_texts(task) -> list[list[str]]:
    """Each test item's sentences, in the order the report's items are: a cross-validated task's
    whole data, else its test split."""
    split = task.splits[protocol_of(task).tested]
    return [list(texts) for texts in zip(*split.sentences, strict=True)]


def breakdown(correct: np.ndarray, keys: np.ndarray, bins) -> list[tuple[str, int, float | None]]:
    """(bin, items, accuracy %) for `bins` of `keys`: (low, high) inclusive ranges of ints
    (high None: no end), or (low, high] ranges of rates (the first, (0, 0], is exactly 0)."""
    rows = []
    for low, high in bins:
        if isinstance(low, int):
            chosen = (keys >= low) & (keys <= high if high is not None else True)
            label = f"{low}-{high}" if high is not None else f"{low}+"
        elif high == low:
            chosen, label = keys == low, f"{100 * low:g}%"
        else:
            chosen, label = (keys > low) & (keys <= high), f"{100 * low:g}-{100 * high:g}%"
        count = int(chosen.sum())
        rows.append((label, count, float(100 * correct[chosen].mean()) if count else None))
    return rows


def decompose_task(task, items: dict[str, np.ndarray], tokenize, has_vector) -> dict[str, list]:
    texts = test_texts(task)
    predicted, gold = items["predicted"], items["gold"]
    if len(texts) != len(gold) or not np.array_equal(gold, np.asarray(_labels(task))):
        raise UserError(
            f"{task.name}: the report's items do not match the task's data: decompose with the data= "
            "the report was made from"
        )
    flat = iter(tokenize([text for item in texts for text in item]))  # one call: spaCy batches them
    tokens = [[word for _ in item for word in next(flat)] for item in texts]
    lengths = np.array([len(words) for words in tokens])
    oov = np.array([np.mean([not has_vector(w) for w in words]) if words else 0.0 for words in tokens])
    correct = predicted == gold
    labels = sorted(set(gold.tolist()))
    names = CLASS_NAMES.get(task.name, ())
    return {
        "length": breakdown(correct, lengths, LENGTH_BINS),
        "oov": breakdown(correct, oov, OOV_BINS),
        "label": [
            (
                names[int(label)] if int(label) < len(names) else str(label),
                int((gold == label).sum()),
                float(100 * correct[gold == label].mean()),
            )
            for label in labels
        ],
        "all": [("all", len(gold), float(100 * correct.mean()))],
    }


def _labels(task) -> list:
    return task.splits[protocol_of(task).tested].labels


def decomposition(config: DecomposeConfig) -> tuple[str, list[list]]:
    """What the decomposition is against (one line), and its rows: task, by, part, items, accuracy."""
    if not config.run:
        raise UserError("just decompose needs run=runs/<run> (transferred first)")
    folder = Path(config.run).expanduser()
    path = folder / f"{config.report}{ITEMS_SUFFIX}"
    if not path.is_file():
        raise UserError(
            f"{folder} has no per-item results for {config.report}: run `just transfer run={folder}` first"
        )
    items = read_items(path, _accuracy_tasks(config))
    if not items:
        raise UserError(f"{path.name} holds no task scored by accuracy among tasks={config.tasks}")
    encoder = load_encoder(folder, device="cpu")
    vectors = config.vectors or encoder.vectors
    if encoder.tokenizer is None:  # encoder=hf: subwords, every word has ids
        tokenize, known, reference = (lambda texts: [t.split() for t in texts]), _Everything(), None
    else:
        tokenize = encoder.tokenizer.tokenize  # the run's own
        if vectors and Path(vectors).is_file():
            known, reference = vector_store(vectors).index, Path(vectors).name
        else:
            known, reference = encoder.vocabulary.index, "the run's vocabulary"
    root = data_root(TransferConfig(data=config.data))
    rows: list[list] = []
    for name, arrays in items.items():
        if "predicted" not in arrays or np.issubdtype(arrays["gold"].dtype, np.floating):
            continue  # relatedness and STS: scored by correlation, not item by item
        parts = decompose_task(read_task(name, root), arrays, tokenize, known.__contains__)
        rows += [[name, by, *row] for by, part in parts.items() for row in part]
    oov = f"OOV: tokens without a vector in {reference}" if reference else "subwords: no OOV"
    return f"{folder.name}, {config.report}: test accuracy (%) by part of the test set; {oov}", rows


def wilson_interval(accuracy: float, items: int) -> tuple[float, float]:
    """The 95% Wilson score interval (SciPy's) of an accuracy (in %) measured on `items` items, in
    %: honest at a handful of items and at 0 or 100%, where the normal one collapses to a point (a
    part of one item read `100.00` with nothing to say it could as well be 21%)."""
    from scipy.stats import binomtest  # only when a decomposition is shown

    interval = binomtest(round(accuracy * items / 100), items).proportion_ci(method="wilson")
    return 100 * float(interval.low), 100 * float(interval.high)


def accuracy_cell(accuracy: float | None, items: int) -> str:
    """A part's accuracy with its 95% interval and its items: `62.50 [30.6, 86.3] (8)`."""
    if accuracy is None:
        return f"– ({items:,})"
    low, high = wilson_interval(accuracy, items)
    return f"{accuracy:.2f} [{low:.1f}, {high:.1f}] ({items:,})"


def run(config: DecomposeConfig) -> str:
    header, rows = decomposition(config)
    lines = [header + "; each accuracy with its 95% Wilson interval and its items"]
    for task in dict.fromkeys(row[0] for row in rows):
        lines += ["", f"### {task}", "", "| by | part | accuracy [95% interval] (items) |", "|---|---|---:|"]
        lines += [
            f"| {by} | {label} | {accuracy_cell(accuracy, count)} |"
            for name, by, label, count, accuracy in rows
            if name == task
        ]
    folder = Path(config.run).expanduser()
    log_tables(
        job_type="decompose",
        name=f"decompose-{folder.name}",
        config={"run": str(folder), "report": config.report, "header": header},
        tables={"decomposition": (["task", "by", "part", "items", "accuracy"], rows)},
        directory=folder / "transfer",  # beside the transfer runs: the training run's folder stays its own
        mode=config.wandb,
        group=wandb_group(folder),
    )
    return "\n".join(lines) + "\n"


class _Everything:
    def __contains__(self, word: object) -> bool:
        return True


def _accuracy_tasks(config: DecomposeConfig) -> dict[str, None]:
    chosen = list(TRANSFER_TASKS) if config.tasks == "all" else [t.strip() for t in config.tasks.split(",")]
    return dict.fromkeys(chosen)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto DecomposeConfig; run; print what it gives."""
    print(run(apply_overrides(DecomposeConfig(), args)))
