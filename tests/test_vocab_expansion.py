"""vocab_expansion=true (Skip-Thought Section 2.2): words training never saw enter trained word
spaces through a least-squares map, in encode(), transfer, the export and its
sentence-transformers folder."""

import json

import numpy as np
import pytest

from mtl import load_encoder
from mtl.errors import UserError
from mtl.eval.export_encoder import ExportConfig, export_encoder
from mtl.eval.vocab_expansion import fit_expansion
from mtl.text.vectors import load_vectors

from .conftest import one_error_line, start_run
from .test_export import encoded_by_sentence_transformers
from .test_transfer_suite import transfer


def test_a_held_out_words_expanded_vector_is_nearer_its_trained_vector_than_its_raw_one():
    # Toy problem: training moved every word vector by one affine map (a rotation-like mix,
    # a shift) plus noise. The map fitted on 200 words places a word it never saw close to
    # where training would have put it; its raw vector is far from there.
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(201, 8))
    mix, shift = np.eye(8) + 0.5 * rng.normal(size=(8, 8)), rng.normal(size=8)
    trained = raw @ mix + shift + 0.05 * rng.normal(size=(201, 8))
    expansion = fit_expansion(raw[:200], trained[:200])
    held_out, its_trained = raw[200:], trained[200]
    expanded = expansion(held_out)[0]
    assert np.linalg.norm(expanded - its_trained) < 0.1 * np.linalg.norm(held_out[0] - its_trained)
    assert expansion.words == 200


def test_the_fitted_map_is_least_squares_with_an_intercept():
    rng = np.random.default_rng(1)
    raw, trained = rng.normal(size=(30, 4)), rng.normal(size=(30, 3))
    expansion = fit_expansion(raw, trained)
    # the normal equations of [raw 1] b = trained hold at the solution: residuals orthogonal to the design
    design = np.hstack([raw, np.ones((30, 1))])
    residual = trained - (raw @ expansion.weight + expansion.bias)
    np.testing.assert_allclose(design.T @ residual, np.zeros((5, 3)), atol=1e-9)


