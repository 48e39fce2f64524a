"""The papers' table rows: InferSent's inner-attention and hierarchical ConvNet,
Liu et al.'s self-attention and sum pooling, and the bottleneck; each trains, resumes exactly,
encodes and transfers."""

import numpy as np
import pytest
import torch

from mtl import load_encoder
from mtl.runs import read_metrics
from mtl.train.loop import run

from .conftest import exported_weights, start_run

ROWS = {
    "innerattention": ("encoder=innerattention",),
    "hconvnet": ("encoder=hconvnet",),
    "gatedconv": ("encoder=gatedconv", "gatedconv_layers=2"),
    "selfattn": ("pooling=selfattn", "selfattn_da=5", "selfattn_r=3"),
    "bottleneck": ("encoder=bilstm", "bottleneck=6"),
    "decomposable-sum": ("encoder=decomposable", "pooling=sum"),
    "bow-trainable": ("encoder=bow", "embeddings=trainable", "embedding_lr=x5"),
    "bilstm-both": ("encoder=bilstm", "embeddings=both"),
}
HIDDEN = 8  # the tiny runs' hidden size (conftest)
DIMS = {
    "innerattention": 4 * 2 * HIDDEN,
    "hconvnet": 4 * 2 * HIDDEN,
    "gatedconv": HIDDEN,
    "selfattn": 3 * 2 * HIDDEN,
    "bottleneck": 6,
    "decomposable-sum": 2 * HIDDEN,
    "bow-trainable": 8,  # the tiny vectors' width
    "bilstm-both": 2 * HIDDEN,
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_each_row_trains_resumes_exactly_and_encodes_at_its_width(tiny_data, tmp_path, row):
    keys = (*ROWS[row], "max_steps=12", "eval_every=5", "dropout=0.1")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *keys)
    killed, _ = start_run(tiny_data, tmp_path / "killed", *keys, killed_after=7)
    _, resumed = run.resume(killed, progress=False)
    assert {k: v for k, v in resumed.items() if k.startswith("best/")} == {
        k: v for k, v in straight.items() if k.startswith("best/")
    }
    first, second = (exported_weights(d) for d in (straight_dir, killed))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    losses = [
        [r["global_step"] for r in read_metrics(d / "metrics.jsonl") if "nli/train/loss" in r]
        for d in (straight_dir, killed)
    ]
    assert losses[0] == losses[1]

    encoder = load_encoder(straight_dir, device="cpu")
    sentences = ["a man plays a guitar .", "two dogs run", "a woman is outside in the sun today"]
    together = encoder.encode(sentences, progress=False)
    assert together.shape == (3, DIMS[row]) and encoder.dim == DIMS[row]
    alone = np.stack([encoder.encode(s, progress=False) for s in sentences])  # padding changes nothing
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)


def test_a_selfattn_run_transfers_and_may_be_pooled_otherwise(tiny_data, senteval, tmp_path):
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer

    run_dir, _ = start_run(tiny_data, tmp_path / "run", *ROWS["selfattn"], "max_steps=6")
    out, report = transfer(
        TransferConfig(
            run=str(run_dir), tasks="MR,CR", mode="fast", data=str(senteval), wandb="disabled", device="cpu"
        )
    )
    assert set(report["results"]) == {"MR", "CR"} and report["dim"] == DIMS["selfattn"]
    encoder = load_encoder(run_dir, device="cpu")
    assert encoder.encode(["a dog"], pooling="max", progress=False).shape == (1, 2 * HIDDEN)


def test_pooling_a_bottleneck_or_an_architectures_own_way_otherwise_is_one_line(tiny_data, tmp_path):
    from mtl.errors import UserError

    for row, message in (
        ("bottleneck", "has a bottleneck trained on pooling=max embeddings"),
        ("hconvnet", "HConvNetEncoder pools its own way"),
    ):
        run_dir, _ = start_run(tiny_data, tmp_path / row, *ROWS[row], "max_steps=2")
        with pytest.raises(UserError, match=message):
            load_encoder(run_dir, device="cpu").encode(["a dog"], pooling="mean", progress=False)
    run_dir, _ = start_run(tiny_data, tmp_path / "max", "max_steps=2")
    with pytest.raises(UserError, match="trained with another pooling, so it has no attention"):
        load_encoder(run_dir, device="cpu").encode(["a dog"], pooling="selfattn", progress=False)


