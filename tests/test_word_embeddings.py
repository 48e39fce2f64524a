"""embeddings=frozen|trainable|both (Liu et al. 2018 Section 6; Quick-Thoughts 4.4.1's MC-QT),
embedding_lr=, and the bag-of-words encoder (Quick-Thoughts Appendix B)."""

import numpy as np
import pytest
import torch

from mtl import load_encoder
from mtl.errors import UserError
from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding, word_embedding
from mtl.text.vectors import load_vectors
from mtl.train.loop import run
from mtl.train.optim.optimizers import build_optimizer, learning_rates

from .conftest import FIXTURES, args_for, exported_encoder, start_run


def glove(tiny_data) -> dict[str, np.ndarray]:
    vectors = load_vectors(tiny_data["vectors"], use_cache=False)
    return dict(zip(vectors.words, vectors.matrix, strict=True))


def trained_words_with_a_vector(tiny_data) -> list[str]:
    """Words of the tiny SNLI's training sentences (as tokenized there) that the vectors file has."""
    text = " ".join((FIXTURES / "snli_tiny" / f"{side}.train").read_text() for side in ("s1", "s2"))
    return sorted(set(text.lower().split()) & set(glove(tiny_data)))


def bag_of_words_run(tiny_data, tmp_path, embeddings: str):
    run_dir, _ = start_run(
        tiny_data, tmp_path / embeddings, "encoder=bow", f"embeddings={embeddings}", "lr=1", "max_steps=12"
    )
    return load_encoder(run_dir, device="cpu")


def test_trainable_vectors_move_where_training_reached_and_a_new_word_reads_its_glove_vector(
    tiny_data, tmp_path
):
    vectors, words = glove(tiny_data), trained_words_with_a_vector(tiny_data)
    encoder = bag_of_words_run(tiny_data, tmp_path, "trainable")  # a word's embedding is its vector
    moved = [
        w for w in words if not np.allclose(encoder.encode([w], progress=False)[0], vectors[w], atol=1e-5)
    ]
    assert len(moved) >= 20, moved  # the words of the 12 batches trained
    # "unused" has a vector and no training sentence: its row is added at encode time, as GloVe's
    np.testing.assert_allclose(encoder.encode(["unused"], progress=False)[0], vectors["unused"], atol=1e-6)


def test_both_keeps_the_glove_channel_and_trains_a_copy_beside_it(tiny_data, tmp_path):
    vectors, words = glove(tiny_data), trained_words_with_a_vector(tiny_data)
    encoder = bag_of_words_run(tiny_data, tmp_path, "both")
    assert encoder.dim == 16  # [GloVe 8 ; trained 8]
    embedded = {w: encoder.encode([w], progress=False)[0] for w in [*words, "unused"]}
    for word in words:
        np.testing.assert_allclose(embedded[word][:8], vectors[word], atol=1e-6)  # frozen channel
    assert sum(not np.allclose(embedded[w][8:], vectors[w], atol=1e-5) for w in words) >= 20
    unused = vectors["unused"]
    np.testing.assert_allclose(embedded["unused"], np.concatenate([unused, unused]), atol=1e-6)


def test_frozen_vectors_stay_glove(tiny_data, tmp_path):
    vectors, words = glove(tiny_data), trained_words_with_a_vector(tiny_data)
    encoder = bag_of_words_run(tiny_data, tmp_path, "frozen")
    for word in words:
        np.testing.assert_allclose(encoder.encode([word], progress=False)[0], vectors[word], atol=1e-6)


