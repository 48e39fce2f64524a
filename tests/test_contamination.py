"""The contamination ledger: transfer test sentences found in a run's training data, exactly and
as near duplicates, reported in summary.json, the model card and MTEB's training_datasets."""

import json

import numpy as np
import pytest

from mtl.eval import contamination
from mtl.models.card import CardFacts, card_text
from mtl.transfer_tasks.tasks import read_task

from .conftest import start_run


@pytest.fixture()
def senteval_root(shared_data):
    return shared_data / "senteval" / "downstream"


def test_normalisation_makes_case_spacing_and_punctuation_exact():
    a, b, c = contamination.exact_keys(
        ["A man plays, the GUITAR!", "a man  plays the guitar", "a man plays guitar"]
    )
    assert a == b and a != c


def test_minhash_agreement_estimates_the_shingles_jaccard():
    words = [f"w{i}" for i in range(40)]
    changed = [*words[:-1], "other"]  # 38 shingles, 37 shared: Jaccard 37/39
    unrelated = [f"v{i}" for i in range(40)]
    signature = contamination.signatures([" ".join(t) for t in (words, changed, unrelated)])
    assert np.mean(signature[0] == signature[1]) >= contamination.NEAR
    assert np.mean(signature[0] == signature[2]) < 0.1


def test_the_ledger_finds_test_sentences_seen_exactly_and_nearly(senteval_root):
    mr = read_task("MR", senteval_root).splits["all"].sentences[0]
    long = next(s for s in mr[2:] if len(s.split()) >= 30)  # not one of the two trained verbatim
    near = " ".join([*long.split()[:-1], "zzzq"])  # its last word changed
    training = [mr[0].upper(), mr[1], near, "a sentence no test set holds , surely : qwxz"]
    ledger = contamination.ledger(training, senteval_root)
    counts = ledger["test_sets"]["MR"]
    assert counts["sentences"] == len(set(mr)) and (counts["exact"], counts["near"]) == (2, 1)
    assert ledger["training_sentences"] == 4 and contamination.seen_test_sets(ledger)["MR"] == 3
    assert set(ledger["test_sets"]) >= {"CR", "SUBJ", "TREC", "STS14", "STS-B", "SICK-R"}


def test_mteb_hears_of_the_sts_sets_seen():
    ledger = {
        "test_sets": {
            "STS-B": {"sentences": 9, "exact": 1, "near": 0},
            "MR": {"sentences": 9, "exact": 2, "near": 0},
        }
    }
    assert contamination.mteb_training_datasets(ledger) == {"STSBenchmark"}  # MTEB has no MR
    assert contamination.seen_test_sets({"test_sets": {"MR": "damaged"}}) == {}


def test_the_card_lists_the_test_sets_seen_in_training():
    facts = CardFacts(name="run", seen_test_sets={"STS-B": {"sentences": 2551, "exact": 27, "near": 1}})
    text = card_text(facts, 8, ["WordEmbeddings", "LSTM", "Pooling"])
    assert "| STS-B | 27 | 1 | 2,551 |" in text and "not a zero-shot score" in text
    assert "zero-shot" not in card_text(CardFacts(name="run"), 8, ["WordEmbeddings", "LSTM", "Pooling"])


def test_a_run_writes_its_ledger_to_its_summary_and_mteb_reads_it(tiny_data, tmp_path, shared_data):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", "contamination=true", "max_steps=2")
    ledger = summary["contamination"]
    assert ledger["training_sentences"] > 0 and "MR" in ledger["test_sets"]
    assert json.loads((run_dir / "summary.json").read_text())["contamination"] == ledger
    _, off = start_run(tiny_data, tmp_path / "off", "max_steps=2")  # the tests' default: contamination=false
    assert off["contamination"] == {"skipped": "contamination=false"}
    pytest.importorskip("mteb")
    from mtl.eval.mteb import seen_mteb_tasks

    record = json.loads((run_dir / "summary.json").read_text())
    record["contamination"]["test_sets"]["STS-B"] = {"sentences": 10, "exact": 0, "near": 2}
    (run_dir / "summary.json").write_text(json.dumps(record))
    assert seen_mteb_tasks(run_dir) == {"STSBenchmark"}
    assert seen_mteb_tasks(tmp_path / "no-run") == set()


def test_the_report_marks_a_transfer_score_on_a_test_set_seen_in_training(tiny_data, tmp_path):
    from mtl.cli import main

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=2")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["contamination"] = {"test_sets": {"MR": {"sentences": 10, "exact": 1, "near": 0}}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (run_dir / "transfer.json").write_text(json.dumps({"results": {"MR": {"acc": 0.7}, "CR": {"acc": 0.6}}}))
    assert main(["report", str(run_dir), f"out={tmp_path / 'report.html'}"]) == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<td>70.00 ‡</td>" in page and "<td>60.00</td>" in page
    assert "training data holds sentences of this test set" in page
