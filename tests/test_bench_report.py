import pytest

from mtl.errors import UserError
from tools import train

from .conftest import FIXTURES


def row(setting, task, mode, reference, fp32, bf16, floor):
    return {
        "setting": setting,
        "task": task,
        "mode": mode,
        "ms": {
            "reference": (reference, reference - 1, reference + 1),
            "mtl fp32": (fp32, fp32, fp32),
            "mtl bf16": (bf16, bf16, bf16),
            "floor": (floor, floor, floor),
        },
        "tokens_per_example": 20.0,
    }


def results(device: str, threads: int, *rows: dict) -> dict:
    return {
        "inputs": "random 300-d vectors",
        "threads": threads,
        "device": device,
        "precisions": ["fp32", "bf16"],
        "rows": list(rows),
        "fill": {("nli", "random"): 0.553, ("nli", "bucketed"): 0.811},
    }


def test_train_report_compares_mtl_bucketed_with_the_reference_on_random_batches():
    report = train.report(
        results(
            "cpu",
            1,
            row("bilstm 512", "nli", "random", 870.0, 800.0, 600.0, 700.0),
            row("bilstm 512", "nli", "bucketed", 700.0, 500.0, 340.0, 450.0),
        )
    )
    assert report.startswith("inputs: random 300-d vectors; 1 threads;")
    assert (
        "bilstm 512 nli step, mtl fp32 bucketed: 500 ms = 1.74x faster than the reference on random batches (870 ms); 1.11x the bucketed floor"
        in report
    )
    assert "bilstm 512 nli step, mtl bf16 bucketed: 340 ms = 2.56x faster" in report
    assert "bilstm 512 nli random: mtl fp32 is 1.09x faster than the reference on the same batches" in report
    assert "reference     870 (869-871)" in report
    assert "padded encoder calls over an epoch: nli random 55%, nli bucketed 81%" in report


def test_train_report_names_the_gpu_and_shows_tenths_of_its_short_steps():
    report = train.report(
        results(
            "NVIDIA H100 80GB HBM3",
            16,
            row("bilstm 2048", "nli", "random", 30.0, 25.0, 20.0, 15.0),
            row("bilstm 2048", "nli", "bucketed", 28.0, 12.5, 10.0, 11.0),
        )
    )
    assert report.startswith("inputs: random 300-d vectors; NVIDIA H100 80GB HBM3;")
    assert (
        "mtl fp32 bucketed: 12.5 ms = 2.40x faster than the reference on random batches (30.0 ms)" in report
    )
    assert "reference    30.0 (29.0-31.0)" in report


def test_padding_fill_counts_real_tokens_within_each_call(tiny_data):
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    from .conftest import args_for

    data = prepare(
        config_from_args(args_for(tiny_data, tiny_data["vectors"].parent / "unused")), progress=False
    )
    random, bucketed = (train.padding_fill(data, "nli", 8, window, 1234) for window in (1, 50))
    assert 0 < random < bucketed <= 1


