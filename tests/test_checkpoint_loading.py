"""Issue 19: an encoder or checkpoint received from someone else never runs code when loaded."""

import os

import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.train import checkpoint

from .conftest import exported_encoder, one_error_line, start_run


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
    return {"format": 1, **exported_encoder(run_dir)}
