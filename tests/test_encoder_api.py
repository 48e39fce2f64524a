import json
import warnings

import numpy as np
import pytest
import torch

from mtl import load_encoder
from mtl.cli import main
from mtl.data.batches import longest_first_batches
from mtl.errors import UserError
from mtl.eval.loading import baseline_encoder
from mtl.text.vectors import load_vectors
from mtl.train.loop import run

from .conftest import args_for

SENTENCES = [
    "A man is playing a guitar .",
    "Two dogs run through the snow in a very large park today .",
    "unused",
    "",
    "The crowd watched the band play on the stage .",
]


@pytest.fixture(scope="module")
def trained_run(tiny_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("encoder-run") / "run"
    args = args_for(tiny_data, out, "pooling=max+mean")
    run.start(run.config_from_args(args), progress=False)
    return out


def test_encode_keeps_input_order_and_ignores_batch_size(trained_run):
    encoder = load_encoder(trained_run, device="cpu")  # cuDNN's fp32 LSTM may round in TF32
    embeddings = encoder.encode(SENTENCES, batch_size=2, progress=False)
    assert embeddings.shape == (len(SENTENCES), encoder.dim) == (5, 32)
    assert embeddings.dtype == np.float32
    reversed_ = encoder.encode(SENTENCES[::-1], batch_size=64, progress=False)
    np.testing.assert_allclose(reversed_[::-1], embeddings, rtol=1e-5, atol=1e-6)
    one_by_one = np.concatenate([encoder.encode([s], batch_size=1, progress=False) for s in SENTENCES])
    np.testing.assert_allclose(one_by_one, embeddings, rtol=1e-5, atol=1e-6)


def test_batches_sized_by_tokens_give_the_same_embeddings(trained_run):
    encoder = load_encoder(trained_run, device="cpu")
    by_sentences = encoder.encode(SENTENCES, batch_size=2, progress=False)
    for tokens in (1, 12, 30, 10_000):  # one sentence per batch, a few, all in one
        by_tokens = encoder.encode(SENTENCES, batch_size=64, batch_tokens=tokens, progress=False)
        np.testing.assert_allclose(by_tokens, by_sentences, rtol=1e-5, atol=1e-6)
    states = encoder.encode(SENTENCES, output_value="token_embeddings", batch_size=2)
    by_tokens = encoder.encode(SENTENCES, output_value="token_embeddings", batch_tokens=12)
    assert [len(s) for s in by_tokens] == [len(s) for s in states] == [7, 13, 1, 1, 10]
    for ours, theirs in zip(by_tokens, states, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_token_budget_batches_hold_every_sentence_once_within_both_limits():
    lengths = np.array([3, 40, 7, 7, 1, 12, 0, 5, 7, 30])
    for batch_size, budget in [(4, 20), (100, 21), (2, 1000), (100, 1)]:
        batches = longest_first_batches(lengths, batch_size, budget)
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
        widths = [int(lengths[b].max()) for b in batches]
        assert widths == sorted(widths, reverse=True)  # longest first
        for batch, width in zip(batches, widths, strict=True):
            assert len(batch) <= batch_size
            assert len(batch) * max(width, 1) <= budget or len(batch) == 1  # a long one goes alone
    # short sentences share a batch the budget allows, long ones get small ones
    assert [len(b) for b in longest_first_batches(lengths, 100, 40)] == [
        1,
        1,
        3,
        5,
    ]  # 40, 30, 12 7 7, 7 5 3 1 0


def test_saved_encoder_and_best_checkpoint_give_the_same_embeddings(trained_run):
    from_export = load_encoder(trained_run / "encoder.json").encode(SENTENCES, progress=False)
    from_checkpoint = load_encoder(trained_run / "checkpoints" / "best.pt").encode(SENTENCES, progress=False)
    np.testing.assert_array_equal(from_export, from_checkpoint)


def test_pooling_can_be_chosen_at_encode_time(trained_run):
    encoder = load_encoder(trained_run)
    both = encoder.encode(SENTENCES, pooling="max+mean", progress=False)
    only_max = encoder.encode(SENTENCES, pooling="max", progress=False)
    np.testing.assert_allclose(only_max, both[:, :16], rtol=1e-5, atol=1e-6)
    assert encoder.encode(SENTENCES, pooling="mean", progress=False).shape == (5, 16)
    assert encoder.dim == 32  # the trained pooling is back


def test_unseen_words_take_their_glove_vector(trained_run, tiny_data):
    encoder = load_encoder(trained_run)
    assert "unused" not in encoder.vocabulary.index
    encoder.encode(["unused"], progress=False)
    row = encoder.vocabulary.index["unused"]
    expected = load_vectors(tiny_data["vectors"], ["unused"]).matrix[0]
    np.testing.assert_allclose(encoder.encoder.embedding.weight[row].cpu().numpy(), expected)
    unknown = load_encoder(trained_run)
    unknown.vectors = None  # no vectors file: the word stays unknown
    assert not np.allclose(
        unknown.encode(["unused"], progress=False), encoder.encode(["unused"], progress=False)
    )


def test_glove_bag_of_vectors_baseline(tiny_data):
    bow = baseline_encoder("glove-bow", str(tiny_data["vectors"]), device="cpu")
    vectors = load_vectors(tiny_data["vectors"])
    words = ["a", "man", "is", "playing", "a", "guitar", "."]
    expected = np.mean([vectors.matrix[vectors.index[w]] for w in words if w in vectors], axis=0)
    np.testing.assert_allclose(
        bow.encode(["A man is playing a guitar ."], progress=False)[0], expected, rtol=1e-5
    )
    random = baseline_encoder("random-bilstm", str(tiny_data["vectors"]), hidden=6, device="cpu")
    assert random.encode(SENTENCES, progress=False).shape == (5, 12)
    # SentEval's tokens: the text split on whitespace ("man's" stays one word, with no vector)
    spaced = baseline_encoder("glove-bow", str(tiny_data["vectors"]), device="cpu", tokenizer="whitespace")
    words = "a man's guitar .".split()
    expected = np.mean([vectors.matrix[vectors.index[w]] for w in words if w in vectors], axis=0)
    np.testing.assert_allclose(spaced.encode("A man's guitar ."), expected, rtol=1e-5)
    assert spaced.token_counts["man's"] == 1 and bow.encode("A man's guitar .").shape == (8,)


def test_a_folder_without_an_encoder_is_an_error(tmp_path):
    with pytest.raises(
        UserError, match="holds no encoder .*give a run folder, an encoder.json or a checkpoint"
    ):
        load_encoder(tmp_path)  # not a run: no advice to resume it
    with pytest.raises(UserError, match="does not exist: give a run folder"):
        load_encoder(tmp_path / "runs" / "main")


def test_the_sentence_transformers_folder_of_a_run_loads_as_the_run(trained_run):
    # runs/<run>/encoder/ is what a user finds beside encoder.json, and tries first
    from_folder = load_encoder(trained_run / "encoder", device="cpu")
    assert from_folder.name == trained_run.name
    np.testing.assert_array_equal(
        from_folder.encode(SENTENCES), load_encoder(trained_run, device="cpu").encode(SENTENCES)
    )


def test_transfer_command_on_real_data(shared_data, tiny_data, tmp_path, capsys):
    out = tmp_path / "baseline"
    code = main(
        [
            "transfer",
            "baseline=glove-bow",
            "tasks=MR,SICK-E,SICK-R,STS14",
            "mode=fast",
            f"out={out}",
            "wandb=offline",
        ]
    )
    assert code == 0
    report = json.loads((out / "transfer-fast.json").read_text())
    assert set(report["results"]) == {"MR", "SICK-E", "SICK-R", "STS14"}
    assert report["dim"] == 50
    assert 0.6 < report["results"]["MR"]["acc"] < 0.85
    assert 0.2 < report["results"]["STS14"]["all/pearson"] < 0.8
    assert "| glove-bow | 50 |" in (out / "transfer-fast.md").read_text()
    said = capsys.readouterr()
    assert "| glove-bow | 50 |" in said.out
    # SentEval's own layout beside mtl's: its task names, percentages, sample counts, (r, p) pairs.
    shaped = json.loads((out / "transfer-fast.senteval.json").read_text())
    assert set(shaped) == {"MR", "SICKEntailment", "SICKRelatedness", "STS14"}
    assert shaped["MR"]["ndev"] == shaped["MR"]["ntest"] == 10662 and 60 < shaped["MR"]["acc"] < 85
    assert 50 < shaped["MR"]["devacc"] < 90
    assert (shaped["SICKEntailment"]["ndev"], shaped["SICKEntailment"]["ntest"]) == (500, 4927)
    assert len(shaped["SICKRelatedness"]["yhat"]) == 4927 and 0 < shaped["SICKRelatedness"]["pearson"] < 1
    images = shaped["STS14"]["images"]
    assert images["nsamples"] == 750 and len(images["pearson"]) == 2 and images["pearson"][1] < 1e-6
    assert shaped["STS14"]["all"]["pearson"]["mean"] == report["results"]["STS14"]["all/pearson"]
    micro, macro = report["aggregate"]["micro"], report["aggregate"]["macro"]
    assert report["aggregate"]["tasks"] == ["MR", "SICK-E"] and min(micro, macro) > 40
    assert f"micro {micro:.2f}, macro {macro:.2f}" in said.out
    assert "transfer: 100%|██████████| 4/4" in said.err  # a bar over the tasks
    assert main(["transfer", "tasks=MR"]) == 2
    assert "give exactly one of run=runs/<run> and baseline=" in capsys.readouterr().err
    assert main(["transfer", "baseline=glove-bow", "tasks=MR,XYZ"]) == 2
    assert "unknown transfer task 'XYZ'" in capsys.readouterr().err


def test_one_string_is_one_sentence(trained_run):
    encoder = load_encoder(trained_run, device="cpu")
    one = encoder.encode(SENTENCES[0], progress=False)
    assert one.shape == (encoder.dim,)
    np.testing.assert_allclose(one, encoder.encode(SENTENCES[:1], progress=False)[0], rtol=1e-5, atol=1e-6)


def test_numpy_strings_encode_as_strings(trained_run):
    encoder = load_encoder(trained_run, device="cpu")
    np.testing.assert_allclose(
        encoder.encode(np.array(SENTENCES), progress=False),
        encoder.encode(SENTENCES, progress=False),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "sentences, kwargs, message",
    [
        (None, {}, "encode\\(\\) takes a list of sentences \\(str\\), not NoneType"),
        (b"a dog runs", {}, "not bytes"),
        (["a dog", 3], {}, "sentence 1 is a int \\(3\\), not a str"),
        (["a dog", b"runs"], {}, "sentence 1 is a bytes"),
        (["a dog", "a \ud800 runs"], {}, "sentence 1 holds a lone surrogate \\(\\\\ud800 at character 2\\)"),
        (SENTENCES, {"batch_size": 0}, "encode\\(batch_size=0\\): give a positive number"),
        (SENTENCES, {"batch_size": -1}, "encode\\(batch_size=-1\\)"),
        (SENTENCES, {"batch_tokens": 0}, "encode\\(batch_tokens=0\\): give a positive number of tokens"),
        (
            SENTENCES,
            {"pooling": "maxx"},
            "encode\\(pooling='maxx'\\) is not a pooling: choose one of max, mean",
        ),
    ],
)
def test_bad_arguments_to_encode_are_one_line(trained_run, sentences, kwargs, message):
    encoder = load_encoder(trained_run, device="cpu")
    with pytest.raises(UserError, match=message):
        encoder.encode(sentences, progress=False, **kwargs)


def test_a_moved_vectors_file_is_said_not_silently_skipped(trained_run, tiny_data, tmp_path):
    encoder = load_encoder(trained_run, device="cpu")
    encoder.vectors = str(tmp_path / "moved-away.txt")
    with pytest.warns(UserWarning, match="moved-away.txt that run was trained with is not here: 1 words new"):
        encoder.encode(["unused"], progress=False)
    assert "unused" not in encoder.vocabulary.index


def test_a_very_long_sentence_is_cut_to_the_encoders_max_tokens(trained_run):
    encoder = load_encoder(trained_run, device="cpu")
    assert encoder.max_tokens == 512  # recorded in the run's config
    words = ("the crowd watched the band play on the stage . " * 3000).split()
    np.testing.assert_allclose(
        encoder.encode(" ".join(words), progress=False),
        encoder.encode(" ".join(words[:512]), progress=False),
        rtol=1e-5,
        atol=1e-6,
    )
    assert encoder.truncated == 1


def test_encode_takes_sentence_transformers_options(trained_run):
    encoder = load_encoder(trained_run, device="cpu")
    plain = encoder.encode(SENTENCES)
    assert isinstance(plain, np.ndarray) and plain.dtype == np.float32
    as_tensor = encoder.encode(SENTENCES, convert_to_tensor=True)
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.shape == (5, 32)
    np.testing.assert_array_equal(as_tensor.numpy(), plain)
    rows = encoder.encode(SENTENCES, convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 5 and rows[0].shape == (32,)
    normalized = encoder.encode(SENTENCES, normalize_embeddings=True, device="cpu")
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(normalized, plain / np.linalg.norm(plain, axis=1, keepdims=True), rtol=1e-5)
    truncated = encoder.encode(SENTENCES, truncate_dim=8, normalize_embeddings=True)
    np.testing.assert_allclose(
        truncated, plain[:, :8] / np.linalg.norm(plain[:, :8], axis=1, keepdims=True), rtol=1e-5
    )
    tokens = encoder.encode(SENTENCES[:2], output_value="token_embeddings")
    assert [t.shape for t in tokens] == [(7, 16), (13, 16)]  # before pooling: one row per token
    one = encoder.encode(SENTENCES[0], None, None, 4, False, "sentence_embedding", "float32", True, True)
    assert isinstance(one, torch.Tensor) and one.shape == (32,)  # by position, as sentence-transformers 3+


def test_code_written_for_sentence_transformers_runs_unchanged(trained_run):
    from sentence_transformers import util

    encoder = load_encoder(trained_run, device="cpu")
    assert (
        encoder.get_sentence_embedding_dimension() == encoder.get_embedding_dimension() == encoder.dim == 32
    )
    assert encoder.similarity_fn_name == "cosine"
    first, second = encoder.encode(SENTENCES[:3]), encoder.encode(SENTENCES[2:])
    scores = encoder.similarity(first, second)
    assert scores.shape == (3, 3)
    torch.testing.assert_close(scores, util.cos_sim(first, second))
    pairwise = encoder.similarity_pairwise(torch.from_numpy(first), list(torch.from_numpy(second)))
    torch.testing.assert_close(pairwise, util.pairwise_cos_sim(first, second))
    assert float(encoder.similarity(first[2], second[0])) == pytest.approx(1.0)  # the same sentence
    with pytest.raises(UserError, match="give as many rows on each side"):
        encoder.similarity_pairwise(first, second[:2])
    assert encoder.max_seq_length == encoder.max_tokens
    encoder.max_seq_length = 3  # as in sentence-transformers: later sentences are cut there
    long = encoder.encode(SENTENCES[1])
    np.testing.assert_allclose(long, encoder.encode("Two dogs run"), rtol=1e-5, atol=1e-6)
    with pytest.raises(UserError, match="max_seq_length=0: give a positive number of tokens"):
        encoder.max_seq_length = 0


@pytest.mark.parametrize("kwargs", [{"prompt": "query: "}, {"prompt_name": "query"}])
def test_word_vector_encoders_ignore_prompts_with_one_warning(trained_run, kwargs):
    encoder = load_encoder(trained_run, device="cpu")
    plain = encoder.encode(SENTENCES)
    with pytest.warns(
        UserWarning, match="fixed word vectors, not a prompted transformer: the prompt is ignored"
    ):
        np.testing.assert_array_equal(encoder.encode(SENTENCES, **kwargs), plain)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per encoder, as sentence-transformers goes on
        encoder.encode(SENTENCES, **kwargs)


def test_batch_size_in_second_place_is_named_in_the_error(trained_run):
    with pytest.raises(
        UserError, match="prompt_name is encode's second argument .* pass batch_size=64 by name"
    ):
        load_encoder(trained_run, device="cpu").encode(SENTENCES, 64)


@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_quantized_embeddings_are_sentence_transformers_own(precision):
    from sentence_transformers.util.quantization import quantize_embeddings

    from mtl.eval.embeddings import quantized

    embeddings = np.random.default_rng(0).normal(size=(300, 37)).astype(np.float32)
    embeddings[:, 5] = 0.25  # a constant dimension
    np.testing.assert_array_equal(
        quantized(embeddings, precision), quantize_embeddings(embeddings, precision)
    )


def test_one_sentence_cannot_calibrate_int8(trained_run):
    with pytest.raises(
        UserError, match="calibrates each dimension's range on the sentences encoded together"
    ):
        load_encoder(trained_run, device="cpu").encode("A dog runs .", precision="int8")


def test_encode_shows_no_bar_unless_asked(trained_run, capsys):
    encoder = load_encoder(trained_run, device="cpu")
    encoder.encode(SENTENCES)
    assert "encode run" not in capsys.readouterr().err
    encoder.encode(SENTENCES, show_progress_bar=True)
    assert "encode run: 100%" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"precision": "float16"}, "encode\\(precision='float16'\\): choose one of float32, int8"),
        ({"truncate_dim": 33}, "encode\\(truncate_dim=33\\): give a number of dimensions from 1 to 32"),
        ({"output_value": "logits"}, "encode\\(output_value='logits'\\): choose sentence_embedding"),
        ({"device": "tpu"}, "device='tpu' is not a device"),
    ],
)
def test_bad_sentence_transformers_options_are_one_line(trained_run, kwargs, message):
    with pytest.raises(UserError, match=message):
        load_encoder(trained_run, device="cpu").encode(SENTENCES, **kwargs)