def test_bench_encode_times_the_same_work_for_both_contenders(capsys):
    import numpy as np
    import torch

    from mtl.eval.encoder import SentenceEncoder
    from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding
    from mtl.text.tokenizer import Tokenizer
    from mtl.text.vocab import Vocabulary
    from tools import encode as bench

    config = bench.BenchEncodeConfig(snli=str(FIXTURES / "snli_tiny"), hidden=6, runs=1, limit=40)
    sentences = bench.distinct_sentences(config)
    assert len(sentences) == 40 and len(set(sentences)) == 40
    tokenizer = Tokenizer()
    words = sorted({w for tokens in tokenizer.tokenize(sentences) for w in tokens})
    matrix = torch.randn(len(words) + 2, 5)
    encoder = build_encoder(
        frozen_embedding(matrix), EncoderConfig(encoder="bilstm", hidden=6, pooling="max")
    )
    ours = SentenceEncoder(encoder, Vocabulary(words), tokenizer, None, torch.device("cpu"), "x")
    vectors = {w: matrix[i + 2].numpy() for i, w in enumerate(words)}
    reference = bench.InferSentStyle(ours.encoder.lstm, vectors, tokenizer, torch.device("cpu"))
    # One sentence per batch: no padding, so InferSent's max (which pads with zeros) is mtl's.
    np.testing.assert_allclose(reference.encode(sentences, 1), ours.encode(sentences), rtol=1e-5, atol=1e-6)

    from mtl.models.precision import bf16_supported

    results = bench.run(config)
    native_bf16 = bf16_supported(torch.device("cpu"))
    expected = {"reference", "mtl", "mtl again", "mtl tokens"} | ({"mtl bf16"} if native_bf16 else set())
    assert results["sentences"] == 40 and set(results["seconds"]) == expected
    assert set(results["split"]) == {"tokenize", "batch", "encode", "copy"}
    text = bench.report(results)
    assert "| reference (batch 64) |" in text and "| mtl (batch 128) |" in text and "- tokenize:" in text
    if native_bf16:
        assert results["bf16_drift"]["min_cosine"] > 0.9 and "bf16 compute against fp32" in text
    else:
        assert "bf16 compute: not timed: this device has no native bf16" in text
    drift = {
        "max_abs_difference": 0.0123,
        "max_abs_value": 1.2,
        "min_cosine": 0.99912,
        "median_cosine": 0.99987,
    }
    assert (
        "largest difference of a value 0.0123 (values up to 1.200); cosine of a sentence's two "
        "embeddings: min 0.99912, median 0.99987" in bench.report({**results, "bf16_drift": drift})
    )
    assert "| mtl tokens (8,192 tokens per batch) |" in text


def test_bench_loop_measures_the_second_block_of_a_real_run_against_its_steps_alone(
    tiny_data, tmp_path, recwarn
):
    from tools import loop

    bench = loop.BenchLoopConfig(
        snli=str(FIXTURES / "snli_tiny"),
        nli_train_split="train",
        vectors=str(tiny_data["vectors"]),
        hidden=4,
        steps=3,
        batch=8,
        runs=1,
        wandb_every=2,
    )
    results = loop.run(bench)
    assert results["loop_examples_per_s"] > 0 and results["step_examples_per_s"] > 0
    assert results["wandb_every"] == 2 and results["setting"] == "bilstm 4"
    text = loop.report(results)
    assert "W&B offline (a row per 2 steps)" in text and "ms per step around a" in text
    assert results["checkpoint_mb"] > 0 and "ms per step at one per 500 steps" in text
    # its runs are Trainers made in Python, with no config.json: W&B is not asked to save one
    assert not [w for w in recwarn if "W&B call failed" in str(w.message)]


def test_bench_train_times_every_contender_on_the_same_batches(tiny_data, tmp_path):
    from mtl.train.loop.run import config_from_args
    from mtl.train.loop.trainer import Trainer

    from .conftest import args_for

    config = config_from_args(
        args_for(tiny_data, tmp_path / "run", "hidden=6", "optim=sgd", "head_layers=1", "precision=fp32")
    )
    trainer = Trainer(config, tmp_path / "run", progress=False)
    row = train.time_contenders(trainer, "nli", "bucketed", 50, ["fp32"], train.BenchTrainConfig(steps=3))
    assert set(row["ms"]) == {"reference", "mtl fp32", "floor", "packed floor"}
    assert all(low <= median <= high for median, low, high in row["ms"].values())
    assert row["memory_mb"] == {}  # GPU memory is measured on CUDA only
    row.update(setting="bilstm 6")
    assert "packed floor" in train.format_row(row)


