"""Skip-Thought's extras (Kiros et al. 2015): MRPC's pair statistics (3.3), NB bigram features
(3.5), and t-SNE pages of a task's embeddings (3.6)."""

import json
import shutil

import numpy as np
import pytest
from scipy import sparse

from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.transfer.skipthought_features import nb_features, pair_statistics, with_nb
from mtl.eval.transfer.suite import TransferConfig

from .conftest import FIXTURES, start_run


def test_pair_statistics_are_the_authors_six_feats():
    a = "the 2 cats sat on 3 mats".split()
    b = "2 cats sat".split()
    expected = [
        0.0,  # {2, 3} != {2}
        0.0,
        1.0,  # {2} inside {2, 3}
        3 / 7,  # of a's 7 distinct tokens, 3 are in b
        3 / 3,
        0.5 * (7 / 3 + 3 / 7),
    ]
    np.testing.assert_allclose(pair_statistics([a], [b])[0], expected)
    same = pair_statistics([["no", "numbers"]], [["none", "here", "either"]])[0]
    assert same[:3].tolist() == [1.0, 0.0, 1.0]  # two empty sets: equal, but not a non-empty match


def test_nb_features_weigh_each_present_ngram_by_its_log_count_ratio():
    texts = ["good good film", "good plot", "bad film", "bad bad plot"]
    labels = np.array([1, 1, 0, 0])
    train, (other,) = nb_features(texts, labels, [["good unseen", "film"]])
    # class 0 (the first) against class 1, counts + 1, each normalised: nbsvm.py's r = log(p / q)
    vocabulary = [
        "bad",
        "bad bad",
        "bad film",
        "bad plot",
        "film",
        "good",
        "good film",
        "good good",
        "good plot",
        "plot",
    ]
    zero = {"bad": 3, "bad bad": 1, "bad film": 1, "bad plot": 1, "film": 1, "plot": 1}
    one = {"good": 3, "good good": 1, "good film": 1, "good plot": 1, "film": 1, "plot": 1}
    p = np.array([1 + zero.get(w, 0) for w in vocabulary], dtype=float)
    q = np.array([1 + one.get(w, 0) for w in vocabulary], dtype=float)
    ratio = np.log((p / p.sum()) / (q / q.sum()))
    first = dict(zip(vocabulary, train.toarray()[0], strict=True))
    assert first["good"] == pytest.approx(ratio[5])  # present twice, counted once
    assert first["good good"] == pytest.approx(ratio[7]) and first["bad"] == 0.0
    assert np.count_nonzero(other.toarray()[0]) == 1  # "unseen" and its bigram were never counted
    x, (tested,) = with_nb(np.ones((4, 2)), texts, labels, [(np.zeros((2, 2)), ["bad", "film"])])
    assert (
        sparse.issparse(x)
        and x.shape == (4, 2 + len(vocabulary))
        and tested.shape == (2, 2 + len(vocabulary))
    )


def test_nb_bigram_features_transfer_and_have_their_own_report(tiny_data, senteval, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "hidden=4")
    args = ["transfer", f"run={run_dir}", "mode=fast", f"data={senteval}", "wandb=disabled"]
    assert main([*args, "features=nb-bigram", "tasks=MR,CR"]) == 0
    report = json.loads((run_dir / "transfer-fast-nb-bigram.json").read_text())
    assert set(report["results"]) == {"MR", "CR"} and not (run_dir / "transfer-fast.json").exists()


def write_mrpc(root):
    sentences = (FIXTURES / "snli_tiny" / "s1.train").read_text().splitlines()
    folder = root / "MRPC"
    folder.mkdir(parents=True)
    for split, rows in (("train", range(0, 60)), ("test", range(60, 90))):
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in rows:  # a paraphrase: the sentence again, the same number; not: another, another number
            same = i % 2 == 0
            other = f"{sentences[i]} 3" if same else f"{sentences[i + 1]} 4"
            lines.append(f"{int(same)}\t{i}\t{i}\t{sentences[i]} 3\t{other}")
        (folder / f"msr_paraphrase_{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_skipthought_mrpc_features_transfer(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "hidden=4")
    data = write_mrpc(tmp_path / "downstream")
    args = ["transfer", f"run={run_dir}", "mode=fast", f"data={data}", "wandb=disabled", "tasks=MRPC"]
    assert main([*args, "features=skipthought-mrpc"]) == 0
    assert main(args) == 0
    with_feats = json.loads((run_dir / "transfer-fast-skipthought-mrpc.json").read_text())["results"]["MRPC"]
    plain = json.loads((run_dir / "transfer-fast.json").read_text())["results"]["MRPC"]
    assert with_feats["acc"] > plain["acc"] and {"acc", "f1"} <= set(with_feats)  # the numbers tell


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"features": "nb-bigram", "tasks": "MR,TREC"}, "leave TREC out of tasks="),
        ({"features": "skipthought-mrpc", "tasks": "MR"}, "is for MRPC"),
        ({"features": "nb-bigram", "tasks": "MR", "mode": "senteval"}, "use mode=standard or fast"),
    ],
)
def test_skipthought_features_elsewhere_are_refused(keys, message):
    with pytest.raises(UserError, match=message):
        TransferConfig(run="r", **keys)


def test_a_tsne_page_shows_a_tasks_sentences_coloured_by_label(tiny_data, senteval, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "hidden=4")
    out = tmp_path / "mr.html"
    assert main(["tsne", f"run={run_dir}", "task=MR", f"data={senteval}", f"out={out}", "limit=40"]) == 0
    page = out.read_text()
    assert "run: 40 MR sentences" in page and "data:image/svg+xml;base64," in page
    assert f"written to {out}" in capsys.readouterr().out
    assert main(["tsne", f"run={run_dir}", "task=STS14", f"data={senteval}"]) == 2  # no labels per sentence


def test_tsne_and_maxpool_read_the_data_the_run_recorded(tiny_data, senteval, tmp_path, monkeypatch, capsys):
    # A run trained on data laid out as MTL_DATA_DIR lays it out (snli/, senteval/downstream/):
    # later, without MTL_DATA_DIR, tsne and maxpool find the run's own copies, as resume= does.
    data = tmp_path / "data"
    shutil.copytree(FIXTURES / "snli_tiny", data / "snli")
    shutil.copytree(senteval, data / "senteval" / "downstream")
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "hidden=4", "pooling=max", f"snli={data / 'snli'}")
    monkeypatch.delenv("MTL_DATA_DIR", raising=False)
    out = tmp_path / "mr.html"
    assert main(["tsne", f"run={run_dir}", "task=MR", f"out={out}", "limit=40"]) == 0
    assert "run: 40 MR sentences" in out.read_text()
    assert (
        main(["maxpool", f"run={run_dir}", "min_count=3", "wandb=disabled", f"out={tmp_path / 'mp.html'}"])
        == 0
    )
    assert "trained: most picked words" in capsys.readouterr().out


def test_tsne_refuses_a_task_whose_protocol_fits_no_labels(shared_data, tmp_path, capsys):
    # STS is scored by cosine alone (its protocol fits nothing): no labels to colour points by
    data = shared_data / "senteval" / "downstream"
    assert main(["tsne", f"run={tmp_path}", "task=STS14", f"data={data}"]) == 2
    assert "STS14 is scored without labels per sentence" in capsys.readouterr().err