def test_vocabulary_expansion_reads_the_vectors_file_once(trained_run, monkeypatch):
    from mtl.text import vectors

    reads = []
    real_read = vectors._read
    monkeypatch.setattr(vectors, "_read", lambda path, wanted: reads.append(path) or real_read(path, wanted))
    vectors._open_store.cache_clear()  # a new process: only the store on disk is left
    first = load_encoder(trained_run, device="cpu")
    first.encode(["unused"])
    vectors._open_store.cache_clear()
    second = load_encoder(trained_run, device="cpu")
    second.encode(["unused", "snow"])
    assert len(reads) <= 1  # converted once (or earlier in this session's cache), then only looked up
    assert isinstance(vectors.vector_store(first.vectors).matrix, np.memmap)
    np.testing.assert_array_equal(second.encode(["unused"]), first.encode(["unused"]))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"compute_dtype": "int8"}, r"encode\(compute_dtype='int8'\): choose one of fp32, bf16, fp16"),
        ({"compute_dtype": "fp16"}, r"compute_dtype='fp16'\) is for GPUs: on the CPU use bf16 or fp32"),
    ],
)
def test_bad_compute_dtypes_are_one_line(trained_run, kwargs, message):
    with pytest.raises(UserError, match=message):
        load_encoder(trained_run, device="cpu").encode(SENTENCES, **kwargs)


