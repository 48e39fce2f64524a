"""The contamination ledger: which test sentences of the transfer tasks a run trained on.

Every training sentence and every test sentence mtl knows (each transfer task's test split; a
k-fold task's whole set, since each of its sentences is tested once; every STS subset) is
normalised (NFKC, lowercase, word characters only) and compared two ways: exactly, and as a
near duplicate (MinHash over word 3-shingles, 64 permutations, locality-sensitive hashing in 16
bands of 4, kept where the signatures agree on at least 80% of their positions: an estimate of
the shingles' Jaccard similarity; Broder 1997). A test set's entry counts its distinct
sentences, those seen exactly and those seen only as a near duplicate, and lists the seen ones
by key (`sentence_key`: the first 8 bytes of the normalised text's digest, in hex; one per seen
sentence, so sentences that normalise alike repeat a key), so that a
transfer report can score each task again without the items holding them (mtl.eval.decontaminate).

No tool fills this in automatically (MTEB's `training_datasets` is annotated by hand); a run
writes it to summary.json, its model card and, for the test sets MTEB also has, the MTEB
adapter's `training_datasets`. The test sets' hashes are cached per data folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mtl.errors import UserError
from mtl.files.atomic import atomic_path
from mtl.files.paths import cache_dir, data_dir
from mtl.transfer_tasks import registry
from mtl.transfer_tasks.tasks import read_task

PERMUTATIONS, BANDS, SHINGLE, NEAR = 64, 16, 3, 0.8
_FORMAT = 1  # of the cached test set hashes: raised when normalisation or hashing changes
_PRIME = (1 << 31) - 1  # hashes and permutations mod a 31-bit prime: products fit in 64 bits
_COEFFICIENTS = np.random.default_rng(20260101).integers(1, _PRIME, size=(2, PERMUTATIONS), dtype=np.uint64)
_BAND_MULTIPLIERS = np.random.default_rng(20260102).integers(
    1, 1 << 62, size=PERMUTATIONS // BANDS, dtype=np.uint64
) | np.uint64(1)
# The transfer test sets MTEB also evaluates, under MTEB's names (for its `training_datasets`).
MTEB_NAMES = {
    "STS12": "STS12",
    "STS13": "STS13",
    "STS14": "STS14",
    "STS15": "STS15",
    "STS16": "STS16",
    "STS-B": "STSBenchmark",
    "SICK-R": "SICK-R",
}
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def exact_keys(texts: Iterable[str]) -> np.ndarray:
    """(N,) 16-byte digests of the normalised texts."""
    return np.array(
        [hashlib.blake2b(" ".join(words(t)).encode(), digest_size=16).digest() for t in texts], dtype="S16"
    )


def sentence_key(digest: bytes) -> str:
    """A test sentence's key in the ledger's `seen` list: its `exact_keys` digest's first 8 bytes,
    in hex (a collision among a task's few thousand sentences: about 1 in 10^11)."""
    return digest[:8].hex()


def signatures(texts: Sequence[str], chunk: int = 20000) -> np.ndarray:
    """(N, PERMUTATIONS) uint64 MinHash signatures of the texts' word 3-shingles (a text of fewer
    words: one shingle of all of them; none: an empty text's own signature)."""
    out = np.empty((len(texts), PERMUTATIONS), dtype=np.uint64)
    a, b = _COEFFICIENTS
    for start in range(0, len(texts), chunk):
        hashes, owners = [], []
        for row, text in enumerate(texts[start : start + chunk]):
            tokens = words(text)
            shingles = {" ".join(tokens[i : i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))}
            hashes += [
                int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
                for s in shingles
            ]
            owners += [row] * len(shingles)
        values = np.asarray(hashes, dtype=np.uint64) % np.uint64(_PRIME)
        permuted = (values[:, None] * a[None, :] + b[None, :]) % np.uint64(_PRIME)
        starts = np.flatnonzero(np.diff(np.asarray(owners), prepend=-1))  # each text's first shingle
        out[start : start + len(starts)] = np.minimum.reduceat(permuted, starts, axis=0)
    return out


def band_hashes(signatures: np.ndarray) -> np.ndarray:
    """(N, BANDS) uint64: each band of a signature folded into one number (uint64 arithmetic
    wraps); two texts sharing a band's number are candidates, checked on their signatures."""
    rows = PERMUTATIONS // BANDS
    folded = signatures.reshape(len(signatures), BANDS, rows) * _BAND_MULTIPLIERS[None, None, :]
    return folded.sum(axis=2, dtype=np.uint64)


def test_sets(root: Path, progress: bool = False) -> dict[str, list[str]]:
    """Each registered transfer task's distinct test sentences, read from SentEval's folder."""
    found = {}
    for name, spec in tqdm(registry.TRANSFER_TASKS.items(), desc="read test sets", disable=not progress):
        try:  # (quietly: a reader's notes on the task's training split are not about its test set)
            with contextlib.redirect_stderr(io.StringIO()):
                task = read_task(name, root)
        except UserError:
            continue  # a task whose data this copy lacks: left out of the ledger, and said so
        tested = task.splits.values() if spec.protocol in ("cv", "sts") else [task.splits["test"]]
        found[name] = list(dict.fromkeys(t for split in tested for column in split.sentences for t in column))
    return found


def hashed_test_sets(root: Path, progress: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """{task: {"keys", "signatures"}} of `test_sets(root)`, cached by the folder's files."""
    files = sorted(f for f in root.rglob("*") if f.is_file())
    identity = json.dumps(
        [_FORMAT, str(root.resolve()), sorted(registry.TRANSFER_TASKS), PERMUTATIONS, SHINGLE]
        + [(str(f.relative_to(root)), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    )
    file = cache_dir() / "contamination" / f"{hashlib.sha256(identity.encode()).hexdigest()[:32]}.npz"
    if (cached := read_cached(file)) is not None:
        return cached
    hashed = {
        name: {"keys": exact_keys(texts), "signatures": signatures(texts)}
        for name, texts in test_sets(root, progress).items()
    }
    arrays = {f"{n}/{part}": values for n, parts in hashed.items() for part, values in parts.items()}
    with atomic_path(file, "contamination cache") as partial, open(partial, "wb") as out:
        np.savez(out, names=json.dumps(sorted(hashed)), **arrays)
    return hashed


def read_cached(file: Path) -> dict[str, dict[str, np.ndarray]] | None:
    """A cache entry of `hashed_test_sets`, or None when there is none or it is damaged (a miss:
    it is computed again, never an error at the end of a training run)."""
    try:
        with np.load(file, allow_pickle=False) as saved:
            names = json.loads(str(saved["names"]))
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                return None
            found = {n: {"keys": saved[f"{n}/keys"], "signatures": saved[f"{n}/signatures"]} for n in names}
    except Exception:  # noqa: BLE001  (numpy and zipfile raise many kinds for a damaged archive)
        return None
    for parts in found.values():
        keys, marks = parts["keys"], parts["signatures"]
        if (
            keys.dtype != np.dtype("S16")
            or marks.dtype != np.uint64
            or keys.ndim != 1
            or marks.shape != (len(keys), PERMUTATIONS)
        ):
            return None
    return found


def transfer_root() -> Path | None:
    """SentEval's downstream folder under $MTL_DATA_DIR, where the transfer suite finds it."""
    root = data_dir() / "senteval" / "downstream" if data_dir() is not None else None
    return root if root is not None and root.is_dir() else None


def ledger(training: Sequence[str], root: Path | None = None, progress: bool = False) -> dict[str, Any]:
    """{"test_sets": {task: {"sentences", "exact", "near"}}, "method": ...}, or {"skipped": why}."""
    root = root or transfer_root()
    if root is None:
        return {"skipped": "no transfer data ($MTL_DATA_DIR/senteval/downstream) to compare with"}
    tests = hashed_test_sets(root, progress)
    distinct = list(dict.fromkeys(training))
    seen = set(exact_keys(distinct).tolist())
    index = TrainedIndex(signatures(distinct))
    entries = {}
    for name, hashed in tests.items():
        keys = hashed["keys"].tolist()
        exact = np.array([key in seen for key in keys], dtype=bool)
        near = np.zeros_like(exact)
        near[~exact] = index.near_duplicates(hashed["signatures"][~exact])
        entries[name] = {
            "sentences": len(exact),
            "exact": int(exact.sum()),
            "near": int(near.sum()),
            "seen": sorted(sentence_key(key) for key, hit in zip(keys, exact | near, strict=True) if hit),
        }
    return {
        "method": f"normalised exact match; MinHash {PERMUTATIONS}x{SHINGLE}-shingles, Jaccard >= {NEAR}",
        "training_sentences": len(distinct),
        "test_sets": entries,
    }


class TrainedIndex:
    """The training signatures' bands, sorted per band for membership tests, and the rows holding
    each band value, for the test sentences that share one."""

    def __init__(self, trained: np.ndarray):
        self.trained, self.bands = trained, band_hashes(trained)
        self.sorted = [np.unique(self.bands[:, band]) for band in range(BANDS)]

    def near_duplicates(self, tested: np.ndarray) -> np.ndarray:
        """(N,) True where a `tested` signature has a trained one agreeing on >= NEAR of positions."""
        found = np.zeros(len(tested), dtype=bool)
        if not len(tested) or not len(self.trained):
            return found
        tested_bands = band_hashes(tested)
        shared = np.zeros(tested_bands.shape, dtype=bool)
        for band, values in enumerate(self.sorted):
            at = np.searchsorted(values, tested_bands[:, band]).clip(max=len(values) - 1)
            shared[:, band] = values[at] == tested_bands[:, band]
        candidates = np.flatnonzero(shared.any(axis=1))
        holders: dict[tuple[int, int], list[int]] = {}
        for band in range(BANDS):  # the trained rows of the band values some candidate shares
            wanted = np.unique(tested_bands[candidates, band])
            for row in np.flatnonzero(np.isin(self.bands[:, band], wanted)):
                holders.setdefault((band, int(self.bands[row, band])), []).append(int(row))
        for row in candidates:
            rows = {
                r
                for band in np.flatnonzero(shared[row])
                for r in holders[(band, int(tested_bands[row, band]))]
            }
            agreement = (self.trained[sorted(rows)] == tested[row]).mean(axis=1)
            found[row] = bool((agreement >= NEAR).any())
        return found


def seen_test_sets(entry: dict[str, Any]) -> dict[str, int]:
    """Test set -> sentences seen in training (exact or near), for those with any."""
    found = entry.get("test_sets") if isinstance(entry, dict) else None
    seen = {}
    for name, counts in (found if isinstance(found, dict) else {}).items():
        readable = isinstance(counts, dict) and all(isinstance(counts.get(k), int) for k in ("exact", "near"))
        if readable and counts["exact"] + counts["near"]:
            seen[name] = counts["exact"] + counts["near"]
    return seen  # (a summary.json damaged or from elsewhere: what of it reads as counts)


def mteb_training_datasets(entry: dict[str, Any]) -> set[str]:
    """For MTEB's `training_datasets`: its tasks whose test sets the run saw sentences of."""
    return {MTEB_NAMES[name] for name in seen_test_sets(entry) if name in MTEB_NAMES}
