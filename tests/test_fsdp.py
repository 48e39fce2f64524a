"""strategy=fsdp: a pretrained transformer sharded over 2 gloo processes trains as one process
does, and its checkpoints resume exactly at another number of processes, both ways."""

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

from mtl.cli import main
from mtl.train.loop import run

from .conftest import FIXTURES, Killed, args_for, killed_after_step, start_run
from .test_distributed import finished, one_thread, rank_pid, torchrun, train_distributed, wait_for_checkpoint

# 200 NLI pairs at batch 7 leave a last batch of 4 per epoch; 12 triples at batch 11 leave one
# row (rank 1 steps at weight 0). accumulate=2: the first micro-batch keeps its gradients local.
STEPS = 16


@pytest.fixture(scope="module")
def still_bert(tiny_bert, tmp_path_factory) -> Path:
    """The tiny BERT without dropout: masks are drawn per process, so with dropout 2 processes
    train as one only in expectation (as under DDP)."""
    folder = tmp_path_factory.mktemp("still-bert") / "model"
    shutil.copytree(tiny_bert, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def settings(bert: Path) -> tuple[str, ...]:
    return (
        "device=cpu",
        "encoder=hf",
        f"hf_model={bert}",
        "strategy=fsdp",
        "gradient_checkpointing=true",  # (each layer recomputed inside its unit's backward)
        # Quick-Thoughts: an in-batch loss over both processes' rows, a head with a transformer
        # of its own, and a dev set that the 2 processes score in different numbers of batches.
        "tasks=nli,squad,qt",
        f"qt.corpus={FIXTURES / 'corpus_tiny.txt'}",
        "qt.batch=8",
        "qt.steps=2",
        "precision=fp32",
        "batch_nli=7",
        "batch_squad=11",
        "accumulate=2",
        "eval_every=5",
        "checkpoint_every=2",
        f"max_steps={STEPS}",
    )


@pytest.fixture(scope="module")
def one_process(tiny_data, still_bert, tmp_path_factory) -> Path:
    """The reference: strategy=fsdp in one process (nothing to shard over: it trains as usual)."""
    out = tmp_path_factory.mktemp("one") / "run"
    with one_thread():
        start_run(tiny_data, out, *settings(still_bert))
    return out


def assert_same_training(a: Path, b: Path) -> None:
    """The same weights (final checkpoint and best one) and the same dev and test accuracies."""
    for name in ("latest.pt", "best.pt"):
        first, second = (torch.load(d / "checkpoints" / name, weights_only=True)["model"] for d in (a, b))
        assert first.keys() == second.keys()
        for key in first:
            assert type(second[key]) is torch.Tensor, key  # whole tensors, not a process's shards
            # Summed in another order over 2 processes, a gradient of float-noise size still moves
            # its weight by up to AdamW's lr (2e-5) a step: 16 steps allow about 3e-4.
            torch.testing.assert_close(first[key], second[key], rtol=1e-4, atol=1e-4, msg=f"{name} {key}")
    summaries = [json.loads((d / "summary.json").read_text()) for d in (a, b)]
    accuracies = [key for key in summaries[0] if key.endswith("/acc")]
    assert accuracies
    for key in accuracies:
        assert summaries[1][key] == pytest.approx(summaries[0][key], abs=1e-9), key


def test_sharded_processes_train_like_one_and_resume_at_another_number_of_processes(
    tiny_data, still_bert, tmp_path, one_process
):
    """2 sharded processes, one killed; 1 process resumes from the checkpoint their shards were
    gathered into, and is killed in turn; 2 sharded processes cut its checkpoint into shards and
    finish (the test evaluation and export from whole weights): one run, equal to one process's."""
    out = tmp_path / "run"
    launcher = train_distributed(2, *args_for(tiny_data, out, *settings(still_bert)))
    wait_for_checkpoint(out, 2, launcher)
    os.kill(rank_pid(launcher, 1), signal.SIGKILL)
    code, output = finished(launcher)
    assert code == 2 and not (out / "summary.json").exists(), output[-3000:]
    assert "strategy=fsdp: 8 units sharded over 2 processes" in output  # 2 + 2 layers, 3 heads, the root
    saved = torch.load(out / "checkpoints" / "latest.pt", weights_only=True)["state"]["global_step"]
    with one_thread(), pytest.raises(Killed):
        run.resume(out, progress=False, callbacks=[killed_after_step(min(saved + 3, STEPS - 1))])
    code, output = finished(torchrun(2, f"resume={out}"))
    assert code == 0, output[-3000:]
    assert_same_training(one_process, out)
    assert (out / "encoder" / "model.safetensors").is_file()  # exported whole, in Hugging Face format


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["encoder=bilstm"],
            "strategy=fsdp shards a pretrained transformer's layers over the processes: it is for "
            "encoder=hf, not encoder=bilstm",
        ),
        (["schedule=mixed"], "strategy=fsdp does not combine with schedule=mixed"),
        (["affinity_every=5"], "strategy=fsdp does not combine with affinity_every="),
        (["compile=true"], "strategy=fsdp does not combine with compile=true"),
        (["precision=fp16"], "strategy=fsdp does not combine with precision=fp16"),
    ],
)
def test_what_fsdp_cannot_shard_is_refused_in_one_line(
    tiny_data, tiny_bert, tmp_path, capsys, extra, message
):
    hf_only = {"hf_model", "gradient_checkpointing"} if "encoder=bilstm" in extra else set()
    replaced = {arg.partition("=")[0] for arg in extra} | hf_only
    keys = [key for key in settings(tiny_bert) if key.partition("=")[0] not in replaced]
    code = main(["train-multitask", *args_for(tiny_data, tmp_path / "run", *keys, *extra)])
    error = capsys.readouterr().err
    assert code == 2 and message in error and error.count("\n") == 1, error
    assert not (tmp_path / "run").exists()


def test_bench_ranks_times_each_process_count_under_each_strategy_and_one_process_once():
    from mtl.errors import UserError
    from tools.ranks import BenchRanksConfig, jobs

    config = BenchRanksConfig(processes="1,2,4", strategies="ddp,fsdp")
    assert jobs(config) == [(1, "ddp"), (2, "ddp"), (2, "fsdp"), (4, "ddp"), (4, "fsdp")]
    with pytest.raises(UserError, match="strategies='zero': give ddp, fsdp or both"):
        jobs(BenchRanksConfig(strategies="zero"))