def test_bf16_compute_gives_float32_embeddings_near_fp32_ones(trained_run, tmp_path, tiny_data):
    from mtl.models.precision import bf16_supported

    lstm = load_encoder(trained_run, device="cpu")
    if not bf16_supported(torch.device("cpu")):  # oneDNN's bf16 LSTM needs AVX512-BF16 or AMX
        with pytest.raises(UserError, match=r"this CPU \(no AVX512-BF16 or AMX.*compute_dtype='fp32'"):
            lstm.encode(SENTENCES, compute_dtype="bf16")
    # A transformer's bf16 runs on any CPU: the same embeddings to bf16's 8 bits of mantissa.
    out = tmp_path / "transformer"
    run.start(
        run.config_from_args(args_for(tiny_data, out, "encoder=transformer", "max_steps=3")), progress=False
    )
    encoders = [load_encoder(out, device="cpu")] + ([lstm] if bf16_supported(torch.device("cpu")) else [])
    for encoder in encoders:
        full = encoder.encode(SENTENCES)
        half = encoder.encode(SENTENCES, compute_dtype="bf16")
        assert half.dtype == np.float32 and half.shape == full.shape
        assert not np.array_equal(half, full)  # autocast did change the arithmetic
        cosines = (half * full).sum(1) / np.linalg.norm(half, axis=1) / np.linalg.norm(full, axis=1)
        assert cosines.min() > 0.99, cosines


