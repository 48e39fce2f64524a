"""`just fuzz`: every reader of a file a user hands mtl, fed randomly damaged copies of a valid one.

Readers: an exported encoder (encoder.json and its weights), a task file's rows (STS tsv and
pairs JSON Lines), a context corpus, a GloVe vectors file, SNLI (JSON Lines and s1/s2/labels).
Each case copies a valid input, damages it (bytes flipped, cut, repeated, odd values such as
nan, U+2028 or a lone quote put in; for an encoder also lies whose checksum matches: tensors
reshaped, dropped, of other dtypes or NaN, vocabularies cut or repeated, configs of other
sizes) and reads it as training or `load_encoder` would. The outcome must be a success with
finite results, or a one-line error (`UserError`); anything else is a finding, printed with the
reader, seed and case that reproduce it. Cases are numbered: case N of seed S is always the
same damage.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from mtl.analysis import report, reproduce
from mtl.analysis.multitask import (
    first_toward,
    released_tag_selection,
    summarize,
    tag_selection,
    toward_targets,
)
from mtl.analysis.power import warn_below
from mtl.analysis.significance import everything, item_counts
from mtl.analysis.significance import scores as significance_scores
from mtl.config import apply_overrides, comma_list, to_dict
from mtl.data.snli import load_snli
from mtl.errors import UserError
from mtl.eval import contamination, decontaminate
from mtl.eval.loading import load_encoder
from mtl.files.archives import Archive
from mtl.files.digest import file_sha256
from mtl.formats import encoder_file
from mtl.formats.merge_record import merge_record
from mtl.formats.transfer_report import ITEMS_SUFFIX, read_items
from mtl.jobs.slurm import job_record, log_tail
from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding
from mtl.published import published
from mtl.runs import Run, read_affinity
from mtl.tasks import build_task
from mtl.tasks.pairs import PairsConfig
from mtl.tasks.qt import QTConfig
from mtl.tasks.skipthought import SkipThoughtConfig
from mtl.tasks.sts import STSConfig
from mtl.text import token_cache
from mtl.text.vectors import load_vectors
from mtl.text.vocab import PAD, UNK
from mtl.tracking import wandb_file
from mtl.train.config.train_config import TrainConfig

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import FuzzConfig as FuzzConfig

SENTENCES = ["a man plays a guitar .", "two dogs run in the park .", "", "unseen words zzyzx"]
WORDS = "a man plays guitar . two dogs run in the park woman sings song children smile at camera".split()
ODD = [
    b"nan", b"inf", b"-inf", b"1e309", b"-1", b"0", b"\x00", b"\xff\xfe", "\u2028".encode(), b'"', b"\\",
    b"\n", b"\r\n", b"\t", b",", b" ", b"[", b"{}", b"null", b"99999999999999999999", b"\xed\xa0\x80",
]  # fmt: skip


@dataclass
class Outcomes:
    """What the cases of one reader gave."""

    reader: str
    ok: int = 0  # read, with finite results
    errors: int = 0  # refused with a one-line error
    findings: list[str] = field(default_factory=list)  # anything else: a traceback, NaN, a long error

    @property
    def cases(self) -> int:
        return self.ok + self.errors + len(self.findings)


def fuzz(reader: str, cases: int, seed: int = 0, progress: bool = False) -> Outcomes:
    """`cases` damaged copies of `reader`'s valid input, each read once."""
    if reader not in READERS:
        raise UserError(f"unknown reader {reader!r}: choose among {', '.join(READERS)}")
    target = READERS[reader]
    make, damage, read = target.make, target.damage, target.read
    outcomes = Outcomes(reader)
    with tempfile.TemporaryDirectory(prefix=f"mtl-fuzz-{reader}-") as root:
        valid = Path(root) / "valid"
        valid.mkdir()
        make(valid)
        read(valid)  # the undamaged input reads: the cases test the damage, not the harness
        for case in tqdm(range(cases), desc=f"fuzz {reader}", disable=not progress, unit=" cases"):
            folder = Path(root) / "case"
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(valid, folder)
            damage(folder, np.random.default_rng([seed, case]))
            outcome = _outcome(read, folder)
            if outcome == "ok":
                outcomes.ok += 1
            elif outcome == "error":
                outcomes.errors += 1
            else:
                outcomes.findings.append(f"{reader} seed={seed} case={case}: {outcome}")
    return outcomes


