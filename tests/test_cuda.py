"""The CUDA paths: cuDNN's packed BiLSTM, training in each precision, runs moving between devices.

CI's machines have no GPU, so there these skip; on a machine with one they run with the rest.
"""

import copy
import json

import pytest
import torch

from mtl.models.encoders import EncoderConfig
from mtl.models.encoders.base import build_encoder, frozen_embedding

from .conftest import exported_weights, start_run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

SENTENCES = ["A man is playing a guitar .", "The cat sleeps .", "Two dogs run on the beach"]


@pytest.fixture
def exact_float32():
    """cuDNN and cuBLAS may compute fp32 in TF32 by default; the comparisons here need full fp32."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def outputs_and_gradients(encoder, tokens, lengths, kernel):
    encoder.kernel = kernel
    encoder.zero_grad()
    output = encoder(tokens, lengths)
    (output * torch.arange(output.shape[1], device=output.device)).sum().backward()
    return output.detach().cpu(), [p.grad.cpu() for p in encoder.parameters() if p.requires_grad]


@pytest.mark.parametrize("name", ["bilstm", "bilstm2"])
def test_cudnn_runs_the_function_the_cpu_runs(name, exact_float32, monkeypatch):
    from mtl.models.encoders import bilstm

    torch.manual_seed(0)
    encoder = build_encoder(frozen_embedding(torch.randn(50, 12)), EncoderConfig(encoder=name, hidden=16))
    tokens = torch.tensor([[5, 9, 3, 7, 2, 4], [8, 8, 0, 0, 0, 0], [1, 2, 3, 0, 0, 0], [6, 0, 0, 0, 0, 0]])
    lengths = torch.tensor([6, 2, 3, 1])
    on_cpu = outputs_and_gradients(encoder, tokens, lengths, "dense")
    on_gpu = copy.deepcopy(encoder).cuda()
    packed_calls = []
    real = bilstm.run_packed
    monkeypatch.setattr(bilstm, "run_packed", lambda *a, **k: packed_calls.append(1) or real(*a, **k))
    # Lengths on the CPU, as batches keep them, or on the GPU.
    for kernel, where in (("auto", "cpu"), ("packed", "cpu"), ("packed", "cuda")):
        output, gradients = outputs_and_gradients(on_gpu, tokens.cuda(), lengths.to(where), kernel)
        named = lambda message: f"kernel={kernel}, lengths on {where}: {message}"  # noqa: E731, B023
        torch.testing.assert_close(output, on_cpu[0], rtol=1e-4, atol=1e-5, msg=named)
        for gpu_gradient, cpu_gradient in zip(gradients, on_cpu[1], strict=True):
            torch.testing.assert_close(gpu_gradient, cpu_gradient, rtol=1e-4, atol=1e-5, msg=named)
    assert len(packed_calls) == 3  # auto packs on CUDA, as packed does; one call for every layer
    # (The dense kernel is the CPU's; on CUDA its gradients differ from the CPU's by up to 2e-4.)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_run_trained_on_cuda_encodes_alike_on_the_cpu(tiny_data, tmp_path, precision, exact_float32):
    from mtl.eval.loading import load_encoder

    run_dir, summary = start_run(tiny_data, tmp_path / "run", "device=cuda", f"precision={precision}")
    recorded = json.loads((run_dir / "config.json").read_text())["config"]["run"]
    assert recorded["precision"] == precision
    assert summary["global_step"] == 10
    checkpoint = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    scale = checkpoint.get("scaler", {}).get("scale")
    assert (scale is not None) == (precision == "fp16")  # loss scaling in fp16 alone
    on_gpu = load_encoder(run_dir, device="cuda").encode(SENTENCES, progress=False)
    on_cpu = load_encoder(run_dir, device="cpu").encode(SENTENCES, progress=False)
    torch.testing.assert_close(torch.as_tensor(on_gpu), torch.as_tensor(on_cpu), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("first", "then"), [("cpu", "cuda"), ("cuda", "cpu")])
def test_a_run_killed_on_one_device_resumes_on_the_other(tiny_data, tmp_path, first, then):
    from mtl.train.loop import run

    cut_dir, _ = start_run(tiny_data, tmp_path / "run", f"device={first}", "precision=fp32", killed_after=7)
    _, summary = run.resume(cut_dir, overrides=[f"device={then}"], progress=False)
    assert summary["global_step"] == 10
    weights = exported_weights(cut_dir)
    assert all(t.device.type == "cpu" for t in weights.values())  # the export loads on any machine


@pytest.mark.parametrize("encoder", ["bilstm", "lstm", "transformer"])
def test_a_training_step_never_waits_for_the_gpu_before_its_metrics(tiny_data, tmp_path, encoder):
    # Forward, backward, clipping and the update only queue kernels: batches arrive from
    # pinned memory without blocking and the lengths stay on the CPU; reading the metrics at
    # the end is the step's one sync.
    import numpy as np

    from mtl.train.data.training_data import prepare
    from mtl.train.loop import run
    from mtl.train.loop.trainer import Trainer

    from .conftest import args_for

    config = run.config_from_args(args_for(tiny_data, tmp_path / "run", "device=cuda", f"encoder={encoder}"))
    trainer = Trainer(config, tmp_path / "run", data=prepare(config, progress=False), progress=False)
    for task in config.tasks:
        examples = trainer.run.data.examples[task]["train"]
        rows = np.arange(min(8, len(examples)))
        trainer.train_step({task: rows})  # cuDNN's first call picks its algorithms
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            totals = trainer.step.queue(task, rows, trainer.run.state.global_step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        loss, correct, grad_norm = totals.tolist()
        assert loss > 0 and 0 <= correct <= len(rows) and grad_norm > 0


@pytest.mark.parametrize("task", ["mnrl", "qt"])
def test_cached_steps_give_the_whole_batchs_gradients_on_cuda(tiny_data, tmp_path, task, exact_float32):
    from .test_grad_cache import one_step

    loss, gradients, _ = one_step(tiny_data, tmp_path / "whole", task, "device=cuda")
    cached_loss, cached, _ = one_step(
        tiny_data, tmp_path / "cached", task, "device=cuda", f"{task}.mini_batch=5"
    )
    assert cached_loss == pytest.approx(loss, rel=1e-5)
    assert gradients.keys() == cached.keys() and len(gradients) > 2
    for name, gradient in gradients.items():
        torch.testing.assert_close(cached[name], gradient, rtol=1e-4, atol=1e-6, msg=name)


def test_cached_steps_replay_cudnns_dropout_masks(tiny_data, tmp_path):
    # A stacked BiLSTM on CUDA is one cuDNN call whose dropout between layers draws from cuDNN's
    # own state, not from torch's generator: the replay must reach that state too.
    from mtl.train.step import grad_cache

    from .test_grad_cache import one_step

    keys = ("device=cuda", "encoder_dropout=0.5", "encoder=bilstm2", "mnrl.mini_batch=4")
    _, _, trainer = one_step(tiny_data, tmp_path / "run", "mnrl", *keys)
    encoder, head = trainer.run.model.encoder, trainer.run.model.heads["mnrl"]
    assert encoder.skips_padding(torch.zeros(1, device="cuda"))  # the packed cuDNN call
    sentences = trainer.step.prepare("mnrl", trainer.run.setup.streams["mnrl"].next()[0]).micro_batches[0][0]
    trainer.run.model.train()
    chunk = grad_cache.rows_of(sentences, slice(0, 4))
    for _ in range(2):  # a pass before, so cuDNN's state has moved on from its first seeding
        state = grad_cache.RandomState(trainer.run.device)
        first = head.embed(encoder, chunk)
        state.restore()
        again = head.embed(encoder, chunk)
        for a, b in zip(first, again, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(head.embed(encoder, chunk)[0], first[0])  # dropout does draw masks


@pytest.mark.parametrize(
    "keys",
    [
        ("encoder=gru",),
        ("encoder=gatedconv",),
        ("encoder=hconvnet",),
        ("encoder=innerattention",),
        ("encoder=bow", "embeddings=trainable"),
        ("encoder=bilstm2", "embeddings=both", "embedding_lr=x0.5"),
    ],
    ids=lambda keys: " ".join(keys),
)
def test_each_encoder_trains_on_cuda_and_encodes_alike_on_the_cpu(tiny_data, tmp_path, keys, exact_float32):
    from mtl.eval.loading import load_encoder

    run_dir, summary = start_run(tiny_data, tmp_path / "run", "device=cuda", "precision=fp32", *keys)
    assert summary["global_step"] == 10
    on_gpu = load_encoder(run_dir, device="cuda").encode(SENTENCES, progress=False)
    on_cpu = load_encoder(run_dir, device="cpu").encode(SENTENCES, progress=False)
    torch.testing.assert_close(torch.as_tensor(on_gpu), torch.as_tensor(on_cpu), rtol=1e-4, atol=1e-5)


def test_lora_with_checkpointing_trains_on_cuda_and_resumes_exactly(tiny_data, tiny_bert, tmp_path):
    from mtl.eval.loading import load_encoder

    from .conftest import deterministic_summary, straight_and_resumed
    from .test_hf import SENTENCES as HF_SENTENCES
    from .test_hf import hf_args

    extra = hf_args(tiny_bert, "device=cuda", "lora_r=4", "gradient_checkpointing=true", "max_steps=12")
    straight_dir, straight, resumed = straight_and_resumed(tiny_data, tmp_path, *extra)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    on_gpu = load_encoder(straight_dir, device="cuda").encode(HF_SENTENCES, progress=False)
    on_cpu = load_encoder(straight_dir, device="cpu").encode(HF_SENTENCES, progress=False)
    torch.testing.assert_close(torch.as_tensor(on_gpu), torch.as_tensor(on_cpu), rtol=1e-4, atol=1e-5)


def test_hf_attention_in_bf16_takes_kernels_that_need_no_plan_per_length(tiny_bert, tmp_path, monkeypatch):
    """cuDNN's attention builds an execution plan for each new padded length (seconds each on an
    H100): the hf encoder turns it off. The control, with the switch made a no-op, shows that this
    GPU's PyTorch would take cuDNN's attention for the same batch; else there is nothing to avoid."""
    import shutil

    from transformers import BertConfig, BertModel

    from mtl.models.encoders.base import EncoderConfig
    from mtl.models.encoders.config import HFOptions
    from mtl.models.encoders.hf import HFEncoder

    folder = tmp_path / "bert-64"  # 64-d heads, as MiniLM's: a head size cuDNN's attention takes
    shutil.copytree(tiny_bert, folder, ignore=shutil.ignore_patterns("model.safetensors", "config.json"))
    torch.manual_seed(0)
    vocabulary = len((tiny_bert / "vocab.txt").read_text().splitlines())
    BertModel(BertConfig(vocab_size=vocabulary, hidden_size=128, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(folder)  # fmt: skip
    tokens = torch.randint(5, vocabulary, (8, 24), device="cuda")
    lengths = torch.tensor([24, 20, 17, 12, 9, 6, 3, 2], device="cuda")

    def attention_kernels() -> set[str]:
        encoder = HFEncoder(
            EncoderConfig(encoder="hf", pooling="mean", options=HFOptions(hf_model=str(folder)))
        ).cuda()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                encoder(tokens, lengths).float().sum().backward()
            torch.cuda.synchronize()
        return {event.key for event in profiled.key_averages() if "scaled_dot_product" in event.key}

    enabled = torch.backends.cuda.cudnn_sdp_enabled()  # off already where an hf test ran on CUDA before
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        with monkeypatch.context() as patched:
            patched.setattr(torch.backends.cuda, "enable_cudnn_sdp", lambda on: None)
            if not any("cudnn" in name for name in attention_kernels()):
                pytest.skip("PyTorch does not take cuDNN's attention for this batch on this GPU")
        taken = attention_kernels()
        assert taken and not any("cudnn" in name for name in taken), taken
    finally:
        torch.backends.cuda.enable_cudnn_sdp(enabled)


RANK_DEVICE = """
import torch
from mtl.runtime.distributed import Distributed

