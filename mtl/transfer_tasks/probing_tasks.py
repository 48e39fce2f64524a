"""Probing tasks (Conneau et al. 2018, "What you can cram into a single vector"; SentEval's
probing.py) as transfer tasks: what a sentence embedding says about its sentence's surface,
syntax and semantics, each a train/dev/test classification.

SentEval's ten sets (`tasks=Length,WordContent,...`) are read from SentEval's files, one example a
line: split (`tr`, `va`, `te`), label, sentence, tab-separated; classes are the training labels
in sorted order, as SentEval numbers them. The files sit in SentEval's `data/probing/`, beside
its `data/downstream/` (the transfer data root), or in the folder `data=` names.

Since SentEval's files are not always at hand, the three surface tasks can be generated from any
sentences (`generate`): sentence length in SentEval's six bins, word content (which of 1,000
mid-frequency words the sentence holds, exactly one of them) and bigram shift (two adjacent
words inverted or not). They are registered under names of their own (`GenLength`,
`GenWordContent`, `GenBigramShift`) so that no report mistakes them for SentEval's sets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mtl.errors import UserError
from mtl.transfer_tasks.registry import SentEvalQuirks, register_transfer_task
from mtl.transfer_tasks.tasks import Split, TransferTask

# SentEval's name -> its file (probing.py)
SENTEVAL_FILES = {
    "Length": "sentence_length.txt",
    "WordContent": "word_content.txt",
    "Depth": "tree_depth.txt",
    "TopConstituents": "top_constituents.txt",
    "BigramShift": "bigram_shift.txt",
    "Tense": "past_present.txt",
    "SubjNumber": "subj_number.txt",
    "ObjNumber": "obj_number.txt",
    "OddManOut": "odd_man_out.txt",
    "CoordinationInversion": "coordination_inversion.txt",
}
GENERATED = {  # generate= name -> (registered task, file)
    "sentence_length": ("GenLength", "sentence_length.generated.txt"),
    "word_content": ("GenWordContent", "word_content.generated.txt"),
    "bigram_shift": ("GenBigramShift", "bigram_shift.generated.txt"),
}
# WordContent's classifier stays linear under classifier=mlp, as SentEval's probing.py sets it.
LINEAR_ONLY = {"WordContent", "GenWordContent"}
LENGTH_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))  # SentEval's sentence_length classes
SPLIT_CODES = {"tr": "train", "va": "dev", "te": "test"}


def probing_file(root: Path, file: str) -> Path:
    """`file` in the folder given (`data=`), or in SentEval's `probing/` beside its `downstream/`."""
    for candidate in (root / file, root.parent / "probing" / file, root / "probing" / file):
        if candidate.is_file():
            return candidate
    raise UserError(
        f"probing file {file} is not in {root} nor in {root.parent / 'probing'}: download SentEval's probing "
        "data (data/probing), or generate the surface tasks with `just probing generate=...`"
    )


def read_probing(path: Path, name: str) -> TransferTask:
    """SentEval's format: split code, label, sentence (tab-separated) a line."""
    rows: dict[str, tuple[list[str], list[str]]] = {split: ([], []) for split in SPLIT_CODES.values()}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 3 or fields[0] not in SPLIT_CODES:
            raise UserError(
                f"line {number} of probing file {path} is malformed: expected tr|va|te, a label and a sentence, "
                "tab-separated"
            )
        texts, labels = rows[SPLIT_CODES[fields[0]]]
        texts.append(fields[-1].strip())
        labels.append(fields[1])
    classes = {label: i for i, label in enumerate(sorted(set(rows["train"][1])))}
    if unknown := {label for _, labels in rows.values() for label in labels} - set(classes):
        raise UserError(
            f"probing file {path}: labels {sorted(unknown)[:3]} never occur in its training split"
        )
    return TransferTask(
        name,
        "dev",
        {
            split: Split([texts], [classes[label] for label in labels])
            for split, (texts, labels) in rows.items()
        },
    )


def _reader(name: str, file: str):
    return lambda root: read_probing(probing_file(root, file), name)


for _name, _file in [*SENTEVAL_FILES.items(), *GENERATED.values()]:
    register_transfer_task(
        _name, "dev", ("acc",), in_all=False, quirks=SentEvalQuirks(linear_only=_name in LINEAR_ONLY)
    )(_reader(_name, _file))


