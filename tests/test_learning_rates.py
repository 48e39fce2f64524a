"""Per-task learning rates (`<task>.lr=`) and the encoder's own (`encoder_lr=`)."""

import pytest

from mtl.errors import UserError
from mtl.train.config.train_config import parse_lr
from mtl.train.loop.run import config_from_args
from mtl.train.loop.trainer import Trainer

from .conftest import args_for


@pytest.mark.parametrize(
    "text, expected",
    [("", None), ("0.05", 0.05), ("x0.5", 0.05), ("0.5x", 0.05), ("X2", 0.2), ("1e-3", 1e-3)],
)
def test_a_learning_rate_is_a_value_or_a_multiple_of_lr(text, expected):
    value = parse_lr(text, 0.1, "nli.lr")
    assert value is None if expected is None else value == pytest.approx(expected)


@pytest.mark.parametrize("text", ["fast", "0", "x-1", "inf", "x"])
def test_a_bad_learning_rate_is_one_line_naming_its_key(tiny_data, tmp_path, text):
    with pytest.raises(
        UserError, match=rf"^nli\.lr={text}: give a learning rate \(0\.05\) or a multiple of lr= \(x0\.5\)"
    ):
        config_from_args(args_for(tiny_data, tmp_path / "run", f"nli.lr={text}"))
    with pytest.raises(UserError, match=rf"^encoder_lr={text}: give a learning rate"):
        config_from_args(args_for(tiny_data, tmp_path / "run", f"encoder_lr={text}"))


def groups(trainer: Trainer, task: str) -> list[tuple[float, int]]:
    """(lr, parameter count) of each group of `task`'s optimizer."""
    return [
        (g["lr"], sum(p.numel() for p in g["params"]))
        for g in trainer.run.setup.optimizers[task].param_groups
    ]


def sizes(trainer: Trainer, task: str) -> tuple[int, int]:
    encoder = sum(p.numel() for p in trainer.run.model.encoder.parameters() if p.requires_grad)
    head = sum(p.numel() for p in trainer.run.model.heads[task].parameters() if p.requires_grad)
    return encoder, head


def trainer_with(tiny_data, tmp_path, *keys: str) -> Trainer:
    config = config_from_args(args_for(tiny_data, tmp_path / "run", "optim=sgd", "lr=0.1", *keys))
    return Trainer(config, tmp_path / "run", progress=False)


def test_without_the_keys_each_optimizer_keeps_one_group(tiny_data, tmp_path):
    trainer = trainer_with(tiny_data, tmp_path)
    assert groups(trainer, "nli") == [(0.1, sum(sizes(trainer, "nli")))]  # as runs before the keys


def test_each_task_trains_its_head_and_the_encoder_at_its_own_rates(tiny_data, tmp_path):
    trainer = trainer_with(tiny_data, tmp_path, "nli.lr=x0.5", "encoder_lr=0.01")
    encoder, nli_head = sizes(trainer, "nli")
    _, squad_head = sizes(trainer, "squad")
    assert groups(trainer, "nli") == [(0.01, encoder), (0.05, nli_head)]
    assert groups(trainer, "squad") == [(0.01, encoder), (0.1, squad_head)]
    # Without encoder_lr=, a task's steps train the encoder at the task's rate.
    trainer = trainer_with(tiny_data, tmp_path / "b", "nli.lr=0.02")
    assert groups(trainer, "nli") == [(0.02, encoder + nli_head)]


def test_a_shared_optimizer_gives_each_head_its_tasks_rate(tiny_data, tmp_path):
    trainer = trainer_with(tiny_data, tmp_path, "optimizer_per_task=false", "squad.lr=x3", "encoder_lr=x0.1")
    encoder, nli_head = sizes(trainer, "nli")
    _, squad_head = sizes(trainer, "squad")
    lrs = groups(trainer, "nli")
    assert lrs[0] == pytest.approx((0.01, encoder)) and lrs[1:] == [
        (0.1, nli_head),
        pytest.approx((0.3, squad_head)),
    ]


@pytest.mark.parametrize("schedule", ["infersent", "linear"])
def test_every_lr_schedule_keeps_the_ratios(tiny_data, tmp_path, schedule):
    keys = ["nli.lr=x0.5", "encoder_lr=x0.1", f"lr_schedule={schedule}"]
    trainer = trainer_with(tiny_data, tmp_path, *keys, *(["warmup_steps=4"] if schedule == "linear" else []))
    trainer.run.lr_schedule.before_step(2)
    trainer.run.lr_schedule.after_epoch("nli")
    trainer.run.lr_schedule.after_epoch_dev("nli", improved=False)
    encoder, head = (g["lr"] for g in trainer.run.setup.optimizers["nli"].param_groups)
    assert head == pytest.approx(5 * encoder) and encoder < 0.01


def test_a_plugins_decaying_lr_schedule_gets_max_steps_as_linear_does(tiny_data, tmp_path, monkeypatch):
    # A schedule that decays over max_steps, given without max_steps=, trained at lr ~ 0 from
    # step 1 (a total of 1 step) when only the built-in names were known to decay.
    from mtl.train.optim import lr_schedules

    class Halving(lr_schedules.ByStep):
        def factor(self, step: int, warmup: int, total: int) -> float:
            return 1.0 - 0.5 * step / total

    monkeypatch.setitem(lr_schedules.LR_SCHEDULES, "halving", Halving)
    linear = trainer_with(tiny_data, tmp_path / "linear", "lr_schedule=linear", "max_steps=none")
    halving = trainer_with(tiny_data, tmp_path / "halving", "lr_schedule=halving", "max_steps=none")
    assert halving.run.config.optim.max_steps == linear.run.config.optim.max_steps > 1  # one epoch of nli
    halving.run.lr_schedule.before_step(1)
    assert halving.run.lr_schedule.lr("nli") > 0.09  # warm-up done or not, far from 0
    assert lr_schedules.LR_SCHEDULES["constant"].needs_max_steps is False