dist = Distributed.from_environment()
device = dist.device("auto")
print(device, torch.cuda.current_device(), torch.cuda.get_device_properties(device).uuid, flush=True)
dist.barrier()
"""


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (a rank each)")
def test_each_rank_takes_the_gpu_slurm_made_visible_to_it(tmp_path):
    """SLURM's job gives its processes CUDA_VISIBLE_DEVICES (here the machine's last two GPUs, in
    reverse: SLURM's grant need not be 0,1) and srun a LOCAL_RANK each; mtl's rank r trains on
    cuda:r, which is the r-th GPU SLURM made visible, with no SLURM involved."""
    import os
    import subprocess
    import sys

    count = torch.cuda.device_count()
    granted = [count - 1, count - 2]  # physical indices, as SLURM lists them
    uuids = {i: str(torch.cuda.get_device_properties(i).uuid) for i in range(count)}
    processes = []
    for rank in range(2):
        env = {
            **os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, granted)), "RANK": str(rank),
            "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533",
        }  # fmt: skip
        processes.append(
            subprocess.Popen([sys.executable, "-c", RANK_DEVICE], env=env, stdout=subprocess.PIPE, text=True)
        )
    for rank, process in enumerate(processes):
        output = process.communicate(timeout=300)[0]
        assert process.returncode == 0, output
        device, current, uuid = output.split()
        assert (device, current) == (f"cuda:{rank}", str(rank))
        assert uuid == uuids[granted[rank]]
