"""GloVe-format word vectors: read .txt/.txt.gz/.zip, restrict to a vocabulary, cache.

Two caches: a restricted load (a run's or build's vocabulary) is kept as one small .npz;
the whole file is converted once into a memory-mapped store (words + float32 matrix), so
looking up words an encoder meets later (vocabulary expansion) never reads the text again.

The text format is one word per line followed by `dim` numbers separated by single
spaces. Some words of glove.840B contain spaces, so the *last* `dim` fields are the vector
and everything before them is the word. Duplicate words keep their first vector.
"""

from __future__ import annotations

import codecs
import functools
import gzip
import hashlib
import io
import os
import shutil
import warnings
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from tqdm.auto import tqdm

from mtl.errors import UserError
from mtl.files.digest import file_sha256
from mtl.files.paths import cache_dir, data_dir

FLOAT32_MAX = float(np.finfo(np.float32).max)  # a vector beyond it would read back as inf
GLOVE_840B_URL = "https://nlp.stanford.edu/data/glove.840B.300d.zip"
GLOVE_840B_HUB = ("stanfordnlp/glove", "glove.840B.300d.zip")  # the same file, on Stanford NLP's Hub page
_DIM_PROBE_LINES = 100
_CACHE_FORMAT = 3  # 2: entries read with field-count and finiteness checks; 3: keyed by content
_STORE_FORMAT = 1


@dataclass
class WordVectors:
    """Row `i` of `matrix` (float32, shape (V, D)) is the vector of `words[i]`."""

    words: list[str]
    matrix: np.ndarray
    source: str

    def __post_init__(self) -> None:
        self.index = {word: i for i, word in enumerate(self.words)}

    @property
    def dim(self) -> int:
        return self.matrix.shape[1]

    def digest(self) -> str:
        """SHA-256 of the words and their vectors as loaded: what a run or a build used."""
        hasher = hashlib.sha256("\n".join(self.words).encode("utf-8"))
        hasher.update(np.ascontiguousarray(self.matrix, dtype=np.float32).tobytes())
        return hasher.hexdigest()

    def identity(self) -> dict[str, Any]:
        """What recognises the file whatever its name (`just reproduce`): its dimension and the
        first values of its vector for "the", when it has one."""
        found: dict[str, Any] = {"dim": int(self.matrix.shape[1])}
        if "the" in self.index:
            found["the"] = [round(float(v), 5) for v in self.matrix[self.index["the"]][:3]]
        return found

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index


def resolve_vectors_path(vectors: str | None, download: bool = True) -> Path | None:
    """`vectors=PATH`, else `MTL_VECTORS`, else GloVe in `MTL_DATA_DIR/glove`, else download
    (`download=False`: None there, a check that fetches nothing)."""
    chosen = vectors or os.environ.get("MTL_VECTORS")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise UserError(f"vectors file {path} does not exist: pass vectors=PATH to a GloVe file")
        return path
    if (local := data_dir()) is not None:
        folder = local / "glove"
        candidates = sorted(p for p in folder.iterdir() if _is_vectors_file(p)) if folder.is_dir() else []
        preferred = [p for p in candidates if p.name.startswith("glove.840B.300d")]
        if preferred or len(candidates) == 1:
            return (preferred or candidates)[0]
        found = (
            f"{len(candidates)} vectors files ({', '.join(p.name for p in candidates)})"
            if candidates
            else "none"
        )
        raise UserError(
            f"MTL_DATA_DIR={local} should hold one GloVe file in glove/, found {found}: pass vectors=PATH"
        )
    return download_glove_840b() if download else None


def download_glove_840b(endpoint: str | None = None) -> Path:
    """The paper's vectors (2.0 GB zip), downloaded once into the user cache by huggingface_hub
    from Stanford NLP's own Hub repository (the file nlp.stanford.edu serves): an interrupted
    download resumes where it stopped when run again, and the file is checked against the
    SHA-256 the Hub records before it is used. `endpoint`: another Hub (a mirror; tests)."""
    repo, filename = GLOVE_840B_HUB
    folder = cache_dir() / "glove"
    target = folder / filename
    if target.is_file():
        return target
    from huggingface_hub import HfApi, hf_hub_download  # only for the one download

    try:
        (info,) = HfApi(endpoint=endpoint).get_paths_info(repo, [filename])
        expected = info.lfs.sha256 if info.lfs is not None else None
        path = Path(hf_hub_download(repo, filename, local_dir=folder, endpoint=endpoint))
    except Exception as error:  # network, the Hub, offline mode: all mean the same to the user
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else "no message"
        raise UserError(
            f"could not download GloVe {filename} from {repo} on the Hugging Face Hub ({type(error).__name__}: "
            f"{reason}): run again to resume it, or download {GLOVE_840B_URL} yourself and pass "
            "vectors=PATH or set MTL_VECTORS"
        ) from None
    if expected is not None and (found := file_sha256(path)) != expected:
        path.unlink()
        raise UserError(
            f"the downloaded {filename} has SHA-256 {found[:12]}..., not the {expected[:12]}... the Hub "
            "records: it was removed; run again to download it anew"
        )
    return path


