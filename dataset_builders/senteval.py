"""`just get-senteval`: SentEval's transfer and probing data, fetched from the sources its own
download script (data/downstream/get_transfer_data.bash) uses, processed as it processes them
(dataset_builders.senteval_text), in the layout `just transfer` and `just probing` read:
`<out>/downstream/MR/rt-polarity.pos`, ..., `<out>/probing/word_content.txt`.

Every file written is checked against the size and SHA-256 recorded in
`senteval_files.json` (the files of the copy SentEval's script produced, as ../shared/data
holds them; regenerate with `python -m dataset_builders.senteval_record <downstream folder>
<SNLI folder>`). Where the processing is SentEval's byte for byte (plain copies, TREC's quote
removal, `cat -v` and the Treebank sed script: checked on the recorded copy itself), a file that
differs is an error and nothing of its task is written. Moses' tokenizer (STS, STS-B, SICK)
comes from sacremoses, its Python port, which may differ from the Perl original on rare
lines: a differing file there is written, reported, and marked unverified in
`<out>/get-senteval.json`. Files no copy here holds (SNLI's training set, the probing sets)
are written with their SHA-256 in that manifest, unverified.

Downloads go to `<out>/.downloads/`; an interrupted one resumes where it stopped (HTTP range
requests) when the command runs again; a task already written is skipped. COCO (image
features in Python pickles, which mtl never loads) is not fetched.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError, model_validator
from tqdm.auto import tqdm

from dataset_builders.senteval_text import (
    UTF8,
    cat_v,
    cut,
    joined,
    lines_of,
    moses,
    treebank,
    without_quotes,
)
from mtl.config import AtLeast1, apply_overrides
from mtl.console import progress_stream
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.files.archives import Archive, Damaged, UnsafeArchive
from mtl.files.digest import file_sha256
from mtl.files.locks import FolderLock
from mtl.files.paths import data_dir
from mtl.files.schemas import RELATIVE_PATH, SHA256, Count, Record, described, read_json


class FetchedFile(Record):
    size: Count
    sha256: SHA256
    verified: bool | None = None


class FetchedTask(Record):
    files: dict[RELATIVE_PATH, FetchedFile]


class SentEvalManifest(Record):
    """<out>/get-senteval.json: task -> the files written for it, their sizes and SHA-256."""

    @model_validator(mode="after")
    def _tasks(self) -> SentEvalManifest:
        for task, entry in (self.model_extra or {}).items():
            try:
                FetchedTask.model_validate(entry)
            except ValidationError as error:
                where = "." if error.errors()[0]["loc"] else ": "
                raise ValueError(f"{task}{where}{described(error)}") from None
        return self


RECORDED_FILE = Path(__file__).with_name("senteval_files.json")
MANIFEST = "get-senteval.json"


@dataclass
class GetSentEvalConfig:
    out: str | None = (
        None  # None: $MTL_DATA_DIR/senteval, else data/senteval (downstream/ and probing/ inside)
    )
    tasks: str = (
        "all"  # comma-separated: MR,CR,SUBJ,MPQA,SST2,SST5,TREC,MRPC,SICK,STS12..STS16,STS-B,SNLI,probing
    )
    mirror: str | None = (
        None  # a base URL serving every download under its file name, or a folder holding them
    )
    keep_downloads: bool = False  # keep <out>/.downloads/ after the files are written
    timeout: AtLeast1 = 60  # seconds a connection may stay silent before the download stops (rerun resumes)


@dataclass(frozen=True)
class Download:
    name: str  # its file name in .downloads/ and under mirror=
    url: str


# What one task's files are made of: the downloads by name -> {path under out: bytes}
Maker = Callable[[dict[str, Path]], dict[str, bytes]]


@dataclass(frozen=True)
class Source:
    task: str  # what tasks= names
    downloads: tuple[Download, ...]
    make: Maker
    # The files (fnmatch pattern) Moses' tokenizer makes, through sacremoses, which may differ from
    # the Perl original on rare lines; every other file is a copy or SentEval's exact processing
    # and must be the recorded one (an STS gold-score file that changed in transit is refused).
    tokenized: str = ""


SENTEVAL_DATA = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
SST_BINARY = "https://raw.githubusercontent.com/PrincetonML/SIF/master/data"
SST_FINE = "https://raw.githubusercontent.com/AcademiaSinicaNLPLab/sentiment_dataset/master/data"
TREC = "https://cogcomp.seas.upenn.edu/Data/QA/QC"
SICK = "https://alt.qcri.org/semeval2014/task1/data/uploads"
STS_WIKI = "http://ixa2.si.ehu.es/stswiki/images"
SNLI = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
PROBING = "https://raw.githubusercontent.com/facebookresearch/SentEval/main/data/probing"

BINARY_CLASSIFICATION = Download("datasmall_NB_ACL12.zip", f"{SENTEVAL_DATA}/datasmall_NB_ACL12.zip")
# task -> (its folder, its two files in the zip's data/ folder, and the names SentEval gives them)
BINARY_TASKS = {
    "MR": ("rt10662", ("rt-polarity.pos", "rt-polarity.neg")),
    "CR": ("customerr", ("custrev.pos", "custrev.neg")),
    "SUBJ": ("subj", ("subj.subjective", "subj.objective")),
    "MPQA": ("mpqa", ("mpqa.pos", "mpqa.neg")),
}
# STS year -> (its zip, the folder inside it, its subsets), as the script lists them
STS_YEARS = {
    "STS12": ("4/40/STS2012-en-test.zip", "test-gold", "MSRpar MSRvid SMTeuroparl surprise.OnWN surprise.SMTnews"),
    "STS13": ("2/2f/STS2013-en-test.zip", "test-gs", "FNWN headlines OnWN"),
    "STS14": ("8/8c/STS2014-en-test.zip", "sts-en-test-gs-2014", "deft-forum deft-news headlines OnWN images tweet-news"),
    "STS15": ("d/da/STS2015-en-test.zip", "test_evaluation_task2a", "answers-forums answers-students belief headlines images"),
    "STS16": ("9/98/STS2016-en-test.zip", "sts2016-english-with-gs-v1.0", "answer-answer headlines plagiarism postediting question-question"),
}  # fmt: skip
SICK_SPLITS = ("train", "trial", "test_annotated")
PROBING_FILES = (
    "sentence_length.txt", "word_content.txt", "tree_depth.txt", "top_constituents.txt", "bigram_shift.txt",
    "past_present.txt", "subj_number.txt", "obj_number.txt", "odd_man_out.txt", "coordination_inversion.txt",
)  # fmt: skip
# transfer task names that share a download with another
TASK_ALIASES = {"SICK-E": "SICK", "SICK-R": "SICK", "STSBenchmark": "STS-B"}


def _binary(task: str) -> Maker:
    folder, files = BINARY_TASKS[task]

    def make(downloads: dict[str, Path]) -> dict[str, bytes]:
        with opened(downloads, BINARY_CLASSIFICATION.name) as archive:
            return {
                f"downstream/{task}/{f}": treebank(cat_v(archive.read(f"data/{folder}/{f}"))) for f in files
            }

    return make


def _copies(folder: str, names: dict[str, str], change: Callable[[bytes], bytes] = bytes) -> Maker:
    """Each download (by name) copied to `folder`/<its new name>, through `change`."""

    def make(downloads: dict[str, Path]) -> dict[str, bytes]:
        return {f"{folder}/{new}": change(downloads[name].read_bytes()) for name, new in names.items()}

    return make


def _sts(year: str) -> Maker:
    _, inside, subsets = STS_YEARS[year]
    folder = f"downstream/STS/{year}-en-test"

    def make(downloads: dict[str, Path]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        with opened(downloads, f"{year}-en-test.zip") as archive:
            for member in archive.names():
                if member.startswith(f"{inside}/"):
                    files[f"{folder}/{member.removeprefix(inside + '/')}"] = archive.read(member)
        for subset in subsets.split():
            name = f"{folder}/STS.input.{subset}.txt"
            if year == "STS16":  # its files carry the year: renamed to the others' names
                files[name] = _member(files, f"{folder}/STS2016.input.{subset}.txt", year)
                files[f"{folder}/STS.gs.{subset}.txt"] = _member(
                    files, f"{folder}/STS2016.gs.{subset}.txt", year
                )
            lines = lines_of(_member(files, name, year), UTF8)
            first = moses([cut(line, 1) for line in lines], lowercase=True)
            second = moses([cut(line, 2) for line in lines], lowercase=True)
            files[name] = joined([f"{a}\t{b}" for a, b in zip(first, second, strict=True)], UTF8)
        return files

    return make


def _sts_benchmark(downloads: dict[str, Path]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with opened(downloads, "Stsbenchmark.tar.gz") as archive:
        for member in archive.names():
            if member.startswith("stsbenchmark/"):
                files[f"downstream/STS/STSBenchmark/{member.removeprefix('stsbenchmark/')}"] = archive.read(
                    member
                )
    for split in ("train", "dev", "test"):
        name = f"downstream/STS/STSBenchmark/sts-{split}.csv"
        lines = lines_of(_member(files, name, "STS-B"), UTF8)
        scores = [cut(line, 1, 2, 3, 4, 5) for line in lines]
        first = moses([cut(line, 6) for line in lines], lowercase=True)
        second = moses([cut(line, 7) for line in lines], lowercase=True)
        files[name] = joined(["\t".join(row) for row in zip(scores, first, second, strict=True)], UTF8)
    return files


def _sick(downloads: dict[str, Path]) -> dict[str, bytes]:
    files = {}
    for split in SICK_SPLITS:
        with opened(downloads, f"sick_{split}.zip") as archive:
            lines = lines_of(archive.read(f"SICK_{split}.txt"), UTF8)
        rows = lines[1:]  # the header stays as it is
        first = moses([cut(line, 2) for line in rows], lowercase=False)
        second = moses([cut(line, 3) for line in rows], lowercase=False)
        body = [
            "\t".join((cut(line, 1), a, b, cut(line, 4, 5)))
            for line, a, b in zip(rows, first, second, strict=True)
        ]
        files[f"downstream/SICK/SICK_{split}.txt"] = joined(lines[:1] + body, UTF8)
    return files


def _snli(downloads: dict[str, Path]) -> dict[str, bytes]:
    files = {}
    with opened(downloads, "snli_1.0.zip") as archive:
        for split in ("train", "dev", "test"):
            lines = lines_of(archive.read(f"snli_1.0/snli_1.0_{split}.txt"))
            # awk '$1 != "-"' (no gold label), cut -f 1,6,7, then the header line dropped
            kept = [cut(line, 1, 6, 7) for line in lines if (line.split() or [""])[0] != "-"][1:]
            files[f"downstream/SNLI/labels.{split}"] = joined([cut(line, 1) for line in kept])
            files[f"downstream/SNLI/s1.{split}"] = treebank(joined([cut(line, 2) for line in kept]))
            files[f"downstream/SNLI/s2.{split}"] = treebank(joined([cut(line, 3) for line in kept]))
    return files


def sources() -> dict[str, Source]:
    """Every task get-senteval fetches, in the order of SentEval's script."""
    table = {
        "SST2": Source("SST2", tuple(Download(f"sentiment-{s}", f"{SST_BINARY}/sentiment-{s}") for s in ("train", "dev", "test")),
                       _copies("downstream/SST/binary", {f"sentiment-{s}": f"sentiment-{s}" for s in ("train", "dev", "test")})),
        "SST5": Source("SST5", tuple(Download(f"stsa.fine.{s}", f"{SST_FINE}/stsa.fine.{s}") for s in ("train", "dev", "test")),
                       _copies("downstream/SST/fine", {f"stsa.fine.{s}": f"sentiment-{s}" for s in ("train", "dev", "test")})),
    }  # fmt: skip
    for year, (path, _, _) in STS_YEARS.items():
        table[year] = Source(
            year,
            (Download(f"{year}-en-test.zip", f"{STS_WIKI}/{path}"),),
            _sts(year),
            tokenized="*/STS.input.*.txt",
        )
    table["STS-B"] = Source(
        "STS-B",
        (Download("Stsbenchmark.tar.gz", f"{STS_WIKI}/4/48/Stsbenchmark.tar.gz"),),
        _sts_benchmark,
        tokenized="*/sts-*.csv",
    )
    trec = ("train_5500.label", "TREC_10.label")
    table["TREC"] = Source(
        "TREC",
        tuple(Download(f, f"{TREC}/{f}") for f in trec),
        _copies("downstream/TREC", {f: f for f in trec}, without_quotes),
    )
    table["SICK"] = Source(
        "SICK",
        tuple(Download(f"sick_{s}.zip", f"{SICK}/sick_{s}.zip") for s in SICK_SPLITS),
        _sick,
        tokenized="*/SICK_*.txt",
    )
    for task in BINARY_TASKS:
        table[task] = Source(task, (BINARY_CLASSIFICATION,), _binary(task))
    table["SNLI"] = Source("SNLI", (Download("snli_1.0.zip", SNLI),), _snli)
    mrpc = ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")
    table["MRPC"] = Source(
        "MRPC",
        tuple(Download(f, f"{SENTEVAL_DATA}/{f}") for f in mrpc),
        _copies("downstream/MRPC", {f: f for f in mrpc}),
    )
    table["probing"] = Source(
        "probing",
        tuple(Download(f, f"{PROBING}/{f}") for f in PROBING_FILES),
        _copies("probing", {f: f for f in PROBING_FILES}),
    )
    return table