def test_encoding_says_how_far_it_is_to_a_suite_that_listens(trained_run):
    # `just transfer`'s bar shows these words: a transformer embeds a task for minutes
    from mtl.eval.transfer.progress import reporting

    said = []
    with reporting(said.append):
        load_encoder(trained_run, device="cpu").encode(SENTENCES * 3, batch_size=4)
    assert said == [f"embedding {n}/15 sentences" for n in (4, 8, 12, 15)]


def test_a_sentence_encoded_again_is_not_tokenized_again(trained_run, monkeypatch):
    from mtl.eval import encoder as encoder_module
    from mtl.text.tokenizer import WhitespaceTokenizer

    encoder = load_encoder(trained_run, device="cpu")
    tokenized: list[str] = []
    tokenize = encoder.tokenizer.tokenize
    monkeypatch.setattr(
        encoder.tokenizer, "tokenize", lambda texts: tokenized.extend(texts) or tokenize(texts)
    )
    first = encoder.encode(SENTENCES, progress=False)
    again = encoder.encode([*SENTENCES[::-1], "A new one ."], progress=False)
    assert sorted(tokenized) == sorted([*SENTENCES, "A new one ."])  # each distinct sentence once
    np.testing.assert_allclose(again[: len(SENTENCES)][::-1], first, rtol=1e-5, atol=1e-6)  # other batches
    fresh = load_encoder(trained_run, device="cpu").encode(SENTENCES, progress=False)
    np.testing.assert_allclose(first, fresh, rtol=1e-5, atol=1e-6)

    # another tokenizer (or max_tokens) makes other tokens: the cache starts over
    encoder.tokenizer = WhitespaceTokenizer()
    assert encoder.cached_tokens(["Two dogs , here ."]) == [["two", "dogs", ",", "here", "."]]
    assert set(encoder.token_cache) == {"Two dogs , here ."}

    # it never holds more than its bound: emptied first when the next sentences would overflow it
    monkeypatch.setattr(encoder_module, "TOKEN_CACHE_SENTENCES", 3)
    encoder.cached_tokens(["a", "b"])
    assert set(encoder.token_cache) == {"Two dogs , here .", "a", "b"}
    encoder.cached_tokens(["c", "a"])
    assert set(encoder.token_cache) == {"c"}
    assert encoder.cached_tokens(["w", "x", "y", "z"]) == [["w"], ["x"], ["y"], ["z"]]
    assert set(encoder.token_cache) == set()  # more than it may hold at once: not kept
