"""Record the files of a copy SentEval's download script produced (size and SHA-256 of each),
which `just get-senteval` checks what it writes against:

    python -m dataset_builders.senteval_record ../shared/data/senteval/downstream ../shared/data/snli

The SNLI folder's dev and test files (SentEval's layout: labels, s1, s2) are recorded as
downstream/SNLI/; its training files only when they are the whole set (`labels.train`).

TREC's files in ../shared/data are the raw ones (they still hold the backquotes and apostrophes
the script removes): what is recorded for them is what the script makes of them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from dataset_builders.senteval import RECORDED_FILE
from dataset_builders.senteval_text import without_quotes
from mtl.files import atomic
from mtl.files.digest import file_sha256


def record(downstream: Path, snli: Path | None) -> dict[str, list]:
    files = {
        f"downstream/{path.relative_to(downstream).as_posix()}": path
        for path in sorted(downstream.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }
    if snli is not None:
        for path in sorted(snli.glob("*")):
            column, _, split = path.name.partition(".")
            if column in ("labels", "s1", "s2") and split in ("dev", "test", "train"):
                files[f"downstream/SNLI/{path.name}"] = path
    recorded = {name: [path.stat().st_size, file_sha256(path)] for name, path in files.items()}
    for name, path in files.items():
        if name.startswith("downstream/TREC/") and name.endswith(".label"):
            data = without_quotes(path.read_bytes())
            recorded[name] = [len(data), hashlib.sha256(data).hexdigest()]
    return recorded


def main(argv: list[str]) -> None:
    downstream, snli = Path(argv[0]), Path(argv[1]) if len(argv) > 1 else None
    recorded = record(downstream, snli)
    lines = [f"{json.dumps(name)}: [{size}, {json.dumps(sha)}]" for name, (size, sha) in recorded.items()]
    atomic.write_text(RECORDED_FILE, "{\n" + ",\n".join(lines) + "\n}\n", "record")  # a line per file
    print(f"{len(recorded)} files recorded in {RECORDED_FILE}")


if __name__ == "__main__":
    main(sys.argv[1:])