def test_embedding_lr_and_adamw_leave_trained_vectors_their_own_rate_and_no_decay(tiny_data, tmp_path):
    run_dir, _ = start_run(
        tiny_data, tmp_path / "run", "embeddings=both", "optim=adamw", "lr=0.001", "embedding_lr=x10",
        "encoder_lr=0.002", "max_steps=4",
    )  # fmt: skip
    saved = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    groups = saved["optimizers"]["nli"]["param_groups"]
    assert groups[0]["base_lr"] == 0.002  # the encoder's first: what nli/lr logs
    vectors = [g for g in groups if g["base_lr"] == pytest.approx(0.01)]
    assert len(vectors) == 1 and vectors[0]["weight_decay"] == 0.0 and len(vectors[0]["params"]) == 1
    assert any(g["weight_decay"] > 0 for g in groups)  # the encoder's and head's matrices still decay


def test_learning_rates_give_word_vectors_embedding_lr_else_the_encoders():
    layer = nn_linear = torch.nn.Linear(2, 2)
    vectors = word_embedding(torch.randn(5, 3), "trainable")
    head = torch.nn.Linear(3, 2)
    encoder = [*vectors.parameters(), *nn_linear.parameters()]

    def lrs(**keys):
        config = run.config_from_args([f"{k}={v}" for k, v in {"lr": "0.1", **keys}.items()]).optim
        lr_of = learning_rates(
            config, {"nli": ""}, encoder, {"nli": list(head.parameters())}, [vectors.weight]
        )
        return lr_of("nli")(vectors.weight), lr_of("nli")(layer.weight), lr_of("nli")(head.weight)

    assert lrs() == (0.1, 0.1, 0.1)
    assert lrs(encoder_lr="x0.5", embeddings="trainable") == (0.05, 0.05, 0.1)
    assert lrs(encoder_lr="x0.5", embeddings="trainable", embedding_lr="0.3") == (0.3, 0.05, 0.1)
    optimizer = build_optimizer(
        run.config_from_args(["optim=adamw", "lr=0.1"]).optim,
        [layer.weight, vectors.weight],
        set(),
        undecayed={id(vectors.weight)},
    )
    decay = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert decay[id(vectors.weight)] == 0.0 and decay[id(layer.weight)] > 0


def test_the_bag_of_words_pools_known_words_only():
    matrix = torch.tensor([[0.0, 0.0], [9.0, 9.0], [1.0, 2.0], [3.0, -4.0]])  # padding, unknown, two words
    tokens, lengths = torch.tensor([[2, 1, 3], [1, 1, 0]]), torch.tensor([3, 2])
    for pooling, first in (("mean", [2.0, -1.0]), ("sum", [4.0, -2.0]), ("max", [3.0, 2.0])):
        encoder = build_encoder(frozen_embedding(matrix), EncoderConfig(encoder="bow", pooling=pooling))
        embedded = encoder(tokens, lengths)
        assert embedded.tolist() == [first, [0.0, 0.0]], pooling  # only unknown words: zeros


def test_both_channels_state_is_one_matrix_and_loads_back():
    matrix = torch.randn(6, 3)
    layer = word_embedding(matrix, "both")
    with torch.no_grad():
        layer.tuned.add_(1.0)
    state = layer.state_dict()
    assert list(state) == ["weight"] and state["weight"].shape == (6, 6)
    assert torch.equal(state["weight"][:, :3], matrix) and torch.equal(state["weight"][:, 3:], matrix + 1)
    again = word_embedding(torch.zeros(6, 3), "both")
    again.load_state_dict(state)
    assert torch.equal(again.frozen, matrix) and torch.equal(again.tuned, matrix + 1)
    assert not again.frozen.requires_grad and again.tuned.requires_grad
    tokens = torch.tensor([[0, 2, 5]])
    assert torch.equal(again(tokens), frozen_embedding(state["weight"])(tokens))  # inference reads it as one
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        word_embedding(torch.zeros(6, 2), "both").load_state_dict(state)


@pytest.mark.parametrize(
    "keys, message",
    [
        (("encoder=hf", "hf_model=x", "embeddings=trainable"), "encoder=hf has none"),
        (("embedding_lr=x2",), "give embeddings=trainable or embeddings=both"),
        (("embeddings=some",), "embeddings"),
    ],
)
def test_word_vector_options_that_cannot_apply_are_refused(tiny_data, tmp_path, keys, message):
    with pytest.raises(UserError, match=message):
        run.config_from_args(args_for(tiny_data, tmp_path / "run", *keys))