def load_vectors(
    path: str | Path, vocabulary: Iterable[str] | None = None, use_cache: bool = True
) -> WordVectors:
    """Vectors of `path`, restricted to `vocabulary` when given (words in file order).

    A restricted load is cached under the user cache dir, keyed by the file's contents
    (`content_digest`) and the vocabulary, so a second load only reads one small .npz file.
    Another vocabulary takes its rows out of the file's store (`vector_store`: converted once,
    as transfer's vocabulary expansion converts it), not from a parse of every line again (3 s
    for glove.6B.50d here, minutes for glove.840B.300d): each build, training and data set has
    its own vocabulary. `use_cache=False` reads the file itself and writes nothing.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"vectors file {path} does not exist: pass vectors=PATH to a GloVe file")
    wanted = None if vocabulary is None else set(vocabulary)
    cache_file = _cache_file(path, wanted) if use_cache and wanted is not None else None
    if cache_file is not None and (cached := _read_cache(cache_file, path)) is not None:
        return cached
    vectors = lookup(path, wanted) if cache_file is not None else _read(path, wanted)
    if cache_file is not None:
        _write_cache(cache_file, vectors)
    return vectors


def vector_store(path: str | Path) -> WordVectors:
    """Every vector of `path`, its matrix memory-mapped from the cache (converted on first use).

    The store is keyed by the file's contents (`content_digest`, remembered per file identity),
    so a copy elsewhere finds it and a changed file gets a new one. One per process and file.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"vectors file {path} does not exist: pass vectors=PATH to a GloVe file")
    return _open_store(content_digest(path), str(path))


