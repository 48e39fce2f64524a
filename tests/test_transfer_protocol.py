import dataclasses

import numpy as np
import pytest

from mtl.eval.transfer import fitting
from mtl.eval.transfer.classifiers import (
    LogisticRegressionFamily,
    Protocol,
    cosine,
    pair_features,
    relatedness,
    score_distribution,
    sts_scores,
)
from mtl.eval.transfer.senteval_classifier import (
    SentEvalClassifier,
    SentEvalParams,
    inner_kfold,
    kfold_train_test,
    split,
)

FAST = Protocol.fast()


# The three ways a transfer task fits its logistic regression, as protocols.py calls them (under
# one_thread_scoring there: a test that counts the fits' threads sets it up itself)
def cross_validated_accuracy(x, y, protocol: Protocol) -> dict:
    return fitting.cross_validated(LogisticRegressionFamily(protocol), x, y)


def train_test_accuracy(x_train, y_train, x_test, y_test, protocol: Protocol) -> dict:
    return fitting.train_test(LogisticRegressionFamily(protocol), x_train, y_train, x_test, y_test)


def dev_tuned_accuracy(x_train, y_train, x_dev, y_dev, x_test, y_test, protocol: Protocol) -> dict:
    family = LogisticRegressionFamily(protocol)
    return fitting.dev_tuned(family, x_train, y_train, x_dev, y_dev, x_test, y_test)


def test_score_distribution_of_tai_et_al():
    np.testing.assert_allclose(
        score_distribution([3.6, 1.0, 5.0], 1.0, 5.0),
        [[0, 0, 0.4, 0.6, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]],
        atol=1e-12,
    )
    assert score_distribution([2.5], 0.0, 5.0).shape == (1, 6)


def test_cosine_and_pair_features():
    u, v = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(cosine(u, v), [0.0, 1.0])
    assert pair_features(u[:1], v[:1]).tolist() == [[1, 0, 0, 2, 1, 2, 0, 0]]


def test_sts_scores_average_plain_and_weighted():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
    gold = cosine(a, b) * 2 + 3  # a monotone map of the cosine: correlation 1
    reverse = -gold[:20]
    results = sts_scores({"same": (a, b, gold), "reversed": (a[:20], b[:20], reverse)})
    assert results["same/pearson"] == pytest.approx(1.0)
    assert results["reversed/spearman"] == pytest.approx(-1.0)
    assert results["all/pearson"] == pytest.approx(0.0)
    assert results["all/pearson_weighted"] == pytest.approx((40 - 20) / 60)
    assert results["items"]["reversed/gold"].tolist() == reverse.tolist()
    np.testing.assert_allclose(results["items"]["same/predicted"], cosine(a, b))


def separable(n=200, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 6)) + 3 * y[:, None]
    return x, y


def test_cross_validation_on_separable_and_random_labels():
    x, y = separable()
    result = cross_validated_accuracy(x, y, FAST)
    assert result["acc"] == pytest.approx(1.0, abs=0.02)
    # Every item predicted once, by the fold it was a test item of: their accuracy is the folds'.
    assert np.array_equal(result["items"]["gold"], y)
    assert (result["items"]["predicted"] == y).mean() == pytest.approx(result["acc"], abs=1e-9)
    noise = np.random.default_rng(1).integers(0, 2, 200)
    assert cross_validated_accuracy(x, noise, FAST)["acc"] == pytest.approx(0.5, abs=0.12)


def test_train_test_and_dev_tuned_accuracy():
    x, y = separable(300)
    result = train_test_accuracy(x[:200], y[:200], x[200:], y[200:], FAST)
    assert result["acc"] > 0.97 and result["f1"] > 0.97
    tuned = dev_tuned_accuracy(x[:200], y[:200], x[200:250], y[200:250], x[250:], y[250:], FAST)
    assert tuned["acc"] > 0.97 and tuned["dev_acc"] > 0.97


