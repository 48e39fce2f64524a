"""SNLI pairs from the Hub, the official .jsonl files, or `s1/s2/labels.<split>` files."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from mtl.console import say
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.files.paths import data_dir
from mtl.text.unicode import decode_utf8, invalid_unicode, text_lines

HUB_ID = "stanfordnlp/snli"
LABELS = ("entailment", "neutral", "contradiction")  # the Hub's label ids 0, 1, 2
HUB_SPLITS = {"dev": "validation"}


def resolve_snli_source(source: str | None, task: str = "nli", source_key: str = "") -> str:
    """An absolute folder or a Hub id; `source` None means `$MTL_DATA_DIR/snli`, else the Hub.
    `task`: the task whose `<task>.source=` (or `source_key=`) an error tells the user to set."""
    source_key = source_key or f"{task}.source"
    if source is None:
        source = str(data_dir() / "snli") if data_dir() is not None else HUB_ID
    folder = Path(source).expanduser()
    if folder.is_dir():
        return str(folder.resolve())
    if source.count("/") != 1 or source.startswith((".", "/", "~")):
        raise UserError(
            f"{task}: folder {folder} does not exist: point {source_key}=PATH at it or set MTL_DATA_DIR"
        )
    return source


def load_snli(
    source: str | None,
    split: str,
    task: str = "nli",
    role: str = "train",
    keys: tuple[str, str] | None = None,
) -> LabelledTexts:
    """`split` of SNLI (or data in its layout: MultiNLI) from a folder or the Hub (see
    `resolve_snli_source`); never empty. Errors name `task`'s own keys: `<task>.<role>_split=`
    and `<task>.source=` (role: train, dev or test), or `keys` (source key, split key) for a
    command whose keys are its own (mine-negatives: `source=`, `split=`)."""
    source_key, split_key = keys or (f"{task}.source", f"{task}.{role}_split")
    source = resolve_snli_source(source, task, source_key)
    folder = Path(source)
    if not folder.is_dir():
        return _nonempty(
            _load_from_hub(source, HUB_SPLITS.get(split, split), task, source_key),
            f"{source} split {split!r}",
            task,
            source_key,
        )
    # SNLI's and MultiNLI's own file names, or a plain <split>.jsonl, in the same layout.
    for name in (f"snli_1.0_{split}.jsonl", f"multinli_1.0_{split}.jsonl", f"{split}.jsonl"):
        if (folder / name).is_file():
            return _nonempty(_read_jsonl(folder / name), f"file {folder / name}", task, source_key)
    if (folder / f"s1.{split}").is_file():
        where = f"files {folder}/{{s1,s2,labels}}.{split}"
        return _nonempty(_read_line_files(folder, split), where, task, source_key)
    raise UserError(
        f"{task}: split {split!r} not found in {folder} (looked for snli_1.0_{split}.jsonl, "
        f"{split}.jsonl and s1.{split}); available: {', '.join(_available_splits(folder)) or 'none'}: "
        f"set {split_key}= or {source_key}=PATH"
    )


def snli_sentences(source: str | None, splits: Sequence[str] = ("dev", "test")) -> list[str]:
    """Every distinct premise and hypothesis of `splits`, stripped, in file order: a sentence pool
    (SNLI dev + test: 25,741) for benchmarks and nearest-neighbour search."""
    found: dict[str, None] = {}
    for split in splits:
        for column in load_snli(source, split).columns:
            found.update(dict.fromkeys(sentence.strip() for sentence in column))
    return [sentence for sentence in found if sentence]


def _nonempty(pairs: LabelledTexts, where: str, task: str, source_key: str) -> LabelledTexts:
    if not len(pairs):
        raise UserError(
            f"{task}: {where} holds no labelled pair (pairs labelled '-' are dropped): point "
            f"{source_key}=PATH at data in SNLI's layout"
        )
    return pairs


def training_split(source: str, split: str, task: str = "nli") -> str:
    """`split`, or the slice a local copy holds instead of SNLI's full training set: a folder with
    `train_small` and no `train` (../shared/data's copy) trains on the slice, and says so, so the
    README's commands run as written there. The run records the split it resolved to."""
    folder = Path(source)
    if split != "train" or not folder.is_dir():
        return split
    available = _available_splits(folder)
    if "train" in available or "train_small" not in available:
        return split
    pairs = len(load_snli(source, "train_small", task, "train"))
    if os.environ.get("RANK", "0") == "0":  # once, not once per torchrun process
        say(
            f"{task}: {folder} holds no full training set: training on its train_small slice ({pairs:,} pairs); "
            f"{task}.train_split= chooses another"
        )
    return "train_small"


def _available_splits(folder: Path) -> list[str]:
    names = {
        p.name.removeprefix("snli_1.0_").removeprefix("multinli_1.0_").removesuffix(".jsonl")
        for p in folder.glob("*.jsonl")
    }
    names |= {p.name.removeprefix("s1.") for p in folder.glob("s1.*")}
    return sorted(names)


def _read_line_files(folder: Path, split: str) -> LabelledTexts:
    columns = []
    for prefix in ("s1", "s2", "labels"):
        path = folder / f"{prefix}.{split}"
        if not path.is_file():
            raise UserError(f"SNLI file {path} is missing: s1, s2 and labels files go together")
        columns.append(_decode(path).rstrip("\n").split("\n"))
    premises, hypotheses, names = columns
    if not len(premises) == len(hypotheses) == len(names):
        raise UserError(
            f"SNLI files in {folder} for split {split!r} differ in length: "
            f"s1 {len(premises)}, s2 {len(hypotheses)}, labels {len(names)} lines"
        )
    labels = [_label(name.strip(), folder / f"labels.{split}", i + 1) for i, name in enumerate(names)]
    return _keep_labelled(premises, hypotheses, labels)


def _decode(path: Path) -> str:
    return decode_utf8(path.read_bytes(), "SNLI file", path)


def _read_jsonl(path: Path) -> LabelledTexts:
    premises, hypotheses, labels = [], [], []
    for number, line in enumerate(text_lines(_decode(path)), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            premise, hypothesis, gold = row["sentence1"], row["sentence2"], row["gold_label"]
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as error:
            reason = "nested too deeply" if isinstance(error, RecursionError) else error
            raise UserError(f"line {number} of SNLI file {path} is not an SNLI record: {reason}") from None
        for field, value in (("sentence1", premise), ("sentence2", hypothesis), ("gold_label", gold)):
            if not isinstance(value, str):
                what = (
                    "a label name (entailment, neutral, contradiction, or -)"
                    if field == "gold_label"
                    else "text"
                )
                raise UserError(
                    f"line {number} of SNLI file {path} is not an SNLI record: its {field} is "
                    f"{type(value).__name__} {value!r:.40}, not {what}"
                )
        if bad := invalid_unicode(premise + hypothesis):
            raise UserError(
                f"line {number} of SNLI file {path} holds a lone surrogate ({bad}), which is not text: fix the line"
            )
        premises.append(premise)
        hypotheses.append(hypothesis)
        labels.append(_label(gold, path, number))
    return _keep_labelled(premises, hypotheses, labels)


def _label(name: str, path: Path, number: int) -> int:
    if name == "-":
        return -1  # annotators did not agree; SNLI's own convention, dropped below
    if name not in LABELS:
        raise UserError(
            f"line {number} of SNLI file {path} has label {name!r}: expected one of {', '.join(LABELS)}"
        )
    return LABELS.index(name)


def _keep_labelled(premises: list[str], hypotheses: list[str], labels: list[int]) -> LabelledTexts:
    keep = [i for i, label in enumerate(labels) if label >= 0]
    return LabelledTexts(
        [[premises[i] for i in keep], [hypotheses[i] for i in keep]], [labels[i] for i in keep]
    )


def _load_from_hub(hub_id: str, split: str, task: str, source_key: str) -> LabelledTexts:
    import datasets  # a second to import: only for a Hub dataset

    try:
        rows = datasets.load_dataset(hub_id, split=split)
    except Exception as error:  # the Hub raises many types; all mean the same to the user
        raise UserError(
            f"{task}: could not load {hub_id!r} split {split!r} from the Hugging Face Hub ({type(error).__name__}): "
            f"point {source_key}=PATH at a folder with snli_1.0_<split>.jsonl or s1/s2/labels.<split> files, "
            "or set MTL_DATA_DIR"
        ) from None
    return _keep_labelled(list(rows["premise"]), list(rows["hypothesis"]), list(rows["label"]))
