import json

import numpy as np
import pytest

from mtl import load_encoder
from mtl.cli import main
from mtl.errors import UserError
from mtl.eval.encoder import baseline_encoder
from mtl.text import load_vectors
from mtl.train import run

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


def test_saved_encoder_and_best_checkpoint_give_the_same_embeddings(trained_run):
    from_export = load_encoder(trained_run / "encoder.pt").encode(SENTENCES, progress=False)
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


def test_a_folder_without_an_encoder_is_an_error(tmp_path):
    with pytest.raises(UserError, match="holds no encoder"):
        load_encoder(tmp_path)


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
    assert "| glove-bow | 50 |" in capsys.readouterr().out
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