def test_relatedness_recovers_a_linear_score():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 8))
    scores = np.clip(3 + x[:, 0] - 0.5 * x[:, 1], 1, 5)
    result = relatedness(
        x[:400],
        scores[:400],
        x[400:500],
        scores[400:500],
        x[500:],
        scores[500:],
        (1.0, 5.0),
        Protocol(relatedness_epochs=60),
    )
    assert result["pearson"] > 0.9 and result["spearman"] > 0.85
    # SICK-R's third number in Skip-Thought and Quick-Thoughts: the test MSE of the expected score.
    assert 0 < result["mse"] < np.var(scores[500:])  # better than predicting the mean


# ---- SentEval's own classifier (mode=senteval) ----------------------------------------------------


def test_senteval_configurations_are_the_papers():
    # Conneau & Kiela (2018), Section 4: "to be comparable to the results published in the
    # literature" and the prototyping set (with kfold 5, as SentEval's README sets it).
    default, prototyping = SentEvalParams.default(), SentEvalParams.prototyping()
    assert (default.nhid, default.optim, default.batch_size, default.tenacity, default.epoch_size) == (
        0,
        "adam",
        64,
        5,
        4,
    )
    assert default.kfold == 10 and default.seed == 1111
    assert (prototyping.optim, prototyping.batch_size, prototyping.tenacity, prototyping.epoch_size) == (
        "rmsprop",
        128,
        3,
        2,
    )
    assert prototyping.kfold == 5 and prototyping.nhid == 0
    assert Protocol.named("senteval").senteval == default and Protocol.named("fast").senteval is None


@pytest.mark.parametrize("nhid", [0, 20])
def test_senteval_classifier_learns_separable_data_and_not_noise(nhid):
    # Enough examples for SentEval's early stopping (misses counted over a whole fit) to let it learn.
    params = SentEvalParams.prototyping(kfold=3, jobs=1, nhid=nhid)
    x, y = separable(1500)
    assert inner_kfold(x, y, params)["acc"] == pytest.approx(1.0, abs=0.03)
    noise = np.random.default_rng(1).integers(0, 2, 1500)
    assert inner_kfold(x, noise, params)["acc"] == pytest.approx(0.5, abs=0.06)
    result = kfold_train_test(x[:1000], y[:1000], x[1000:], y[1000:], params)
    assert result["acc"] > 0.97 and result["f1"] > 0.97
    tuned = split(x[:1000], y[:1000], x[1000:1200], y[1000:1200], x[1200:], y[1200:], params)
    assert tuned["acc"] > 0.97 and tuned["dev_acc"] > 0.97


def test_senteval_stops_after_tenacity_plus_one_misses_in_all_not_in_a_row(monkeypatch):
    # SentEval's fit() counts validation misses without resetting the count on an improvement.
    scripted = iter([0.5, 0.6, 0.55, 0.7, 0.65, 0.8, 0.9])
    classifier = SentEvalClassifier(6, 2, 0.0, SentEvalParams(tenacity=1, epoch_size=1))
    monkeypatch.setattr(classifier, "score", lambda x, y: next(scripted))
    x, y = separable(20)
    best = classifier.fit(x, y, validation=(x, y))
    assert best == 0.7  # the 0.65 was the second miss: it stopped there, before 0.8
    assert next(scripted) == 0.8


def test_micro_and_macro_averages_weigh_dev_accuracies_as_infersent():
    from mtl.formats.senteval_format import micro_macro

    results = {
        "MR": {"acc": 0.8, "dev_acc": 0.80, "ndev": 100, "ntest": 100},
        "TREC": {"acc": 0.9, "dev_acc": 0.90, "ndev": 300, "ntest": 50},
        "SICK-R": {"pearson": 0.8, "dev_pearson": 0.8, "ndev": 500, "ntest": 4927},  # not an accuracy
    }
    assert micro_macro(results) == {"micro": 87.5, "macro": 85.0, "tasks": ["MR", "TREC"]}
    assert micro_macro({"SICK-R": results["SICK-R"]}) is None


