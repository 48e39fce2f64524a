"""What mtl wrote and later reads back is input too, and nothing from a file reaches the
terminal raw: the files of a run folder damaged by hand (`just report`, `just reproduce`),
control characters in names and messages, and degenerate inputs to the newer commands."""

import re
import shutil

import numpy as np
import pytest

from mtl import load_encoder
from mtl.cli import main
from mtl.errors import UserError, printable
from mtl.transfer import CallableEncoder
from mtl.transfer_tasks.probing_tasks import generate

from .conftest import FIXTURES

FINISHED = FIXTURES / "run_before_read_layer" / "finished"
MEASUREMENT = '{"step": 1, "block": 0, "task": "nli", "tasks": ["nli", "squad"], "matrix": %s}\n'


def run_copy(tmp_path, name="run"):
    folder = tmp_path / name
    shutil.copytree(FINISHED, folder)
    return folder


@pytest.mark.parametrize(
    ("file", "text", "said"),
    [
        (
            "affinity.jsonl",
            MEASUREMENT % "[[1, 2], [3]]",
            r"affinity.jsonl line 1, matrix: 2 tasks need 2 rows of 2",
        ),
        (
            "affinity.jsonl",
            MEASUREMENT % '[[1, "x"], [3, 4]]',
            r"affinity.jsonl line 1, matrix.0.1: Input should be a valid number",
        ),
        ("affinity.jsonl", "\xff\n", r"affinity.jsonl line 1 is not UTF-8 text"),
        ("transfer-fast.json", "[1, 2]", r"transfer-fast.json holds list, not a JSON object"),
        (
            "transfer-fast.json",
            '{"results": {"MR": {"acc": "high"}}}',
            r"results: MR.acc is 'high', not a number",
        ),
    ],
)
def test_a_damaged_side_file_is_left_out_of_the_report_and_said(tmp_path, capsys, file, text, said):
    folder = run_copy(tmp_path)
    (folder / file).write_bytes(text.encode("latin-1"))
    assert main(["report", str(folder), f"out={tmp_path / 'page.html'}"]) == 0
    err = capsys.readouterr().err
    assert "left out of the report: " in err and re.search(said, err)
    assert (tmp_path / "page.html").is_file()


@pytest.mark.parametrize(
    ("file", "text", "said"),
    [
        (
            "summary.json",
            '{"best/nli/dev/acc": "high"}',
            r"summary.json, best/nli/dev/acc is 'high', not a number",
        ),
        (
            "metrics.jsonl",
            '{"global_step": 1, "nli/train/loss": "max"}\n',
            r"metrics.jsonl line 1, nli/train/loss is 'max'",
        ),
    ],
)
def test_a_damaged_run_file_is_one_line_naming_file_line_and_field(tmp_path, capsys, file, text, said):
    folder = run_copy(tmp_path)
    (folder / file).write_text(text)
    assert main(["report", str(folder), f"out={tmp_path / 'page.html'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(said, err)


def test_a_files_text_never_drives_the_terminal(tmp_path, capsys):
    escape = "\x1b]0;owned\x07\x1b[2J"
    assert printable(f"a{escape}\nb") == "a\\x1b]0;owned\\x07\\x1b[2J\nb"
    assert str(UserError(f"x{escape}\u202ey\nz")) == "x\\x1b]0;owned\\x07\\x1b[2J\\u202ey\\nz"
    folder = run_copy(tmp_path, f"run{escape}")
    assert main(["status", str(folder)]) == 0  # prints the run's name
    assert main(["status", str(tmp_path / f"none{escape}")]) == 2  # an error quoting it
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "run\\x1b]0;owned\\x07\\x1b[2J" in out and "none\\x1b]0;owned" in err


def test_degenerate_inputs_of_the_newer_entry_points_are_one_line():
    with pytest.raises(UserError, match=r"generate=sentence_length: the corpus holds no sentence"):
        generate("sentence_length", ["", "  "], seed=0)
    with pytest.raises(
        UserError,
        match=r"shape \(1, 0\) for 1 sentences: return one row per sentence, \(N, D\) with D of at least 1",
    ):
        CallableEncoder(lambda sentences: np.zeros((len(sentences), 0)), "empty")
    widths = iter([4, 5])
    changing = CallableEncoder(lambda sentences: np.ones((len(sentences), next(widths))), "changing")
    with pytest.raises(UserError, match=r"encode gave 5 dimensions, and 4 for the first sentences"):
        changing.encode(["a", "b"])
    encoder = load_encoder(FINISHED)
    for given in ({"a man": 1}, {"a man"}):
        with pytest.raises(
            UserError, match=rf"encode\(\) takes a list of sentences \(str\), not {type(given).__name__}"
        ):
            encoder.encode(given)


def test_a_bag_of_words_export_note_names_word_vectors():
    import torch

    from mtl.models.encoders.bow import BagOfWordsEncoder
    from mtl.models.sentence_transformers import unsupported

    encoder = BagOfWordsEncoder(torch.nn.Embedding(5, 4), "sum")  # sentence-transformers has no sum
    assert unsupported(encoder) == "sentence-transformers' Pooling has no sum pooling over the word vectors"
