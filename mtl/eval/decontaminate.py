"""Transfer scores without the test items a run trained on.

A run's contamination ledger (summary.json's `contamination`, mtl.eval.contamination) lists by
key the test sentences its training data held, exactly or as near duplicates. Here each test
item of a transfer task (a sentence, or a pair) is marked seen when one of its sentences is
listed. The suite keeps the marks beside the per-item outputs (`<task>/seen` in the items file;
STS: per subset) and reports each task's score on all its items and on the unseen ones, so that
`just compare` and `just report` read them without SentEval's data.

A merged encoder (`just merge-encoders`) trained on what its parents trained on: its marks are
the union of its parents' ledgers. An ensemble's (`run=a,b`) are the union of its members'.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtl.eval.contamination import exact_keys, sentence_key
from mtl.eval.transfer.items import Items, everything, item_counts, scores, seen_marks, short_subsets, without
from mtl.eval.transfer.protocols import protocol_of
from mtl.files import schemas
from mtl.files.digest import file_sha256
from mtl.formats import run_files
from mtl.formats.merge_record import merge_record, parent_file
from mtl.runs import RunFolder, read_summary
from mtl.transfer_tasks.registry import TRANSFER_TASKS
from mtl.transfer_tasks.tasks import TransferTask

Seen = dict[str, frozenset[str]]  # test set -> keys of its sentences the run trained on


def run_folder_of(path: str | Path) -> Path:
    """The run folder of `run=`: the folder itself, or the one holding its encoder.json or checkpoint."""
    given = Path(path).expanduser()
    if given.is_dir():
        return given
    return given.parent.parent if given.parent.name == "checkpoints" else given.parent


def ledger_of(folder: Path, visited: frozenset[Path] = frozenset()) -> tuple[Seen | None, str]:
    """The seen keys of a run folder's ledger (a merge's: its parents'), or None and why there are none."""
    summary = read_summary(RunFolder(folder).summary)
    if summary is None:
        merged = merged_parents(folder)
        if merged is None:
            return None, f"{folder.name} has no summary.json (not a run folder, or not finished)"
        here = visited | {folder.resolve()}
        if any(parent.resolve() in here for parent in merged):  # a file naming itself a parent
            return None, f"{folder.name}'s encoder.json names itself among its parents"
        if changed := changed_parent(folder):
            return None, changed
        return union([ledger_of(parent, here) for parent in merged], folder.name)
    where = f"{RunFolder(folder).summary}: its contamination ledger"
    entry = summary.get("contamination")
    if entry is None:
        return None, f"{folder.name} kept no contamination ledger (contamination=false)"
    try:
        ledger = schemas.checked(run_files.Ledger, entry, where, schemas.RESTORE)
    except schemas.DamagedFile as damage:
        return None, str(damage)
    if ledger.get("test_sets") is None:
        return (
            None,
            f"{folder.name} kept no ledger ({ledger.get('skipped') or 'no transfer data to compare with'})",
        )
    entries = ledger["test_sets"]
    if any(counts.get("seen") is None for counts in entries.values()):
        return (
            None,
            f"{folder.name}'s ledger counts seen sentences but does not list them (trained before 2026-11-29)",
        )
    return {task: frozenset(counts["seen"]) for task, counts in entries.items()}, ""


def merged_parents(folder: Path) -> list[Path] | None:
    """The run folders of a merged encoder's parents, or None when `folder` holds no merge."""
    merged = merge_record(folder)
    if merged is None:
        return None
    return [parent_file(folder, parent["path"]).parent for parent in merged["parents"]]


def changed_parent(folder: Path) -> str | None:
    """Why a merge's parents are not the encoders it merged, or None: each parent's weights must
    still hash to the SHA-256 the merge recorded. Without it a parent folder since replaced by
    another run (the same path) would lend the merge that run's ledger: its "unseen" items would
    be another training's (a merge of parents that saw 2 SNLI test sentences read "0 seen")."""
    merged = merge_record(folder) or {"parents": []}
    for parent in merged["parents"]:
        recorded = parent_file(folder, parent["path"])  # its encoder.json: the weights beside it were hashed
        weights = recorded.with_suffix(".safetensors") if recorded.suffix == ".json" else recorded
        try:
            found = file_sha256(weights)
        except OSError:
            return f"{folder.name}'s parent {weights} is gone: its ledger cannot be the merge's"
        if found != parent["sha256"]:
            return (
                f"{folder.name}'s parent {weights} has changed since the merge (its SHA-256 is not the one "
                "recorded): what it trained on is not the merge's; merge again from the parents as they are"
            )
    return None


def union(ledgers: Sequence[tuple[Seen | None, str]], name: str) -> tuple[Seen | None, str]:
    """Several encoders' training at once (a merge's parents, an ensemble's members)."""
    if not ledgers:
        return None, f"{name}: no encoders to take a ledger from"
    if missing := [why for seen, why in ledgers if seen is None]:
        return None, f"{name}: {missing[0]}"
    tasks = set.intersection(*(set(seen) for seen, _ in ledgers if seen is not None))
    return {
        task: frozenset().union(*(seen[task] for seen, _ in ledgers if seen is not None)) for task in tasks
    }, ""


def runs_seen(runs: Sequence[str]) -> tuple[Seen | None, str]:
    """What the encoder of `run=` (one run, or an ensemble's) trained on, or None and why not."""
    if not runs:
        return None, "a baseline trained on nothing of the test sets"
    return union([ledger_of(run_folder_of(run)) for run in runs], ", ".join(runs))


def item_marks(task: TransferTask, seen: frozenset[str]) -> Items:
    """The items file's marks of `task`: per test item, True where one of its sentences is seen."""
    sts = TRANSFER_TASKS[task.name].protocol == "sts"
    splits = task.splits if sts else {"": task.splits[protocol_of(task).tested]}
    marks = {}
    for prefix, split in splits.items():
        texts = [text for column in split.sentences for text in column]
        keys = [sentence_key(digest) for digest in exact_keys(list(dict.fromkeys(texts))).tolist()]
        is_seen = {text: key in seen for text, key in zip(dict.fromkeys(texts), keys, strict=True)}
        marks[f"{prefix}/seen" if prefix else "seen"] = np.array(
            [any(is_seen[text] for text in item) for item in zip(*split.sentences, strict=True)], dtype=bool
        )
    return marks


def summary(items: Items) -> dict[str, Any] | None:
    """A task's score (points) on all its items and on the unseen ones, with the counts; None
    without marks. `unseen_score` is None when too few items are left; an STS subset left with
    too few is named in `subsets_left_out` (the unseen score: the mean over the others)."""
    marks = seen_marks(items)
    if marks is None:
        return None
    kept = without(items, marks)
    found = {
        "items": int(sum(len(mark) for mark in marks.values())),
        "seen": int(sum(int(mark.sum()) for mark in marks.values())),
        "score": float(scores(items, everything(item_counts(items)))),
        "unseen_score": float(scores(kept, everything(item_counts(kept)))) if kept is not None else None,
    }
    if kept is not None and (short := short_subsets(items, marks)):
        found["subsets_left_out"] = short
    return found


def summaries(items: dict[str, Items]) -> dict[str, dict[str, Any]]:
    """`summary` of every task whose items hold marks."""
    return {task: found for task, arrays in items.items() if (found := summary(arrays)) is not None}
