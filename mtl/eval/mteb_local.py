"""MTEB's STS tasks built from SentEval's copies (`just mteb ... data=local`), for a machine that
cannot reach the Hugging Face Hub but holds SentEval's data, as `just transfer` reads it.

Each task keeps MTEB's own definition (its metadata, main score and score range) and takes its
pairs from SentEval's files through the transfer suite's readers:

- STS12-STS16: every SentEval subset of the year, pooled into one test set as MTEB's copies are.
  SentEval's files hold the same pairs, scores and text as MTEB's (checked against MTEB's recorded
  statistics: pair count, characters, unique pairs, mean score), so the scores are MTEB's.
  MTEB scores the pooled set; `just transfer` averages per-subset correlations as SentEval does:
  the two numbers differ by design.
- STSBenchmark (its test split) and SICK-R (train, trial and test together, MTEB's 9,927 pairs):
  the same pairs and scores, but SentEval's get_transfer_data script tokenized their text (Moses;
  STS-B lowercased too), so an encoder reads slightly different sentences than MTEB's raw copies.
  The report says so per task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl.errors import UserError
from mtl.files.paths import data_dir
from mtl.transfer_tasks.tasks import read_task


@dataclass(frozen=True)
class LocalSource:
    transfer_task: str  # the transfer suite's task whose files it reads
    splits: tuple[str, ...] | None  # the splits pooled into MTEB's test set; None: every subset
    note: str  # how the text compares with MTEB's own copy


SAME_TEXT = "MTEB's pairs, scores and text"
TOKENIZED = "MTEB's pairs and scores; text tokenized by SentEval's script"

LOCAL_TASKS: dict[str, LocalSource] = {
    **{f"STS{year}": LocalSource(f"STS{year}", None, SAME_TEXT) for year in (12, 13, 14, 15, 16)},
    "STSBenchmark": LocalSource("STS-B", ("test",), TOKENIZED + " (Moses, lowercased)"),
    "SICK-R": LocalSource("SICK-R", ("train", "dev", "test"), TOKENIZED + " (Moses)"),
}
# The transfer suite's names, and the one without a hyphen people type
ALIASES = {"STS-B": "STSBenchmark", "SICKR": "SICK-R"}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def pairs(name: str, root: Path) -> tuple[list[str], list[str], list[float]]:
    """MTEB task `name`'s test pairs (first sentences, second sentences, gold scores) from the
    SentEval downstream folder `root`."""
    source = LOCAL_TASKS[name]
    task = read_task(source.transfer_task, root)  # a damaged folder: one line naming data=
    splits = [task.splits[split] for split in (source.splits or list(task.splits))]
    first = [sentence for split in splits for sentence in split.sentences[0]]
    second = [sentence for split in splits for sentence in split.sentences[1]]
    scores = [float(score) for split in splits for score in split.labels]
    return first, second, scores


def senteval_root(data: str) -> Path:
    """SentEval's downstream folder for data=local ($MTL_DATA_DIR's) or data=PATH."""
    if data != "local":
        root = Path(data).expanduser()
    elif (shared := data_dir()) is None:
        raise UserError(
            "data=local: no SentEval data: set MTL_DATA_DIR, or give data=PATH to SentEval's downstream folder"
        )
    else:
        root = shared / "senteval" / "downstream"
    if not root.is_dir():
        raise UserError(
            f"data={data}: SentEval's downstream folder {root} is missing (its STS/ and SICK/ folders)"
        )
    return root


def check_local(names: list[str]) -> None:
    if unknown := [name for name in names if name not in LOCAL_TASKS]:
        raise UserError(
            f"data=local: no local copy of {', '.join(unknown)}; SentEval's data gives "
            f"{', '.join(LOCAL_TASKS)} (leave data= out to take other tasks from the Hub)"
        )


def with_local_data(tasks: list[Any], root: Path) -> list[Any]:
    """MTEB's `tasks` (from `mteb.get_tasks`) holding their test pairs read from `root`: MTEB's
    load_data() keeps data a task already holds, so nothing is fetched."""
    from datasets import Dataset, DatasetDict

    check_local([task.metadata.name for task in tasks])
    for task in tasks:
        first, second, scores = pairs(task.metadata.name, root)
        column_a, column_b = task.column_names
        task.dataset = DatasetDict(
            {"test": Dataset.from_dict({column_a: first, column_b: second, "score": scores})}
        )
        task.data_loaded = True
    return tasks
