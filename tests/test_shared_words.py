"""An exported encoder carries no word of data the run did not train on, and
`just export-encoder vocabulary=public` keeps only the words of the public vectors file."""

import json
import re

import numpy as np
import pytest

from mtl import load_encoder
from mtl.cli import main
from mtl.data.batches import TaskExamples, TaskStream
from mtl.formats import checkpoint
from mtl.text.vectors import load_vectors

from .conftest import start_run

SECRETS = ("zqxtoken123", "hunter2secret")


@pytest.fixture(scope="module")
def private_corpus_run(tiny_data, tmp_path_factory):
    """A received preset's Quick-Thoughts corpus is a private file; NLI's blocks are longer than the run."""
    root = tmp_path_factory.mktemp("private")
    corpus = root / "notes.txt"
    corpus.write_text(
        f"my api token is {SECRETS[0]} .\nthe password is {SECRETS[1]} .\nremember both .\n\n"
        "a second document .\nwith more lines .\nand one more .\n"
    )
    run_dir, summary = start_run(
        tiny_data, root / "run", "tasks=nli,qt", f"qt.corpus={corpus}", "steps_nli=50", "max_steps=10"
    )
    assert summary["steps/qt"] == 0
    return run_dir


def test_a_task_that_never_trained_leaves_no_word_in_the_exported_encoder(private_corpus_run):
    exported = (private_corpus_run / "encoder.json").read_text()
    assert not any(secret in exported for secret in SECRETS)
    # The checkpoints keep the whole vocabulary, which a resume rebuilds and compares (README says so).
    assert set(SECRETS) <= set(checkpoint.load(private_corpus_run / "checkpoints" / "best.pt")["vocabulary"])


def test_the_exported_words_are_public_ones_and_those_of_trained_examples(private_corpus_run, tiny_data):
    saved = checkpoint.load(private_corpus_run / "checkpoints" / "best.pt")
    words = json.loads((private_corpus_run / "encoder.json").read_text())["vocabulary"]
    public = set(load_vectors(tiny_data["vectors"]).words)
    private = [word for word in words[2:] if word not in public]
    assert private, "the trained NLI examples' words without a vector stay"
    assert len(words) < len(saved["vocabulary"]) and set(words) <= set(saved["vocabulary"])
    encoder = load_encoder(private_corpus_run, device="cpu")
    full = load_encoder(private_corpus_run / "checkpoints" / "best.pt", device="cpu")
    sentence = [" ".join(words[2:40])]  # words both vocabularies hold: the same rows, the same embedding
    assert np.allclose(encoder.encode(sentence), full.encode(sentence), atol=1e-6)


def test_a_stream_knows_which_examples_its_batches_held():
    examples = TaskExamples(np.arange(10)[:, None], np.zeros(10, dtype=np.int64))
    stream = TaskStream(examples, np.ones(10), batch_size=3, seed=[1, 2], window=1)
    assert len(stream.seen()) == 0
    given = [stream.next()[0] for _ in range(2)]
    assert sorted(stream.seen()) == sorted(np.concatenate(given))
    for _ in range(3):
        stream.next()
    assert list(stream.seen()) == list(range(10))


def test_export_encoder_keeps_only_public_words(finished_run_for_sharing, tiny_data, tmp_path, capsys):
    out = tmp_path / "shared"
    assert main(["export-encoder", f"run={finished_run_for_sharing}", f"out={out}"]) == 0
    assert "words of the vectors file" in capsys.readouterr().out
    words = json.loads((out / "encoder.json").read_text())["vocabulary"]
    public = set(load_vectors(tiny_data["vectors"]).words)
    assert words[:2] == ["<pad>", "<unk>"] and set(words[2:]) <= public
    shared, original = load_encoder(out, device="cpu"), load_encoder(finished_run_for_sharing, device="cpu")
    sentence = [" ".join(words[2:30])]
    assert np.allclose(shared.encode(sentence), original.encode(sentence), atol=1e-6)
    from sentence_transformers import SentenceTransformer

    portable = SentenceTransformer(str(out / "encoder"), device="cpu")
    assert np.allclose(portable.encode(sentence), shared.encode(sentence), atol=1e-5)
    assert (
        main(["export-encoder", f"run={finished_run_for_sharing}", f"out={out}"]) == 2
    )  # no silent overwrite
    assert "exists: choose another out= or set overwrite=true" in capsys.readouterr().err


@pytest.fixture(scope="module")
def finished_run_for_sharing(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("sharing") / "run", "max_steps=3")
    return run_dir


@pytest.mark.parametrize(
    ("kept", "message"),
    [
        (
            {"notes.txt": "mine"},
            r"out=.* holds files that are not an export \(notes.txt\): choose a new folder",
        ),
        ({"encoder/mine.txt": "mine"}, r"holds an encoder/ folder but no encoder.json: choose a new folder"),
    ],
)
def test_export_encoder_never_replaces_a_folder_of_the_users(
    finished_run_for_sharing, tmp_path, capsys, kept, message
):
    out = tmp_path / "mine"
    for name, text in kept.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    args = ["export-encoder", f"run={finished_run_for_sharing}", f"out={out}", "overwrite=true"]
    assert main(args) == 2
    assert re.search(message, capsys.readouterr().err)
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == set(kept)  # untouched