def test_quick_thoughts_g_trains_word_vectors_of_its_own_and_loads_them_back(tiny_data, tmp_path):
    # With one shared table a bag-of-words g would be f itself (Quick-Thoughts, Appendix B).
    corpus = FIXTURES / "corpus_tiny.txt"
    qt = ("tasks=qt", f"qt.corpus={corpus}", f"qt.dev={corpus}", "qt.batch=6", "qt.steps=2")
    run_dir, _ = start_run(
        tiny_data, tmp_path / "qt", *qt, "encoder=bow", "embeddings=trainable", "lr=1", "max_steps=10"
    )
    saved = exported_encoder(run_dir)
    part = saved["parts"]["heads.qt.output_encoder"]
    assert part["embedding.weight"].shape == saved["encoder"]["embedding.weight"].shape
    assert not torch.equal(part["embedding.weight"], saved["encoder"]["embedding.weight"])
    encoder = load_encoder(run_dir, device="cpu")
    sentence = (corpus.read_text().splitlines()[0].lower(),)
    embedded = encoder.encode(sentence, progress=False)[0]
    assert embedded.shape == (16,) and not np.allclose(embedded[:8], embedded[8:])  # f, then g
    best = load_encoder(run_dir / "checkpoints" / "best.pt", device="cpu")
    np.testing.assert_allclose(best.encode(sentence, progress=False)[0], embedded, rtol=1e-5, atol=1e-6)
    unused = glove(tiny_data)["unused"]  # added at encode time to f's and g's tables alike
    np.testing.assert_allclose(encoder.encode(["unused"], progress=False)[0], np.tile(unused, 2), atol=1e-6)


def test_quick_thoughts_g_trains_its_vectors_at_embedding_lr_without_decay(tiny_data, tmp_path):
    corpus = FIXTURES / "corpus_tiny.txt"
    qt = ("tasks=qt", f"qt.corpus={corpus}", f"qt.dev={corpus}", "qt.batch=6", "qt.steps=2")
    keys = ("encoder=bow", "embeddings=both", "optim=adamw", "lr=0.001", "embedding_lr=x10", "max_steps=2")
    run_dir, _ = start_run(tiny_data, tmp_path / "qt", *qt, *keys)
    groups = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)["optimizers"]["qt"][
        "param_groups"
    ]
    (vectors,) = [g for g in groups if g["base_lr"] == pytest.approx(0.01)]
    assert len(vectors["params"]) == 2 and vectors["weight_decay"] == 0.0  # f's trained half and g's


@pytest.mark.parametrize("embeddings", ["trainable", "both"])
def test_the_monitors_scoring_copy_reads_the_trained_vectors(tiny_data, senteval, tmp_path, embeddings):
    from mtl.train.callbacks.monitor import Monitor
    from mtl.train.loop.trainer import Trainer

    keys = ("encoder=bow", f"embeddings={embeddings}", "monitor=MR", f"monitor_data={senteval}", "device=cpu")
    trainer = Trainer(
        run.config_from_args(args_for(tiny_data, tmp_path / "run", *keys)), tmp_path / "run", progress=False
    )
    live = trainer.run.model.encoder.embedding
    (monitor,) = [callback for callback in trainer.run.callbacks.callbacks if isinstance(callback, Monitor)]
    for step in range(2):  # as training moves the vectors between two evaluations
        with torch.no_grad():
            for vectors in (p for p in live.parameters() if p.requires_grad):
                vectors[2:].add_(1.0 + step)
        copy = monitor._refreshed(trainer.run.model.encoder.state_dict()).encoder.embedding.weight
        assert torch.equal(copy[: len(live.weight)], live.weight)