@pytest.fixture(scope="module")
def trained_runs(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("expansion")
    return {
        embeddings: start_run(
            tiny_data, root / embeddings, "encoder=bow", f"embeddings={embeddings}", "lr=30", "max_steps=30"
        )[0]
        for embeddings in ("trainable", "both", "frozen")
    }


def hand_map(tiny_data, encoder, half: slice):
    """The map fitted by hand: the words training saw (their rows moved), their trained rows."""
    vectors = load_vectors(tiny_data["vectors"], use_cache=False)
    glove = dict(zip(vectors.words, vectors.matrix, strict=True))
    weight = encoder.encoder.embedding.weight.detach().numpy()
    rows = {w: weight[encoder.vocabulary.index[w], half] for w in encoder.vocabulary.words[2:] if w in glove}
    seen = [w for w, row in rows.items() if not np.array_equal(row, glove[w])]  # the rows training moved
    assert 20 < len(seen) < len(rows)  # some vocabulary words (dev sentences') no batch reached
    trained = np.array([rows[w] for w in seen])
    design = np.hstack([np.array([glove[w] for w in seen]), np.ones((len(seen), 1))])
    solution = np.linalg.lstsq(design, trained, rcond=None)[0]
    return glove["unused"] @ solution[:-1] + solution[-1], glove["unused"]


@pytest.mark.parametrize("embeddings", ["trainable", "both"])
def test_encode_maps_a_new_words_vector_into_the_trained_space(tiny_data, trained_runs, embeddings):
    encoder = load_encoder(trained_runs[embeddings], device="cpu", vocab_expansion=True)
    plain = load_encoder(trained_runs[embeddings], device="cpu")  # without: the raw vector, as before
    half = slice(None) if embeddings == "trainable" else slice(8, None)
    mapped, raw = hand_map(tiny_data, plain, half)
    # "unused" has a GloVe vector and no training sentence: added at encode time, through the map
    expected = (
        mapped if embeddings == "trainable" else np.concatenate([raw, mapped])
    )  # frozen half stays GloVe
    np.testing.assert_allclose(encoder.encode(["unused"]), expected[None], atol=1e-5)
    assert not np.allclose(mapped, raw, atol=1e-3)  # the map moved it
    np.testing.assert_allclose(plain.encode(["unused"])[0][-8:], raw, atol=1e-6)
    # a vocabulary word no batch reached went through the map too; a trained word kept its row
    vectors = load_vectors(tiny_data["vectors"], use_cache=False)
    glove = dict(zip(vectors.words, vectors.matrix, strict=True))
    before = plain.encoder.embedding.weight.detach().numpy()[:, half]
    after = encoder.encoder.embedding.weight.detach().numpy()[:, half]
    words = [w for w in plain.vocabulary.words[2:] if w in glove and w != "unused"]  # (encode added it)
    unreached = [w for w in words if np.array_equal(before[plain.vocabulary.index[w]], glove[w])]
    trained = [w for w in words if w not in unreached]
    assert encoder.expansion_remapped == len(unreached) > 0
    for word in unreached[:5]:
        np.testing.assert_allclose(
            after[encoder.vocabulary.index[word]], encoder.expansion(glove[word][None])[0], atol=1e-5
        )
    assert all(
        np.array_equal(after[encoder.vocabulary.index[w]], before[plain.vocabulary.index[w]]) for w in trained
    )


def test_frozen_vectors_need_no_expansion_and_say_so(trained_runs):
    with pytest.raises(
        UserError, match="frozen GloVe vectors, so a new word's vector is already in its space"
    ):
        load_encoder(trained_runs["frozen"], device="cpu", vocab_expansion=True)


def test_the_export_records_the_map_and_its_sentence_transformers_folder_equals_encode(
    tiny_data, trained_runs, tmp_path
):
    run = trained_runs["both"]
    out, _, _ = export_encoder(
        ExportConfig(run=str(run), out=str(tmp_path / "export"), vocabulary="trained", vocab_expansion=True)
    )
    record = json.loads((out / "encoder.json").read_text())
    assert record["vocab_expansion"]["words"] > 0
    sentences = ["unused", "a man is playing ."]  # a new word, and trained ones
    expected = load_encoder(run, device="cpu", vocab_expansion=True).encode(sentences)
    # the export maps new words with the map it recorded, asked or not
    np.testing.assert_allclose(load_encoder(out, device="cpu").encode(sentences), expected, atol=1e-6)
    (theirs,), _ = encoded_by_sentence_transformers(out / "encoder", sentences=sentences)
    np.testing.assert_allclose(theirs, expected, rtol=1e-5, atol=1e-6)


def test_st_vocabulary_vectors_gives_the_folder_every_word_encode_looks_up(trained_runs, tmp_path, capsys):
    """Frozen GloVe: encode() gives a word outside the run's vocabulary its vector from the file;
    the folder carries the run's words only, unless st_vocabulary=vectors adds the file's."""
    run = trained_runs["frozen"]
    sentences = ["unused", "a man is unused ."]  # "unused" has a vector and is in no training sentence
    expected = load_encoder(run, device="cpu").encode(sentences)
    kept = {"run": str(run), "vocabulary": "trained"}  # the run's words, as its encode() has them
    plain, _, _ = export_encoder(ExportConfig(**kept, out=str(tmp_path / "plain")))
    every, _, _ = export_encoder(ExportConfig(**kept, out=str(tmp_path / "every"), st_vocabulary="vectors"))
    (without, with_words), _ = encoded_by_sentence_transformers(
        plain / "encoder", every / "encoder", sentences=sentences
    )
    assert np.abs(without - expected).max() > 1e-3  # the unknown word's vector in the plain folder
    np.testing.assert_allclose(with_words, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(UserError, match="st_vocabulary=vectors: the vectors file /nowhere.txt is not here"):
        export_encoder(
            ExportConfig(
                run=str(run), out=str(tmp_path / "none"), st_vocabulary="vectors", vectors="/nowhere.txt"
            )
        )
    assert not (tmp_path / "none").exists()  # refused before anything is written


def test_transfer_with_vocab_expansion_writes_its_own_report(tiny_data, senteval, trained_runs, tmp_path):
    run = trained_runs["trainable"]
    assert transfer(tiny_data, senteval, f"run={run}", "tasks=MR", "vocab_expansion=true") == 0
    assert (run / "transfer-fast-vocab-expansion.json").is_file()
    assert not (run / "transfer-fast.json").exists()  # never merged into the plain report


def test_vocab_expansion_on_a_baseline_is_one_line(tiny_data, senteval, tmp_path, capsys):
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "vocab_expansion=true", f"out={tmp_path}") == 2
    assert "baseline=glove-bow has none; give run=" in one_error_line(capsys)


def test_a_transformer_has_no_words_to_expand_and_says_so(tiny_data, tiny_bert, tmp_path):
    run_dir, _ = start_run(
        tiny_data, tmp_path / "hf", "encoder=hf", f"hf_model={tiny_bert}", "max_seq_length=16", "max_steps=2"
    )
    with pytest.raises(UserError, match="reads subwords, so no word is new to it"):
        load_encoder(run_dir, device="cpu", vocab_expansion=True)
