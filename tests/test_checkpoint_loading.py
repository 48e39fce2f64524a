"""An encoder or checkpoint received from someone else never runs code when loaded."""

import os
import re

import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.formats import checkpoint
from mtl.train.loop import run

from .conftest import (
    deterministic_summary,
    exported_encoder,
    exported_weights,
    one_error_line,
    start_run,
)


class Payload:
    """What a crafted file holds: unpickling it calls os.mkdir(marker), standing for any code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def craft(path, marker, base: dict) -> None:
    """Replace the mtl file at `path` by one that keeps its contents and adds a payload."""
    torch.save({**base, "extra": Payload(marker)}, path)


@pytest.fixture(scope="module")
def finished_run(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("finished") / "run", "max_steps=3")
    return run_dir


def test_every_file_a_run_writes_loads_without_unpickling(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=7)
    start_run(tiny_data, tmp_path / "done", "max_steps=3")
    files = [
        run_dir / "checkpoints" / "latest.pt",
        run_dir / "checkpoints" / "previous-latest.pt",
        run_dir / "checkpoints" / "best.pt",
    ]
    for file in files:
        assert isinstance(torch.load(file, weights_only=True), dict), file
    # The exported encoder is JSON and safetensors: nothing to unpickle at all.
    assert exported_encoder(tmp_path / "done")["encoder"]


def test_a_crafted_encoder_is_refused_without_running_its_code(finished_run, tmp_path):
    from mtl import load_encoder

    encoder, marker = tmp_path / "encoder.pt", tmp_path / "ran"
    craft(encoder, marker, legacy_encoder(finished_run))
    with pytest.raises(
        UserError, match=r"encoder.pt holds Python objects that loading would execute \(posix.mkdir\)"
    ):
        load_encoder(encoder)
    assert not marker.exists()


def test_a_crafted_latest_checkpoint_is_refused_not_skipped(tiny_data, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=7)
    latest, marker = run_dir / "checkpoints" / "latest.pt", tmp_path / "ran"
    assert checkpoint.previous_of(latest).is_file()  # a damaged file would fall back to it
    craft(latest, marker, torch.load(latest, weights_only=True))
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    assert "latest.pt holds Python objects that loading would execute" in one_error_line(capsys)
    assert not marker.exists()


def test_transfer_of_a_crafted_file_is_one_line(finished_run, senteval, tmp_path, capsys):
    encoder, marker = tmp_path / "encoder.pt", tmp_path / "ran"
    craft(encoder, marker, legacy_encoder(finished_run))
    assert main(["transfer", f"run={encoder}", "tasks=MR", f"data={senteval}", "wandb=disabled"]) == 2
    assert "holds Python objects" in one_error_line(capsys)
    assert not marker.exists()


def test_a_file_with_a_vocabulary_but_no_config_is_one_line(finished_run, tmp_path):
    from mtl import load_encoder

    saved = legacy_encoder(finished_run)
    del saved["config"]
    torch.save(saved, tmp_path / "encoder.pt")
    with pytest.raises(UserError, match=r"encoder.pt holds no config: it is not an encoder"):
        load_encoder(tmp_path / "encoder.pt")


def test_a_pretrained_folder_outside_the_encoder_file_is_refused(finished_run, tmp_path):
    from mtl import load_encoder

    saved = legacy_encoder(finished_run)
    del saved["encoder"]
    saved["config"]["model"]["encoder"] = "hf"
    saved["pretrained"] = "../../elsewhere"
    torch.save(saved, tmp_path / "encoder.pt")
    with pytest.raises(UserError, match=r"names '../../elsewhere' as its model folder"):
        load_encoder(tmp_path / "encoder.pt")


def legacy_encoder(run_dir):
    """The exported encoder as runs before encoder.json wrote it: one torch.save dict (encoder.pt)."""
    saved = {"format": 1, **exported_encoder(run_dir)}
    del saved["encoder_config"], saved["prompts"]  # encoder.json's entries since the formats moved down
    return saved


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tiny_data, tmp_path, damage):
    extra = ("dropout=0.2", "max_steps=17", "checkpoint_every=4")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=9)
    latest = cut_dir / "checkpoints" / "latest.pt"
    assert checkpoint.load(latest)["state"]["global_step"] == 8
    assert checkpoint.load(checkpoint.previous_of(latest))["state"]["global_step"] == 5
    data = bytearray(latest.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = bytearray()
    latest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"checkpoint .*latest.pt is damaged .*using the one before it"):
        _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a, b = exported_weights(straight_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_damaged_checkpoint_without_a_previous_one_is_one_line(tiny_data, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=6)
    latest = run_dir / "checkpoints" / "latest.pt"
    checkpoint.previous_of(latest).unlink(missing_ok=True)
    latest.write_bytes(latest.read_bytes()[:100])
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    assert re.match(
        r"error: checkpoint .*latest.pt is damaged \(truncated or corrupted", one_error_line(capsys)
    )


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(
    tiny_data, tmp_path, capsys, monkeypatch
):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=6)
    before = (run_dir / "checkpoints" / "latest.pt").read_bytes()
    real_save = torch.save

    def full_disk(obj, path, *args, **kwargs):
        real_save(obj, path, *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    error = one_error_line(capsys)
    assert re.match(r"error: could not write checkpoint .*latest.pt: No space left on device", error)
    assert (run_dir / "checkpoints" / "latest.pt").read_bytes() == before
    assert not list((run_dir / "checkpoints").glob(".*partial"))
