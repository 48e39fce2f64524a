"""Probing tasks: SentEval's files read as it reads them, the three surface tasks generated, and
`just probing` scoring them through the transfer suite."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.transfer import fitting, protocols, senteval_classifier, suite
from mtl.transfer_tasks.probing_tasks import LENGTH_BINS, generate, read_probing
from mtl.transfer_tasks.tasks import read_task

from .conftest import start_run


@pytest.fixture()
def sentences(shared_data):
    """SNLI's dev sentences: enough of each length bin (the fixtures' 250 sentences are not)."""
    return [
        line for s in ("s1", "s2") for line in (shared_data / "snli" / f"{s}.dev").read_text().splitlines()
    ]


def test_senteval_probing_files_number_classes_in_sorted_order(tmp_path):
    (tmp_path / "tense.txt").write_text(
        "tr\tPRES\tHe walks .\ntr\tPAST\tHe walked .\nva\tPAST\tShe ran .\nte\tPRES\tShe runs .\n"
    )
    task = read_probing(tmp_path / "tense.txt", "Tense")
    assert task.kind == "dev" and task.splits["train"].labels == [1, 0]  # PAST 0, PRES 1
    assert task.splits["test"].sentences == [["She runs ."]]
    (tmp_path / "bad.txt").write_text("xx\tPRES\tHe walks .\n")
    with pytest.raises(UserError, match=r"line 1 of probing file .* expected tr\|va\|te"):
        read_probing(tmp_path / "bad.txt", "Tense")
    (tmp_path / "unseen.txt").write_text("tr\tPRES\ta .\nte\tFUT\tb .\nva\tPRES\tc .\n")
    with pytest.raises(UserError, match=r"labels \['FUT'\] never occur in its training split"):
        read_probing(tmp_path / "unseen.txt", "Tense")


def parsed(lines):
    return [line.split("\t") for line in lines]


def test_generated_length_bigram_shift_and_word_content_hold_what_they_say(sentences):
    rows = parsed(generate("sentence_length", sentences, seed=1))
    counts = {}
    for _, label, sentence in rows:
        low, high = LENGTH_BINS[int(label)]
        assert low <= len(sentence.split()) <= high
        counts[label] = counts.get(label, 0) + 1
    assert len(set(counts.values())) == 1  # balanced as SentEval's sets
    originals = {tuple(s.split()) for s in sentences}
    shifted = parsed(generate("bigram_shift", sentences, seed=1))
    assert {"I", "O"} == {label for _, label, _ in shifted}
    for _, label, sentence in shifted:
        words = sentence.split()
        if label == "O":
            assert tuple(words) in originals
        else:  # exactly one adjacent pair swapped back gives an original
            assert any(
                tuple([*words[:i], words[i + 1], words[i], *words[i + 2 :]]) in originals
                for i in range(len(words) - 1)
            )
    content = parsed(generate("word_content", sentences, seed=1))
    targets = {label for _, label, _ in content}
    for _, label, sentence in content:
        assert [w for w in {w.lower() for w in sentence.split()} if w in targets] == [label]
    trained = {label for code, label, _ in content if code == "tr"}
    assert {label for code, label, _ in content if code != "tr"} <= trained
    assert generate("bigram_shift", sentences, seed=1) == generate("bigram_shift", sentences, seed=1)


def test_word_content_stays_linear_under_an_mlp_as_senteval_keeps_it(tmp_path, monkeypatch):
    lines = [
        f"{c}\t{w}\tthe {w} is here"
        for c in ("tr", "va", "te")
        for w in ("cat", "dog", "cow")
        for _ in range(3)
    ]
    (tmp_path / "word_content.txt").write_text("\n".join(lines) + "\n")
    task = read_task("WordContent", tmp_path)
    seen = []
    monkeypatch.setattr(
        fitting,
        "dev_tuned",
        lambda family, *a: seen.append(family.params.nhid) or {"acc": 1.0, "dev_acc": 1.0},
    )
    texts = sorted({t for s in task.splits.values() for t in s.sentences[0]})
    embedded = np.random.default_rng(0).normal(size=(len(texts), 4)).astype(np.float32)
    mlp = suite.Protocol.named(
        "senteval-prototyping", senteval_classifier.SentEvalParams.prototyping(nhid=50)
    )
    protocols.scored(task, embedded, {t: i for i, t in enumerate(texts)}, mlp)
    assert seen == [0]


def test_a_corpus_too_small_for_word_content_asks_for_more_sentences_not_other_data():
    # Each of 100 words in one sentence only: every class has one example, so no class outside
    # training was trained on and dev and test end up empty (what 2,000 of the shared sentences
    # gave); the advice is max_sentences=, not other data.
    words = [chr(97 + i // 26) + chr(97 + i % 26) + "x" for i in range(100)]
    with pytest.raises(UserError, match=r"leave its dev and test splits empty: .*raise max_sentences="):
        generate("word_content", [f"{w} ." for w in words], seed=1)
    with pytest.raises(UserError, match=r"3 examples from 3 sentences: .*raise max_sentences="):
        generate("bigram_shift", ["a b c", "d e f", "g h i"], seed=1)


def test_just_probing_generates_and_scores_the_surface_tasks(tiny_data, tmp_path, capsys, sentences):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=2")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentences[:3000]) + "\n")
    args = [
        f"run={run_dir}",
        "generate=sentence_length,bigram_shift",
        f"corpus={corpus}",
        "mode=fast",
        "wandb=disabled",
    ]
    assert main(["probing", *args]) == 0
    assert "generated GenLength, GenBigramShift" in capsys.readouterr().out
    report = json.loads((run_dir / "transfer-fast.json").read_text())
    assert {"GenLength", "GenBigramShift"} <= set(report["results"])
    assert 0 <= report["results"]["GenBigramShift"]["acc"] <= 1
    made = json.loads((run_dir / "probing-generated" / "generated.json").read_text())
    assert made["sentences"] == len({s.strip() for s in sentences[:3000]}) and made["seed"] == 1111
    assert main(["probing", f"run={run_dir}", f"data={tmp_path}"]) == 2  # no probing file there
    assert "holds none of SentEval's probing files" in capsys.readouterr().err