# ---- generating the surface tasks -----------------------------------------------------------------


def generate(
    task: str, sentences: Sequence[str], seed: int, shares: tuple[float, float] = (0.8, 0.1)
) -> list[str]:
    """SentEval-format lines of the generated task `task` (a key of GENERATED) from `sentences`
    (whitespace-tokenized, as SentEval's are), split train/dev/test by `shares`, seeded."""
    random = np.random.default_rng(seed)
    tokens = [s.split() for s in dict.fromkeys(s.strip() for s in sentences) if s.strip()]
    if not tokens:
        raise UserError(f"generate={task}: the corpus holds no sentence: give a text file, a sentence a line")
    if task == "sentence_length":
        examples = [
            (str(b), t) for t in tokens for b, (low, high) in enumerate(LENGTH_BINS) if low <= len(t) <= high
        ]
        examples = _balanced(examples, random)
    elif task == "word_content":
        examples = _word_content(tokens)
    elif task == "bigram_shift":
        examples = []
        for t in tokens:
            if len(t) < 3:
                continue
            shifted = bool(random.integers(2))
            if shifted:
                i = int(random.integers(len(t) - 1))
                if t[i] == t[i + 1]:
                    continue  # an inversion that changes nothing
                t = [*t[:i], t[i + 1], t[i], *t[i + 2 :]]
            examples.append(("I" if shifted else "O", t))  # SentEval's labels: inverted, original
    else:
        raise UserError(f"generate={task} is not a generated task: choose from {', '.join(GENERATED)}")
    more = "give more sentences (raise max_sentences=, or a longer corpus=FILE)"
    if len(examples) < 30:
        raise UserError(f"generate={task}: {len(examples)} examples from {len(tokens)} sentences: {more}")
    order = random.permutation(len(examples))
    train_end = int(shares[0] * len(examples))
    dev_end = train_end + int(shares[1] * len(examples))
    positions = np.arange(len(examples))
    code = np.where(positions < train_end, "tr", np.where(positions < dev_end, "va", "te"))
    trained = {examples[i][0] for c, i in zip(code, order, strict=True) if c == "tr"}
    kept = [
        (c, i)
        for c, i in zip(code, order, strict=True)
        if examples[i][0] in trained  # a class never trained on cannot be predicted (word content)
    ]
    # Word content spreads its examples over up to 1,000 classes: a small corpus leaves a class with
    # one example, which lands in training, and dev or test can end up empty.
    empty = [SPLIT_CODES[split] for split in ("va", "te") if not any(c == split for c, _ in kept)]
    if empty:
        raise UserError(
            f"generate={task}: {len(tokens)} sentences leave its {' and '.join(empty)} "
            f"split{'s' if len(empty) > 1 else ''} empty: {more}"
        )
    return [f"{c}\t{examples[i][0]}\t{' '.join(examples[i][1])}" for c, i in kept]


def _balanced(
    examples: list[tuple[str, list[str]]], random: np.random.Generator
) -> list[tuple[str, list[str]]]:
    """As many examples of each class as the rarest class has (SentEval's sets are balanced)."""
    by_class: dict[str, list[int]] = {}
    for i, (label, _) in enumerate(examples):
        by_class.setdefault(label, []).append(i)
    each = min((len(rows) for rows in by_class.values()), default=0)
    kept = sorted(i for rows in by_class.values() for i in random.choice(rows, size=each, replace=False))
    return [examples[i] for i in kept]


def _word_content(tokens: list[list[str]], words: int = 1000) -> list[tuple[str, list[str]]]:
    """Sentences holding exactly one of the `words` mid-frequency words (frequency ranks 2,000 on,
    as Conneau et al. take them, or the middle of a smaller vocabulary), labelled by that word."""
    counts = Counter(w.lower() for t in tokens for w in set(t))
    ranked = [w for w, _ in counts.most_common() if w.isalpha()]
    start = 2000 if len(ranked) >= 3000 else max(0, (len(ranked) - words) // 2)
    targets = set(ranked[start : start + words])
    examples = []
    for t in tokens:
        found = {w.lower() for w in t} & targets
        if len(found) == 1:
            examples.append((found.pop(), t))
    return examples
