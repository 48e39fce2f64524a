"""mtl from Python, as a notebook uses it: train, transfer and compare through mtl.train,
TrainedRun.transfer and mtl.compare, the same folders and files the commands make."""

import json

import numpy as np
import pytest

import mtl
from mtl.api import TrainedRun, _keys
from mtl.errors import UserError

from .conftest import args_for


def test_a_notebook_trains_transfers_and_compares(tiny_data, senteval, tmp_path):
    runs = []
    for hidden in (4, 12):
        keys = args_for(tiny_data, tmp_path / f"h{hidden}", f"hidden={hidden}")
        runs.append(mtl.train(*keys, seed=1, progress=False))  # a keyword is a key too
    first = runs[0]
    assert isinstance(first, TrainedRun) and first.summary["global_step"] > 0
    recorded = json.loads((first.folder / "config.json").read_text())
    assert recorded["config"]["model"]["hidden"] == 4 and recorded["config"]["run"]["seed"] == 1
    assert "seed=1" in recorded["command"]  # the same record the CLI writes
    vectors = f"vectors={tiny_data['vectors']}"
    for run in runs:
        report = run.transfer("tasks=MR,CR", vectors, mode="fast", data=senteval, wandb="disabled")
        assert set(report["results"]) == {"MR", "CR"}
    verdicts = mtl.compare(*runs, report="transfer-fast", resamples=200)
    assert set(verdicts["encoders"]) == {"hidden=4", "hidden=12"}
    assert {c["task"] for c in verdicts["comparisons"]} == {"MR", "CR"}
    assert all(c["verdict"].endswith(("(1 seed)", "no evidence")) for c in verdicts["comparisons"])
    embedding = first.encoder(device="cpu").encode(["a man plays a guitar ."])
    assert embedding.shape[0] == 1 and np.isfinite(embedding).all()
    again = TrainedRun.of(first.folder)
    assert again.summary == first.summary and str(again.folder) == first.__fspath__()
    with pytest.raises(UserError, match="has already finished"):  # as `just train-multitask resume=`
        mtl.train(f"resume={first.folder}", progress=False)


def test_keywords_become_the_commands_keys():
    assert _keys(["preset=cpu-small"], {"nli__steps": 200, "wandb": False, "tasks": ["nli", "squad"]}) == [
        "preset=cpu-small", "nli.steps=200", "wandb=false", "tasks=nli,squad",
    ]  # fmt: skip


def test_the_python_api_runs_the_command_lines_preamble():
    """A non-text key was a traceback and plugins= an unknown key: as on the command line now."""
    from mtl.api import _keys
    from mtl.errors import UserError

    with pytest.raises(UserError, match="3 is not a key=value text"):
        _keys([3], {})
    assert _keys(["plugins=", "max_steps=3"], {"nli__steps": 2}) == ["max_steps=3", "nli.steps=2"]
