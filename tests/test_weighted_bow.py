"""baseline=sif, glove-bow-idf, glove-positional: each checked against a computation by hand on a
three-word corpus, and run as a row of `just transfer`."""

import json
import math

import numpy as np
import pytest

from mtl.analysis import significance
from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.weighted_bow import WeightedBagOfWords
from mtl.text.tokenizer import make_tokenizer

from .conftest import one_error_line
from .test_transfer_suite import transfer

VECTORS = {"a": [1.0, 0.0, 2.0], "b": [0.0, 3.0, 1.0], "c": [2.0, 1.0, 0.0]}
SENTENCES = ["a b", "a c c zzz"]  # zzz has no vector: left out of every average


@pytest.fixture
def vectors(tmp_path):
    path = tmp_path / "tiny.3d.txt"
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in VECTORS.items()))
    return str(path)


def encoded(vectors, name, **keys):
    encoder = WeightedBagOfWords(name, vectors, make_tokenizer("whitespace", lowercase=True), **keys)
    return encoder.encode(SENTENCES)


def v(word):
    return np.array(VECTORS[word])


def test_sif_weighs_words_by_a_over_a_plus_p_and_removes_the_first_singular_direction(vectors):
    a = 0.3  # large enough that the weights differ visibly on five tokens
    # counts over the encoded sentences: a 2, b 1, c 2, zzz 1 (6 tokens; zzz has no vector)
    weight = {w: a / (a + n / 6) for w, n in {"a": 2, "b": 1, "c": 2}.items()}
    before = np.array(
        [
            (weight["a"] * v("a") + weight["b"] * v("b")) / 2,  # divided by the word count (SIF's code)
            (weight["a"] * v("a") + 2 * weight["c"] * v("c")) / 3,
        ]
    )
    # the first right singular vector of the uncentered 2x3 matrix, by power iteration
    direction = np.ones(3)
    for _ in range(500):
        direction = before.T @ (before @ direction)
        direction /= np.linalg.norm(direction)
    expected = before - np.outer(before @ direction, direction)
    np.testing.assert_allclose(encoded(vectors, "sif", sif_a=a), expected, atol=1e-6)


def test_idf_weighs_each_occurrence_by_smooth_inverse_document_frequency(vectors):
    idf = {"a": math.log(3 / 3) + 1, "b": math.log(3 / 2) + 1, "c": math.log(3 / 2) + 1}  # N=2 sentences
    expected = np.array(
        [
            (idf["a"] * v("a") + idf["b"] * v("b")) / (idf["a"] + idf["b"]),
            (idf["a"] * v("a") + 2 * idf["c"] * v("c")) / (idf["a"] + 2 * idf["c"]),
        ]
    )
    np.testing.assert_allclose(encoded(vectors, "glove-bow-idf"), expected, atol=1e-6)


def test_positional_encoding_sums_word_vectors_weighted_by_position_and_dimension(vectors):
    # l_kj = (1 - j/J) - (k/d)(1 - 2j/J), d = 3; J = 2: rows j=1 [.5 .5 .5], j=2 [1/3 2/3 1]
    two = np.array([[0.5, 0.5, 0.5], [1 / 3, 2 / 3, 1.0]])
    # J = 3 (a c c): j=1 [2/3 - k/9], j=2 [1/3 + k/9], j=3 [0 + k/3]
    three = np.array(
        [[2 / 3 - k / 9 for k in (1, 2, 3)], [1 / 3 + k / 9 for k in (1, 2, 3)], [k / 3 for k in (1, 2, 3)]]
    )
    expected = np.array(
        [
            (two * np.array([v("a"), v("b")])).sum(axis=0),
            (three * np.array([v("a"), v("c"), v("c")])).sum(axis=0),
        ]
    )
    np.testing.assert_allclose(encoded(vectors, "glove-positional"), expected, atol=1e-6)


def test_frequencies_come_from_a_counts_file_or_a_corpus(vectors, tmp_path):
    counts = tmp_path / "enwiki_vocab.txt"
    counts.write_text("a 10\nb 30\nC 60\n")  # SIF's own format; cased words counted lowercased
    embedded = encoded(vectors, "sif", sif_a=0.1, word_frequencies=str(counts))
    weight = {w: 0.1 / (0.1 + n / 100) for w, n in {"a": 10, "b": 30, "c": 60}.items()}
    before = np.array(
        [
            (weight["a"] * v("a") + weight["b"] * v("b")) / 2,
            (weight["a"] * v("a") + 2 * weight["c"] * v("c")) / 3,
        ]
    )
    direction = np.linalg.svd(before)[2][0]
    np.testing.assert_allclose(embedded, before - np.outer(before @ direction, direction), atol=1e-6)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b\nb b c\n")  # idf from these two sentences, not from the encoded ones
    idf = {"a": math.log(3 / 2) + 1, "b": math.log(3 / 3) + 1, "c": math.log(3 / 2) + 1}
    first = (idf["a"] * v("a") + idf["b"] * v("b")) / (idf["a"] + idf["b"])
    np.testing.assert_allclose(
        encoded(vectors, "glove-bow-idf", word_frequencies=str(corpus))[0], first, atol=1e-6
    )
    with pytest.raises(UserError, match="must be a corpus of sentences"):
        encoded(vectors, "glove-bow-idf", word_frequencies=str(counts))