def test_train_report_gives_the_packed_floor_and_gpu_memory():
    bucketed = row("bilstm 2048", "nli", "bucketed", 28.0, 12.5, 10.0, 11.0)
    bucketed["ms"]["packed floor"] = (6.9, 6.8, 7.0)
    bucketed["memory_mb"] = {"reference": 900.0, "mtl fp32": 1234.5}
    report = train.report(
        results("H100", 16, row("bilstm 2048", "nli", "random", 30.0, 25.0, 20.0, 15.0), bucketed)
    )
    assert "1.81x the one-call packed floor" in report
    assert "peak MB reference 900  mtl fp32 1,234" in report


def test_bench_transfer_prints_each_tasks_seconds_and_its_fits_share():
    from tools import transfer

    row = {
        "encoder": "glove-bow", "mode": "senteval-prototyping", "seconds": 64.0, "dim": 50,
        "tasks": {"MR": 30.0, "TREC": 10.0}, "embedding": {"MR": 3.0, "TREC": 1.0},
    }  # fmt: skip
    printed = transfer.format_row(row)
    assert "glove-bow" in printed and "fits 90%" in printed
    assert "MR 30.0 s (90% fits), TREC 10.0 s (90% fits)" in printed
    assert "64.0 s, tasks 40.0 s" in printed
    assert transfer.BenchTransferConfig(modes="senteval-prototyping").modes == "senteval-prototyping"
    with pytest.raises(UserError, match=r"encoders='glove': 'glove' is not one of glove-bow, 1024"):
        transfer.BenchTransferConfig(encoders="glove")
    with pytest.raises(UserError, match=r"tokenizer='bpe': use spacy or whitespace"):
        transfer.BenchTransferConfig(tokenizer="bpe")


def test_gradcache_report_sets_the_cached_step_beside_the_plain_one():
    from tools import gradcache

    rows = [
        {"batch": 1024, "contender": "plain", "mini_batch": None, "ms": 1000.0, "peak_mb": 600.0},
        {"batch": 1024, "contender": "cached", "mini_batch": 32, "ms": 1400.0, "peak_mb": 90.0},
    ]
    text = gradcache.report(rows, "mnrl")
    assert "batch  1024  cached (mini_batch 32):     1400 ms/step, peak     90.0 MB" in text
    assert text.endswith("batch 1024: cached takes 0.15x the plain step's peak memory and 1.40x its time")


def test_gradcache_bench_measures_a_step_and_its_peak(tiny_data, tmp_path):
    import torch

    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.loop.run import config_from_args
    from mtl.train.loop.trainer import Trainer
    from tools import gradcache

    from .conftest import args_for

    keys = ("tasks=nli,mnrl", f"mnrl.source={FIXTURES / 'snli_tiny'}", "mnrl.batch=12", "mnrl.mini_batch=4")
    trainer = Trainer(
        resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "run", *keys))), tmp_path / "run"
    )
    row = gradcache.measured(trainer, "mnrl", warmup=1, steps=3, device=torch.device("cpu"))
    assert row["ms"] > 0 and row["peak_mb"] >= 0


def test_checkpointing_report_sets_the_checkpointed_step_beside_the_plain_one():
    from tools import hf

    rows = [
        {"batch": 64, "contender": "plain", "ms": 2000.0, "peak_mb": 600.0},
        {"batch": 64, "contender": "checkpointed", "ms": 2600.0, "peak_mb": 300.0},
        {"batch": 64, "contender": "lora r=8", "ms": 1500.0, "peak_mb": 450.0},
    ]
    text = hf.checkpointing_report(rows, hf.BenchHFConfig(checkpointing=True, lora_r=8, steps=3))
    assert "| 64 | checkpointed | 2000 | 2600 | 1.30x | 600.0 | 300.0 | 0.50x |" in text
    assert "| 64 | lora r=8 | 2000 | 1500 | 0.75x | 600.0 | 450.0 | 0.75x |" in text
    assert list(hf.memory_contenders(hf.BenchHFConfig(lora_r=8))) == ["plain", "lora r=8"]
