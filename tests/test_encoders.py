import pytest
import torch

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.models.encoders import ENCODERS, EncoderConfig
from mtl.models.encoders.base import build_encoder, frozen_embedding
from mtl.models.encoders.config import GatedConvOptions, GRUOptions, TransformerOptions
from mtl.models.heads import MultitaskModel, TaskHead
from mtl.tasks import KINDS as TASKS
from mtl.train.config.train_config import TrainConfig, with_overrides

SMALL = {
    "bilstm": EncoderConfig(encoder="bilstm", hidden=16),
    "bilstm2": EncoderConfig(encoder="bilstm2", hidden=16),
    "transformer": EncoderConfig(
        encoder="transformer", hidden=16, options=TransformerOptions(transformer_layers=2, transformer_ffn=32)
    ),
    "decomposable": EncoderConfig(encoder="decomposable", hidden=16),
    "lstm": EncoderConfig(encoder="lstm", hidden=16),
    "gru": EncoderConfig(encoder="gru", hidden=16),
    "bigru": EncoderConfig(encoder="gru", hidden=16, options=GRUOptions(bidirectional=True)),
    "innerattention": EncoderConfig(encoder="innerattention", hidden=16),
    "hconvnet": EncoderConfig(encoder="hconvnet", hidden=16),
    "gatedconv": EncoderConfig(encoder="gatedconv", hidden=16, options=GatedConvOptions(2)),
    "bow": EncoderConfig(encoder="bow"),
}
OWN_POOLING = {"innerattention", "hconvnet"}  # the architecture is the pooling


@pytest.fixture
def embedding():
    torch.manual_seed(0)
    return frozen_embedding(torch.randn(50, 12))


def test_every_registered_encoder_is_tested():
    assert set(ENCODERS) == {config.encoder for config in SMALL.values()} | {
        "hf"
    }  # hf needs a model folder: tests/test_hf.py


def pooling_cases() -> list[tuple[str, str]]:
    """Every encoder with every pooling it takes (the ones pooling their own way: as built;
    `bottleneck`: max pooling, then a bottleneck)."""
    cases = []
    for name in sorted(SMALL):
        for pooling in ["max", "mean", "max+mean", "sum", "selfattn", "last", "bottleneck"]:
            own = name in OWN_POOLING and pooling != "max"
            stateless = pooling == "last" and name in ("transformer", "decomposable", "gatedconv", "bow")
            if not own and not stateless and not (pooling == "bottleneck" and name == "decomposable"):
                cases.append((name, pooling))
    return cases


@pytest.mark.parametrize(("name", "pooling"), pooling_cases())
def test_padding_never_changes_an_embedding(embedding, name, pooling):
    torch.manual_seed(1)
    keys = {"bottleneck": 6, "pooling": "max"} if pooling == "bottleneck" else {"pooling": pooling}
    encoder = build_encoder(embedding, EncoderConfig(**{**SMALL[name].__dict__, **keys})).eval()
    sentence = torch.tensor([[5, 9, 3, 7]])
    alone = encoder(sentence, torch.tensor([4]))
    batch = torch.tensor(
        [[5, 9, 3, 7, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7, 8, 9], [8, 8, 0, 0, 0, 0, 0, 0, 0]]
    )
    together = encoder(batch, torch.tensor([4, 9, 2]))
    assert alone.shape == (1, encoder.output_dim)
    torch.testing.assert_close(together[0:1], alone, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(together[1], together[0])


def test_pair_model_comparison_ignores_padding(embedding):
    encoder = build_encoder(embedding, SMALL["decomposable"]).eval()
    a, b = torch.tensor([[4, 5, 6]]), torch.tensor([[7, 8]])
    alone = encoder.compare(a, torch.tensor([3]), b, torch.tensor([2]))
    padded = encoder.compare(
        torch.tensor([[4, 5, 6, 0, 0]]), torch.tensor([3]), torch.tensor([[7, 8, 0]]), torch.tensor([2])
    )
    torch.testing.assert_close(padded, alone, rtol=1e-5, atol=1e-6)
    assert alone.shape == (1, encoder.pair_dim)


def multitask_model(encoder, tasks, hidden: int, layers: int) -> MultitaskModel:
    """The shared encoder and the built-in tasks' heads, as a run builds them."""
    return MultitaskModel(
        encoder, {task: TaskHead(TASKS[task].recipe, encoder, hidden, layers, dropout=0.0) for task in tasks}
    )


@pytest.mark.parametrize("name", sorted(SMALL))
def test_head_inputs_follow_the_feature_recipes(embedding, name):
    encoder = build_encoder(embedding, SMALL[name])
    heads = {
        task: TaskHead(TASKS[task].recipe, encoder, hidden=8, layers=2, dropout=0.0)
        for task in ("nli", "squad")
    }
    model = MultitaskModel(encoder, heads)
    encoder = model.encoder
    first = {task: model.heads[task].classifier[1].in_features for task in ("nli", "squad")}
    if encoder.pair_model:
        assert first == {"nli": encoder.pair_dim, "squad": 2 * encoder.pair_dim}
    else:
        assert first == {"nli": 4 * encoder.output_dim, "squad": 7 * encoder.output_dim}
    tokens, lengths = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([3, 2])
    assert model("nli", [(tokens, lengths)] * 2).shape == (2, TASKS["nli"].recipe.outputs)
    assert model("squad", [(tokens, lengths)] * 3).shape == (2, TASKS["squad"].recipe.outputs)


def test_siamese_features_are_the_papers():
    u, v, w = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 1.0]]), torch.tensor([[0.5, 0.5]])
    assert TASKS["nli"].recipe.features(u, v).tolist() == [[1, -2, 3, 1, 2, 3, 3, -2]]
    assert TASKS["squad"].recipe.features(u, v, w).tolist() == [
        [1, -2, 3, 1, 0.5, 0.5, 2, 3, 3, -2, 0.5, 2.5, 0.5, -1]
    ]


