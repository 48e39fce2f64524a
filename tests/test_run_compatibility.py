"""Run folders written by earlier code resume and finish as they did then, and report as they did.

The fixture was made once, by `tests/fixtures/make_run_before_tasks.py` at the commit in its
MADE_AT: a run killed after step 7, and the same run trained straight to its end.
"""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from mtl import load_encoder
from mtl.analysis.report import _results_table
from mtl.runs import Run
from mtl.train.loop import run

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
    # Today's export keeps fewer words (none the run did not train on), each with its row.
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


# A run folder written before the read layer, the metric registry and plugins (its MADE_AT):
# it resumes to the summary and weights its straight twin reached then, and reports identically.
READ_LAYER = FIXTURES / "run_before_read_layer"


def test_a_run_written_before_the_read_layer_resumes_to_what_it_reached_then(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(READ_LAYER / "interrupted", run_dir)
    record = json.loads((run_dir / "config.json").read_text())
    record["config"]["tasks"]["nli"]["source"] = str(FIXTURES / "snli_tiny")
    record["config"]["tasks"]["squad"]["source"] = str(tiny_data["classifsquad"])
    record["config"]["data"]["vectors"] = str(tiny_data["vectors"])
    (run_dir / "config.json").write_text(json.dumps(record, indent=2))
    _, summary = run.resume(run_dir, progress=False)
    expected = json.loads((READ_LAYER / "finished" / "summary.json").read_text())
    assert {
        k: v for k, v in summary.items() if k.startswith(("best/", "steps/", "examples/", "params/"))
    } == {k: v for k, v in expected.items() if k.startswith(("best/", "steps/", "examples/", "params/"))}
    then, now = (
        load_file(READ_LAYER / "finished" / "encoder.safetensors"),
        load_file(run_dir / "encoder.safetensors"),
    )
    assert then.keys() == now.keys()
    for key in then:
        torch.testing.assert_close(now[key], then[key], rtol=0, atol=0, msg=key)


def test_a_run_written_before_the_read_layer_reports_identically(tmp_path):
    run_dir = tmp_path / "finished"  # the table names the run by its folder
    shutil.copytree(READ_LAYER / "finished", run_dir)
    table = _results_table([Run.read(run_dir)])
    # Every column holds what the old code showed; the page now puts results before the keys.
    assert by_column(table) == by_column((READ_LAYER / "results_table.html").read_text(encoding="utf-8"))


def by_column(tables: str) -> dict[str, str]:
    """A one-run page's results tables (one, or since 2026-12-02 one per kind of result and one of
    how the run was trained) as header -> cell."""
    import re

    found: dict[str, str] = {}
    for table in re.findall(r"<table[^>]*>(.*?)</table>", tables):
        header, row = re.findall(r"<tr>(.*?)</tr>", table)
        found |= dict(
            zip(re.findall(r"<th>(.*?)</th>", header), re.findall(r"<td[^>]*>(.*?)</td>", row), strict=True)
        )
    return found


def test_a_run_recorded_before_sample_test_resumes_scoring_test_on_its_sample(tiny_data, tmp_path):
    """Before the key, max_eval= sampled test as well as dev: such a run resumes on the same
    sample (its recorded inputs' fingerprints), and says so."""
    from .conftest import start_run

    run_dir, _ = start_run(tiny_data, tmp_path / "old", "max_eval=20", "sample_test=true", killed_after=3)
    record = json.loads((run_dir / "config.json").read_text())
    del record["config"]["data"]["sample_test"]  # as config.json was written before 2026-11-29
    (run_dir / "config.json").write_text(json.dumps(record, indent=2))
    _, summary = run.resume(run_dir, progress=False)
    assert summary["scored_on"]["nli/test"] == {"examples": 20, "of": 100, "sampled": True}
