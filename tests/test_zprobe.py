from mtl.cli import main
from tests.conftest import args_for


def test_sts(tiny_data, tmp_path):
    out = tmp_path / "r"
    assert (
        main(
            [
                "train-multitask",
                *args_for(
                    tiny_data,
                    out,
                    "tasks=nli,experiments/tasks/stsb.toml",
                    "stsb.steps=3",
                    "stsb.batch=16",
                    "max_eval=200",
                    "wandb=disabled",
                ),
            ]
        )
        == 0
    )
    print((out / "summary.json").read_text()[:600])


def test_mnrl(tiny_data, tmp_path):
    out = tmp_path / "r"
    assert (
        main(
            [
                "train-multitask",
                *args_for(
                    tiny_data,
                    out,
                    "tasks=nli,mnrl",
                    "mnrl.source=tests/fixtures/snli_tiny",
                    "mnrl.batch=4",
                    "mnrl.steps=2",
                    "wandb=disabled",
                ),
            ]
        )
        == 0
    )
    print((out / "summary.json").read_text()[:600])