# Liu et al. (2018) Table 1, trainable parameters with glove.840B.300d (frozen, excluded).
# Table 1 of Liu et al. (2018): preset -> (trainable parameters at 300-d inputs, the paper's figure).
TABLE_1 = {
    "paper-blstm2048-nli": (47_155_715, 47e6),
    "paper-2blstm1024-nli": (40_503_811, 40e6),
    "paper-multitask-lstm2048": (31_314_437, 32e6),
    "paper-multitask-blstm2048": (62_099_973, 62e6),
    "paper-decomposable": (582_224, 580e3),
    "paper-transformer": (9_878_531, 989e3),  # "989K" reads as a misprint of 9.89M
}


@pytest.mark.parametrize("preset", sorted(TABLE_1))
def test_every_table_1_preset_has_its_parameter_count_at_300d(preset):
    from mtl.train.loop.run import config_from_args

    config = config_from_args([f"preset={preset}"])
    head = config.head
    encoder = build_encoder(frozen_embedding(torch.zeros(10, 300)), config.model)
    model = multitask_model(encoder, config.tasks, head.head_hidden, head.head_layers)
    ours, paper = TABLE_1[preset]
    assert model.trainable_parameters() == ours
    assert abs(ours - paper) / paper < 0.025 or preset == "paper-transformer"
    assert abs(ours - 10 * paper) / (10 * paper) < 0.01 or preset != "paper-transformer"


def test_unknown_encoder_and_impossible_shapes_are_named():
    with pytest.raises(
        UserError,
        match="encoder='cnn' is not valid: choose one of bilstm, bilstm2, bow, decomposable, gatedconv, gru",
    ):
        apply_overrides(TrainConfig(), ["encoder=cnn"])
    with pytest.raises(UserError, match="transformer_heads=4 must divide hidden=50"):
        apply_overrides(TrainConfig(), ["encoder=transformer", "hidden=50"])


