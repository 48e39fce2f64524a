"""What a training run's W&B record holds, read back from the offline run files."""

import json
import re
import subprocess
import sys

import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.tracking import wandb_file
from mtl.tracking.wandb_file import by_kind, run_files
from mtl.train.loop import run

from .conftest import (
    FIXTURES,
    args_for,
    start_run,
)

TIMING = ("examples_per_s", "_runtime", "_timestamp", "eval_seconds")


def history(path):
    """The history rows of a run file, as W&B's reader prints them."""
    return [row["item"] for row in by_kind(path).get("history", [])]


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
    """The keys of config or summary records, later updates over earlier ones (a nested key as
    W&B's reader prints it: `_wandb.visualize.affinity`)."""
    return {key: value for u in updates for key, value in u.get("update", {}).items()}


def test_offline_run_holds_curves_phases_and_metadata(tiny_data, tmp_path):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", "wandb=offline")
    (run_file,) = run_files(tmp_path)
    records = by_kind(run_file)
    (header,) = records["run"]
    assert header["job_type"] == "train" and not header.get("resumed") and not header.get("resume")
    assert header["run_group"] == "multitask" and set(header["tags"]) == {"bilstm", "blocks", "nli", "squad"}
    assert header["notes"].startswith("just train-multitask")

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
        "nli/dev/loss",
        "squad/dev/loss",
        "nli/epoch",
        "phase/task_id",
    ):
        assert key in keys, key
    scalars = [(k, v) for row in rows for k, v in row.items() if not k.startswith("phases.")]
    assert not any(isinstance(value, str) for _, value in scalars)  # the phases tables are media
    assert not any(key.startswith(("params/", "best/")) for key in keys)
    assert [row["phase/task_id"] for row in rows] == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    assert [row["nli/epoch"] for row in rows if "nli/epoch" in row] == [
        8 * k / 200 for k in (1, 2, 3, 4, 5, 6)
    ]
    # The phases table is logged at each block's end, a row longer each time.
    assert [(row["_step"], row["phases.nrows"]) for row in rows if "phases.nrows" in row] == [
        (3, 1),
        (5, 2),
        (8, 3),
        (10, 4),
    ]
    assert rows[-1]["phases._type"] == "table-file"

    config = items([header["config"], *records.get("config", [])])
    assert config["params/trainable"] == summary["params/trainable"] and config["world_size"] == 1
    assert config["data"]["nli_train_examples"] == 200
    final = items(records["summary"])
    assert final["best/nli/dev/acc"] == summary["best/nli/dev/acc"]
    assert "recovery/nli/median_jump" in final and "params/trainable" not in final
    assert final["scored_on"]["nli/test"] == {
        "examples": 100,
        "of": 100,
        "sampled": False,
    }  # what it was scored on
    metrics = {m["name"]: m for m in records["metric"] if "name" in m}
    assert metrics["nli/dev/acc"]["step_metric"] == "nli/step" and metrics["nli/dev/acc"]["summary"]["max"]

    # Artifacts: the best checkpoints as versions of one model artifact (files copied when
    # logged), the encoder, and the exact ClassifSQuAD build loaded, by its content digest.
    logged = [(a["type"], a["name"], tuple(a["aliases"])) for a in records["artifact"]]
    assert {kind for kind, _, _ in logged} == {"model", "encoder", "run_table"}  # run_table: phases
    models = [(name, aliases) for kind, name, aliases in logged if kind == "model"]
    # Named after the folder and the W&B run: a folder name repeats across sweeps, a run id does not.
    assert {name for name, _ in models} == {f"run-{header['run_id']}-model"}
    assert all(
        "best" in aliases and any(re.fullmatch(r"step-\d+", a) for a in aliases) for _, aliases in models
    )
    (encoder,) = [a for a in records["artifact"] if a["type"] == "encoder"]
    assert encoder["name"] == f"run-{header['run_id']}-encoder" == summary["wandb_artifacts"]["encoder"]
    stored = {entry["path"] for entry in encoder["manifest"]["contents"]}
    # GloVe encoders carry their sentence-transformers folder too, as hf runs do
    assert {"encoder.json", "encoder.safetensors", "encoder/modules.json"} <= stored, sorted(stored)
    metadata = json.loads(encoder["metadata"])
    assert (
        metadata["config"]["model"]["hidden"] == 8
        and metadata["params/trainable"] == summary["params/trainable"]
    )
    assert config["input_artifacts"]["classifsquad"] == folder_digest(tiny_data["classifsquad"])


