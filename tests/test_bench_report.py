from mtl.bench import train


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
    from mtl.train.data import prepare
    from mtl.train.run import config_from_args

    from .conftest import args_for

    data = prepare(
        config_from_args(args_for(tiny_data, tiny_data["vectors"].parent / "unused")), progress=False
    )
    random, bucketed = (train.padding_fill(data, "nli", 8, window, 1234) for window in (1, 50))
    assert 0 < random < bucketed <= 1
