"""`just bench-transfer senteval=PATH`: SentEval itself beside mtl, on the same embeddings.

SentEval's code is the user's checkout (not shipped with mtl, not here); what mtl adds is tested:
the batcher it hands SentEval gives mtl's own `baseline=glove-bow tokenizer=whitespace`
embeddings, SentEval's `.cuda()` calls stay on the CPU in SentEval's process only, the comparison's
arithmetic, and the one-line refusals."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mtl.errors import UserError
from tools import transfer
from tools.senteval_itself import bag_of_vectors


def test_the_batcher_given_to_senteval_embeds_as_mtls_glove_bow_with_senteval_tokens(shared_data):
    from mtl.eval.loading import baseline_encoder

    vectors = str(shared_data / "glove" / "glove.6B.50d.zip")
    lines = (shared_data / "senteval/downstream/CR/custrev.pos").read_text(encoding="latin-1").splitlines()
    sentences = [*lines[:300], "", "zzzqqq xxyyzz"]  # an empty line and one of unknown words: zeros
    ours = baseline_encoder("glove-bow", vectors, device="cpu", tokenizer="whitespace").encode(sentences)
    theirs = bag_of_vectors(vectors)(None, [line.split() for line in sentences])  # SentEval's tokens
    assert theirs.shape == ours.shape == (302, 50)
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6)
    assert not theirs[-1].any() and not theirs[-2].any()


def test_senteval_cuda_calls_stay_on_the_cpu_in_its_own_process_only():
    code = (
        "import torch; from tools.senteval_itself import _cuda_as_no_op; _cuda_as_no_op(); "
        "assert torch.zeros(2).cuda().device.type == ('cuda' if torch.cuda.is_available() else 'cpu'); "
        "assert next(torch.nn.Linear(2, 2).cuda().parameters()).device.type in ('cpu', 'cuda'); "
        "assert torch.cuda.is_available() or torch.zeros(2).to(torch.device('cuda'), dtype=torch.int64).dtype == torch.int64; "
        "print('ok')"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr
    import torch

    if not torch.cuda.is_available():  # this process keeps torch as it is
        with pytest.raises((AssertionError, RuntimeError)):
            torch.zeros(2).cuda()


def test_the_comparison_gives_mtls_time_as_a_share_of_senteval_and_the_accuracy_differences():
    rows = [
        {
            "encoder": "glove-bow (whitespace)", "mode": "senteval-prototyping", "seconds": 40.0, "dim": 50,
            "tasks": {"MR": 15.0, "TREC": 2.0}, "embedding": {"MR": 1.0, "TREC": 0.5},
            "acc": {"MR": 0.6925, "TREC": 0.684}, "runs": 3,
        },
        {
            "encoder": "SentEval itself (glove-bow)", "mode": "senteval-prototyping", "seconds": 40.0,
            "dim": None, "tasks": {"MR": 30.0, "TREC": 4.0},
            "acc": {"MR": 0.6925, "TREC": 0.6860}, "runs": 3,
        },
    ]  # fmt: skip
    printed = transfer.report(rows)
    assert "17.0 s against 34.0 s = 0.50x its time" in printed
    assert "MR +0.00, TREC -0.20" in printed
    rows[0]["acc"]["MR"] = 0.69249999  # a float hair under SentEval's: no "-0.00"
    assert "MR +0.00" in transfer.report(rows)
    assert "(median of 3 runs)" in printed
    assert "MR 30.0 s, TREC 4.0 s" in printed  # SentEval's seconds, without a fits share it cannot give
    assert transfer.median_run([{"seconds": s} for s in (3.0, 1.0, 2.0)])["seconds"] == 2.0


def test_senteval_comparison_is_refused_in_one_line_where_it_cannot_compare(tmp_path):
    with pytest.raises(
        UserError, match=r"senteval=.*no senteval/engine.py there; give the folder of a SentEval"
    ):
        transfer.BenchTransferConfig(senteval=str(tmp_path), modes="senteval-prototyping", tasks="MR")
    (tmp_path / "senteval").mkdir()
    (tmp_path / "senteval" / "engine.py").write_text("")
    with pytest.raises(UserError, match=r"add modes=senteval-prototyping or modes=senteval"):
        transfer.BenchTransferConfig(senteval=str(tmp_path), tasks="MR")
    with pytest.raises(
        UserError, match=r"compares on MR, CR, SUBJ, MPQA, TREC, SICK-E, STS14: give tasks= among"
    ):
        transfer.BenchTransferConfig(senteval=str(tmp_path), modes="senteval", tasks="MR,STS15")
    with pytest.raises(UserError, match=r"keep glove-bow in encoders="):
        transfer.BenchTransferConfig(senteval=str(tmp_path), modes="senteval", tasks="MR", encoders="1024")
    assert transfer.BenchTransferConfig(senteval=str(tmp_path), modes="senteval", tasks="MR,TREC").runs == 1


def test_the_busy_machine_bench_compares_medians_and_checks_the_results_agree():
    """`just bench-transfer hog=N`: the default threads against one thread, medians of the pairs;
    a task scored differently by the two is named; the busy processes end with the suite."""
    from tools import busy_machine

    def timed(wall, cpu, acc):
        result = {"acc": acc, "seconds": wall, "embed_seconds": 1.0}
        return {"wall": wall, "cpu": cpu, "embed": 1.0, "fits": wall - 1.0, "results": {"CR": result}}

    same = busy_machine.summarized(
        {
            "default": [timed(30, 21, 0.8), timed(50, 25, 0.8), timed(40, 22, 0.8)],
            "one thread": [timed(20, 16, 0.8)] * 3,
        }
    )
    assert same == {
        "medians": {
            "default": {"wall": 40, "cpu": 22, "embed": 1.0, "fits": 39.0},
            "one thread": {"wall": 20, "cpu": 16, "embed": 1.0, "fits": 19.0},
        },
        "pairs": 3,
        "differ": [],
    }
    line = busy_machine.report([{"encoder": "glove-bow", "mode": "fast", "hog": 2, **same}]).splitlines()[1]
    assert line == (
        "glove-bow fast: default threads 40.0 s wall, 22.0 CPU-s (embedding 1.0 s, scoring 39.0 s); "
        "one thread 20.0 s, 16.0 CPU-s (embedding 1.0 s, scoring 19.0 s): "
        "default/one 2.00x wall, 1.38x CPU (3 pairs); the same results"
    )
    differ = busy_machine.summarized({"default": [timed(1, 1, 0.8)], "one thread": [timed(1, 1, 0.7)]})
    assert differ["differ"] == ["CR"]
    with busy_machine.hogs(2):
        busy = [p for p in children_command_lines() if busy_machine.BUSY_LOOP in " ".join(p)]
        assert len(busy) == 2
    assert not [p for p in children_command_lines() if busy_machine.BUSY_LOOP in " ".join(p)]


def children_command_lines() -> list[list[str]]:
    """The command lines of this process's children (read from /proc)."""
    import os
    from pathlib import Path

    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid():
                found.append((status.parent / "cmdline").read_text().split("\0"))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_senteval_sts_loader_gets_its_ragged_token_arrays_as_numpy_made_them_before():
    import types

    from tools.senteval_itself import _ragged_arrays_as_before

    module = types.SimpleNamespace(np=np)
    _ragged_arrays_as_before(module)
    ragged = module.np.array([["a", "b"], ["c"]])
    assert ragged.dtype == object and ragged[0] == ["a", "b"] and ragged[1] == ["c"]
    assert module.np.array([[1, 2], [3, 4]]).shape == (2, 2) and module.np.mean is np.mean
    assert np.array is not module.np.array  # numpy itself is left as it is


def test_the_command_as_typed_is_counted_with_every_process_it_leaves_behind(tmp_path):
    """A process tree's CPU: a worker the command starts and never waits for is counted too
    (os.times would miss it), once it has ended; the wall time is the command's."""
    from tools import as_typed

    if as_typed.cgroup_root() is None:
        pytest.skip("no cgroup can be made on this machine (not root, or none mounted writable)")
    spent = tmp_path / "worker-cpu"
    worker = (
        "import time; x = 0\n"
        "for i in range(3_000_000): x += i * i\n"
        f"open({str(spent)!r}, 'w').write(str(time.process_time()))"
    )
    leaves = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {worker!r}])"
    measured = as_typed.timed([sys.executable, "-c", leaves], dict(os.environ), "test")
    assert spent.is_file()  # the bench waited for the worker to leave the group before counting
    assert measured["cpu"] >= float(spent.read_text())
