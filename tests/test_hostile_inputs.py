"""Inputs as a hostile colleague or a careless paste hands them over (issue 78): numbers read one
way everywhere, keys named as typed, links never written through, a pickled model refused, and
text from files escaped wherever it is printed."""

import os
import subprocess
import sys

import pytest

from mtl.cli import main
from mtl.config import read_number
from mtl.errors import UserError
from mtl.files import atomic
from mtl.files.locks import FolderLock

from .conftest import one_error_line


@pytest.mark.parametrize(
    ("text", "value"),
    [("9007199254740993", 9007199254740993), ("9223372036854775807", 2**63 - 1), ("6e2", 600), (" 7 ", 7)],
)
def test_whole_numbers_are_read_exactly_never_through_a_float(text, value):
    assert read_number("seed", text, int) == value


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("9223372036854775808", "too large"),
        ("1.5", "not a whole number"),
        ("²", "not a whole number"),
        ("1e999999999", "too large"),
        ("nan", "must be a finite number"),
    ],
)
def test_what_is_no_whole_number_is_one_line(text, said):
    with pytest.raises(UserError, match=said):
        read_number("seed", text, int)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["sweep", "lr=0.1,0.2", "launcher=slurm", "slurm.time=0"], "error: slurm.time=0 must be 1 or more"),
        (["sweep", "lr=0.1,0.2", "launcher=slurm", "slurm.extra=--a='b"], "close its quotes"),
        (["sweep", "lr=0.1,0.2", "seeds=1e6"], "error: seeds=1e6 must be in [1, 200]"),
        (["sweep", "vectors=a/b_c/x.txt,a/b/c/x.txt"], "make the same run folder name (vectorsa_b_c_x.txt)"),
        (["versus-single", "transfer_mode=slow"], "error: transfer_mode='slow' is not valid"),
        (["mixture-search", "search_seed=-1"], "error: search_seed=-1 must be 0 or more"),
        (["mteb", "run=x", "batch_size=0"], "error: batch_size=0 must be 1 or more"),
    ],
)
def test_each_key_is_checked_and_named_as_typed(tmp_path, capsys, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert said in one_error_line(capsys)


def test_sif_counts_are_ascii_digits(tmp_path):
    from mtl.eval.weighted_bow import read_frequencies
    from mtl.text.tokenizer import WhitespaceTokenizer

    counts = tmp_path / "counts.txt"
    counts.write_text("the ²\nman 3\n")  # not `word count` lines: read as a corpus of sentences
    statistics = read_frequencies(counts, WhitespaceTokenizer(lowercase=True))
    assert statistics.counts["²"] == 1 and statistics.counts["the"] == 1


def test_a_link_planted_as_a_lock_or_temporary_file_is_never_written_through(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / ".run.lock")
    with pytest.raises(
        UserError, match=r"the lock file of run folder .* is a link: mtl never writes through one"
    ):
        FolderLock(tmp_path / "run", "run folder", "out").acquire()
    os.symlink(victim, tmp_path / f".out.txt.{os.getpid()}.partial")
    atomic.write_text(tmp_path / "out.txt", "written", "file")
    assert victim.read_text() == "precious" and (tmp_path / "out.txt").read_text() == "written"
    assert not (tmp_path / f".out.txt.{os.getpid()}.partial").exists()


def test_a_pickled_hf_model_is_refused_in_one_line(tmp_path):
    from mtl.models.encoders.hf import load_backbone

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(
        UserError, match=r"holds its weights as a pickle \(pytorch_model.bin\), which mtl never loads"
    ):
        load_backbone(str(folder))


def test_a_warning_quoting_a_files_text_reaches_the_terminal_escaped(tmp_path):
    script = (
        "import warnings; from mtl.console import printable_stdout\n"
        "with printable_stdout(): warnings.warn('vectors /data/\\x1b]0;owned\\x07\\x1b[2J.txt')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "\x1b" not in done.stderr and "\\x1b]0;owned\\x07\\x1b[2J" in done.stderr