@pytest.mark.parametrize("name", ["bilstm", "bilstm2"])
def test_dense_and_packed_bilstm_kernels_are_one_function(embedding, name):
    # CPU runs the dense kernel, CUDA the packed (cuDNN) one: same parameters, same outputs and gradients.
    torch.manual_seed(2)
    encoder = build_encoder(embedding, SMALL[name])
    tokens = torch.tensor([[5, 9, 3, 7, 2, 4], [8, 8, 0, 0, 0, 0], [1, 2, 3, 0, 0, 0], [6, 0, 0, 0, 0, 0]])
    lengths = torch.tensor([6, 2, 3, 1])
    results = {}
    for kernel in ("dense", "packed"):
        encoder.kernel = kernel
        encoder.zero_grad()
        output = encoder(tokens, lengths)
        (output * torch.arange(output.shape[1])).sum().backward()
        results[kernel] = (output.detach(), [p.grad.clone() for p in encoder.parameters() if p.requires_grad])
    # Within float32 rounding: the two kernels sum in other orders (1e-6 apart on some CPUs).
    torch.testing.assert_close(results["dense"][0], results["packed"][0], rtol=1e-4, atol=1e-5)
    for dense, packed in zip(results["dense"][1], results["packed"][1], strict=True):
        torch.testing.assert_close(dense, packed, rtol=1e-4, atol=1e-5)


def test_auto_kernel_on_cpu_packs_only_narrow_batches_that_are_mostly_padding(embedding, monkeypatch):
    from mtl.models.encoders import bilstm

    calls = []
    real = bilstm.run_packed
    monkeypatch.setattr(bilstm, "run_packed", lambda *a, **k: calls.append(1) or real(*a, **k))
    encoder = build_encoder(embedding, SMALL["bilstm"])
    assert encoder.kernel == "auto"
    encoder(torch.tensor([[5, 9], [3, 4]]), torch.tensor([2, 2]))  # no padding: dense
    assert calls == []
    encoder(torch.tensor([[5, 9, 3, 7, 2], [8, 0, 0, 0, 0]]), torch.tensor([5, 1]))  # 60% real: dense
    assert calls == []
    encoder(torch.tensor([[5, 9, 3, 7, 2], [8, 0, 0, 0, 0], [8, 0, 0, 0, 0]]), torch.tensor([5, 1, 1]))
    assert calls == [1]  # 7 of 15 positions real: packed
    wide = build_encoder(embedding, EncoderConfig(encoder="bilstm", hidden=1024))
    wide(torch.tensor([[5, 9, 3, 7, 2], [8, 0, 0, 0, 0], [8, 0, 0, 0, 0]]), torch.tensor([5, 1, 1]))
    assert calls == [1]  # wide LSTMs stay dense on the CPU


@pytest.mark.parametrize("name", ["bilstm", "bilstm2"])
def test_a_wide_batch_mostly_padding_is_encoded_in_length_sorted_chunks_as_packed(
    embedding, name, monkeypatch
):
    """On the CPU a batch of 32 or more rows, under 60% real, runs as its rows sorted by length in
    chunks (each dense once mostly real), not packed: the same outputs and gradients, in order."""
    from mtl.models.encoders import bilstm

    torch.manual_seed(3)
    encoder = build_encoder(embedding, SMALL[name])
    lengths = torch.tensor([12, 1, 2, 3, 1, 2, 11, 1] * 8)  # 64 rows, 34% real
    tokens = torch.randint(1, 50, (64, 12)) * (torch.arange(12)[None, :] < lengths[:, None])
    widths = []
    real = bilstm.BiLSTMEncoder._by_length
    monkeypatch.setattr(
        bilstm.BiLSTMEncoder, "_by_length", lambda self, t, n, c: widths.append(c) or real(self, t, n, c)
    )
    results = {}
    for kernel in ("auto", "packed"):
        encoder.kernel = kernel
        encoder.zero_grad()
        output = encoder(tokens, lengths)
        (output * torch.arange(output.shape[1])).sum().backward()
        results[kernel] = (output.detach(), [p.grad.clone() for p in encoder.parameters() if p.requires_grad])
    assert widths == [4]  # auto: 4 chunks of 16 rows; packed: as told
    torch.testing.assert_close(results["auto"][0], results["packed"][0], rtol=1e-4, atol=1e-5)
    for chunked, packed in zip(results["auto"][1], results["packed"][1], strict=True):
        torch.testing.assert_close(chunked, packed, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["bilstm", "transformer"])
