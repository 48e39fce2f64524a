"""SNLI files are read as UTF-8 deliberately: a byte-order mark is dropped, invalid text refused."""

import json
import re
from pathlib import Path

import pytest

from mtl.data.snli import load_snli
from mtl.errors import UserError

from .conftest import (
    one_error_line,
    train_cli,
)


def jsonl(path, rows, prefix=b""):
    path.write_bytes(prefix + "\n".join(json.dumps(row) for row in rows).encode("utf-8") + b"\n")
    return path


ROW = {"sentence1": "A man sleeps.", "sentence2": "A person rests.", "gold_label": "entailment"}


def test_a_byte_order_mark_is_read_past(tmp_path):
    jsonl(tmp_path / "snli_1.0_train.jsonl", [ROW, ROW], prefix=b"\xef\xbb\xbf")
    texts = load_snli(str(tmp_path), "train")
    assert texts.columns[0] == ["A man sleeps.", "A man sleeps."]


def test_a_lone_surrogate_names_its_line(tmp_path):
    jsonl(tmp_path / "snli_1.0_train.jsonl", [ROW, {**ROW, "sentence2": "A \ud800 rests."}])
    with pytest.raises(
        UserError, match=r"line 2 of SNLI file .* holds a lone surrogate \(\\ud800 at character"
    ):
        load_snli(str(tmp_path), "train")


def write_snli(folder: Path, premises: bytes, labels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (folder / f"s1.{split}").write_bytes(premises)
        (folder / f"s2.{split}").write_bytes(b"a dog .\nthe cat .\n")
        (folder / f"labels.{split}").write_text(labels)
    return folder


def test_snli_that_is_not_utf8_names_the_file_and_line(tiny_data, tmp_path, capsys):
    snli = write_snli(tmp_path / "snli", b"a man .\ncaf\xe9 .\n", "neutral\nentailment\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.fullmatch(
        rf"error: line 2 of SNLI file {snli}/s1.train is not UTF-8 .*: re-save the file as UTF-8",
        one_error_line(capsys),
    )


def test_snli_with_only_unlabelled_pairs_is_refused(tiny_data, tmp_path, capsys):
    snli = write_snli(tmp_path / "snli", b"a man .\na woman .\n", "-\n-\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.match(
        r"error: nli: files .*train holds no labelled pair .*: point nli.source=PATH", one_error_line(capsys)
    )


def test_errors_name_the_tasks_own_keys(tmp_path):
    """MultiNLI (a task file of kind nli) and mnrl read SNLI's layout: an error names their keys."""
    jsonl(tmp_path / "multinli_1.0_train.jsonl", [ROW])
    with pytest.raises(
        UserError,
        match=r"mnli: split 'dev_matched' not found .* available: train: set mnli.dev_split= or mnli.source=PATH",
    ):
        load_snli(str(tmp_path), "dev_matched", "mnli", "dev")
    with pytest.raises(
        UserError, match=r"^mnrl: folder /nowhere/snli does not exist: point mnrl.source=PATH"
    ):
        load_snli("/nowhere/snli", "train", "mnrl")


def test_ranking_follows_the_runs_nli_splits_unless_set():
    from mtl.tasks.configs import NLIConfig, RankingConfig
    from mtl.tasks.ranking import Ranking

    nli = NLIConfig(source="/data/snli", train_split="train_small")
    followed = Ranking("mnrl", RankingConfig()).inherit({"nli": nli, "mnrl": RankingConfig()})
    assert (followed.source, followed.train_split, followed.dev_split, followed.test_split) == (
        "/data/snli", "train_small", "dev", "test"
    )  # fmt: skip
    own = Ranking("mnrl", RankingConfig(train_split="train")).inherit({"nli": nli})
    assert (own.source, own.train_split) == ("/data/snli", "train")
    alone = Ranking("mnrl", RankingConfig()).inherit({"mnli": NLIConfig(display="MultiNLI")})
    assert (alone.source, alone.train_split) == (None, "train")  # SNLI's own, not another dataset's


def test_a_deeply_nested_snli_jsonl_line_is_one_line(tiny_data, tmp_path, capsys):
    snli = tmp_path / "snli"
    snli.mkdir()
    for split in ("train", "dev", "test"):
        (snli / f"snli_1.0_{split}.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.match(
        r"error: line 1 of SNLI file .* is not an SNLI record: nested too deeply", one_error_line(capsys)
    )


def test_a_local_copy_with_only_a_training_slice_trains_on_it_and_says_so(tiny_data, tmp_path, capsys):
    # ../shared/data's SNLI holds dev, test and train_small: the README's commands run on it as written
    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.loop import run

    from .conftest import FIXTURES, args_for

    folder = tmp_path / "snli"
    folder.mkdir()
    for path in (FIXTURES / "snli_tiny").iterdir():
        name = path.name.replace(".train", ".train_small")
        (folder / name).write_bytes(path.read_bytes())
    config = run.config_from_args(args_for(tiny_data, tmp_path / "run", f"snli={folder}", "tasks=nli,mnrl"))
    resolved = resolve_inputs(config)
    assert resolved.tasks["nli"].train_split == "train_small"
    assert resolved.tasks["mnrl"].train_split == "train_small"  # it follows nli's
    pairs = len(load_snli(str(folder), "train_small"))
    assert f"training on its train_small slice ({pairs:,} pairs)" in capsys.readouterr().err
    # the full set, where there is one, and a slice asked for by name are kept
    (folder / "s1.train").write_bytes((folder / "s1.train_small").read_bytes())
    assert resolve_inputs(config).tasks["nli"].train_split == "train"
    assert resolve_inputs(run.config_from_args(args_for(
        tiny_data, tmp_path / "run", f"snli={folder}", "nli.train_split=dev"
    ))).tasks["nli"].train_split == "dev"  # fmt: skip


def test_an_integer_label_is_named_as_the_label_not_the_texts(tmp_path):
    jsonl(tmp_path / "snli_1.0_train.jsonl", [ROW, {**ROW, "gold_label": 0}])
    with pytest.raises(UserError, match=r"line 2 of SNLI file .*: its gold_label is int 0, not a label name"):
        load_snli(str(tmp_path), "train")