def _outcome(read: Callable[[Path], None], folder: Path) -> str:
    try:
        # The readers' warnings and progress bars are not outcomes: only what they return or raise.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            read(folder)
    except UserError as error:
        text = str(error)
        return (
            "error"
            if text and "\n" not in text and "\r" not in text
            else f"an error of several lines: {text!r:.300}"
        )
    except NotFinite as error:
        return f"a result that is not finite ({error})"
    except Exception as error:  # noqa: BLE001  (what the fuzzer is looking for)
        return f"a traceback: {type(error).__name__}: {str(error)[:300]!r}"
    return "ok"


class NotFinite(Exception):
    pass


def _finite(values: object, what: str) -> None:
    array = np.asarray(values, dtype=np.float64)
    if not np.isfinite(array).all():
        raise NotFinite(what)


# ---- damage --------------------------------------------------------------------------------


def damaged_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    """`data` with one to three random edits of bytes or lines."""
    data = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        kind = int(rng.integers(9))
        at = int(rng.integers(len(data) + 1))
        span = int(rng.integers(1, 64))
        if kind == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            data[at : at + span] = b""
        elif kind == 2:
            data[at:at] = data[at : at + span]
        elif kind == 3:
            data[at:at] = ODD[int(rng.integers(len(ODD)))]
        elif kind == 4:
            data = data[:at]
        elif kind == 5:  # a number or word replaced by an odd value
            start = data.rfind(b" ", 0, at) + 1
            end = data.find(b" ", at)
            end = len(data) if end < 0 else end
            data[start:end] = ODD[int(rng.integers(len(ODD)))]
        else:
            lines = bytes(data).split(b"\n")
            i, j = (int(x) for x in rng.integers(len(lines), size=2))
            if kind == 6:
                lines[i], lines[j] = lines[j], lines[i]
            elif kind == 7:
                lines.insert(i, lines[j])
            else:
                del lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def _damage_each_file(folder: Path, rng: np.random.Generator) -> None:
    """Damage one of the folder's files (chosen at random)."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    path = files[int(rng.integers(len(files)))]
    path.write_bytes(damaged_bytes(path.read_bytes(), rng))


# ---- vectors -------------------------------------------------------------------------------


def _make_vectors(folder: Path) -> None:
    rng = np.random.default_rng(0)
    lines = [f"{word} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for word in dict.fromkeys(WORDS)]
    (folder / "vectors.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _read_vectors(folder: Path) -> None:
    vectors = load_vectors(folder / "vectors.txt", WORDS, use_cache=False)
    _finite(vectors.matrix, "vectors")


# ---- SNLI ----------------------------------------------------------------------------------


SNLI_ROWS = [
    ("a man plays a guitar .", "a man makes music .", "entailment"),
    ("two dogs run in the park .", "the dogs sleep .", "contradiction"),
    ("a woman sings a song .", "a woman is on a stage .", "neutral"),
    ("children smile at the camera .", "kids are happy .", "-"),
]


def _make_snli(folder: Path) -> None:
    rows = [{"sentence1": a, "sentence2": b, "gold_label": label} for a, b, label in SNLI_ROWS * 3]
    jsonl = folder / "jsonl"
    jsonl.mkdir()
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    (jsonl / "snli_1.0_train.jsonl").write_text(text, encoding="utf-8")
    lines = folder / "lines"
    lines.mkdir()
    for index, name in enumerate(("s1", "s2", "labels")):
        (lines / f"{name}.train").write_text(
            "".join(f"{r[index]}\n" for r in SNLI_ROWS * 3), encoding="utf-8"
        )


def _damage_snli(folder: Path, rng: np.random.Generator) -> None:
    _damage_each_file(folder / ("jsonl" if rng.random() < 0.5 else "lines"), rng)


def _read_snli(folder: Path) -> None:
    for layout in ("jsonl", "lines"):
        pairs = load_snli(str(folder / layout), "train")
        _finite(pairs.labels, "labels")


# ---- task files ----------------------------------------------------------------------------


def _make_task_files(folder: Path) -> None:
    sts = folder / "sts"
    sts.mkdir()
    scores = [4.2, 0.9, 3.0, 5.0]
    for split in ("train", "dev"):
        rows = [f"{a}\t{b}\t{score}" for (a, b, _), score in zip(SNLI_ROWS, scores, strict=True)]
        (sts / f"{split}.tsv").write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    pairs = folder / "pairs"
    pairs.mkdir()
    for split in ("train", "dev"):
        text = "".join(
            json.dumps({"sentence1": a, "sentence2": b, "label": label}, ensure_ascii=False) + "\n"
            for a, b, label in SNLI_ROWS
        )
        (pairs / f"{split}.jsonl").write_text(text, encoding="utf-8")


def _damage_task_files(folder: Path, rng: np.random.Generator) -> None:
    _damage_each_file(folder / ("sts" if rng.random() < 0.5 else "pairs"), rng)


def _read_task_files(folder: Path) -> None:
    sts = build_task("sts", STSConfig(source=str(folder / "sts")))
    pairs = build_task(
        "pairs", PairsConfig(source=str(folder / "pairs"), labels="entailment,neutral,contradiction")
    )
    for task in (sts, pairs):
        for split in ("train", "dev"):
            texts = task.load(split)
            _finite(texts.labels, f"{task.name} labels")


# ---- corpus --------------------------------------------------------------------------------


def _make_corpus(folder: Path) -> None:
    documents = [[a, b, "it was a good day .", "then they went home ."] for a, b, _ in SNLI_ROWS]
    text = "\n\n".join("\n".join(document) for document in documents) + "\n"
    (folder / "corpus.txt").write_text(text, encoding="utf-8")


def _read_corpus(folder: Path) -> None:
    for kind, config in (("qt", QTConfig), ("skipthought", SkipThoughtConfig)):
        task = build_task(kind, config(corpus=str(folder / "corpus.txt")))
        task = build_task(kind, task.resolve_inputs())
        for split in ("train", "dev"):
            task.load(split)


# ---- encoder files -------------------------------------------------------------------------


def _make_encoder(folder: Path) -> None:
    _make_vectors(folder)
    config = TrainConfig(model=EncoderConfig(encoder="bilstm", hidden=6))
    words = [PAD, UNK, *dict.fromkeys(WORDS)]
    torch.manual_seed(0)
    encoder = build_encoder(frozen_embedding(torch.randn(len(words), 4)), config.model)
    metadata = {
        "config": to_dict(config),
        "vocabulary": words,
        "vectors": str(folder / "vectors.txt"),
        "embedding_parts": [],
    }
    encoder_file.write(folder / "encoder.json", metadata, encoder.state_dict(), {})


def _damage_encoder(folder: Path, rng: np.random.Generator) -> None:
    """A lie whose checksum matches (the JSON's record of its weights rewritten), or plain damage."""
    record_path, weights_path = folder / "encoder.json", folder / "encoder.safetensors"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    kind = int(rng.integers(6))
    if kind == 0:  # the JSON's bytes
        record_path.write_bytes(damaged_bytes(record_path.read_bytes(), rng))
        return
    if kind == 1:  # the weights' bytes, checksum rewritten to match
        weights_path.write_bytes(damaged_bytes(weights_path.read_bytes(), rng))
    elif kind == 2:  # the tensors: shapes, dtypes, values, names
        tensors = load_file(weights_path)
        names = sorted(tensors)
        name = names[int(rng.integers(len(names)))]
        tensors[name] = _damaged_tensor(tensors[name], rng)
        if rng.random() < 0.2:
            del tensors[name]
        elif rng.random() < 0.2:
            tensors[f"encoder/extra{int(rng.integers(9))}"] = torch.zeros(3)
        save_file({k: v.contiguous() for k, v in tensors.items()}, weights_path)
    elif kind == 3:  # the vocabulary
        record["vocabulary"] = _damaged_list(record["vocabulary"], rng)
    elif kind == 4:  # one config value, of another size or type
        record["config"] = _damaged_value(record["config"], rng)
    else:  # a top-level entry removed or replaced
        key = sorted(record)[int(rng.integers(len(record)))]
        if rng.random() < 0.5:
            del record[key]
        else:
            record[key] = [None, 0, "", [], {}, 1e308, "../x"][int(rng.integers(7))]
    if weights_path.is_file() and "weights_sha256" in record:
        record["weights_sha256"] = file_sha256(weights_path)
    record_path.write_text(json.dumps(record), encoding="utf-8")


def _damaged_tensor(tensor: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    kind = int(rng.integers(7))
    if kind == 0:
        return tensor.to(
            [torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.bool][int(rng.integers(5))]
        )
    if kind == 1:
        return tensor.reshape(-1)
    if kind == 2 and tensor.dim() == 2:
        return tensor.t().contiguous()
    if kind == 3:
        return tensor[: max(0, tensor.shape[0] - int(rng.integers(1, 3)))].contiguous()
    if kind == 4:
        return torch.cat([tensor, tensor[:1]])
    flat = tensor.clone().reshape(-1)
    if len(flat):
        flat[int(rng.integers(len(flat)))] = [float("nan"), float("inf"), -float("inf"), 1e38][
            int(rng.integers(4))
        ]
    return flat.reshape(tensor.shape)


def _damaged_list(words: list, rng: np.random.Generator) -> object:
    words = list(words)
    kind = int(rng.integers(6))
    if kind == 0 and words:
        del words[int(rng.integers(len(words)))]
    elif kind == 1 and words:
        words.insert(int(rng.integers(len(words))), words[int(rng.integers(len(words)))])
    elif kind == 2:
        words.append("zzyzx")
    elif kind == 3:
        words = []
    elif kind == 4 and words:
        words[int(rng.integers(len(words)))] = [None, 3, ["a"], ""][int(rng.integers(4))]
    else:
        return "<pad> <unk> a man"
    return words


def _damaged_value(config: dict, rng: np.random.Generator) -> dict:
    """`config` with one leaf (found by a random walk) replaced by an odd value."""
    node = config
    while True:
        keys = sorted(node)
        if not keys:
            return config
        key = keys[int(rng.integers(len(keys)))]
        if isinstance(node[key], dict) and node[key] and rng.random() < 0.8:
            node = node[key]
            continue
        odd = [None, -1, 0, 10_000_000, 2.5, "max", "", [], {}, True, "bilstm2", "transformer", 1e308]
        node[key] = odd[int(rng.integers(len(odd)))]
        return config


def _read_encoder(folder: Path) -> None:
    # what compare and transfer read of a merge: None when damaged, never an error
    merge_record(folder)
    encoder = load_encoder(folder, device="cpu")
    _finite(encoder.encode(SENTENCES), "embeddings")


# ---- a run folder: what report and reproduce read back -------------------------------------


def _make_run(folder: Path) -> None:
    config = to_dict(TrainConfig())
    files = {
        "config.json": {
            "config": config,
            "command": "just train-multitask preset=paper-blstm2048-nli",
            "metrics": {task: {"metric": "acc", "higher_is_better": True} for task in config["tasks"]},
            "published": published("paper-blstm2048-nli"),
        },
        "summary.json": {
            "stop_reason": "min_lr",
            "global_step": 40,
            "steps/nli": 30,
            "steps/squad": 10,
            "examples/nli": 1920,
            "examples/squad": 640,
            "best/step": 30,
            "best/nli/dev/acc": 0.52,
            "best/nli/test/acc": 0.5,
            "best/squad/dev/acc": 0.61,
            "wandb_artifacts": {"encoder": "run-encoder"},
            "contamination": {
                "test_sets": {
                    "MR": {
                        "sentences": 10662,
                        "exact": 2,
                        "near": 1,
                        "seen": ["00ff" * 4, "0a0b" * 4, "1234" * 4],
                    },
                    "CR": {"sentences": 3766, "exact": 0, "near": 0, "seen": []},
                }
            },
        },
        "transfer.json": {
            "encoder": "run",
            "mode": "standard",
            "pooling": None,
            "dim": 4096,
            "seconds": 12.0,
            "results": {
                "MR": {"acc": 0.7, "dev_acc": 0.71, "ndev": 100, "ntest": 100, "seconds": 1.0},
                "SICK-R": {"pearson": 0.8, "spearman": 0.75, "seconds": 1.0},
                "STS14": {"all/pearson": 0.6, "all/spearman": 0.58, "seconds": 1.0},
            },
            "aggregate": {"micro": 71.0, "macro": 71.0, "tasks": ["MR"]},
        },
    }
    for name, value in files.items():
        (folder / name).write_text(json.dumps(value, indent=1), encoding="utf-8")
    rows = [{"global_step": 0, "phase/event": "block_start", "phase/task": "nli", "phase/block": 0}]
    for step in range(1, 41, 4):
        task = "nli" if step <= 30 else "squad"
        rows.append(
            {
                "global_step": step,
                f"{task}/step": step if task == "nli" else step - 30,
                f"{task}/train/loss": 1.0 / step,
                f"{task}/train/acc": 0.5,
                f"{task}/lr": 0.1,
                "phase/task_id": 0 if task == "nli" else 1,
            }
        )
        rows.append({"global_step": step, "phase/event": "evaluation", "nli/dev/acc": 0.4 + step / 100})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    measurements = [
        {"step": step, "block": step // 20, "task": "nli", "tasks": ["nli", "squad"], "matrix": [[0.1, -0.01], [0.02, 0.2]],
         "unit": "per_lr", "batches": 2, "per_batch": [[[0.1, -0.02], [0.01, 0.2]], [[0.1, 0.0], [0.03, 0.2]]],
         "targets": ["stsb"], "toward": [[0.3], [-0.1]], "toward_per_batch": [[[0.2], [-0.1]], [[0.4], [-0.1]]]}
        for step in (10, 20, 30)
    ]  # fmt: skip
    (folder / "affinity.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in measurements), encoding="utf-8"
    )


def _damage_run(folder: Path, rng: np.random.Generator) -> None:
    """One of the run's files: its bytes, or one value of one record (a hand edit, a newer writer)."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    path = files[int(rng.integers(len(files)))]
    if rng.random() < 0.5:
        path.write_bytes(damaged_bytes(path.read_bytes(), rng))
        return
    lines = path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl" else [path.read_text()]
    at = int(rng.integers(len(lines)))
    record = json.loads(lines[at])
    lines[at] = json.dumps(
        _damaged_value(record, rng) if rng.random() < 0.8 else [None, [], "x", 3][int(rng.integers(4))]
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _read_run(folder: Path) -> None:
    run = Run.read(folder)
    report.build([run])
    reproduce.text(folder)
    decontaminate.ledger_of(folder)  # a damaged ledger: no second score, and why


# ---- a W&B offline run file (what resume= reads to know which rows W&B has) ---------------------


# W&B's log format, as its SDK writes it (LEVELDBLOG_HEADER_IDENT, _MAGIC, _VERSION; 32 KiB blocks
# of records with a 7-byte header: CRC-32 of kind and chunk, length, kind): only to write a file to
# damage, which W&B's own reader then reads (mtl.tracking.wandb_file)
_WANDB_HEADER = b":W&B" + (0xBEE1).to_bytes(2, "little") + bytes([0])
_BLOCK, _RECORD_HEADER = 32768, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _make_wandb(folder: Path) -> None:
    from wandb.proto import wandb_internal_pb2  # W&B is slow to import: only when this target runs

    records = []
    for step in range(12):
        record = wandb_internal_pb2.Record()
        record.history.step.num = step
        item = record.history.item.add()
        item.key, item.value_json = "loss", json.dumps(1.0 / (step + 1))
        if step == 7:  # one record longer than a block: written as FIRST, MIDDLE..., LAST
            item = record.history.item.add()
            item.key, item.value_json = "text", json.dumps("x" * 70_000)
        records.append(record.SerializeToString())
    out = bytearray(_WANDB_HEADER)
    for data in records:
        first = True
        while True:
            room = _BLOCK - len(out) % _BLOCK
            if room < _RECORD_HEADER:
                out += b"\0" * room
                continue
            chunk, data = data[: room - _RECORD_HEADER], data[room - _RECORD_HEADER :]
            kind = (_FULL if first else _LAST) if not data else (_FIRST if first else _MIDDLE)
            header = zlib.crc32(bytes([kind]) + chunk).to_bytes(4, "little") + len(chunk).to_bytes(
                2, "little"
            )
            out += header + bytes([kind]) + chunk
            first = False
            if not data:
                break
    (folder / "run-fuzz.wandb").write_bytes(bytes(out))


def _read_wandb(folder: Path) -> None:
    path = folder / "run-fuzz.wandb"
    history = wandb_file.by_kind(path).get("history", [])
    steps = [int(row.get("step", {}).get("num", 0)) for row in history]
    # W&B skips a damaged region and reads on: what it reads is some of what was written, in order
    if steps != sorted(set(steps)) or not set(steps) <= set(range(12)):
        raise NotFinite(f"history steps {steps} are not among the file's, in order")
    wandb_file.last_history_step([path])


# ---- cache entries (a damaged one is a miss, never an error) --------------------------------


def _make_caches(folder: Path) -> None:
    texts = [a for a, _, _ in SNLI_ROWS]
    with open(folder / "contamination.npz", "wb") as out:
        np.savez(
            out,
            names=json.dumps(["MR", "TREC"]),
            **{
                f"{name}/{part}": values
                for name in ("MR", "TREC")
                for part, values in (
                    ("keys", contamination.exact_keys(texts)),
                    ("signatures", contamination.signatures(texts)),
                )
            },
        )
    tokens = [text.split() for text in texts]
    (folder / "tokens.json").write_text(json.dumps(tokens), encoding="utf-8")


def _damage_caches(folder: Path, rng: np.random.Generator) -> None:
    if rng.random() < 0.5:
        _damage_each_file(folder, rng)
        return
    with np.load(folder / "contamination.npz", allow_pickle=False) as saved:
        arrays = {key: saved[key] for key in saved.files}
    key = sorted(arrays)[int(rng.integers(len(arrays)))]
    if key == "names":
        arrays[key] = np.array(json.dumps(["MR", "SST2", 3][: int(rng.integers(1, 4))]))
    else:
        values = arrays[key]
        arrays[key] = [values[:-1], np.zeros(values.shape, np.int8), values.reshape(-1), np.zeros(0)][
            int(rng.integers(4))
        ]
    with open(folder / "contamination.npz", "wb") as out:
        np.savez(out, **arrays)


def _read_caches(folder: Path) -> None:
    if (found := contamination.read_cached(folder / "contamination.npz")) is not None:
        for parts in found.values():
            if len(parts["keys"]) != len(parts["signatures"]):
                raise NotFinite("a cache entry of unequal arrays was taken")
    tokens = token_cache.read_entry(folder / "tokens.json", len(SNLI_ROWS))
    if tokens is not None and not all(isinstance(token, str) for sentence in tokens for token in sentence):
        raise NotFinite("a token cache entry that holds other than text was taken")


# ---- transfer items, SLURM job records, get-senteval's manifest and archives -----------------


def _make_items(folder: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {"MR/predicted": rng.integers(0, 2, 40), "MR/gold": rng.integers(0, 2, 40)}
    arrays["MR/log_probs"], arrays["MR/seen"] = np.log(rng.dirichlet([1, 1], 40)), rng.random(40) < 0.3
    for subset in ("images", "headlines"):
        arrays[f"STS14/{subset}/predicted"] = rng.random(30)
        arrays[f"STS14/{subset}/gold"] = 5 * rng.random(30)
        arrays[f"STS14/{subset}/seen"] = rng.random(30) < 0.3
    with open(folder / f"transfer{ITEMS_SUFFIX}", "wb") as out:
        np.savez(out, **arrays)


def _damage_items(folder: Path, rng: np.random.Generator) -> None:
    path = folder / f"transfer{ITEMS_SUFFIX}"
    if rng.random() < 0.4:
        path.write_bytes(damaged_bytes(path.read_bytes(), rng))
        return
    with np.load(path, allow_pickle=False) as saved:
        arrays = {key: saved[key] for key in saved.files}
    key = sorted(arrays)[int(rng.integers(len(arrays)))]
    values = arrays.pop(key)
    edits = [
        lambda: None,  # removed
        lambda: values[:-1],
        lambda: values.reshape(-1, 1),
        lambda: np.full(values.shape, np.nan),
        lambda: np.array(["a"] * len(values)),
        lambda: np.zeros(0),
        lambda: values.astype(np.complex64),
    ]
    edited = edits[int(rng.integers(len(edits)))]()
    if edited is not None:
        arrays[key] = edited
    with open(path, "wb") as out:
        np.savez(out, **arrays)


def _read_items(folder: Path) -> None:
    items = read_items(
        folder / f"transfer{ITEMS_SUFFIX}", {"MR": None, "STS14": None}, damaged_is_missing=False
    )
    for arrays in items.values():
        counts = item_counts(arrays)
        scored = significance_scores(arrays, everything(counts))
        if not np.all(np.isnan(scored) | np.isfinite(scored)):
            raise NotFinite("an items file scored to infinity")
        decontaminate.summary(arrays)  # the score without the items the marks call seen


def _make_jobs(folder: Path) -> None:
    record = {
        "job_id": "1234_5",
        "stdout": str(folder / "job.out"),
        "stderr": str(folder / "job.err"),
        "run": str(folder),
        "submitted": "2026-11-28 12:00:00",
        "cluster": "c",
        "comment": "mtl:study:0123456789ab",
    }
    (folder / "slurm.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    (folder / "job.out").write_text("step 10\nerror: the run's own one-line error\n", encoding="utf-8")


def _read_jobs(folder: Path) -> None:
    record = job_record(folder)
    if record is not None:
        log_tail(str(record.get("stdout", "")))


def _make_senteval(folder: Path) -> None:
    members = {"test-gold/STS.input.x.txt": b"A b.\tC d.\n" * 50, "test-gold/STS.gs.x.txt": b"1.0\n" * 50}
    with zipfile.ZipFile(folder / "sts.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with tarfile.open(folder / "stsb.tar.gz", "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(f"stsbenchmark/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    manifest = {
        "STS12": {
            "files": {
                f"downstream/STS/{name}": {
                    "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "verified": None,
                }
                for name, data in members.items()
            }
        }
    }
    (folder / "get-senteval.json").write_text(json.dumps(manifest), encoding="utf-8")


def _read_senteval(folder: Path) -> None:
    from dataset_builders.senteval import read_manifest

    read_manifest(folder)
    for name in ("sts.zip", "stsb.tar.gz"):
        with Archive(folder / name) as archive:
            for member in archive.names():
                archive.read(member)


def _make_affinity(folder: Path) -> None:
    """affinity.jsonl of three training tasks and a watched one: what TAG's selections and
    affinity-check read."""
    rng = np.random.default_rng(5)
    tasks = ["nli", "squad", "sick"]
    rows = []
    for step in (10, 20, 30, 40):
        per_batch = rng.normal(0, 0.1, (4, 3, 3))
        toward = rng.normal(0, 0.1, (4, 3, 1))
        rows.append({"step": step, "block": step // 20, "task": "nli", "tasks": tasks,
                     "matrix": per_batch.mean(axis=0).tolist(), "unit": "per_lr", "batches": 4,
                     "per_batch": per_batch.tolist(), "targets": ["stsb"], "toward": toward.mean(axis=0).tolist(),
                     "toward_per_batch": toward.tolist()})  # fmt: skip
    (folder / "affinity.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _damage_lines(folder: Path, rng: np.random.Generator) -> None:
    """One file's bytes, or one value of one of its JSON records (a hand edit: NaN, null, 1e308, a
    list where a number was): the damage a shared file may carry."""
    path = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))[0]
    if rng.random() < 0.3:
        path.write_bytes(damaged_bytes(path.read_bytes(), rng))
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    at = int(rng.integers(len(lines)))
    record = json.loads(lines[at])
    lines[at] = json.dumps(_damaged_leaf(record, rng))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _damaged_leaf(value: object, rng: np.random.Generator) -> object:
    """`value` with one leaf, lists included (a matrix entry), replaced by an odd value."""
    odd = [None, float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 0, -1, "x", [], {}, True, 1e-300]
    if isinstance(value, dict) and value and rng.random() < 0.9:
        key = sorted(value)[int(rng.integers(len(value)))]
        return {**value, key: _damaged_leaf(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.9:
        at = int(rng.integers(len(value)))
        return [*value[:at], _damaged_leaf(value[at], rng), *value[at + 1 :]]
    return odd[int(rng.integers(len(odd)))]


def _read_affinity(folder: Path) -> None:
    rows = read_affinity(folder / "affinity.jsonl")
    if not rows:
        return
    summary = summarize(rows)
    _finite(summary.mean, "the mean affinity")
    if summary.half_width is not None:
        _finite(summary.half_width, "the noise floor")
    for select in (tag_selection, released_tag_selection):
        _finite(select(summary, 2)[2], "TAG's selection score")
    if (toward := toward_targets(rows)) is not None:
        _finite(toward[0].mean, "the affinity toward the targets")
        first_toward(*toward)


def _make_merge(folder: Path) -> None:
    """A merged encoder's encoder.json (its `merged` record) beside a parent run whose weights
    hash to the recorded SHA-256, with its ledger."""
    parent = folder / "parent"
    parent.mkdir()
    (parent / "encoder.safetensors").write_bytes(b"weights")
    (parent / "encoder.json").write_text("{}", encoding="utf-8")
    (parent / "summary.json").write_text(
        json.dumps({"contamination": {"test_sets": {"CR": {"sentences": 10, "exact": 1, "near": 0,
                                                             "seen": ["0123456789abcdef"]}}}}),
        encoding="utf-8",
    )  # fmt: skip
    record = {"merged": {"method": "average", "lam": None,
                         "parents": [{"path": "parent/encoder.json", "sha256": file_sha256(parent / "encoder.safetensors")}]}}  # fmt: skip
    (folder / "encoder.json").write_text(json.dumps(record), encoding="utf-8")


def _damage_merge(folder: Path, rng: np.random.Generator) -> None:
    if rng.random() < 0.2:  # the parent replaced by another run's weights since the merge
        (folder / "parent" / "encoder.safetensors").write_bytes(b"other weights")
        return
    _damage_lines(folder, rng)


def _read_merge(folder: Path) -> None:
    merge_record(folder)  # None when damaged, never an error
    seen, why = decontaminate.ledger_of(folder)
    recorded = folder / "parent" / "encoder.safetensors"
    if seen is not None and recorded.read_bytes() != b"weights":
        raise NotFinite("a merge's ledger read from a parent that changed since the merge")
    if seen is None and not why:
        raise NotFinite("no ledger and no reason")


def _make_plan(folder: Path) -> None:
    record = {"config": {"difference": "2"}, "seeds": {"MR": 4, "STS14": None}, "most": 100}
    (folder / "plan.json").write_text(json.dumps(record), encoding="utf-8")


def _read_plan(folder: Path) -> None:
    warn_below(str(folder / "plan.json"), 3)


# Every format mtl writes and reads back, with the reader that checks it: `just fuzz` has a
# target for each (tests/test_fuzz.py fails for a format added here without one).
READ_BACK = {
    "config.json": "runs.Run.read, train.config.record.read_run_record (formats.run_files: RunRecord, RunConfig)",
    "summary.json": "runs.Run.read, runs.read_summary (formats.run_files.Summary)",
    "metrics.jsonl": "formats.run_files.read_metrics (MetricsRow)",
    "affinity.jsonl": "formats.run_files.read_affinity (AffinityRow)",
    "transfer report": "formats.transfer_report.read_report (TransferReport)",
    "published figures": "analysis.reproduce.recorded_figures (a run's copy of its paper's figures)",
    "encoder file": "eval.loading.load_encoder",
    "W&B run file": "tracking.wandb_file.records",
    "contamination cache": "eval.contamination.read_cached",
    "token cache": "text.token_cache.read_entry",
    "slurm.json": "jobs.status.job_of (jobs.slurm.SlurmJob)",
    "get-senteval manifest": "dataset_builders.senteval.read_manifest (its SentEvalManifest)",
    "transfer items": "formats.transfer_report.read_items",
    "seed plan": "analysis.power.read_plan (its SeedPlan)",
    "merge record": "formats.merge_record.merge_record, eval.decontaminate.ledger_of (a merge's parents)",
}


@dataclass(frozen=True)
class Target:
    """A reader under fuzzing: make a valid input in a folder, damage a copy, read it."""

    make: Callable[[Path], None]
    damage: Callable[[Path, np.random.Generator], None]
    read: Callable[[Path], None]
    formats: tuple[str, ...]  # the file formats (READ_BACK) whose readers it reaches


READERS: dict[str, Target] = {
    "encoder": Target(_make_encoder, _damage_encoder, _read_encoder, ("encoder file",)),
    "task": Target(_make_task_files, _damage_task_files, _read_task_files, ("task files",)),
    "corpus": Target(_make_corpus, _damage_each_file, _read_corpus, ("corpus",)),
    "vectors": Target(_make_vectors, _damage_each_file, _read_vectors, ("vectors",)),
    "snli": Target(_make_snli, _damage_snli, _read_snli, ("snli",)),
    "run": Target(
        _make_run,
        _damage_run,
        _read_run,
        ("config.json", "summary.json", "metrics.jsonl", "affinity.jsonl", "transfer report", "published figures"),
    ),
    "wandb": Target(_make_wandb, _damage_each_file, _read_wandb, ("W&B run file",)),
    "caches": Target(_make_caches, _damage_caches, _read_caches, ("contamination cache", "token cache")),
    "items": Target(_make_items, _damage_items, _read_items, ("transfer items",)),
    "jobs": Target(_make_jobs, _damage_each_file, _read_jobs, ("slurm.json",)),
    "senteval": Target(_make_senteval, _damage_each_file, _read_senteval, ("get-senteval manifest", "archives")),
    "plan": Target(_make_plan, _damage_lines, _read_plan, ("seed plan",)),
    "affinity": Target(_make_affinity, _damage_lines, _read_affinity, ("affinity.jsonl",)),
    "merge": Target(_make_merge, _damage_merge, _read_merge, ("merge record",)),
}  # fmt: skip


def run(config: FuzzConfig) -> str:
    """Fuzz each reader of `config`; a table of outcomes, and an error when any case found a defect."""
    readers = comma_list(config.readers)
    if unknown := [name for name in readers if name not in READERS]:
        raise UserError(
            f"readers={config.readers}: unknown {', '.join(unknown)}; choose among {', '.join(READERS)}"
        )
    results = [fuzz(name, config.cases, config.seed, progress=True) for name in readers]
    lines = ["| reader | cases | read | one-line error | findings |", "|---|---:|---:|---:|---:|"]
    lines += [
        f"| {r.reader} | {r.cases:,} | {r.ok:,} | {r.errors:,} | {len(r.findings):,} |" for r in results
    ]
    findings = [finding for r in results for finding in r.findings]
    text = "\n".join(lines)
    if findings:
        text += "\n\n" + "\n".join(findings[:50])
        print(text)
        raise UserError(
            f"{len(findings)} damaged inputs were neither read nor refused in one line (listed above)"
        )
    return text


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto FuzzConfig; run; print what it gives."""
    print(run(apply_overrides(FuzzConfig(), args)))