def test_a_sentence_without_a_known_word_embeds_as_zeros(vectors):
    encoder = WeightedBagOfWords("glove-bow-idf", vectors, make_tokenizer("whitespace", lowercase=True))
    np.testing.assert_array_equal(encoder.encode(["zzz yyy", "a"])[0], np.zeros(3))
    assert encoder.coverage.words_found == 1 and encoder.coverage.words == 3


@pytest.mark.parametrize("baseline", ["sif", "glove-bow-idf", "glove-positional"])
def test_each_weighted_baseline_is_a_row_of_just_transfer(tiny_data, senteval, tmp_path, baseline):
    out = tmp_path / baseline
    assert transfer(tiny_data, senteval, f"baseline={baseline}", "tasks=MR", f"out={out}") == 0
    report = json.loads((out / "transfer-fast.json").read_text())
    assert report["encoder"] == baseline and report["dim"] == 8
    assert 0 <= report["results"]["MR"]["acc"] <= 100


def test_sif_settings_name_their_own_report_folder(tiny_data, senteval, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert transfer(tiny_data, senteval, "baseline=sif", "sif_a=0.0001", "tasks=MR") == 0
    assert (
        json.loads((tmp_path / "runs/baseline-sif-a0.0001/transfer-fast.json").read_text())["encoder"]
        == "sif"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["baseline=sif", "pooling=max"], "pooling=max: baseline=sif weighs word vectors its own way"),
        (["baseline=glove-bow", "sif_a=0.01"], "sif_a= sets a weighted baseline"),
        (["baseline=sif", "word_frequencies=/nowhere.txt"], "word_frequencies=/nowhere.txt cannot be read"),
    ],
)
def test_weighted_baseline_keys_given_wrongly_are_one_line(
    tiny_data, senteval, tmp_path, capsys, args, message
):
    assert transfer(tiny_data, senteval, *args, "tasks=MR", f"out={tmp_path / 'out'}") == 2
    assert message in one_error_line(capsys)


def test_baseline_folders_are_rows_of_just_compare(tiny_data, senteval, tmp_path, capsys):
    folders = [tmp_path / name for name in ("glove-bow", "sif", "random-bilstm")]
    for folder in folders:
        assert transfer(tiny_data, senteval, f"baseline={folder.name}", "tasks=MR", f"out={folder}") == 0
    capsys.readouterr()
    out = tmp_path / "compared.md"
    assert main(["compare", *map(str, folders), "report=transfer-fast", f"out={out}", "wandb=disabled"]) == 0
    compared = json.loads(out.with_suffix(".json").read_text())
    assert list(compared["encoders"]) == ["glove-bow", "sif", "random-bilstm"]
    # two bags of GloVe vectors hold nothing random: a verdict between them needs no seeds; an
    # untrained BiLSTM is one draw of its random weights, so its seed variance stays unknown
    encoders = significance.group_runs(folders, "transfer-fast")
    known = {
        (c.first, c.second): c.seed_variance_known
        for c in significance.compare(encoders, significance.SignificanceConfig(report="transfer-fast"))
    }
    assert known == {
        ("glove-bow", "sif"): True,
        ("glove-bow", "random-bilstm"): False,
        ("sif", "random-bilstm"): False,
    }


def test_compare_names_folders_as_typed_relative_to_where_it_runs(tiny_data, senteval, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("glove-bow", "sif"):
        assert transfer(tiny_data, senteval, f"baseline={name}", "tasks=MR") == 0  # into runs/baseline-<name>
    absolute = [str(tmp_path / "runs" / f"baseline-{n}") for n in ("glove-bow", "sif")]
    assert main(["compare", *absolute, "report=transfer-fast", "out=compared.md", "wandb=disabled"]) == 0
    listed = [line for line in (tmp_path / "compared.md").read_text().splitlines() if line.startswith("- ")]
    assert listed == ["- baseline-glove-bow: runs/baseline-glove-bow", "- baseline-sif: runs/baseline-sif"]
