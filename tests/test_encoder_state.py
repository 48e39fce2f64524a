"""An encoder file is checked against the architecture its config builds before a weight
is loaded; a file whose checksum matches but whose content lies is one line, never a traceback
or embeddings from other words' vectors."""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from mtl import load_encoder
from mtl.cli import main
from mtl.errors import UserError
from mtl.files.digest import file_sha256
from mtl.formats import checkpoint

from .conftest import one_error_line, start_run

SENTENCES = ["a man is playing a guitar .", "two dogs run ."]


@pytest.fixture(scope="module")
def finished_run(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("finished") / "run", "max_steps=3")
    return run_dir


@pytest.fixture
def copy(finished_run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(finished_run, folder)
    return folder


def lie(folder, edit_tensors=None, edit_record=None) -> None:
    """Rewrite the encoder's weights and/or JSON, the recorded checksum made to match the new weights."""
    weights, record_path = folder / "encoder.safetensors", folder / "encoder.json"
    if edit_tensors:
        tensors = load_file(weights)
        edit_tensors(tensors)
        save_file({k: v.contiguous() for k, v in tensors.items()}, weights)
    record = json.loads(record_path.read_text())
    if edit_record:
        edit_record(record)
    if weights.is_file():
        record["weights_sha256"] = file_sha256(weights)
    record_path.write_text(json.dumps(record))


def set_config(path: str, value, entry: str = "encoder_config"):
    """Set `path` in the record's encoder_config (what loading reads) or, with entry="config", in an
    encoder written before encoder_config: its training run's config then is what loading reads."""

    def edit(record):
        if entry == "config":
            del record["encoder_config"], record["prompts"]
        node = record[entry]
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value

    return edit


EMBEDDING = "encoder/embedding.weight"
LSTM = "encoder/lstm.weight_hh_l0"


@pytest.mark.parametrize(
    "tensors, record, message",
    [
        (lambda t: t.update({LSTM: t[LSTM][:, :-1].contiguous()}), None, r"lstm.weight_hh_l0 has shape"),
        (lambda t: t.update({EMBEDDING: t[EMBEDDING][:, :-1].contiguous()}), None, r"has shape .* builds"),
        (lambda t: t.pop(LSTM), None, r"lacks lstm.weight_hh_l0, which its config"),
        (lambda t: t.update({"encoder/extra.weight": torch.zeros(2)}), None, r"holds extra.weight, which"),
        (None, set_config("model.pooling", "selfattn"), r"lacks attention.w1.weight"),
        (None, set_config("model.bottleneck", 4), r"lacks inner\.embedding\.weight"),
        (lambda t: t.update({EMBEDDING: t[EMBEDDING].reshape(-1)}), None, r"embedding.weight has shape \(\d+,\), not"),
        (None, lambda r: r.pop("weights"), r"holds no encoder weights"),
        (lambda t: t.update({LSTM: t[LSTM].to(torch.int64)}), None, r"holds torch.int64 values where the model has"),
        (None, lambda r: r["vocabulary"].append("zzyzx"), r"vocabulary has \d+ words for \d+ embedding rows"),
        (None, lambda r: r["vocabulary"].pop(), r"vocabulary has \d+ words for \d+ embedding rows"),
        (None, lambda r: r["vocabulary"].__setitem__(5, r["vocabulary"][4]), r"lists '.*' twice"),
        (None, lambda r: r.update(vocabulary=[]), r"does not start with <pad> and <unk>"),
        (None, set_config("model.hidden", 10_000_000), r"has shape .* where its config \(encoder=bilstm hidden=10000000"),
        (lambda t: t[LSTM].__setitem__((0, 0), float("nan")), None, r"lstm.weight_hh_l0 holds 1 NaN or infinite"),
        (lambda t: t[EMBEDDING].__setitem__((7, 0), float("inf")), None, r"embedding.weight holds 1 NaN or infinite"),
        (None, lambda r: r.update(vectors=3), r"its vectors entry is a int"),
        (None, lambda r: r.update(embedding_parts="heads"), r"its embedding_parts entry is a str"),
        (None, set_config("model", "bilstm"), r"encoder_config: model must be a table of keys"),
        (None, set_config("data.tokenizer", "bert"), r"data.tokenizer='bert' is not valid"),
        (None, lambda r: r.update(prompts={"nli": 3}), r"its prompts are not task names with their text"),
        (None, set_config("optim", "sgd", entry="config"), r"the config is not in a layout mtl wrote"),
        (None, set_config("model.hidden", 10_000_000, entry="config"), r"where its config \(encoder=bilstm hidden=10000000"),
    ],
)  # fmt: skip
def test_an_encoder_whose_checksum_matches_but_whose_content_lies_is_one_line(copy, tensors, record, message):
    lie(copy, tensors, record)
    with pytest.raises(UserError, match=message) as error:
        load_encoder(copy, device="cpu").encode(SENTENCES)
    assert "\n" not in str(error.value)


def test_weights_of_a_dtype_that_holds_the_same_values_load_converted(copy, finished_run):
    lie(copy, lambda t: t.update({k: v.double() for k, v in t.items()}))
    assert np.array_equal(
        load_encoder(copy, device="cpu").encode(SENTENCES),
        load_encoder(finished_run, device="cpu").encode(SENTENCES),
    )
    lie(copy, lambda t: t.update({k: v + 1e-12 for k, v in t.items()}))  # float64 values float32 cannot hold
    with pytest.raises(UserError, match=r"holds torch.float64 values that torch.float32 cannot hold exactly"):
        load_encoder(copy, device="cpu")


def test_half_precision_weights_load_as_float32(copy):
    lie(copy, lambda t: t.update({k: v.half() for k, v in t.items()}))
    embeddings = load_encoder(copy, device="cpu").encode(SENTENCES)
    assert embeddings.dtype == np.float32 and np.isfinite(embeddings).all()


def test_embeddings_that_overflow_are_an_error_not_nan(copy):
    encoder = load_encoder(copy, device="cpu")
    with torch.no_grad():
        encoder.encoder.lstm.bias_ih_l0.fill_(3e38)  # finite weights whose sums are not
        encoder.encoder.lstm.bias_hh_l0.fill_(3e38)
        encoder.encoder.lstm.weight_ih_l0.fill_(3e38)
    with pytest.raises(UserError, match=r"of 2 embeddings hold NaN or infinite values"):
        encoder.encode(SENTENCES)


def test_a_checkpoint_without_weights_is_one_line(finished_run, tmp_path):
    saved = checkpoint.load(finished_run / "checkpoints" / "best.pt")
    path = tmp_path / "best.pt"
    checkpoint.save({"config": saved["config"], "vocabulary": saved["vocabulary"]}, path)
    with pytest.raises(UserError, match=r"holds no encoder weights \(no `encoder` or `model`\)"):
        load_encoder(path)


@pytest.mark.parametrize("name", ["README.md", "metrics.jsonl", "encoder.pt"])
def test_files_that_are_not_encoders_are_called_that_not_unsafe(finished_run, tmp_path, name, capsys):
    path = tmp_path / name
    if name == "metrics.jsonl":
        shutil.copy(finished_run / name, path)
    else:
        path.write_bytes(b"# mtl\n" if name == "README.md" else b"x")
    with pytest.raises(UserError, match=rf"{name} is not an encoder or run folder") as error:
        load_encoder(path)
    assert "Python objects" not in str(error.value)


def test_a_random_bilstm_too_large_for_memory_is_one_line(tiny_data, senteval, capsys, tmp_path):
    code = main(
        ["transfer", "baseline=random-bilstm", "random_hidden=200000", f"vectors={tiny_data['vectors']}",
         "tasks=MR", "wandb=disabled", f"out={tmp_path}", f"data={senteval}"]
    )  # fmt: skip
    assert code == 2
    assert "random_hidden=200000 makes" in one_error_line(capsys)


def test_a_truncated_encoder_is_one_line(tiny_data, tmp_path, capsys):
    import json

    from mtl import load_encoder

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=3")
    weights = run_dir / "encoder.safetensors"
    intact = weights.read_bytes()
    weights.write_bytes(intact[:-200])
    with pytest.raises(
        UserError, match=r"encoder.safetensors is damaged or not the one .*encoder.json was written with"
    ):
        load_encoder(run_dir)
    weights.write_bytes(intact)
    record = json.loads((run_dir / "encoder.json").read_text())
    (run_dir / "encoder.json").write_text(json.dumps({**record, "weights": "../elsewhere.safetensors"}))
    with pytest.raises(
        UserError, match=r"names '../elsewhere.safetensors' as its weights, which are not beside it"
    ):
        load_encoder(run_dir)
    (run_dir / "encoder.json").write_text("{")
    with pytest.raises(UserError, match=r"encoder .*encoder.json cannot be read"):
        load_encoder(run_dir)


def test_an_encoder_loads_by_its_own_config_whatever_its_training_config_says(copy, finished_run):
    """encoder.json's encoder_config is all loading reads: a training config in a layout this
    version does not know, or none, leaves the encoder loading and encoding as it did."""
    expected = load_encoder(finished_run, device="cpu").encode(SENTENCES)
    lie(copy, None, lambda r: r.update(config={"a_section_of_a_later_version": {"k": 1}}))
    assert np.array_equal(load_encoder(copy, device="cpu").encode(SENTENCES), expected)
    lie(copy, None, lambda r: r.pop("config"))
    assert np.array_equal(load_encoder(copy, device="cpu").encode(SENTENCES), expected)
    record = json.loads((finished_run / "encoder.json").read_text())
    assert set(record["encoder_config"]) == {"model", "data"}
    assert record["encoder_config"]["model"] == record["config"]["model"]
