"""Tasks are plugins: one registered in this file, and one defined by a TOML file, train beside
the built-in ones with no library file changed for them."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from mtl.config import AtLeast1
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import HeadRecipe
from mtl.runs import read_metrics
from mtl.tasks import KINDS, TaskConfig, register
from mtl.tasks.base import Task
from mtl.train.loop import run

from .conftest import FIXTURES, args_for

REPO = Path(__file__).parent.parent


@dataclass
class ParityConfig(TaskConfig):
    kind: str = "parity"
    steps: AtLeast1 = 2
    batch: AtLeast1 = 4


class Parity(Task):
    """A toy task: is a sentence's word count even? One sentence per example, a margin loss."""

    kind = "parity"
    config_class = ParityConfig
    recipe = HeadRecipe(sentences=1, outputs=2, features=lambda u: u, width=1, pairs=(), calls=((0,),))
    losses_computed = 0

    def load(self, split: str) -> LabelledTexts:
        sentences = (FIXTURES / "snli_tiny" / f"s1.{split}").read_text().splitlines()
        return LabelledTexts([sentences], [len(s.split()) % 2 for s in sentences])

    def losses(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        Parity.losses_computed += 1
        return nn.functional.multi_margin_loss(outputs.float(), labels, reduction="none")


@pytest.fixture
def parity():
    register(Parity)
    Parity.losses_computed = 0
    yield Parity
    del KINDS["parity"]


def test_a_task_registered_in_a_test_trains_beside_the_built_in_ones(tiny_data, tmp_path, parity):
    # One cycle: 3 NLI + 2 ClassifSQuAD + 2 parity steps; two cycles.
    run_dir, summary = run.start(
        run.config_from_args(args_for(tiny_data, tmp_path / "run", "tasks=nli,squad,parity", "max_steps=14")),
        progress=False,
    )
    assert [summary[f"steps/{task}"] for task in ("nli", "squad", "parity")] == [6, 4, 4]
    # Its own loss, once per step (4) and once per evaluation (dev at steps 7 and 14, test): the dev loss.
    assert parity.losses_computed == 4 + 3
    assert summary["best/parity/dev/loss"] > 0
    records = read_metrics(run_dir / "metrics.jsonl")
    parity_steps = [r for r in records if "parity/train/loss" in r]
    assert [r["global_step"] for r in parity_steps] == [6, 7, 13, 14]
    assert {r["phase/task_id"] for r in parity_steps} == {2}
    assert 0.0 <= summary["best/parity/dev/acc"] <= 1.0 and "best/parity/test/acc" in summary
    recorded = json.loads((run_dir / "config.json").read_text())["config"]["tasks"]
    assert list(recorded) == ["nli", "squad", "parity"] and recorded["parity"]["steps"] == 2


def test_a_run_of_a_registered_task_resumes_exactly(tiny_data, tmp_path, parity):
    from .conftest import start_run

    args = ("tasks=parity,nli", "max_steps=12", "parity.steps=3")
    _, straight = start_run(tiny_data, tmp_path / "straight", *args)
    killed, _ = start_run(tiny_data, tmp_path / "killed", *args, killed_after=7)
    _, resumed = run.resume(killed, progress=False)
    for key in ("best/parity/dev/acc", "best/nli/dev/acc", "best/nli/test/acc", "best/step"):
        assert resumed[key] == straight[key], key


def test_a_task_defined_by_a_file_trains_with_snli(tiny_data, tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("MTL_DATA_DIR", str(shared_data))
    task_file = REPO / "experiments" / "tasks" / "sick.toml"
    args = args_for(
        tiny_data,
        tmp_path / "run",
        f"tasks=nli,{task_file}",
        "sick.steps=2",
        "sick.batch=8",
        "sick.max_train=64",
        "max_eval=40",
        "sample_test=true",
        "max_steps=10",
    )
    run_dir, summary = run.start(run.config_from_args(args), progress=False)
    assert (summary["steps/nli"], summary["steps/sick"]) == (6, 4)
    assert 0.0 <= summary["best/sick/dev/acc"] <= 1.0 and 0.0 <= summary["best/sick/test/acc"] <= 1.0
    record = json.loads((run_dir / "config.json").read_text())
    sick = record["config"]["tasks"]["sick"]
    # The definition is recorded, its folder resolved: resuming needs neither the file nor MTL_DATA_DIR.
    assert sick["kind"] == "pairs" and sick["source"] == str(
        (shared_data / "senteval/downstream/SICK").resolve()
    )
    assert record["inputs"]["sick"]["sha256"]


def test_old_keys_still_name_the_built_in_tasks_and_can_leave_one_out():
    config = run.config_from_args(["steps_squad=0", "batch_nli=32", "snli=/data/snli"])
    assert list(config.tasks) == ["nli"]
    assert (config.tasks["nli"].batch, config.tasks["nli"].source) == (32, "/data/snli")
    config = run.config_from_args(["preset=paper-blstm2048-nli", "steps_squad=500"])
    assert list(config.tasks) == ["nli", "squad"] and config.tasks["squad"].steps == 500


@pytest.mark.parametrize(
    "args, message",
    [
        (["tasks=nli,nope"], r"unknown task 'nope': choose one of nli, .*squad"),
        (["tasks=nli", "squad.steps=3"], r"squad.steps=3: squad is not one of this run's tasks \(nli\)"),
        (["tasks=nli,nli"], r"nli is listed twice"),
        (["tasks=./missing.toml"], r"task file missing.toml does not exist"),
        (["steps=3"], r"key 'steps' is ambiguous: use one of nli.steps, squad.steps"),
        (["nli.steps=0"], r"nli.steps=0 must be 1 or more"),
    ],
)
def test_task_lists_and_keys_are_checked(args, message):
    with pytest.raises(UserError, match=message):
        run.config_from_args(args)


def test_a_task_file_without_a_kind_or_labels_is_refused(tmp_path):
    (tmp_path / "odd.toml").write_text('source = "x"\n')
    with pytest.raises(UserError, match=r"task file .*odd.toml has no kind"):
        run.config_from_args([f"tasks={tmp_path / 'odd.toml'}"])
    (tmp_path / "pairs.toml").write_text('kind = "pairs"\nsource = "/nowhere"\n')
    config = run.config_from_args([f"tasks={tmp_path / 'pairs.toml'}"])
    from mtl.tasks import build_task

    with pytest.raises(UserError, match=r"pairs.labels='': a pair task needs the values of its label column"):
        build_task("pairs", config.tasks["pairs"])


def test_shuffle_labels_plants_a_noise_task_with_its_training_labels_permuted(tiny_data, tmp_path):
    """`<task>.shuffle_labels=true`: the training labels permuted (the same counts, seeded by the
    run's seed), dev and test untouched, so the task trains on no signal."""
    import numpy as np

    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    def examples(*keys: str):
        config = resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "run", *keys)))
        return prepare(config, progress=False).examples["nli"]

    plain, shuffled = examples(), examples("nli.shuffle_labels=true")
    again, other = examples("nli.shuffle_labels=true"), examples("nli.shuffle_labels=true", "seed=2")
    assert np.array_equal(plain["train"].sentences, shuffled["train"].sentences)
    assert sorted(plain["train"].labels) == sorted(shuffled["train"].labels)
    assert (plain["train"].labels != shuffled["train"].labels).mean() > 0.4
    assert np.array_equal(shuffled["train"].labels, again["train"].labels)  # seeded
    assert not np.array_equal(shuffled["train"].labels, other["train"].labels)
    for split in ("dev", "test"):
        assert np.array_equal(plain[split].labels, shuffled[split].labels)