@functools.lru_cache(maxsize=4)
def _open_store(digest: str, path: str) -> WordVectors:
    folder = cache_dir() / "vectors" / "stores" / f"{_STORE_FORMAT}-{digest[:32]}"
    if not (folder / "matrix.npy").is_file():
        vectors = _read(Path(path), None)
        if not _write_store(folder, vectors):
            return vectors  # no store (an unwritable cache): what was just read, not a second read
    try:
        words = (folder / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
        matrix = np.load(folder / "matrix.npy", mmap_mode="r", allow_pickle=False)
        if len(words) != len(matrix):
            raise ValueError(f"{len(words)} words but {len(matrix)} vectors")
    except (OSError, ValueError) as error:
        warnings.warn(f"vector store {folder} is damaged ({error}): converting {path} again", stacklevel=3)
        shutil.rmtree(folder, ignore_errors=True)
        _write_store(folder, vectors := _read(Path(path), None))
        return vectors
    return WordVectors(words, matrix, path)


def _write_store(folder: Path, vectors: WordVectors) -> bool:
    """Write the store beside its final place, then rename it there (a crash leaves no half store);
    whether a store is now in place."""
    partial = folder.with_name(f"{folder.name}.{os.getpid()}.part")
    try:
        partial.mkdir(parents=True, exist_ok=True)
        (partial / "words.txt").write_text("".join(f"{word}\n" for word in vectors.words), encoding="utf-8")
        np.save(partial / "matrix.npy", np.ascontiguousarray(vectors.matrix, dtype=np.float32))
        os.replace(partial, folder)
    except OSError as error:
        if not (folder / "matrix.npy").is_file():  # unless another process won the race: theirs is as good
            warnings.warn(
                f"could not store vectors in {folder.parent} ({error.strerror or error}): every lookup "
                "reads the file again (set MTL_CACHE_DIR to a writable folder)",
                stacklevel=4,
            )
            return False
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return True


def lookup(path: str | Path, words: Iterable[str]) -> WordVectors:
    """The vectors `path` has for `words` (in file order), out of its store: no read of the file."""
    store = vector_store(path)
    rows = sorted(store.index[word] for word in set(words) if word in store.index)
    return WordVectors([store.words[row] for row in rows], np.array(store.matrix[rows]), store.source)


def _read(path: Path, wanted: set[str] | None) -> WordVectors:
    wanted_bytes = None if wanted is None else {word.encode("utf-8") for word in wanted}
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[bytes] = set()
    with open_lines(path) as lines:
        lines = iter(lines)
        head = [line for _, line in zip(range(_DIM_PROBE_LINES), lines, strict=False)]
        if head:
            head[0] = _without_byte_order_mark(path, head[0])
        # word2vec's and fastText's `.vec` files begin with `<words> <dim>`: not a vector
        counted = len(head) > 1 and _is_count_line(head[0])
        dim = _infer_dim(path, head[1:] if counted else head)
        start, header = 1, None
        if counted and int(head[0].split()[1]) == dim:
            header, head, start = head[0], head[1:], 2
        numbered = enumerate(_chain(head, lines), start=start)
        vector_lines = 0
        for number, raw in tqdm(numbered, desc=f"read {path.name}", unit=" lines", mininterval=1):
            line = raw.rstrip()
            if not line:
                continue
            vector_lines += 1
            spaces = line.count(b" ")
            if spaces == dim:
                word = line[: line.index(b" ")]
            elif spaces > dim:
                word = line.rsplit(b" ", dim)[0]
                if _all_numbers(word.split(b" ")[1:]):
                    raise _malformed(path, number, f"{spaces} numbers, but the file's vectors have {dim}")
            else:
                raise _malformed(path, number, f"{spaces} numbers, but the file's vectors have {dim}")
            if word in seen or (wanted_bytes is not None and word not in wanted_bytes):
                continue
            seen.add(word)
            try:
                wide = np.array(line.rsplit(b" ", dim)[1:], dtype=np.float64)
                words.append(word.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as error:
                raise _malformed(path, number, str(error)) from None
            if not np.isfinite(wide).all():
                raise _malformed(
                    path, number, f"{words[-1]!r}'s vector holds a value that is not finite (nan or inf)"
                )
            if (np.abs(wide) > FLOAT32_MAX).any():
                raise _malformed(
                    path,
                    number,
                    f"{words[-1]!r}'s vector holds {wide[np.abs(wide) > FLOAT32_MAX][0]:g}, beyond float32's range",
                )
            rows.append(wide.astype(np.float32))
        if header is not None and dim == 1 and int(header.split()[0]) != vector_lines:
            # not a `.vec` header after all: a 1-d file's first word is a number ("2 1": "2", [1.0])
            word = header.split()[0]
            if (wanted_bytes is None or word in wanted_bytes) and word not in seen:
                words.insert(0, word.decode("utf-8"))
                rows.insert(0, np.array(header.split()[1:], dtype=np.float32))
    if not words and wanted is None:
        raise UserError(f"vectors file {path} holds no vectors: is it a GloVe text file?")
    matrix = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    return WordVectors(words, matrix, str(path))


def _without_byte_order_mark(path: Path, first: bytes) -> bytes:
    """The first line without a UTF-8 BOM (Windows editors add one; it would glue itself to "the")."""
    if first.startswith(codecs.BOM_UTF8):
        return first[len(codecs.BOM_UTF8) :]
    if first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UserError(f"vectors file {path} is UTF-16: convert it to UTF-8 (GloVe's encoding)")
    return first


def _infer_dim(path: Path, head: list[bytes]) -> int:
    """The most common field count among the first lines (rare words with spaces add fields)."""
    counts = Counter(len(line.split(b" ")) - 1 for line in (raw.rstrip() for raw in head) if line)
    dim = max(counts, key=lambda count: (counts[count], -count)) if counts else 0
    if dim < 1:
        raise UserError(f"vectors file {path} is empty or not in GloVe text format (word v1 v2 …)")
    return dim


def _is_count_line(line: bytes) -> bool:
    """Whether `line` may be the header word2vec and fastText `.vec` files start with: two whole
    numbers, the word count and the dimension (a header only when the second is the vectors')."""
    fields = line.split()
    return len(fields) == 2 and all(f.isdigit() for f in fields)


def _all_numbers(fields: list[bytes]) -> bool:
    """Whether every field parses as a number: then a line has too many numbers, not a word with spaces.

    glove.840B has a few hundred words with spaces ("at name@domain.com", ". . ."), none of
    whose later parts are numbers.
    """
    try:
        for field in fields:
            float(field)
    except ValueError:
        return False
    return bool(fields)


def _chain(head: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    yield from head
    yield from rest


def _malformed(path: Path, number: int, reason: str) -> UserError:
    return UserError(f"malformed line {number} in vectors file {path}: {reason}")


@contextmanager
def open_lines(path: Path) -> Iterator[BinaryIO]:
    """The vectors file's bytes as a stream, out of its zip (one member) or gzip when it is one."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                members = [m for m in archive.namelist() if not m.endswith("/")]
                if len(members) != 1:
                    raise UserError(f"zip file {path} must hold exactly one vectors file, found {members}")
                with archive.open(members[0]) as raw:
                    yield io.BufferedReader(raw, buffer_size=1 << 20)
        elif path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                yield handle
        else:
            with open(path, "rb", buffering=1 << 20) as handle:
                yield handle
    except (zipfile.BadZipFile, gzip.BadGzipFile, EOFError, OSError) as error:
        raise UserError(f"cannot read vectors file {path}: {error}") from None


def _is_vectors_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith((".txt", ".txt.gz", ".zip", ".vec", ".vec.gz"))


def content_digest(path: Path) -> str:
    """SHA-256 of the file's bytes, computed once and remembered in the cache with its identity.

    The identity is the resolved path, size, modification and change time and inode:
    a file replaced by another of the same size and modification time (which `cp -p`,
    `touch -r` or an archive keep) still has a new change time, so it is hashed again.
    """
    resolved = path.resolve()
    stat = resolved.stat()
    identity = f"{resolved}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}\0{stat.st_ino}"
    memo = cache_dir() / "vectors" / "digests" / hashlib.sha256(identity.encode()).hexdigest()[:32]
    with suppress(OSError, UnicodeDecodeError):
        remembered = memo.read_text(encoding="utf-8").strip()
        if len(remembered) == 64 and all(c in "0123456789abcdef" for c in remembered):
            return remembered
    hasher = hashlib.sha256()
    with (
        open(resolved, "rb") as handle,
        tqdm(
            total=stat.st_size,
            unit="B",
            unit_scale=True,
            desc=f"fingerprint {path.name}",
            mininterval=1,
            disable=stat.st_size < 1 << 26,  # under 64 MB it takes well under a second
        ) as bar,
    ):
        while chunk := handle.read(1 << 22):
            hasher.update(chunk)
            bar.update(len(chunk))
    digest = hasher.hexdigest()
    with suppress(OSError):  # best effort, as the cache itself
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f"{memo.name}.{os.getpid()}.part")
        partial.write_text(digest + "\n", encoding="utf-8")
        os.replace(partial, memo)
    return digest


def _cache_file(path: Path, wanted: set[str]) -> Path:
    digest = hashlib.sha256()
    digest.update(f"{_CACHE_FORMAT}\0{content_digest(path)}".encode())
    for word in sorted(wanted):
        digest.update(word.encode("utf-8") + b"\0")
    return cache_dir() / "vectors" / f"{digest.hexdigest()[:32]}.npz"  # no file name: a moved copy hits


def _read_cache(cache_file: Path, path: Path) -> WordVectors | None:
    """The cached vectors, or None when there are none or the entry is damaged (it is then re-read)."""
    if not cache_file.is_file():
        return None
    try:
        with np.load(cache_file, allow_pickle=False) as cached:
            words, matrix = cached["words"].tolist(), cached["matrix"]
        if len(words) != len(matrix) or not np.isfinite(matrix).all():
            raise ValueError("words and vectors disagree")
    except Exception as error:  # a damaged .npz raises zipfile, pickle, value and key errors
        warnings.warn(
            f"vector cache entry {cache_file} is damaged ({error}): reading {path} again", stacklevel=3
        )
        return None
    return WordVectors(words, matrix, str(path))


def _write_cache(cache_file: Path, vectors: WordVectors) -> None:
    """Best effort: an unwritable cache folder or a full disk costs a re-read next time, nothing more."""
    partial = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.part")
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as handle:
            np.savez(handle, words=np.array(vectors.words, dtype=str), matrix=vectors.matrix)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, cache_file)
    except OSError as error:
        warnings.warn(
            f"could not cache vectors in {cache_file.parent} ({error.strerror or error}): continuing without "
            "the cache (set MTL_CACHE_DIR to a writable folder)",
            stacklevel=3,
        )
    finally:
        with suppress(OSError):
            partial.unlink(missing_ok=True)