def test_senteval_layout_without_per_item_results_keeps_its_shape():
    from mtl.formats.senteval_format import senteval_results

    sts = {"images/pearson": 0.7, "images/spearman": 0.6, "all/pearson": 0.7, "all/spearman": 0.6}
    shaped = senteval_results({"STS14": sts, "SICK-E": {"acc": 0.81234, "dev_acc": 0.8, "ndev": 500}}, {})
    assert shaped["STS14"]["images"] == {"pearson": (0.7, None), "spearman": (0.6, None), "nsamples": None}
    assert shaped["STS14"]["all"]["pearson"] == {"mean": 0.7, "wmean": None}
    assert shaped["SICKEntailment"] == {"devacc": 80.0, "acc": 81.23, "ndev": 500}


def test_a_long_task_says_its_stage_while_it_runs():
    """The transfer bar's words for one task: the k-fold fits count up as they finish, the
    C search of a train/test task counts its folds; outside a suite nothing listens."""
    from mtl.eval.transfer.progress import reporting

    x, y = separable()
    notes = []
    with reporting(notes.append):
        cross_validated_accuracy(x, y, FAST)  # (features this small are fitted in this process)
    assert notes == [f"fold {k}/5" for k in range(6)]
    notes.clear()
    with reporting(notes.append):
        train_test_accuracy(x[:150], y[:150], x[150:], y[150:], FAST)
    assert notes[:3] == [f"choosing C: fold {k}/3" for k in (1, 2, 3)] and notes[3].startswith(
        "final fit (C="
    )
    cross_validated_accuracy(x, y, FAST)  # no listener: no error, nothing kept
    assert len(notes) == 4


def test_splits_are_fitted_in_senteval_order_and_items_come_back_in_file_order():
    """SentEval sorts each split by the sentences' whitespace tokens, then the label (stable), and
    draws its folds in that order; mtl fits in that order and reports items in the file's."""
    from mtl.eval.transfer.suite import in_file_order, reordered, senteval_order
    from mtl.transfer_tasks.tasks import Split

    split = Split([["a b c", "a", "a b", "z", "a b"], ["x", "y y", "x", "x", "x"]], [1, 0, 2, 0, 1])
    order = senteval_order(split)
    assert order.tolist() == [3, 1, 4, 2, 0]  # (1,1,0) (1,2,0) (2,1,1) (2,1,2) (3,1,1)
    assert reordered(split, order).labels == [0, 0, 1, 2, 1]
    values = np.array([30, 10, 40, 20, 0])  # what a classifier said, in the sorted order
    assert in_file_order(values, order).tolist() == [0, 10, 20, 30, 40]


def test_penalties_are_compared_as_senteval_rounds_them():
    """Two C whose scores differ past the second decimal of a percent tie, and the first wins."""
    from mtl.eval.transfer.senteval_classifier import in_points

    assert in_points(0.812341) == in_points(0.812339) == 81.23
    assert int(np.argmax([in_points(0.812339), in_points(0.812341)])) == 0