def test_a_subsample_trains_on_a_seeded_share_apart_from_the_runs_seed(tiny_data, tmp_path):
    """`<task>.subsample=` (bagging): a seeded draw of that share of the training examples, in
    their order, the same for the same subsample_seed whatever the run's seed (a bag's runs share
    their data, the seed sets their initialisation), another for another; dev and test untouched."""
    import numpy as np

    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    def examples(*keys: str) -> dict[str, tuple[set[tuple], np.ndarray]]:
        """Per split, its examples as their sentences' texts (the sentence table is the run's), and its labels."""
        config = resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "run", *keys)))
        prepared = prepare(config, progress=False)
        texts = prepared.table.texts
        return {
            split: (
                {
                    tuple(texts[i] for i in row)
                    for row in np.asarray(part.sentences).reshape(len(part.labels), -1).tolist()
                },
                np.asarray(part.labels),
            )
            for split, part in prepared.examples["nli"].items()
        }

    plain = examples()
    bag = examples("nli.subsample=0.5", "nli.subsample_seed=1")
    again, other = (
        examples("nli.subsample=0.5", "nli.subsample_seed=1", "seed=9"),
        examples("nli.subsample=0.5", "nli.subsample_seed=2"),
    )
    assert len(bag["train"][1]) == round(0.5 * len(plain["train"][1]))
    assert bag["train"][0] <= plain["train"][0]
    assert bag["train"][0] == again["train"][0] and bag["train"][0] != other["train"][0]
    for split in ("dev", "test"):
        assert np.array_equal(plain[split][1], bag[split][1]) and plain[split][0] == bag[split][0]
    with pytest.raises(UserError, match="nli.subsample=0"):
        config_from_args(args_for(tiny_data, tmp_path / "run", "nli.subsample=0"))
