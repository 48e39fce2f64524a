"""`just transfer`'s suite: where reports go, what is checked first, what is kept, headlines."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtl.cli import main
from mtl.errors import UserError

from .conftest import (
    FIXTURES,
    one_error_line,
    start_run,
)


def transfer(tiny_data, senteval, *args) -> int:
    return main(
        [
            "transfer",
            "mode=fast",
            f"data={senteval}",
            f"vectors={tiny_data['vectors']}",
            "wandb=disabled",
            *args,
        ]
    )


def test_transfer_writes_into_the_run_folder_of_a_checkpoint_path(tiny_data, senteval, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=3")
    assert transfer(tiny_data, senteval, f"run={run_dir / 'encoder.json'}", "tasks=MR") == 0
    assert json.loads((run_dir / "transfer-fast.json").read_text())["results"].keys() == {"MR"}
    assert not Path("runs/baseline-None").exists()


def test_transfer_checks_every_task_before_the_first_runs(tiny_data, senteval, tmp_path, capsys):
    shutil.rmtree(senteval / "CR")
    out = tmp_path / "out"
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR,CR", f"out={out}") == 2
    assert re.match(r"error: transfer data file .*CR/custrev.pos is missing", one_error_line(capsys))
    assert not out.exists()


def test_each_transfer_result_is_kept_as_soon_as_it_exists(tiny_data, senteval, tmp_path, monkeypatch):
    from mtl.eval.transfer import suite

    out = tmp_path / "out"
    real = suite.evaluate_task

    def interrupted_at_cr(task, *args):
        if task.name == "CR":
            raise KeyboardInterrupt
        return real(task, *args)

    monkeypatch.setattr(suite, "evaluate_task", interrupted_at_cr)
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR,CR", f"out={out}") == 130
    report = json.loads((out / "transfer-fast.json").read_text())
    assert set(report["results"]) == {"MR"}
    # A later run of CR alone completes the same report instead of replacing it.
    monkeypatch.setattr(suite, "evaluate_task", real)
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=CR", f"out={out}") == 0
    assert set(json.loads((out / "transfer-fast.json").read_text())["results"]) == {"MR", "CR"}


def test_other_protocols_and_poolings_write_their_own_reports(tiny_data, senteval, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=3", "pooling=max+mean")
    assert transfer(tiny_data, senteval, f"run={run_dir}", "tasks=MR") == 0
    assert transfer(tiny_data, senteval, f"run={run_dir}", "tasks=MR", "pooling=mean") == 0
    fast = json.loads((run_dir / "transfer-fast.json").read_text())
    mean = json.loads((run_dir / "transfer-fast-pool-mean.json").read_text())
    assert fast["dim"] == 32 and fast["pooling"] is None  # hidden 8, both directions, max+mean
    assert mean["pooling"] == "mean" and mean["dim"] == 16  # mean of the 16-d word states
    assert (run_dir / "transfer-fast-pool-mean.md").is_file()


def test_a_damaged_senteval_file_is_one_line(tiny_data, senteval, tmp_path, capsys):
    (senteval / "MR" / "rt-polarity.neg").unlink()
    (senteval / "MR" / "rt-polarity.neg").mkdir()  # unreadable as a file
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR", f"out={tmp_path / 'out'}") == 2
    assert re.match(r"error: transfer data .*MR.* (is missing|cannot be read)", one_error_line(capsys))


def test_a_multiclass_task_read_back_from_its_report_keeps_its_headline():
    from mtl.formats.transfer_report import headline

    # TREC has no F1 (six classes); an older report's null F1 must not hide its accuracy.
    assert headline("TREC", {"acc": 0.702, "f1": None, "dev_acc": 0.62}) == "70.20"
    assert headline("MRPC", {"acc": 0.7, "f1": None}) == "n/a"
    assert (
        headline("STS14", {"all/pearson": 0.63, "all/spearman": 0.61, "images/pearson": None})
        == "63.00/61.00"
    )


def test_the_training_share_keeps_every_class():
    import numpy as np

    from mtl.eval.transfer.fitting import training_share

    labels = np.array([0] * 90 + [1] * 10)
    share = training_share(labels, 0.1, seed=3)
    assert len(share) == 9 + 2 and set(labels[share]) == {0, 1}  # 10% of each class, 2 at least
    assert np.array_equal(share, training_share(labels, 0.1, seed=3))
    assert len(training_share(labels, 1.0, seed=3)) == 100


def test_snli_is_a_transfer_task_as_senteval_runs_it(tiny_data, senteval, tmp_path, capsys):
    """SentEval's SNLI (snli.py): SentEval's layout under the data root, [u, v, u*v, |u-v|], no
    penalty, pairs sorted by the second sentence first; asked for by name, not in tasks=all."""
    from mtl.transfer_tasks.registry import SentEvalQuirks, default_tasks
    from mtl.transfer_tasks.tasks import read_task

    shutil.copytree(FIXTURES / "snli_tiny", senteval / "SNLI")
    task = read_task("SNLI", senteval)
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [200, 100, 100]
    assert task.quirks == SentEvalQuirks(features="nli", no_penalty=True, sort_columns=(1, 0))
    assert "SNLI" not in default_tasks()
    for mode in ("fast", "senteval-prototyping"):
        out = tmp_path / f"out-{mode}"
        args = ["transfer", f"mode={mode}", f"data={senteval}", f"vectors={tiny_data['vectors']}"]
        assert main([*args, "wandb=disabled", "baseline=glove-bow", "tasks=SNLI", f"out={out}"]) == 0
        result = json.loads(next(out.glob("transfer*.json")).read_text())["results"]["SNLI"]
        assert (result["ndev"], result["ntest"]) == (100, 100) and 0 <= result["acc"] <= 1
        assert 0 <= result["embed_seconds"] <= result["seconds"]  # what bench-transfer splits off
    (senteval / "SNLI" / "labels.train").rename(senteval / "SNLI" / "labels.train_small")
    for prefix in ("s1", "s2"):
        (senteval / "SNLI" / f"{prefix}.train").rename(senteval / "SNLI" / f"{prefix}.train_small")
    capsys.readouterr()
    assert len(read_task("SNLI", senteval).splits["train"]) == 200  # the shared copy's slice, said
    captured = capsys.readouterr()
    assert "train_small slice: the full train split is not there" in captured.out + captured.err


def test_snli_pairs_are_classified_on_u_v_their_product_and_difference(monkeypatch):
    import numpy as np

    from mtl.eval.transfer import classifiers, fitting
    from mtl.eval.transfer.protocols import scored
    from mtl.eval.transfer.senteval_classifier import SentEvalParams
    from mtl.eval.transfer.suite import senteval_order
    from mtl.transfer_tasks.registry import SentEvalQuirks
    from mtl.transfer_tasks.tasks import SNLI_QUIRKS, Split, TransferTask

    split = Split([["a b", "c"], ["d", "e f g"]], [0, 1])
    assert senteval_order(split, (1, 0)).tolist() == [0, 1] and senteval_order(split).tolist() == [1, 0]
    seen = {}
    monkeypatch.setattr(fitting, "dev_tuned", lambda family, x, *rest: seen.update(x=x, family=family) or {})
    rows = {"a b": 0, "c": 1, "d": 2, "e f g": 3}
    embedded = np.arange(8, dtype=np.float32).reshape(4, 2)
    task = TransferTask("SNLI", "dev", dict.fromkeys(("train", "dev", "test"), split), quirks=SNLI_QUIRKS)
    scored(task, embedded, rows, classifiers.Protocol())
    u, v = embedded[[0, 1]], embedded[[2, 3]]
    np.testing.assert_array_equal(seen["x"], np.concatenate([u, v, u * v, np.abs(u - v)], axis=1))
    assert seen["family"].penalties == (1e9,)  # SentEval's noreg
    scored(task, embedded, rows, classifiers.Protocol(senteval=SentEvalParams()))
    assert seen["family"].penalties == (1e-9,)  # its own classifier's
    plain = TransferTask(
        "SICK-E", "dev", dict.fromkeys(("train", "dev", "test"), split), quirks=SentEvalQuirks()
    )
    scored(plain, embedded, rows, classifiers.Protocol())
    np.testing.assert_array_equal(seen["x"], np.concatenate([np.abs(u - v), u * v], axis=1))
    assert seen["family"].penalties == classifiers.Protocol().penalties


def test_any_function_of_sentences_is_scored_and_reported_beside_runs(tiny_data, senteval, tmp_path):
    """mtl.transfer.evaluate: a function from sentences to an (N, D) array (here GloVe-BoW written
    by hand, as another library's model would be) gives the same scores as the built-in baseline,
    in the reports `just transfer` writes."""
    import numpy as np

    import mtl.transfer
    from mtl.eval.loading import baseline_encoder

    bow = baseline_encoder("glove-bow", str(tiny_data["vectors"]), device="cpu")
    calls = []

    def encode(sentences):
        calls.append(len(sentences))
        return bow.encode(sentences)

    out = tmp_path / "mine"
    results = mtl.transfer.evaluate(
        encode, "mine", tasks=["MR", "CR"], mode="fast", out=out, data=senteval, batch_size=16
    )
    assert max(calls) <= 16  # called in batches
    assert (
        transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR,CR", f"out={tmp_path / 'builtin'}") == 0
    )
    builtin = json.loads((tmp_path / "builtin" / "transfer-fast.json").read_text())["results"]
    assert {t: results[t]["acc"] for t in ("MR", "CR")} == {t: builtin[t]["acc"] for t in ("MR", "CR")}
    report = json.loads((out / "transfer-fast.json").read_text())
    assert report["encoder"] == "mine" and report["source"] == "python: mine" and report["dim"] == 8
    assert (out / "transfer-fast.items.npz").is_file() and (out / "transfer-fast.md").is_file()
    with pytest.raises(UserError, match=r"mine: encode gave an array of shape \(1,\) for 1 sentences"):
        mtl.transfer.evaluate(
            lambda s: np.zeros(len(s)), "mine", tasks=["MR"], out=tmp_path / "x", data=senteval
        )


def test_a_matryoshka_run_transfers_at_a_truncated_width(tiny_data, senteval, tmp_path):
    from mtl.config import apply_overrides
    from mtl.eval.transfer import suite

    mnrl = (f"mnrl.source={FIXTURES / 'snli_tiny'}", "mnrl.batch=6", "mnrl.steps=2")
    run_dir, _ = start_run(
        tiny_data, tmp_path / "run", "tasks=nli,mnrl", *mnrl, "mnrl.matryoshka=16,8,4", "max_steps=6"
    )
    assert transfer(tiny_data, senteval, f"run={run_dir}", "tasks=MR", "truncate_dim=8") == 0
    report = json.loads((run_dir / "transfer-fast-dim8.json").read_text())
    assert report["dim"] == 8 and report["results"].keys() == {"MR"}
    too_wide = [f"run={run_dir}", "tasks=MR", "truncate_dim=32", f"data={senteval}", "wandb=disabled"]
    with pytest.raises(
        UserError, match=r"truncate_dim=32: .* embeddings have 16 dimensions: give at most 16"
    ):
        suite.run(apply_overrides(suite.TransferConfig(), too_wide))


def test_a_plugin_protocol_scores_a_plugin_task_with_no_edit_of_the_suite(
    tiny_data, senteval, tmp_path, monkeypatch, capsys
):
    """A transfer task with a protocol of its own is one file: a `TransferProtocol` registered by
    name, and a task registered with that name. Here: the nearest class centroid (cosine) of
    the first 40 MR sentences, tested on the other 20, checked against the same rule by hand."""
    import numpy as np

    from mtl.eval.loading import baseline_encoder
    from mtl.eval.transfer.protocols import TaskFeatures, TransferProtocol
    from mtl.registry import (
        Split,
        TransferTask,
        read_task,
        register_transfer_protocol,
        register_transfer_task,
    )
    from mtl.transfer_tasks import registry

    def nearest_centroid(train_x, train_y, test_x):
        unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # noqa: E731
        classes = np.unique(train_y)
        centroids = unit(np.stack([train_x[train_y == c].mean(axis=0) for c in classes]))
        return classes[np.argmax(unit(test_x) @ centroids.T, axis=1)]

    # what the test registers is taken out again afterwards
    monkeypatch.setitem(registry.TRANSFER_PROTOCOLS, "centroid", None)
    monkeypatch.setitem(registry.TRANSFER_TASKS, "MR-centroid", None)

    @register_transfer_protocol
    class NearestCentroid(TransferProtocol):
        name = "centroid"

        def sizes(self, splits):
            return {"ndev": splits["train"], "ntest": splits["test"]}

        def score(self, data: TaskFeatures, senteval):
            predicted = nearest_centroid(data.features("train"), data.labels("train"), data.features("test"))
            return {"acc": float((predicted == data.labels("test")).mean())}

    def read_mr_halves(root):  # MR's sentences: the first 40 to train on, the rest to test
        mr = read_task("MR", root).splits["all"]
        halves = {"train": slice(0, 40), "test": slice(40, None)}
        splits = {s: Split([mr.sentences[0][part]], mr.labels[part]) for s, part in halves.items()}
        return TransferTask("MR-centroid", "centroid", splits)

    register_transfer_task("MR-centroid", protocol="centroid", in_all=False)(read_mr_halves)
    with pytest.raises(
        ValueError, match=r"protocol 'knn' is not one of .*centroid.*register_transfer_protocol"
    ):
        register_transfer_task("MR-knn", protocol="knn")

    out = tmp_path / "centroid"
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR-centroid", f"out={out}") == 0
    result = json.loads((out / "transfer-fast.json").read_text())["results"]["MR-centroid"]
    halves = read_mr_halves(senteval)
    bow = baseline_encoder("glove-bow", str(tiny_data["vectors"]), device="cpu")
    train, test = halves.splits["train"], halves.splits["test"]
    expected = nearest_centroid(
        bow.encode(train.sentences[0]), np.asarray(train.labels), bow.encode(test.sentences[0])
    )
    assert result["acc"] == pytest.approx(float((expected == np.asarray(test.labels)).mean()), abs=1e-6)
    assert result["ndev"] == len(train.labels) and result["ntest"] == len(test.labels)
    # a protocol returning percent where mtl takes fractions is one line, never 5680.00 in a report
    monkeypatch.setattr(NearestCentroid, "score", lambda self, data, senteval: {"acc": 56.8})
    assert (
        transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR-centroid", f"out={tmp_path / 'pct'}")
        == 2
    )
    assert "protocol 'centroid' returned acc=56.8, outside its score_range [-1, 1]" in one_error_line(capsys)


def test_scoring_sts_alone_imports_neither_scikit_learn_nor_scipy_stats(shared_data, tmp_path):
    # They cost ~1 CPU-s to import, and an STS task fits nothing: the command on STS14 alone cost
    # 1.19x SentEval's whole process (issue 105). Classifiers import scikit-learn where they fit.
    probe = (
        "import sys\n"
        "from mtl.cli import main\n"
        f"code = main(['transfer', 'baseline=glove-bow', 'tokenizer=whitespace', 'tasks=STS14', 'mode=fast',"
        f" 'vectors={shared_data / 'glove' / 'glove.6B.50d.zip'}', 'out={tmp_path / 'out'}', 'wandb=disabled'])\n"
        "print(code, sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"
    scores = json.loads((tmp_path / "out" / "transfer-fast.json").read_text())["results"]["STS14"]
    # SentEval's own process on these vectors (RESULTS: the transfer command as typed against it)
    assert (round(100 * scores["all/pearson"], 2), round(100 * scores["all/spearman"], 2)) == (47.05, 49.69)