def folder_digest(path):
    import wandb

    artifact = wandb.Artifact("classifsquad", "dataset")
    artifact.add_reference(path.resolve().as_uri())
    return artifact.digest


@pytest.mark.parametrize("setting", ["none", "all"])
def test_wandb_checkpoints_chooses_which_checkpoints_are_uploaded(tiny_data, tmp_path, setting):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "wandb=offline", f"wandb_checkpoints={setting}")
    (run_file,) = run_files(run_dir)
    models = [a for a in by_kind(run_file)["artifact"] if a["type"] == "model"]
    if setting == "none":
        assert models == []
        return
    # 10 steps, checkpoint_every=3, evaluations at 5 and 10: latest.pt at 3, 5, 6, 9 and 10.
    assert len([a for a in models if "best" not in a["aliases"]]) == 5
    assert 1 <= len([a for a in models if "best" in a["aliases"]]) <= 2


def test_a_transfer_run_sits_in_its_own_folder_and_group_and_uses_the_exact_encoder(
    tiny_data, senteval, tmp_path
):
    import wandb

    run_dir, summary = start_run(tiny_data, tmp_path / "run", "max_steps=3", "wandb=offline")
    args = ["transfer", "mode=fast", "tasks=MR", f"data={senteval}", f"vectors={tiny_data['vectors']}"]
    assert main([*args, f"run={run_dir}", "wandb=offline"]) == 0
    files = {path.parents[2]: path for path in run_files(run_dir)}  # <dir>/wandb/offline-run-*/run-*.wandb
    assert files.keys() == {run_dir, run_dir / "transfer"}  # the training run's folder keeps its own run
    transfer_file = files[run_dir / "transfer"]
    records = by_kind(transfer_file)
    (header,) = records["run"]
    assert header["job_type"] == "transfer-eval" and header["run_group"] == "multitask"
    encoder = wandb.Artifact("x", "encoder")
    encoder.add_file(str(run_dir / "encoder.safetensors"))
    encoder.add_file(str(run_dir / "encoder.json"))
    config = items([header["config"], *records.get("config", [])])
    assert (
        config["input_artifacts"][summary["wandb_artifacts"]["encoder"]] == encoder.digest
    )  # training's name


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
    # The resumed process logs best.pt again (the kill may have lost its upload): same name, aliases.
    before, after = (
        [a for a in by_kind(f).get("artifact", []) if a["type"] == "model"] for f in (first, second)
    )
    assert after[0]["name"] == before[-1]["name"] and "best" in after[0]["aliases"]
    assert [a for a in after[0]["aliases"] if a.startswith("step-")] == ["step-5"]  # the best before the kill
    damaged = tmp_path / "other-format.wandb"
    damaged.write_bytes(b":W&B\xe1\xbe\x01" + first.read_bytes()[7:])  # a later format version
    with pytest.raises(
        UserError, match=r"not a W&B run file the installed W&B reads .*resume with wandb=disabled"
    ):
        wandb_file.records(damaged)


