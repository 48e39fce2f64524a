"""The planted-leak study's data: how much of a transfer score is memory, and how much domain?

    python -m dataset_builders.leak_control ../shared/data/senteval/downstream out=data/leak-control

Training on half of CR's reviews raised the other half's score too (RESULTS.md, 2026-11-29), so
"decontaminated" scores still carry in-domain learning. A matched control separates the two:
CR's sentences in thirds by line (each of custrev.pos and custrev.neg apart):

- A, the leak: trained on (a task file, `crA.toml`), and left in the test set;
- B, the control: as much in-domain data (`crB.toml`), taken out of the test set (and without
  the few sentences CR repeats in A or C), so a run trained on it saw the domain but none of the
  test items;
- C: seen by no run.

The SentEval downstream folder written beside them holds CR as A and C only (every other task
linked to the source). Transferred with `data=` that folder, `just compare leak control clean`
gives `CR seen` (A: the leak differs from the control there by memory) and `CR unseen` (C: by
the domain alone, which the control matches). Lines are kept byte for byte (Latin-1, as
SentEval's files are read).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from mtl.errors import UserError
from mtl.files import atomic

FILES = (("custrev.pos", 1), ("custrev.neg", 0))
TASK_FILE = """kind = "pairs"
source = "{folder}"
format = "tsv"
train_file = "train.tsv"
dev = "dev.tsv"
test = "test.tsv"
first = "sentence"
second = ""
label = "label"
labels = "0,1"
steps = 50
batch = 64
"""


def thirds(lines: list[str]) -> dict[str, list[str]]:
    """Lines by their index mod 3: A (0), B (1), C (2)."""
    return {part: [line for j, line in enumerate(lines) if j % 3 == k] for k, part in enumerate("ABC")}


def build(source: Path, out: Path) -> dict[str, int]:
    """The leak's and the control's task files and a downstream folder whose CR is A and C;
    returns the sentences of each part."""
    if not (source / "CR" / "custrev.pos").is_file():
        raise UserError(f"{source} holds no CR/custrev.pos: give SentEval's downstream folder")
    out = atomic.check_output_dir(out, "out")
    downstream = out / "downstream"
    (downstream / "CR").mkdir(parents=True, exist_ok=True)
    for task in sorted(p.name for p in source.iterdir() if p.is_dir() and p.name != "CR"):
        if not (downstream / task).exists():
            (downstream / task).symlink_to((source / task).resolve())
    rows: dict[str, list[tuple[str, int]]] = {"A": [], "B": []}
    counts = dict.fromkeys("ABC", 0)
    # CR repeats some sentences: the control trains on none that stays a test item
    tested = {
        line.strip()
        for name, _ in FILES
        for j, line in enumerate((source / "CR" / name).read_text(encoding="latin-1").splitlines())
        if j % 3 != 1
    }
    for name, label in FILES:
        lines = (source / "CR" / name).read_text(encoding="latin-1").splitlines()
        parts = thirds(lines)
        kept = [line for j, line in enumerate(lines) if j % 3 != 1]  # A and C, in their order
        atomic.write_text(downstream / "CR" / name, "\n".join(kept) + "\n", "CR file")
        for part in "ABC":  # test items: every line, blank ones too, as SentEval reads them
            counts[part] += len(parts[part])
        rows["A"] += [(line.strip(), label) for line in parts["A"] if line.strip()]
        rows["B"] += [
            (line.strip(), label) for line in parts["B"] if line.strip() and line.strip() not in tested
        ]
    for part, found in rows.items():
        folder = out / f"cr{part}"
        folder.mkdir(exist_ok=True)
        for split in ("train", "dev", "test"):
            with open(folder / f"{split}.tsv", "w", newline="", encoding="utf-8") as handle:
                csv.writer(handle, delimiter="\t").writerows([("sentence", "label"), *found])
        atomic.write_text(out / f"cr{part}.toml", TASK_FILE.format(folder=folder.resolve()), "task file")
    return counts


def main(argv: list[str]) -> int:
    sources = [a for a in argv if "=" not in a]
    outs = [a.partition("=")[2] for a in argv if a.startswith("out=")]
    if len(sources) != 1 or len(outs) != 1:
        print("usage: python -m dataset_builders.leak_control <senteval downstream folder> out=<folder>")
        return 2
    try:
        counts = build(Path(sources[0]).expanduser(), Path(outs[0]).expanduser())
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"CR in thirds: A {counts['A']:,} (the leak trains on them), B {counts['B']:,} (the control; "
        f"out of the test set), C {counts['C']:,} (no run); written to {outs[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
