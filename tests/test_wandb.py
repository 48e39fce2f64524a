"""What a training run's W&B record holds, read back from the offline run files."""

import json
import subprocess
import sys

from mtl.train import run
from mtl.wandb_file import by_kind, run_files

from .conftest import start_run

TIMING = ("examples_per_s", "_runtime", "_timestamp", "eval_seconds")


def history(path):
    """The history rows of a run file, as `wandb leet inspect --json` prints them."""
    printed = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    records = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    return [r["history"]["item"] for r in records if r["type"] == "history"]


def without_timing(rows):
    """Rows less what differs between two runs of the same steps: timings, and the phases table's
    file (its blocks' seconds), of which the row count stays."""
    return [
        {
            k: v
            for k, v in row.items()
            if not k.endswith(TIMING) and not k.startswith("phases.") or k == "phases.nrows"
        }
        for row in rows
    ]


def items(updates):
    return {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for u in updates for i in u.update}


def test_offline_run_holds_curves_phases_and_metadata(tiny_data, tmp_path):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", "wandb=offline")
    (run_file,) = run_files(tmp_path)
    records = by_kind(run_file)
    (header,) = records["run"]
    assert header.job_type == "train" and not header.resumed and not header.resume
    assert header.run_group == "multitask" and set(header.tags) == {"bilstm", "blocks", "nli", "squad"}
    assert header.notes.startswith("just train-multitask")

    rows = history(run_file)
    steps = [row["_step"] for row in rows]
    assert steps == sorted(set(steps)) == list(range(1, 11))  # one row per step, keyed by the global step
    keys = set().union(*rows)
    for key in (
        "nli/train/loss",
        "squad/train/loss",
        "nli/lr",
        "squad/grad_norm",
        "nli/dev/acc",
        "phase/task_id",
    ):
        assert key in keys, key
    scalars = [(k, v) for row in rows for k, v in row.items() if not k.startswith("phases.")]
    assert not any(isinstance(value, str) for _, value in scalars)  # the phases table is media
    assert not any(key.startswith(("params/", "best/")) for key in keys)
    assert [row["phase/task_id"] for row in rows] == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    assert rows[-1]["phases._type"] == "table-file" and rows[-1]["phases.nrows"] == 4

    config = items([header.config, *records.get("config", [])])
    assert config["params/trainable"] == summary["params/trainable"] and config["world_size"] == 1
    assert config["data"]["nli_train_examples"] == 200
    final = items(records["summary"])
    assert final["best/nli/dev/acc"] == summary["best/nli/dev/acc"]
    assert "recovery/nli/median_jump" in final and "params/trainable" not in final
    metrics = {m.name: m for m in records["metric"]}
    assert metrics["nli/dev/acc"].step_metric == "nli/step" and metrics["nli/dev/acc"].summary.max


def test_a_resumed_run_holds_every_step_once_as_an_uninterrupted_one(tiny_data, tmp_path):
    extra = ("wandb=offline", "max_steps=17", "checkpoint_every=4")
    start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)  # checkpoint at step 5
    run.resume(cut_dir, progress=False)
    (straight_file,) = run_files(tmp_path / "straight")
    first, second = run_files(cut_dir)
    resumed = history(first) + history(second)
    assert [row["_step"] for row in resumed] == list(range(1, 18))
    assert without_timing(resumed) == without_timing(history(straight_file))