def test_a_run_file_damaged_mid_way_is_read_on_past_the_damage_as_wandb_uploads_it(tmp_path):
    """W&B's reader (the one `wandb sync` uploads with) skips a damaged block and reads on: a resume
    must not log again the steps W&B holds after it (mtl's own parser once stopped at the damage)."""
    from tools import fuzz

    fuzz._make_wandb(tmp_path)  # 12 history rows over three 32 KiB blocks (step 7's row spans them)
    path = tmp_path / "run-fuzz.wandb"
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF  # inside the first block's first record
    path.write_bytes(bytes(data))
    steps = [int(h.get("step", {}).get("num", 0)) for h in by_kind(path)["history"]]
    assert len(steps) < 12 and steps[-1] == 11  # the damaged block's rows are lost, the later ones read
    assert wandb_file.last_history_step([path]) == 11


def test_rows_of_several_steps_hold_their_means_and_resume_as_an_uninterrupted_run(tiny_data, tmp_path):
    extra = ("wandb=offline", "wandb_every=3", "max_steps=17", "checkpoint_every=4")
    straight_dir, _ = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)  # checkpoint at step 5
    run.resume(cut_dir, progress=False)
    (straight_file,) = run_files(tmp_path / "straight")
    rows = history(straight_file)
    # Windows end at steps 3, 6, ... and at the last step; evaluations (ends of cycles: 5, 10, 15)
    # and the phases table (ends of blocks: 3, 5, 8, 10, ...) join the row of their step.
    assert [row["_step"] for row in rows] == [3, 5, 6, 8, 9, 10, 12, 13, 15, 17]
    assert [row["_step"] for row in rows if "nli/train/loss" in row or "squad/train/loss" in row] == [
        3, 6, 9, 12, 15, 17,
    ]  # fmt: skip
    records = [json.loads(line) for line in (straight_dir / "metrics.jsonl").read_text().splitlines()]
    steps = {r["global_step"]: r for r in records if "phase/task_id" in r}
    for row in rows:
        window = [steps[s] for s in range(row["_step"] - 2, row["_step"] + 1) if s in steps]
        for task in ("nli", "squad"):
            losses = [r[f"{task}/train/loss"] for r in window if f"{task}/train/loss" in r]
            if losses and row["_step"] % 3 == 0:
                assert row[f"{task}/train/loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-12)
                assert row[f"{task}/step"] == max(r[f"{task}/step"] for r in window if f"{task}/step" in r)
    first, second = run_files(cut_dir)
    assert without_timing(history(first) + history(second)) == without_timing(rows)


def test_a_diverged_run_sends_an_alert(tiny_data, tmp_path):
    args = ["lr=1e30", "max_grad_norm=0", "checkpoint_every=1", "max_steps=50", "steps_squad=0"]
    assert main(["train-multitask", *args_for(tiny_data, tmp_path / "nan", *args, "wandb=offline")]) == 2
    (run_file,) = run_files(tmp_path / "nan")
    records = by_kind(run_file)
    (alert,) = records["alert"]
    assert alert["title"] == "mtl run diverged" and "loss became nan" in alert["text"]
    assert records["exit"][0]["exit_code"] == 1


def test_the_run_says_where_its_wandb_run_is_and_keeps_its_console(tiny_data, tmp_path):
    out = tmp_path / "run"
    extra = ("wandb_tags=ablation, small", "wandb_notes=the first try", "wandb_entity=my-team")
    done = subprocess.run(  # a process of its own, as a user runs it: W&B wraps the console once per process
        [sys.executable, "-m", "mtl", "train-multitask", *args_for(tiny_data, out, "wandb=offline"), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr
    (run_file,) = run_files(out)
    folder = run_file.parent
    said = f"W&B offline run in {folder}: upload it with `wandb sync {folder}`"
    assert err.count(said) == 1  # once, at the end
    evaluations = re.findall(
        r"step (\d+): nli/dev/acc \d+\.\d{2}, nli/dev/loss \d\.\d{4}, squad/dev/acc \d+\.\d{2}, squad/dev/loss \d\.\d{4}\n",
        err,
    )
    assert evaluations == ["5", "10"]  # one line per evaluation (every cycle of 3 + 2 steps)
    records = by_kind(run_file)
    (header,) = records["run"]
    assert {"ablation", "small", "bilstm"} <= set(header["tags"])
    assert header["notes"] == "the first try" and header["entity"] == "my-team"
    console = "".join(record.get("line", "") for record in records["output_raw"])
    assert "trainable parameters:" in console and "train: 100%|██████████|" in console  # Unicode bars
    # config.json among the run's files, as resume= reads it (W&B's config is flattened)
    copy = folder / "files" / "config.json"
    assert not copy.is_symlink() and json.loads(copy.read_text()) == json.loads(
        (out / "config.json").read_text()
    )
    assert "config.json" in {item["path"] for record in records["files"] for item in record["files"]}


def test_wandb_console_off_keeps_the_logs_tab_empty(tiny_data, tmp_path):
    start_run(tiny_data, tmp_path / "run", "wandb=offline", "wandb_console=false")
    (run_file,) = run_files(tmp_path)
    assert "output_raw" not in by_kind(run_file)


def test_a_replayed_metrics_file_sends_only_steps_and_evaluations(tmp_path):
    # A resume whose W&B run holds nothing yet (its writer lost everything) replays the file:
    # parameter counts and block events stay out of the history, as they do when logged live.
    from mtl.train.run.log import RunLog

    class Recorder:
        def __init__(self):
            self.rows = []

        def last_history_step(self):
            return None

        def log(self, values, step=None):
            self.rows.append((step, dict(values)))

    records = [
        {"global_step": 0, "params/trainable": 10},
        {"global_step": 0, "phase/event": "block_start", "phase/task": "nli", "phase/block": 0},
        *(
            {"global_step": s, "nli/train/loss": float(s), "nli/step": s, "phase/task_id": 0}
            for s in (1, 2, 3, 4)
        ),
        {"global_step": 4, "phase/event": "block_end", "phase/block": 0, "phase/seconds": 1.5},
        {"global_step": 4, "phase/event": "evaluation", "nli/dev/acc": 0.5, "nli/step": 4},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    tracker = Recorder()
    log = RunLog(path, tracker, resume_at_byte=path.stat().st_size, every=2)
    log.close()
    assert tracker.rows == [
        (2, {"global_step": 2, "nli/train/loss": 1.5, "nli/step": 2, "phase/task_id": 0}),
        (4, {"global_step": 4, "nli/train/loss": 3.5, "nli/step": 4, "phase/task_id": 0, "nli/dev/acc": 0.5}),
    ]


def test_an_unwritable_wandb_dir_does_not_end_a_build(tiny_data, tmp_path, capsys):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.warns(UserWarning, match="W&B call failed, continuing without it"):
        code = main(
            [
                "build-classifsquad",
                f"squad={FIXTURES / 'squad_tiny'}",
                f"vectors={tiny_data['vectors']}",
                f"out={tmp_path / 'out'}",
                "max_oov=100",
                "wandb=offline",
                f"wandb_dir={blocked / 'runs'}",
            ]
        )
    assert code == 0 and (tmp_path / "out" / "stats.json").is_file()


def test_task_affinity_is_a_wandb_heatmap_of_each_measurement(tiny_data, tmp_path):
    start_run(tiny_data, tmp_path / "run", "wandb=offline", "affinity_every=4")
    (run_file,) = run_files(tmp_path)
    tables = [
        (row["_step"], row["affinity_table.nrows"])
        for row in history(run_file)
        if "affinity_table.nrows" in row
    ]
    assert tables == [(4, 4), (8, 4)]  # every ordered pair of nli, squad at each measurement
    chart = items(by_kind(run_file)["config"])["_wandb.visualize.affinity"]
    assert chart["panel_config"]["panelDefId"] == "wandb/confusion_matrix/v1"  # W&B's heatmap of a table
    assert chart["panel_config"]["fieldSettings"] == {
        "Actual": "source",
        "Predicted": "target",
        "nPredictions": "affinity",
    }