def test_answers_encoded_in_one_call_score_as_encoded_apart(embedding, name):
    import dataclasses

    torch.manual_seed(2)
    model = multitask_model(build_encoder(embedding, SMALL[name]), ["squad"], 16, 1).eval()
    sentences = [
        (torch.randint(1, 50, (3, width)), torch.tensor(lengths))
        for width, lengths in ((4, [4, 2, 3]), (7, [7, 1, 5]), (3, [2, 3, 3]))
    ]
    together = model("squad", sentences)  # the answers (positions 1 and 2) share one call
    head = model.heads["squad"]
    head.recipe = dataclasses.replace(head.recipe, calls=((0,), (1,), (2,)))
    torch.testing.assert_close(model("squad", sentences), together, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("task", ["nli", "squad"])
def test_packed_sequences_encode_a_whole_batch_in_one_call(embedding, task):
    # Padding costs a packed BiLSTM nothing: every sentence of a batch shares one call (one
    # cuDNN launch on a GPU), and scores as the dense kernel's call per position does.
    torch.manual_seed(2)
    model = multitask_model(build_encoder(embedding, SMALL["bilstm2"]), [task], 16, 1).eval()
    widths = {
        "nli": ((6, [6, 2, 3]), (3, [1, 3, 2])),
        "squad": ((4, [4, 2, 3]), (7, [7, 1, 5]), (3, [2, 3, 3])),
    }
    sentences = [(torch.randint(1, 50, (3, width)), torch.tensor(lengths)) for width, lengths in widths[task]]
    calls = []
    model.encoder.register_forward_hook(lambda module, inputs, output: calls.append(inputs[0].shape))
    scores = {}
    for kernel in ("dense", "packed"):
        model.encoder.kernel = kernel
        calls.clear()
        scores[kernel] = model(task, sentences)
        expected = [
            (3 * len(call), max(sentences[i][0].shape[1] for i in call)) for call in TASKS[task].recipe.calls
        ]
        everything = [(3 * len(sentences), max(tokens.shape[1] for tokens, _ in sentences))]
        assert calls == (expected if kernel == "dense" else everything)
    torch.testing.assert_close(scores["packed"], scores["dense"], rtol=1e-4, atol=1e-5)


def test_bucketing_key_orders_by_the_longest_call_coarsely_then_the_others():
    import numpy as np

    # (premise, hypothesis): premises are the longer call, grouped in steps of 3 tokens.
    lengths = np.array([[12, 9], [13, 4], [14, 2], [15, 1], [9, 30]])
    order = np.argsort(TASKS["nli"].recipe.bucket_key(lengths), kind="stable").tolist()
    assert order == [4, 2, 1, 0, 3]  # 9 | 12, 13, 14 by hypothesis (2, 4, 9) | 15
    # ClassifSQuAD: the answers (one call, by their longer) before the question.
    squad = np.array([[11, 30, 12], [9, 5, 31], [20, 29, 3]])
    assert np.argsort(TASKS["squad"].recipe.bucket_key(squad), kind="stable").tolist() == [
        2,
        1,
        0,
    ]  # 29 | 30, 31 by q


def earlier_layout(state: dict[str, torch.Tensor], per_direction: bool) -> dict[str, torch.Tensor]:
    """`state` under an earlier layout's names: one nn.LSTM per layer (lstms.N.weight_ih_l0[_reverse])
    or per layer and direction (forward_layers.N.weight_ih_l0, backward_layers.N.weight_ih_l0)."""
    import re

    old = {}
    for key, value in state.items():
        if match := re.fullmatch(r"lstm\.(\w+?)_l(\d+)(_reverse)?", key):
            name, layer, reverse = match.groups()
            if per_direction:
                key = f"{'backward' if reverse else 'forward'}_layers.{layer}.{name}_l0"
            else:
                key = f"lstms.{layer}.{name}_l0{reverse or ''}"
        old[key] = value.clone()
    return old


@pytest.mark.parametrize("per_direction", [False, True], ids=["lstm-per-layer", "lstm-per-direction"])
@pytest.mark.parametrize("name", ["bilstm", "bilstm2"])
def test_checkpoints_of_earlier_layouts_still_load(embedding, name, per_direction):
    torch.manual_seed(3)
    encoder = build_encoder(embedding, SMALL[name])
    old = earlier_layout(encoder.state_dict(), per_direction)
    assert not any(k.startswith("lstm.") for k in old)
    assert (
        sum(k.startswith(("lstms.", "forward_layers.", "backward_layers.")) for k in old)
        == 8 * encoder.layers
    )
    loaded = build_encoder(embedding, SMALL[name])
    loaded.load_state_dict(old)
    tokens, lengths = torch.tensor([[5, 9, 3], [8, 8, 0]]), torch.tensor([3, 2])
    torch.testing.assert_close(loaded(tokens, lengths), encoder(tokens, lengths), rtol=0, atol=0)


def test_packing_by_one_gather_packs_as_pytorch_does():
    from torch.nn.utils.rnn import pack_padded_sequence

    from mtl.models.encoders.packing import packed_rows

    lengths = torch.tensor([3, 6, 1, 4, 5])  # distinct: PyTorch's order among equal lengths is its own
    states = torch.arange(5 * 7 * 2, dtype=torch.float32).view(5, 7, 2)  # padded to 7
    expected = pack_padded_sequence(states, lengths, batch_first=True, enforce_sorted=False)
    rows, batch_sizes = packed_rows(lengths.numpy(), width=7)
    torch.testing.assert_close(torch.from_numpy(batch_sizes), expected.batch_sizes)
    torch.testing.assert_close(states.view(35, 2)[rows], expected.data, rtol=0, atol=0)


def test_self_attentive_pooling_is_lin_et_als_formula_by_hand():
    from mtl.models.encoders.base import SelfAttentivePooling

    torch.manual_seed(3)
    attention = SelfAttentivePooling(width=4, da=5, r=3)
    states = torch.randn(2, 6, 4)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    pooled = attention(states, mask)
    assert pooled.shape == (2, 3 * 4)
    for b, length in enumerate([6, 3]):
        h = states[b, :length]  # (T, D)
        a = torch.softmax(attention.w2.weight @ torch.tanh(attention.w1.weight @ h.T), dim=1)  # (r, T)
        torch.testing.assert_close(pooled[b], (a @ h).flatten())


def test_sum_pooling_adds_the_real_positions():
    from mtl.models.encoders.base import pool

    states = torch.tensor([[[1.0, 2.0], [3.0, -1.0], [100.0, 100.0]]])
    assert pool(states, torch.tensor([[True, True, False]]), "sum").tolist() == [[4.0, 1.0]]


@pytest.mark.parametrize("name", ["bilstm", "lstm", "transformer", "gru"])
def test_selfattn_widens_the_embedding_r_times(embedding, name):
    config = EncoderConfig(
        **{**SMALL[name].__dict__, "pooling": "selfattn", "selfattn_da": 7, "selfattn_r": 3}
    )
    encoder = build_encoder(embedding, config)
    assert encoder.output_dim == 3 * encoder.state_width
    assert sum(p.numel() for p in encoder.attention.parameters()) == 7 * encoder.state_width + 3 * 7


@pytest.mark.parametrize("name", ["bilstm", "lstm", "transformer", "bigru", "hconvnet", "innerattention"])
def test_a_bottleneck_gives_n_dimensional_embeddings_and_the_head_4n_features(embedding, name):
    encoder = build_encoder(embedding, EncoderConfig(**{**SMALL[name].__dict__, "bottleneck": 5}))
    assert encoder.output_dim == 5
    model = multitask_model(encoder, ["nli"], hidden=8, layers=1)
    assert model.heads["nli"].classifier[1].in_features == 4 * 5
    tokens, lengths = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([3, 2])
    assert encoder(tokens, lengths).shape == (2, 5)


def test_a_bottleneck_is_refused_where_it_would_never_be_trained():
    with pytest.raises(
        UserError, match="bottleneck=64 needs a Siamese word-vector encoder: encoder=decomposable"
    ):
        apply_overrides(TrainConfig(), ["encoder=decomposable", "bottleneck=64"])
    with pytest.raises(UserError, match="pooling=mean does not apply to encoder=hconvnet"):
        apply_overrides(TrainConfig(), ["encoder=hconvnet", "pooling=mean"])


# InferSent (Conneau et al. 2017) at enc_lstm_dim 2048 over 300-d GloVe, counted from its code
# (models.py): ConvNetEncoder's four Conv1d(…, 4096, kernel_size=3) layers: 300·4096·3 + 4096,
# then 3 × (4096·4096·3 + 4096); InnerAttentionMILAEncoder: a BiLSTM (2 × 4·2048·(300 + 2048 + 2)),
# proj_key and proj_lstm (4096·4096 each, no bias) and its query table. InferSent's table holds
# 2 queries of 4096 (its views 2-4 reuse the second); mtl gives each of the 4 views its own.
INFERSENT_300D = {
    "hconvnet": (300 * 4096 * 3 + 4096 + 3 * (4096 * 4096 * 3 + 4096), 8 * 2048),
    "innerattention": (2 * 4 * 2048 * (300 + 2048 + 2) + 2 * 4096 * 4096 + 4 * 4096, 8 * 2048),
}


@pytest.mark.parametrize("name", sorted(INFERSENT_300D))
def test_infersents_encoders_have_its_parameter_counts_at_300d(name):
    encoder = build_encoder(frozen_embedding(torch.zeros(10, 300)), EncoderConfig(encoder=name, hidden=2048))
    parameters, dim = INFERSENT_300D[name]
    assert sum(p.numel() for p in encoder.parameters() if p.requires_grad) == parameters
    assert encoder.output_dim == dim
    if name == "innerattention":
        assert parameters - 2 * 4096 == 72_065_024  # InferSent's own module, with its 2 queries


def test_quick_thoughts_gru_init_is_xavier_uniform_with_gate_biases_at_one():
    """Quick-Thoughts 4.3; PyTorch's own init (the default) stays untouched."""
    import math

    embedding = frozen_embedding(torch.randn(10, 6))
    torch.manual_seed(0)
    plain = build_encoder(
        embedding, EncoderConfig(encoder="gru", hidden=5, options=GRUOptions(bidirectional=True))
    )
    torch.manual_seed(0)
    again = build_encoder(
        embedding, EncoderConfig(encoder="gru", hidden=5, options=GRUOptions(True, "pytorch"))
    )
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), again.parameters(), strict=True))
    qt = build_encoder(
        embedding, EncoderConfig(encoder="gru", hidden=5, options=GRUOptions(True, "quickthoughts"))
    )
    assert qt(torch.tensor([[2, 3, 4]]), torch.tensor([3])).shape == (1, 10)  # and it encodes
    gru = qt.gru
    for name, parameter in gru.named_parameters():
        if name.startswith("weight"):
            for gate in parameter.split(5):
                fan_out, fan_in = gate.shape
                assert gate.abs().max() <= math.sqrt(6 / (fan_in + fan_out)) and gate.std() > 0
        else:
            gates = (parameter[:10], parameter[10:])  # reset and update, then the candidate
            expected = 1.0 if name.startswith("bias_ih") else 0.0
            assert torch.all(gates[0] == expected) and torch.all(gates[1] == 0), name
    with pytest.raises(
        UserError, match=r"unknown key for encoder=bilstm \(gru_init configures encoder=gru\)"
    ):
        with_overrides(TrainConfig(), ["gru_init=quickthoughts"])