def chosen(config: GetSentEvalConfig) -> list[Source]:
    table = sources()
    if config.tasks.strip().lower() == "all":
        return list(table.values())
    names = [TASK_ALIASES.get(t.strip(), t.strip()) for t in config.tasks.split(",") if t.strip()]
    if unknown := [n for n in names if n not in table]:
        raise UserError(
            f"tasks={config.tasks}: {', '.join(unknown)} is not fetched here: choose from {', '.join(table)}"
        )
    if not names:
        raise UserError(f"tasks={config.tasks!r} names no task: give all or a list such as MR,CR,STS14")
    return [table[n] for n in dict.fromkeys(names)]


def output_folder(config: GetSentEvalConfig) -> Path:
    if config.out:
        return Path(config.out).expanduser()
    return (data_dir() / "senteval") if data_dir() is not None else Path("data") / "senteval"


def recorded() -> dict[str, tuple[int, str]]:
    """The recorded files: path under out -> (size, SHA-256)."""
    return {path: (int(size), sha) for path, (size, sha) in json.loads(RECORDED_FILE.read_text()).items()}


def get_senteval(config: GetSentEvalConfig) -> tuple[Path, dict]:
    """Fetch and write every chosen task; returns the folder and the manifest."""
    out = atomic.check_output_dir(output_folder(config), "out")
    tasks = chosen(config)
    downloads_folder = out / ".downloads"
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "SentEval data folder", "out"):
        manifest = read_manifest(out)
        expected = recorded()
        for source in tasks:
            if _complete(out, manifest, source.task):
                print(f"  {source.task:<8} already here")
                continue
            found, difference = in_place(out, source.task, expected)
            if found:  # laid out by SentEval's own script, or copied
                manifest[source.task] = {"files": found}
                atomic.write_text(out / MANIFEST, jsonfile.dumps(manifest, indent=1) + "\n", "manifest")
                print(f"  {source.task:<8} already here: {len(found)} files as recorded, found in place")
                continue
            if difference:  # say why it is fetched again
                print(f"  {source.task:<8} in {out} but not as recorded ({difference}): fetching it")
            fetched = {
                d.name: fetch(d, downloads_folder, config.mirror, config.timeout) for d in source.downloads
            }
            files = source.make(fetched)
            checks = {path: _check(path, data, expected, source, fetched) for path, data in files.items()}
            for path, data in files.items():
                atomic.write_bytes(out / path, data, f"{source.task} file")
            manifest[source.task] = {"files": checks}
            atomic.write_text(out / MANIFEST, jsonfile.dumps(manifest, indent=1) + "\n", "manifest")
            print(f"  {source.task:<8} {_summary(checks)}")
            if not config.keep_downloads:
                _remove_unneeded(fetched, tasks[tasks.index(source) + 1 :])
    return out, manifest