def test_trec_and_mrpc_tune_c_over_senteval_kfold_grid():
    assert Protocol().train_test_penalties == (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # validation.py
    assert Protocol().penalties == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def pool_threads(pools: list[dict] | None = None) -> dict[str, set[int]]:
    """The thread count of each kind of pool (blas, openmp) loaded here (or in `pools`, a
    worker's threadpool_info), and torch's here."""
    import torch
    from threadpoolctl import threadpool_info

    found: dict[str, set[int]] = {} if pools is not None else {"torch": {torch.get_num_threads()}}
    for pool in threadpool_info() if pools is None else pools:
        found.setdefault(pool["user_api"], set()).add(pool["num_threads"])
    return found


def test_every_fit_and_score_runs_on_one_thread_here_and_in_the_workers(monkeypatch):
    """One guard (threads.py) around a task's whole scoring: BLAS, OpenMP and torch at one thread
    in this process and in the k-fold workers it starts (a second thread waits for a core on a
    shared machine; the count changes an unconverged solver's path); the caller's count after."""
    import torch
    from joblib import Parallel, delayed
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_info

    from mtl.eval.transfer.threads import one_thread_scoring

    seen = []
    real_fit = LogisticRegression.fit

    def watched_fit(self, x, y, *args, **kwargs):
        seen.append(pool_threads())
        return real_fit(self, x, y, *args, **kwargs)

    monkeypatch.setattr(LogisticRegression, "fit", watched_fit)
    torch.set_num_threads(2)
    try:
        x, y = separable(300)
        with one_thread_scoring():  # as protocols.py scores every task
            train_test_accuracy(x[:200], y[:200], x[200:], y[200:], FAST)
            dev_tuned_accuracy(x[:200], y[:200], x[200:250], y[200:250], x[250:], y[250:], FAST)
        assert seen and all(counts == {1} for found in seen for counts in found.values()), seen
        assert torch.get_num_threads() == 2  # the caller's count back: encoding keeps it
        with one_thread_scoring():
            # (threadpoolctl's own function: a worker imports no test module, so no torch)
            workers = [
                pool_threads(pools)
                for pools in Parallel(n_jobs=2)(delayed(threadpool_info)() for _ in range(2))
            ]
        assert all(counts == {1} for found in workers for counts in found.values()), workers
    finally:
        torch.set_num_threads(1)


def test_small_features_fit_in_the_callers_process_with_the_workers_results(monkeypatch):
    """Folds costing less than fitting.WORKERS_FROM to fit skip the worker processes (starting them
    costs more than they share); every fit seeds itself, so the workers give the same items."""
    from mtl.eval.transfer import fitting
    from mtl.eval.transfer.classifiers import LogisticRegressionFamily

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    x = rng.normal(size=(300, 8)) + 0.6 * y[:, None]  # overlapping classes: an accuracy under 1
    family = LogisticRegressionFamily(dataclasses.replace(FAST, jobs=2))
    assert family.processes(x) == 1 and family.processes(np.zeros((3775, 4096))) == 1  # CR at 4,096
    assert family.processes(np.broadcast_to(np.float32(0), (70_000, 4096))) == 2  # SST2-sized
    alone = fitting.cross_validated(family, x, y)
    monkeypatch.setattr(fitting, "WORKERS_FROM", 0)
    assert family.processes(x) == 2
    pooled = fitting.cross_validated(family, x, y)
    assert 0.6 < alone["acc"] < 0.95
    assert (pooled["acc"], pooled["dev_acc"]) == (alone["acc"], alone["dev_acc"])
    for key, values in alone["items"].items():
        np.testing.assert_array_equal(pooled["items"][key], values, err_msg=key)


def test_senteval_fits_skip_the_workers_where_they_cannot_pay_back_with_the_same_results(monkeypatch):
    """SentEval's classifier (many epochs a fit) weighs its fits by its configuration: GloVe's 50
    dimensions on MR fit in the caller's process under the prototyping configuration, not under
    the default one (~27x the epochs' work), nor at 4,096 dimensions; where they run changes no item."""
    from mtl.eval.transfer import senteval_classifier
    from mtl.eval.transfer.senteval_classifier import SentEvalFamily

    mr = np.broadcast_to(np.float32(0), (10_662, 50))
    prototyping, default = (
        SentEvalFamily(SentEvalParams.prototyping()),
        SentEvalFamily(SentEvalParams.default()),
    )
    assert prototyping.processes(mr) == 1 and default.processes(mr) == 2
    assert default.fit_cost(mr) / prototyping.fit_cost(mr) == pytest.approx(26.7, abs=0.1)
    assert prototyping.processes(np.broadcast_to(np.float32(0), (10_662, 4096))) == 2
    params = SentEvalParams.prototyping(kfold=2, jobs=2, max_epoch=2)
    x, y = separable(200)
    alone = inner_kfold(x, y, params)
    monkeypatch.setattr(senteval_classifier, "SENTEVAL_WORKERS_FROM", 0)
    assert SentEvalFamily(params).processes(x) == 2
    pooled = inner_kfold(x, y, params)
    assert (pooled["acc"], pooled["dev_acc"]) == (alone["acc"], alone["dev_acc"])
    for key, values in alone["items"].items():
        np.testing.assert_array_equal(pooled["items"][key], values, err_msg=key)


def test_fits_in_worker_processes_say_nothing_of_read_only_arrays(capfd, monkeypatch):
    # Over 1 MB, joblib hands its workers the features as a memory map; a read-only one made torch
    # warn "The given NumPy array is not writable" on each worker's first fit (`just transfer
    # mode=senteval...` on MR printed it twice). The workers write to the terminal's stderr.
    from mtl.eval.transfer import senteval_classifier

    monkeypatch.setattr(senteval_classifier, "SENTEVAL_WORKERS_FROM", 0)  # these would fit in this process
    params = SentEvalParams.prototyping(kfold=2, jobs=2, max_epoch=1)
    x, y = separable(2500)
    x = np.hstack([x, np.zeros((len(x), 150 - x.shape[1]), dtype=np.float32)])  # 1.5 MB
    assert x.nbytes > 1_000_000
    inner_kfold(x, y, params)
    assert "not writable" not in capfd.readouterr().err


def test_the_three_classifiers_answer_one_interface_and_every_protocol_flow():
    """scikit-learn's logistic regression, SentEval's classifier and the self-attention classifier
    are one `fitting.ClassifierFamily` each; the cross-validated, train/test and dev-tuned flows
    run unchanged over each of them and give each test item a prediction and log-probabilities."""
    from mtl.eval.transfer import fitting
    from mtl.eval.transfer.classifiers import LogisticRegressionFamily
    from mtl.eval.transfer.selfattn import AttentionFamily, States
    from mtl.eval.transfer.senteval_classifier import SentEvalFamily

    x, y = separable(600)
    x = x.astype(np.float32)
    rows = np.arange(len(y))  # the attention classifier reads row numbers into its token states
    states = [States([x[i : i + 1] - 1.5 for i in rows])]  # one "word" per sentence, centred
    families = [
        (LogisticRegressionFamily(FAST), x),
        (SentEvalFamily(SentEvalParams.prototyping(kfold=3, jobs=1)), x),
        (AttentionFamily(states, 2, 4, 1, dataclasses.replace(FAST, folds=3)), rows),
    ]
    for family, inputs in families:
        name = type(family).__name__
        results = [
            fitting.cross_validated(family, inputs, y),
            fitting.train_test(family, inputs[:400], y[:400], inputs[400:], y[400:]),
            fitting.dev_tuned(
                family, inputs[:300], y[:300], inputs[300:400], y[300:400], inputs[400:], y[400:]
            ),
        ]
        for result, tested in zip(results, (y, y[400:], y[400:]), strict=True):
            assert result["acc"] > 0.85 and 0.85 < result["dev_acc"] <= 1, (name, result)
            items = result["items"]
            assert np.array_equal(items["gold"], tested)
            assert np.array_equal(items["log_probs"].argmax(axis=1), items["predicted"]), name
            assert result["acc"] == pytest.approx(float((items["predicted"] == tested).mean()), abs=0.02)
        assert results[1]["f1"] > 0.85  # two classes: train/test reports the F1 of class 1


def test_a_task_entry_names_a_feature_recipe_a_plugin_registers(monkeypatch):
    from mtl.errors import UserError
    from mtl.eval.transfer import features, fitting
    from mtl.eval.transfer.protocols import scored
    from mtl.registry import SentEvalQuirks, register_feature_recipe
    from mtl.transfer_tasks.tasks import Split, TransferTask

    monkeypatch.setitem(features.FEATURE_RECIPES, "difference", None)  # taken out again afterwards

    @register_feature_recipe("difference")
    def difference(columns, texts):
        u, v = columns
        return u - v

    seen = {}
    monkeypatch.setattr(fitting, "dev_tuned", lambda family, x, *rest: seen.update(x=x) or {})
    split = Split([["a", "b"], ["c", "d"]], [0, 1])
    rows = {"a": 0, "b": 1, "c": 2, "d": 3}
    embedded = np.arange(8, dtype=np.float32).reshape(4, 2)
    task = TransferTask("PAIRS", "dev", dict.fromkeys(("train", "dev", "test"), split))
    scored(dataclasses.replace(task, quirks=SentEvalQuirks(features="difference")), embedded, rows, FAST)
    np.testing.assert_array_equal(seen["x"], embedded[[0, 1]] - embedded[[2, 3]])
    with pytest.raises(UserError, match=r"PAIRS: its entry names the feature recipe 'ratio'.*plugins="):
        scored(dataclasses.replace(task, quirks=SentEvalQuirks(features="ratio")), embedded, rows, FAST)
