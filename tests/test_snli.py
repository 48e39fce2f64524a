"""Issue 19: SNLI files are read as UTF-8 deliberately: a byte-order mark is dropped, invalid text refused."""

import json

import pytest

from mtl.data.snli import load_snli
from mtl.errors import UserError


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