def fetch(download: Download, folder: Path, mirror: str | None, timeout: int) -> Path:
    """The download in `folder`, fetched (or copied from a mirror folder) or resumed unless complete
    there already."""
    target = folder / download.name
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    if mirror and not _is_url(mirror):
        return _copy_from_folder(download, Path(mirror).expanduser(), target)
    partial = folder / f"{download.name}.partial"
    validator_file = folder / f"{download.name}.partial.json"
    url = f"{mirror.rstrip('/')}/{urllib.parse.quote(download.name)}" if mirror else download.url
    # Resumed only where the server named the version the kept bytes are of (ETag or
    # Last-Modified) and is asked to send the rest only if it still serves that version
    # (If-Range): otherwise a file changed since would be spliced onto the old one's start.
    validator = _recorded_validator(validator_file, url)
    have = partial.stat().st_size if partial.is_file() and validator else 0
    request = urllib.request.Request(url, headers={"User-Agent": "mtl get-senteval"})
    if have:
        request.add_header("Range", f"bytes={have}-")
        request.add_header("If-Range", validator)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if have and response.status != 206:  # the file changed, or no ranges: sent whole again
                have = 0
            if not have:
                _record_validator(validator_file, url, response.headers)
            length = response.headers.get("Content-Length")
            total = have + int(length) if length and length.isdigit() else None
            with (
                open(partial, "ab" if have else "wb") as written,
                tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=download.name,
                     file=progress_stream(), leave=False) as bar,
            ):  # fmt: skip
                while chunk := response.read(1 << 20):
                    written.write(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # nothing after the bytes kept: complete, or not this file
            total = (error.headers.get("Content-Range") or "").rpartition("/")[2]
            if total.isdigit() and int(total) == have:  # killed between its last byte and its rename
                return _finished(partial, validator_file, target)
            partial.unlink(missing_ok=True)
            validator_file.unlink(missing_ok=True)
            raise UserError(
                f"the {have:,} bytes kept of {download.name} do not fit the file {url} serves now: they were "
                "removed; run again to download it anew"
            ) from None
        raise UserError(
            f"{url} answered HTTP {error.code} ({error.reason}) for {download.name}: the file may have moved; "
            f"download it by hand into {target} (or give mirror=) and run again"
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", None) or error
        done = partial.stat().st_size if partial.is_file() else 0
        raise UserError(
            f"could not download {download.name} from {urllib.parse.urlsplit(url).netloc} ({reason}): "
            + (
                _next_run(validator_file, url, f"{done:,} bytes kept")
                if done
                else "offline? run again when online"
            )
            + f", or put {download.url} by hand at {target}"
        ) from None
    if total is not None and partial.stat().st_size != total:
        raise UserError(
            f"download of {download.name} stopped at {partial.stat().st_size:,} of {total:,} bytes: "
            + _next_run(validator_file, url)
        )
    return _finished(partial, validator_file, target)


def _next_run(validator_file: Path, url: str, kept: str = "") -> str:
    if _recorded_validator(validator_file, url):
        return f"{kept}{', ' if kept else ''}run again to resume"
    return "run again to download it anew (the server names no version to resume against)"


def _is_url(mirror: str) -> bool:
    return urllib.parse.urlsplit(mirror).scheme in ("http", "https", "ftp")


def _copy_from_folder(download: Download, mirror: Path, target: Path) -> Path:
    """`mirror=<folder>`: the download copied from a local folder holding it under its name."""
    source = mirror / download.name
    if not mirror.is_dir():
        raise UserError(
            f"mirror={mirror} is neither a URL (http://, https://) nor a folder: give one of them"
        )
    if not source.is_file():
        raise UserError(
            f"mirror={mirror} has no {download.name}: put {download.url} there under that name, or leave out mirror="
        )
    with (
        atomic.atomic_path(target, "download") as partial,
        open(source, "rb") as read,
        open(partial, "wb") as out,
    ):
        while chunk := read.read(1 << 20):
            out.write(chunk)
    return target


def _recorded_validator(validator_file: Path, url: str) -> str | None:
    """The ETag (or Last-Modified date) the server gave for the kept bytes of `url`; None if none."""
    try:
        record = json.loads(validator_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if (
        not isinstance(record, dict)
        or record.get("url") != url
        or not isinstance(record.get("validator"), str)
    ):
        return None
    validator = record["validator"]
    return validator if validator.isprintable() and validator.strip() else None


def _record_validator(validator_file: Path, url: str, headers) -> None:  # noqa: ANN001
    validator = headers.get("ETag") or headers.get("Last-Modified")
    if validator and not validator.startswith("W/"):  # a weak ETag may not guard a range (RFC 9110)
        atomic.write_text(
            validator_file, json.dumps({"url": url, "validator": validator}) + "\n", "download record"
        )
    else:
        validator_file.unlink(missing_ok=True)


def _finished(partial: Path, validator_file: Path, target: Path) -> Path:
    os.replace(partial, target)
    validator_file.unlink(missing_ok=True)
    return target


def _member(files: dict[str, bytes], path: str, task: str) -> bytes:
    """A file the archive must have held: its absence is one line, not a KeyError."""
    if path not in files:
        raise UserError(
            f"{task}'s download has no {Path(path).name}: the source changed since mtl recorded it; "
            "tell mtl's maintainers (or give mirror= a copy of the original)"
        )
    return files[path]


@contextlib.contextmanager
def opened(downloads: dict[str, Path], name: str) -> Iterator[Archive]:
    """An archive among the downloads, opened through mtl's one archive reader (members checked
    and bounded: mtl/files/archives.py); a damaged or unsafe one is removed (the next run fetches
    it again) and named in one line."""
    path = downloads[name]
    try:
        with Archive(path) as archive:
            yield archive
    except (Damaged, UnsafeArchive) as error:
        path.unlink(missing_ok=True)
        raise UserError(f"{error}: it was removed, run again to download it anew") from None


def _check(path: str, data: bytes, expected: dict[str, tuple[int, str]], source: Source, fetched) -> dict:
    """The file's size and SHA-256, and whether they are the recorded ones (None: none recorded)."""
    sha = hashlib.sha256(data).hexdigest()
    entry = {"size": len(data), "sha256": sha, "verified": None}
    if path in expected:
        entry["verified"] = expected[path] == (len(data), sha)
        if not entry["verified"] and not (source.tokenized and fnmatch.fnmatch(path, source.tokenized)):
            for download in fetched.values():  # the download is not what SentEval's script read
                download.unlink(missing_ok=True)
            raise UserError(
                f"{path} has SHA-256 {sha[:12]}... ({len(data):,} bytes), not the recorded {expected[path][1][:12]}... "
                f"({expected[path][0]:,} bytes): the source changed; its downloads were removed and nothing of "
                f"{source.task} was written"
            )
    return entry


def _summary(checks: dict[str, dict]) -> str:
    verified = sum(c["verified"] is True for c in checks.values())
    differ = [Path(p).name for p, c in checks.items() if c["verified"] is False]
    unrecorded = sum(c["verified"] is None for c in checks.values())
    parts = [f"{len(checks)} files", f"{verified} as recorded"]
    if differ:
        parts.append(f"{len(differ)} tokenized differently from the recorded copy ({', '.join(differ[:3])})")
    if unrecorded:
        parts.append(f"{unrecorded} with no recorded copy")
    return ", ".join(parts)


# Where each task's files sit under out/ (SentEval's layout): a folder written by SentEval's own
# get_transfer_data.bash or copied from one holds them without this command's manifest. SNLI and
# the probing sets are absent: their files have no recorded copy to check against.
LAYOUT = {
    **{task: f"downstream/{task}/" for task in (*BINARY_TASKS, "MRPC", "TREC", "SICK")},
    "SST2": "downstream/SST/binary/",
    "SST5": "downstream/SST/fine/",
    **{year: f"downstream/STS/{year}-en-test/" for year in STS_YEARS},
    "STS-B": "downstream/STS/STSBenchmark/",
}


def in_place(
    out: Path, task: str, expected: dict[str, tuple[int, str]]
) -> tuple[dict[str, dict] | None, str | None]:
    """(the manifest entry of `task` when every file recorded for it is in `out` with its recorded
    size and SHA-256: nothing to fetch, else None; how a file of it already there differs from the
    recorded one, `downstream/TREC/x: 335,858 bytes, recorded 333,379`, else None). Each file is
    hashed once."""
    prefix = LAYOUT.get(task)
    files = {path: value for path, value in expected.items() if prefix and path.startswith(prefix)}
    complete = bool(files)
    for path, (size, sha) in files.items():
        file = out / path
        if not file.is_file():
            complete = False
        elif (found := file.stat().st_size) != size:
            return None, f"{path}: {found:,} bytes, recorded {size:,}"
        elif (digest := file_sha256(file)) != sha:
            return None, f"{path}: SHA-256 {digest[:12]}..., recorded {sha[:12]}..."
    if not complete:
        return None, None
    return {
        path: {"size": size, "sha256": sha, "verified": True} for path, (size, sha) in files.items()
    }, None


def _complete(out: Path, manifest: dict, task: str) -> bool:
    files = manifest.get(task, {}).get("files", {})
    return bool(files) and all(
        (out / p).is_file() and (out / p).stat().st_size == c["size"] for p, c in files.items()
    )


def read_manifest(out: Path) -> dict:
    """What an earlier get-senteval wrote into `out` (none: {}), checked against its schema."""
    manifest = read_json(
        out / MANIFEST,
        SentEvalManifest,
        f"remove it (every task of {out} is then fetched and checked again)",
    )
    return manifest or {}


def _remove_unneeded(fetched: dict[str, Path], later: Sequence[Source]) -> None:
    """Downloads no later task reads (MR, CR, SUBJ and MPQA share one zip)."""
    needed = {d.name for source in later for d in source.downloads}
    for name, path in fetched.items():
        if name not in needed:
            path.unlink(missing_ok=True)


def command(args: Sequence[str]) -> None:
    """`just get-senteval [out=] [tasks=]`."""
    config = apply_overrides(GetSentEvalConfig(), args)
    out, manifest = get_senteval(config)
    differ = sum(c["verified"] is False for task in manifest.values() for c in task["files"].values())
    print(
        f"SentEval data in {out}: {len(manifest)} tasks"
        + (
            f"; {differ} tokenized files differ from the recorded copy (listed in {out / MANIFEST})"
            if differ
            else ""
        )
    )
    print(f"use it with: just transfer data={out / 'downstream'} ... (or MTL_DATA_DIR with senteval/ inside)")