def test_senteval_modes_name_their_report_and_record_the_classifier(tiny_data, senteval, tmp_path):
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=2")
    out, report = transfer(
        TransferConfig(
            run=str(run_dir),
            tasks="MR",
            mode="senteval-prototyping",
            classifier="mlp",
            nhid=7,
            kfold=3,
            data=str(senteval),
            wandb="disabled",
            device="cpu",
        )
    )
    assert (out / "transfer-senteval-prototyping-mlp.json").is_file()
    assert report["classifier"]["nhid"] == 7 and report["classifier"]["optim"] == "rmsprop"
    assert report["classifier"]["kfold"] == 3 and 0 <= report["results"]["MR"]["acc"] <= 1


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["classifier=mlp"], "classifier= sets SentEval's classifier: add mode=senteval"),
        (["mode=fast", "tenacity=3"], "tenacity= sets SentEval's classifier"),
        (["mode=senteval", "optim=adamw"], "optim='adamw' is not SentEval's optimizer string"),
        (["mode=senteval", "optim=sgd,lr=x"], "optim='sgd,lr=x' is not SentEval's optimizer string"),
        (["pooling=selfattn", "tasks=MR,STS14"], "STS14 take no classifier of that kind"),
        (["pooling=selfattn", "mode=senteval"], "pooling=selfattn trains attention and its own classifier"),
    ],
)
def test_transfer_keys_that_need_senteval_mode_say_so(keys, message):
    from mtl.config import apply_overrides
    from mtl.errors import UserError
    from mtl.eval.transfer.suite import TransferConfig

    with pytest.raises(UserError, match=message):
        apply_overrides(TransferConfig(run="x"), keys)


def test_attention_trained_for_a_task_finds_the_one_position_that_decides_it():
    # Sentences of noise states where the label is the sign of one marked position's first
    # feature: mean pooling drowns it, attention that learns to find the marker does not.
    from mtl.eval.transfer.classifiers import Protocol
    from mtl.eval.transfer.selfattn import AttentionFit, States

    rng = np.random.default_rng(0)
    rows, labels = [], []
    for _ in range(1000):
        length = int(rng.integers(4, 12))
        states = rng.normal(size=(length, 6)).astype(np.float32)
        where = int(rng.integers(length))
        states[where, 5] = 4.0  # the marker
        label = int(rng.integers(2))
        states[where, 0] = 2.0 if label else -2.0
        rows.append(states)
        labels.append(label)
    labels = np.array(labels)
    mean_pooled = np.stack([r.mean(axis=0) for r in rows])
    from sklearn.linear_model import LogisticRegression

    baseline = (
        LogisticRegression().fit(mean_pooled[:800], labels[:800]).score(mean_pooled[800:], labels[800:])
    )
    attention = AttentionFit([States(rows)], 2, 8, 1, Protocol())
    held = attention.fit(np.arange(700), labels[:700], validation=(np.arange(700, 800), labels[700:800]))
    assert held == attention.score(np.arange(700, 800), labels[700:800])  # the epoch it kept
    tested = attention.tested(np.arange(800, 1000), labels[800:])
    accuracy = (tested["predicted"] == labels[800:]).mean()
    assert np.array_equal(tested["log_probs"].argmax(axis=1), tested["predicted"])
    assert accuracy > 0.95 and accuracy > baseline + 0.1


def test_transfer_trains_self_attention_per_task_on_the_frozen_states(tiny_data, senteval, tmp_path):
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "encoder=lstm", "max_steps=2")
    out, report = transfer(
        TransferConfig(
            run=str(run_dir),
            tasks="MR,CR",
            pooling="selfattn",
            selfattn_da=4,
            mode="fast",
            data=str(senteval),
            wandb="disabled",
            device="cpu",
        )
    )
    assert set(report["results"]) == {"MR", "CR"} and (out / "transfer-fast-pool-selfattn.json").is_file()
    assert report["dim"] == 3 * HIDDEN  # selfattn_r views of the word states, in the report's table
    assert f"| {run_dir.name} | {3 * HIDDEN} |" in (out / "transfer-fast-pool-selfattn.md").read_text()
    assert all(0 <= r["acc"] <= 1 and 0 <= r["dev_acc"] <= 1 for r in report["results"].values())
    states = load_encoder(run_dir, device="cpu").token_states(["a man plays a guitar .", "a dog"])
    assert [s.shape for s in states] == [(6, HIDDEN), (2, HIDDEN)]


@pytest.mark.parametrize("row", ["innerattention", "hconvnet", "bottleneck"])
def test_infersents_encoders_and_a_bottleneck_transfer(tiny_data, senteval, tmp_path, row):
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer

    run_dir, _ = start_run(tiny_data, tmp_path / "run", *ROWS[row], "max_steps=2")
    _, report = transfer(
        TransferConfig(
            run=str(run_dir), tasks="MR", mode="fast", data=str(senteval), wandb="disabled", device="cpu"
        )
    )
    assert report["dim"] == DIMS[row] and 0 <= report["results"]["MR"]["acc"] <= 1
