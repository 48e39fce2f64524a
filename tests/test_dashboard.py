"""`just dashboard`: the W&B workspace spec offline, and one line without the network."""

import json
import re

from mtl.cli import main

from .conftest import one_error_line


def test_the_dashboard_without_network_is_one_line(capsys, monkeypatch):
    import wandb

    def unreachable(*args, **kwargs):
        raise wandb.errors.CommError("Failed to execute API request: the service process did not respond")

    # With a key and no network, W&B's own client waits 30 s and raises AuthenticationError.
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setattr(wandb, "Api", unreachable)
    assert main(["dashboard", "group=fig2"]) == 2
    assert one_error_line(capsys).startswith(
        "error: could not save the workspace on W&B (Failed to execute API request: the service process did not "
        "respond): check the network and WANDB_API_KEY, or write its JSON offline with spec=PATH"
    )


def test_the_dashboard_spec_is_built_offline_with_every_section(tmp_path, capsys):
    spec_path = tmp_path / "workspace.json"
    assert main(["dashboard", "group=fig2", f"spec={spec_path}"]) == 0
    spec = json.loads(spec_path.read_text())
    sections = spec["spec"]["section"]["panel_bank_config"]["sections"]
    assert [s["name"] for s in sections] == [
        "SNLI (nli)",
        "ClassifSQuAD (squad)",
        "Blocks",
        "Comparison",
        "Transfer",
    ]
    text = json.dumps(spec)
    for key in (
        "nli/train/loss",
        "squad/dev/acc",
        "phase/task_id",
        "best/nli/dev/acc",
        "recovery/nli/median_steps",
        "transfer/MR/acc",
        "transfer/SICK-R/pearson",
        "transfer/STS14/all/pearson",
        "transfer/micro",  # against the embedding dimension: InferSent's Figure 4
    ):
        assert key in text, key
    # The runs shown: W&B's own group (a preset-named run has no run.group in its config) and job types.
    (runset,) = re.findall(r'"filters": (\{"filterFormat": "filterV2".*?\]\})', text)
    filters = json.loads(runset)["filters"]
    assert [(f["key"], f["op"], f["value"]) for f in filters] == [
        ({"section": "run", "name": "jobType"}, "IN", ["train", "transfer-eval"]),
        ({"section": "run", "name": "group"}, "=", "fig2"),
    ]
    assert "run.group" not in text
    blocks = sections[2]["panels"]
    (indicator,) = [p for p in blocks if "phase/task_id" in json.dumps(p)]
    assert indicator["config"]["smoothing_weight"] == 0 and indicator["config"]["smoothing_type"] == "none"
    assert '"val": "phases"' in json.dumps(blocks[-1])  # a table panel, not a media browser


def test_the_dashboard_says_it_needs_wandb_online(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: no API key
    assert main(["dashboard"]) == 2
    assert "log in first" in capsys.readouterr().err