def test_gated_convolutions_are_dauphin_et_als_glu_blocks_by_hand(embedding):
    """h = A * sigmoid(B) of a width-3 centred convolution; residual from the second layer on;
    max over the sentence's positions (Dauphin et al. 2017, Section 2)."""
    torch.manual_seed(2)
    encoder = build_encoder(
        embedding, EncoderConfig(encoder="gatedconv", hidden=5, options=GatedConvOptions(2))
    )
    tokens, lengths = torch.tensor([[4, 8, 15, 16]]), torch.tensor([4])
    x = embedding(tokens)[0]  # (T, E)

    def glu_layer(conv, inputs):  # inputs (T, C) -> (T, H), the convolution written out
        padded = torch.cat([torch.zeros(1, inputs.shape[1]), inputs, torch.zeros(1, inputs.shape[1])])
        out = torch.stack(
            [
                torch.einsum("oik,ki->o", conv.weight, padded[t : t + 3]) + conv.bias
                for t in range(len(inputs))
            ]
        )
        a, b = out[:, :5], out[:, 5:]
        return a * torch.sigmoid(b)

    first = glu_layer(encoder.convs[0], x)
    second = first + glu_layer(encoder.convs[1], first)
    torch.testing.assert_close(encoder(tokens, lengths)[0], second.max(dim=0).values)
    assert encoder.output_dim == 5
    assert sum(p.numel() for p in encoder.parameters() if p.requires_grad) == (12 * 10 * 3 + 10) + (
        5 * 10 * 3 + 10
    )
