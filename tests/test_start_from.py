"""start_from=: a run's shared encoder begins from another run's trained network (continued
training; versus-single's incremental arm adds a task this way), its word vectors its own."""

import json

import pytest
import torch

from mtl import cli
from mtl.registry import Callback

from .conftest import deterministic_summary, exported_weights, one_error_line, start_run, straight_and_resumed


@pytest.fixture(scope="module")
def nli_run(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("start") / "nli", "tasks=nli", "max_steps=4")
    return run_dir


class FirstWeights(Callback):
    """The shared encoder's weights as the first step finds them."""

    def on_train_begin(self, run):
        self.weights = {k: v.clone() for k, v in run.model.encoder.state_dict().items()}


def test_a_run_starts_from_another_runs_network_and_keeps_its_own_word_vectors(nli_run, tiny_data, tmp_path):
    from mtl.train.loop import run

    from .conftest import args_for

    seen = FirstWeights()
    config = run.config_from_args(
        args_for(tiny_data, tmp_path / "squad", "tasks=squad", f"start_from={nli_run}")
    )
    out, _ = run.start(config, progress=False, callbacks=[seen])
    trained = exported_weights(nli_run)
    network = [k for k in trained if not k.startswith("embedding.")]
    assert network and all(torch.equal(seen.weights[k], trained[k]) for k in network)
    assert (
        seen.weights["embedding.weight"].shape[0] != trained["embedding.weight"].shape[0]
    )  # its own vocabulary
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    (started,) = [e for e in events if e.get("phase/event") == "start_from"]
    assert (
        started["phase/path"] == str((nli_run / "encoder.json").resolve())
        and len(started["phase/sha256"]) == 64
    )
    # a plain run of the same seed starts elsewhere
    plain = FirstWeights()
    run.start(
        run.config_from_args(args_for(tiny_data, tmp_path / "plain", "tasks=squad")),
        progress=False,
        callbacks=[plain],
    )
    assert not all(torch.equal(plain.weights[k], trained[k]) for k in network)


def test_a_run_started_from_another_resumes_exactly(nli_run, tiny_data, tmp_path):
    _, straight, resumed = straight_and_resumed(tiny_data, tmp_path, "tasks=squad", f"start_from={nli_run}")
    assert deterministic_summary(resumed) == deterministic_summary(straight)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["hidden=6"], "its encoder differs from this run's at"),
        (["start_from=/nowhere/at/all"], "start_from=/nowhere/at/all: no encoder there"),
    ],
)
def test_a_start_that_does_not_fit_is_one_line(nli_run, tiny_data, tmp_path, capsys, extra, says):
    from .conftest import args_for

    given = [f"start_from={nli_run}", *extra] if not extra[0].startswith("start_from=") else extra
    args = args_for(tiny_data, tmp_path / "bad", "tasks=squad", *given)
    assert cli.main(["train-multitask", *args]) != 0
    assert says in one_error_line(capsys)
