"""A run folder written before the multitask-core redesign (issue 20) resumes and finishes as it did then.

The fixture was made once, by `tests/fixtures/make_run_before_tasks.py` at the commit in its
MADE_AT: a run killed after step 7, and the same run trained straight to its end.
"""

import json
import shutil

import pytest
import torch

from mtl import load_encoder
from mtl.train import run

from .conftest import FIXTURES, exported_weights

BEFORE = FIXTURES / "run_before_tasks"


@pytest.fixture
def interrupted(tiny_data, tmp_path):
    """The killed run, its recorded inputs pointed at this checkout's copies of the same files."""
    run_dir = tmp_path / "run"
    shutil.copytree(BEFORE / "interrupted", run_dir)
    record = json.loads((run_dir / "config.json").read_text())
    data = record["config"]["data"]
    data["snli"] = str(FIXTURES / "snli_tiny")
    data["classifsquad"] = str(tiny_data["classifsquad"])
    data["vectors"] = str(tiny_data["vectors"])
    (run_dir / "config.json").write_text(json.dumps(record, indent=2))
    return run_dir


def test_a_run_written_before_the_redesign_resumes_and_finishes_as_it_would_have(interrupted):
    _, summary = run.resume(interrupted, progress=False)
    expected = json.loads((BEFORE / "finished" / "summary.json").read_text())
    assert (summary["stop_reason"], summary["global_step"]) == (
        expected["stop_reason"],
        expected["global_step"],
    )
    for key, value in expected.items():
        if key.startswith(("best/", "steps/", "params/")):
            assert summary[key] == pytest.approx(value, abs=1e-9), key
    before = torch.load(BEFORE / "finished" / "encoder.pt", weights_only=True)
    then, now = before["encoder"], exported_weights(interrupted)
    assert then.keys() == now.keys()
    # Today's export keeps fewer words (issue 34: none the run did not train on), each with its row.
    words = json.loads((interrupted / "encoder.json").read_text())["vocabulary"]
    assert set(words) <= set(before["vocabulary"]) and len(words) < len(before["vocabulary"])
    rows = [before["vocabulary"].index(word) for word in words]
    then["embedding.weight"] = then["embedding.weight"][rows]
    for key in then:
        torch.testing.assert_close(now[key], then[key], msg=key)


def test_an_encoder_written_before_the_redesign_still_loads_and_encodes(tiny_data):
    encoder = load_encoder(BEFORE / "finished" / "encoder.pt", device="cpu")
    encoder.vectors = str(tiny_data["vectors"])  # the recorded path was on the machine that made it
    embeddings = encoder.encode(["A man is playing a guitar .", "Two dogs run ."], progress=False)
    assert embeddings.shape == (2, encoder.dim) and torch.isfinite(torch.from_numpy(embeddings)).all()
