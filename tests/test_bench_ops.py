"""The host-work counter of `just bench-train ops=true`, and the step's budget it guards (a step's
host work is what bounds it on a GPU)."""

import pytest
import torch
from torch import nn

from tools import ops

from .conftest import args_for

# The target for one BiLSTM-max NLI step (head, loss, metric, clip, update, record):
# 473 ops when it was filed, 257 after the contiguous gradient buffer, fused updates, numpy
# packing positions, max pooling over -inf padding and a seeded backward.
STEP_BUDGET = 260


def test_the_counter_counts_nested_ops():
    a, b = torch.ones(3), torch.ones(3)
    assert ops.count_host_work(lambda: a + b).ops == 1
    # A Python number in an op is converted to a tensor first: four nested ops more.
    assert ops.count_host_work(lambda: a + 1.5).ops == 5


def test_an_lstm_call_counts_once_each_way_whatever_its_length():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 6, batch_first=True, bidirectional=True)

    def forward_and_backward(length: int):
        x = torch.randn(3, length, 4)
        return ops.count_host_work(lambda: lstm(x)[0].sum().backward())

    short, long = forward_and_backward(2), forward_and_backward(40)
    assert short.ops == long.ops  # the CPU kernel's per-step ops are not counted
    assert short.by_op.get("aten::lstm") == 1


def test_the_counter_counts_host_reads():
    t = torch.arange(4.0)
    work = ops.count_host_work(lambda: (t.sum().item(), int(t[1]), t.tolist(), bool(t[2] > 0)))
    assert work.syncs == 4
    assert ops.count_host_work(lambda: t.numpy().sum()).syncs == 0  # a host tensor, by construction
    assert torch.Tensor.item is torch._C.TensorBase.item  # the counting patch is undone


@pytest.fixture
def bilstm_trainer(tiny_data, tmp_path):
    from mtl.train.loop.run import config_from_args
    from mtl.train.loop.trainer import Trainer

    config = config_from_args(
        args_for(tiny_data, tmp_path / "run", "optim=sgd", "head_layers=1", "precision=fp32", "device=cpu")
    )
    return Trainer(config, tmp_path / "run", progress=False)


def test_a_bilstm_nli_step_stays_within_its_host_budget(bilstm_trainer):
    from mtl.models.encoders.bilstm import BiLSTMEncoder

    with ops.kernel(BiLSTMEncoder, "packed"):  # the kernel CUDA runs
        step, floor = ops.count_step(bilstm_trainer, "nli")
    assert step.ops <= STEP_BUDGET, f"{step.ops} ops per step: {step.by_op}"
    assert step.syncs == 1  # the logged loss, metric and gradient norm, read together
    assert step.ops < 2 * floor.ops


def test_the_report_has_a_line_per_encoder():
    step, floor = ops.HostWork(257, 1, {"aten::add_": 14}), ops.HostWork(141, 0)
    text = ops.report([ops.Counted("bilstm", step, floor)])
    assert text.splitlines()[0] == "bilstm ops/step 257 syncs/step 1 floor 141"
    assert "packed, as on CUDA; most frequent: add_ 14" in text


def test_busy_time_counts_overlapping_intervals_once():
    from tools.step_profile import union_us

    assert union_us([(0, 10), (5, 12), (12, 13), (20, 25), (21, 22)]) == 18
    assert union_us([]) == 0


def test_the_profile_times_the_step_and_names_its_host_ops(bilstm_trainer):
    from tools import step_profile

    profiled = step_profile.profile_task(bilstm_trainer, "nli", steps=2, warmup=1)
    assert set(profiled) == {"mtl fp32", "packed floor"}
    step, floor = profiled["mtl fp32"], profiled["packed floor"]
    assert step.wall_ms > 0 and step.busy_ms is None and step.kernels == 0  # a CPU: no kernels
    for contender in (step, floor):  # the ops with the most self time: which ones depends on the CPU
        assert 0 < len(contender.host_ops) <= step_profile.TOP
        assert all(op.startswith("aten::") and ms >= 0 for op, ms in contender.host_ops)
    report = step_profile.report([step_profile.Row("tiny", "nli", profiled)], "cpu")
    assert "tiny nli mtl fp32: wall" in report and "no GPU" in report


def test_the_mixed_bench_says_affinitys_share_and_the_rhythm_that_keeps_it_at_5_percent():
    from tools.mixed import BALANCERS, report

    names = [
        "single steps",
        *(f"mixed {name}" for name in BALANCERS),
        "affinity",
        "affinity, every held batch",
    ]
    ms = {name: (11.0, 10.0, 12.0) for name in names} | {"single steps": (10.0, 9.0, 11.0)}
    ms["affinity"], ms["affinity, every held batch"] = (55.0, 50.0, 60.0), (220.0, 200.0, 230.0)
    results = {
        "tasks": ["nli", "squad"],
        "batches": {"nli": 64, "squad": 128},
        "affinity_batches": 8,
        "affinity_each": 2,
        "ms": ms,
        "ops": dict.fromkeys(names, 100),
    }
    text = report(results, "preset=x")
    # 55 / (55 + 100 * 11) of the wall time; 55 / (55 + 95 * 11) is 5.0%
    assert (
        "one measurement (as a run makes it: 2 of 8 held batches in turn) 55 ms = 4.8% of the wall time"
        in text
    )
    assert "5% from affinity_every=95" in text
    # 220 / (220 + 1100); 220 / (220 + 380 * 11) is 5.0%
    assert "(all 8 held batches, the narrowest floor) 220 ms = 16.7% of the wall time" in text
    assert "5% from affinity_every=380" in text
    assert "mixed sum step = 1.10x the single-task steps" in text


def test_the_mixed_bench_times_every_contender_on_a_real_run(tiny_data, tmp_path):
    """`just bench-train schedule=mixed` end to end on the tiny data (its trainers once lost their
    `config` to the run object and the bench stopped with an AttributeError no test saw)."""
    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args
    from tools import mixed

    base = resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "run", "device=cpu")))
    data = prepare(base, progress=False)
    results = mixed.run(base, data, steps=1, warmup=0, device=torch.device("cpu"))
    assert set(results["ms"]) >= {"single steps", "mixed sum", "affinity", "affinity, every held batch"}
    assert all(median > 0 for median, *_ in results["ms"].values())
    # a run's default held batches, not the class's: 2 of its 8 in turn at each measurement
    assert (results["affinity_batches"], results["affinity_each"]) == (8, 2)
    assert "one measurement (as a run makes it: 2 of 8 held batches in turn)" in mixed.report(results, "tiny")
