"""Readers for the SentEval transfer tasks, in the layout SentEval's download script makes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mtl.console import say
from mtl.data.snli import LABELS
from mtl.errors import UserError
from mtl.files.paths import data_dir
from mtl.transfer_tasks.registry import SentEvalQuirks, register_transfer_task, spec


@dataclass
class Split:
    sentences: list[list[str]]  # one list per sentence position: [texts] or [texts_a, texts_b]
    labels: list  # class ids, or scores for relatedness and STS

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class TransferTask:
    name: str
    kind: (
        str  # "cv" (k-fold), "trec" (CV on train, test on test), "dev" (train/dev/test), "relatedness", "sts"
    )
    splits: dict[str, Split] = field(default_factory=dict)  # train/dev/test, or one per STS subset
    score_range: tuple[float, float] | None = None
    quirks: SentEvalQuirks = SentEvalQuirks()  # the task's entry's (registry.py), set by read_task


class TransferDataError(UserError):
    """SentEval's data missing or damaged. The message names the key that points at the data:
    `data=` (just transfer), or the key of the command that read it (`monitor_data=`), by `naming`."""

    def __init__(self, text: str, key: str = "data"):
        self.text = text  # with "{key}" where the key goes
        super().__init__(text.replace("{key}", key))

    def naming(self, key: str) -> TransferDataError:
        return TransferDataError(self.text, key)


def _lines(path: Path, encoding: str = "utf-8-sig") -> list[str]:  # -sig: a byte-order mark dropped
    if not path.is_file():
        raise TransferDataError(
            f"transfer data file {path} is missing: point {{key}}=PATH at SentEval's downstream folder"
        )
    return path.read_text(encoding=encoding, errors="replace").splitlines()


def _malformed(path: Path, number: int, expected: str) -> UserError:
    return UserError(f"line {number} of transfer data file {path} is malformed: expected {expected}")


def _binary(folder: Path, positive: str, negative: str, name: str) -> TransferTask:
    texts, labels = [], []
    for label, file in ((1, positive), (0, negative)):
        # Every line is an example, blank ones too (a few in CR and MPQA), as in SentEval.
        lines = [line.strip() for line in _lines(folder / file, "latin-1")]
        texts += lines
        labels += [label] * len(lines)
    return TransferTask(name, "cv", {"all": Split([texts], labels)})


def read_mr(root: Path) -> TransferTask:
    return _binary(root / "MR", "rt-polarity.pos", "rt-polarity.neg", "MR")


def read_cr(root: Path) -> TransferTask:
    return _binary(root / "CR", "custrev.pos", "custrev.neg", "CR")


def read_subj(root: Path) -> TransferTask:
    return _binary(root / "SUBJ", "subj.objective", "subj.subjective", "SUBJ")


def read_mpqa(root: Path) -> TransferTask:
    return _binary(root / "MPQA", "mpqa.pos", "mpqa.neg", "MPQA")


def _sst(root: Path, fine: bool) -> TransferTask:
    folder = root / "SST" / ("fine" if fine else "binary")
    splits = {}
    for split in ("train", "dev", "test"):
        path = folder / f"sentiment-{split}"
        texts, labels = [], []
        for number, line in enumerate(_lines(path), start=1):
            if not line.strip():
                continue
            if fine:
                label, _, text = line.partition(" ")
            else:
                text, _, label = line.rpartition("\t")
            if not label.strip().isdigit():
                raise _malformed(path, number, "a sentence and a class number")
            texts.append(text.strip())
            labels.append(int(label))
        splits[split] = Split([texts], labels)
    return TransferTask("SST5" if fine else "SST2", "dev", splits)


def read_sst2(root: Path) -> TransferTask:
    return _sst(root, fine=False)


def read_sst5(root: Path) -> TransferTask:
    return _sst(root, fine=True)


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")  # SentEval's class ids (trec.py tgt2idx)


def read_trec(root: Path) -> TransferTask:
    splits, classes = {}, {name: index for index, name in enumerate(TREC_CLASSES)}
    for split, file in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        path = root / "TREC" / file
        texts, labels = [], []
        for number, line in enumerate(_lines(path, "latin-1"), start=1):
            if not line.strip():
                continue
            target, _, text = line.partition(" ")
            if ":" not in target or not text or target.split(":")[0] not in classes:
                raise _malformed(
                    path, number, f"COARSE:fine question, COARSE one of {', '.join(TREC_CLASSES)}"
                )
            labels.append(classes[target.split(":")[0]])
            texts.append(text.strip())
        splits[split] = Split([texts], labels)
    return TransferTask("TREC", "trec", splits)


def read_mrpc(root: Path) -> TransferTask:
    splits = {}
    for split in ("train", "test"):
        path = root / "MRPC" / f"msr_paraphrase_{split}.txt"
        rows = _tsv(path, columns=5)
        splits[split] = Split([[r[3] for r in rows], [r[4] for r in rows]], [int(r[0]) for r in rows])
    return TransferTask("MRPC", "trec", splits)


def _tsv(path: Path, columns: int, header: bool = True) -> list[list[str]]:
    lines = _lines(path, "utf-8-sig")[1 if header else 0 :]
    rows = []
    for number, line in enumerate(lines, start=2 if header else 1):
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) < columns:
            raise _malformed(path, number, f"{columns} tab-separated fields")
        rows.append(row)
    return rows


SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_LABELS = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}

# Each classification task's class names by label id (t-SNE's legend, the decomposition's rows)
CLASS_NAMES: dict[str, tuple[str, ...]] = {
    "TREC": TREC_CLASSES,
    "SICK-E": tuple(sorted(SICK_LABELS, key=SICK_LABELS.__getitem__)),
    "SNLI": tuple(LABELS),
    "MR": ("negative", "positive"),
    "CR": ("negative", "positive"),
    "MPQA": ("negative", "positive"),
    "SUBJ": ("objective", "subjective"),
}


def _sick_rows(root: Path) -> dict[str, list[list[str]]]:
    return {split: _tsv(root / "SICK" / file, columns=5) for split, file in SICK_FILES.items()}


def read_sick_e(root: Path) -> TransferTask:
    splits = {}
    for split, rows in _sick_rows(root).items():
        splits[split] = Split(
            [[r[1] for r in rows], [r[2] for r in rows]], [SICK_LABELS[r[4].strip()] for r in rows]
        )
    return TransferTask("SICK-E", "dev", splits)


def read_sick_r(root: Path) -> TransferTask:
    splits = {
        split: Split([[r[1] for r in rows], [r[2] for r in rows]], [float(r[3]) for r in rows])
        for split, rows in _sick_rows(root).items()
    }
    return TransferTask("SICK-R", "relatedness", splits, score_range=(1.0, 5.0))


def read_stsb(root: Path) -> TransferTask:
    splits = {}
    for split in ("train", "dev", "test"):
        path = root / "STS" / "STSBenchmark" / f"sts-{split}.csv"
        rows = []
        for number, line in enumerate(_lines(path), start=1):
            fields = line.split("\t")
            if len(fields) < 7:
                raise _malformed(
                    path, number, "7 tab-separated fields (genre, file, year, id, score, s1, s2)"
                )
            rows.append(fields)
        splits[split] = Split([[r[5] for r in rows], [r[6] for r in rows]], [float(r[4]) for r in rows])
    return TransferTask("STS-B", "relatedness", splits, score_range=(0.0, 5.0))


def _read_sts(year: int) -> Callable[[Path], TransferTask]:
    def read(root: Path) -> TransferTask:
        folder = root / "STS" / f"STS{year % 100}-en-test"
        if not folder.is_dir():
            raise TransferDataError(
                f"transfer data folder {folder} is missing: point {{key}}=PATH at SentEval's downstream folder"
            )
        splits = {}
        # Subsets whose inputs are absent (STS13 SMT, under licence) are skipped, as SentEval does.
        for inputs in sorted(folder.glob("STS.input.*.txt")):
            subset = inputs.name.removeprefix("STS.input.").removesuffix(".txt")
            gold = _lines(folder / f"STS.gs.{subset}.txt")
            pairs = _lines(inputs)
            if len(gold) != len(pairs):
                raise UserError(f"{inputs} has {len(pairs)} lines but its gold file has {len(gold)}")
            a, b, scores = [], [], []
            for number, (pair, score) in enumerate(zip(pairs, gold, strict=True), start=1):
                if not score.strip():
                    continue  # unscored pairs are not part of the evaluation
                fields = pair.split("\t")
                if len(fields) < 2:
                    raise _malformed(inputs, number, "two tab-separated sentences")
                a.append(fields[0])
                b.append(fields[1])
                scores.append(float(score))
            splits[subset] = Split([a, b], scores)
        return TransferTask(f"STS{year % 100}", "sts", splits)

    return read


def read_snli(root: Path) -> TransferTask:
    """SNLI in SentEval's layout (`SNLI/s1.<split>`, `s2.<split>`, `labels.<split>`), or mtl's own
    copy ($MTL_DATA_DIR/snli); a copy without the full train split (the shared data's) trains on
    its `train_small` slice, said on the console."""
    folder = root / "SNLI"
    if not folder.is_dir() and data_dir() is not None and (data_dir() / "snli").is_dir():
        folder = data_dir() / "snli"
    train = "train"
    if not (folder / "labels.train").is_file() and (folder / "labels.train_small").is_file():
        train = "train_small"
        say(
            f"note: SNLI as a transfer task trains on {folder}'s train_small slice: the full train split is not there"
        )
    splits = {}
    for split, name in (("train", train), ("dev", "dev"), ("test", "test")):
        columns = [_lines(folder / f"{prefix}.{name}", "latin-1") for prefix in ("s1", "s2", "labels")]
        if not len(columns[0]) == len(columns[1]) == len(columns[2]):
            raise UserError(f"SNLI files in {folder} for split {name!r} differ in length")
        kept = [i for i, label in enumerate(columns[2]) if label.strip() in LABELS]  # '-': no gold label
        splits[split] = Split(
            [[columns[0][i] for i in kept], [columns[1][i] for i in kept]],
            [LABELS.index(columns[2][i].strip()) for i in kept],
        )
    return TransferTask("SNLI", "dev", splits)


# Table 2 of Liu et al. (2018) first, then the other SentEval tasks: the order of every report.
for _name, _reader, _protocol, _metrics, _attention in [
    ("MR", read_mr, "cv", ("acc",), True),
    ("CR", read_cr, "cv", ("acc",), True),
    ("MPQA", read_mpqa, "cv", ("acc",), True),
    ("SUBJ", read_subj, "cv", ("acc",), True),
    ("SST2", read_sst2, "dev", ("acc",), True),
    ("SST5", read_sst5, "dev", ("acc",), True),
    ("SICK-E", read_sick_e, "dev", ("acc",), True),
    ("SICK-R", read_sick_r, "relatedness", ("pearson",), False),
    ("STS14", _read_sts(2014), "sts", ("all/pearson", "all/spearman"), False),
    ("TREC", read_trec, "trec", ("acc",), True),
    ("MRPC", read_mrpc, "trec", ("acc", "f1"), True),
    ("STS-B", read_stsb, "relatedness", ("pearson",), False),
    *(
        (f"STS{year % 100}", _read_sts(year), "sts", ("all/pearson", "all/spearman"), False)
        for year in (2012, 2013, 2015, 2016)
    ),
]:
    register_transfer_task(_name, _protocol, _metrics, _attention)(_reader)
# SentEval's SNLI: asked for by name (tasks=SNLI), not in tasks=all (550k pairs to embed and fit).
# SentEval's code fits SNLI on [u, v, u*v, |u-v|] without a penalty, its pairs sorted by the
# second sentence first (snli.py).
SNLI_QUIRKS = SentEvalQuirks(features="nli", no_penalty=True, sort_columns=(1, 0))
register_transfer_task("SNLI", "dev", ("acc",), attention=True, in_all=False, quirks=SNLI_QUIRKS)(read_snli)


def read_task(name: str, root: Path) -> TransferTask:
    registered = spec(name)
    try:
        # the registry decides how it is scored
        task = dataclasses.replace(registered.read(root), kind=registered.protocol, quirks=registered.quirks)
    except UserError:
        raise
    except (OSError, ValueError, IndexError, KeyError) as error:  # a damaged or partial SentEval folder
        raise TransferDataError(
            f"transfer data of {name} in {root} cannot be read ({type(error).__name__}: {error}): "
            "re-download SentEval's data or point {key}=PATH at a complete copy"
        ) from None
    if not all(len(split) for split in task.splits.values()):
        raise TransferDataError(
            f"transfer data of {name} in {root} has an empty split: point {{key}}=PATH at a complete copy"
        )
    return task
