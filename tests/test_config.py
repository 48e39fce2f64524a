import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest
import torch

from mtl.cli import COMMANDS, main
from mtl.config import Range, apply_overrides, as_name, describe_keys, read_number, read_numbers, to_dict
from mtl.errors import UserError
from mtl.models.encoders.config import HFOptions, TransformerOptions
from mtl.studies.versus import budget_amount
from mtl.tasks import config_classes
from mtl.tasks.matryoshka import matryoshka_widths
from mtl.train.config.train_config import TrainConfig
from mtl.train.loop.selection import parse_terms

from .conftest import (
    one_error_line,
    train_cli,
)


@dataclass
class Optim:
    lr: float = 0.1
    name: Literal["sgd", "adam"] = "sgd"


@dataclass
class Schedule:
    steps_nli: int = 1000
    steps_squad: int = 500

    def __post_init__(self):
        if self.steps_nli == 0 and self.steps_squad == 0:
            raise UserError(f"steps_nli={self.steps_nli} and steps_squad={self.steps_squad} cannot both be 0")


@dataclass
class Config:
    optim: Optim = field(default_factory=Optim)
    schedule: Schedule = field(default_factory=Schedule)
    seed: int = 1
    out: str | None = None
    overwrite: bool = False


def test_flat_and_dotted_keys_are_typed():
    config = apply_overrides(Config(), ["lr=0.5", "schedule.steps_squad=7", "overwrite=true", "out=none"])
    assert config.optim.lr == 0.5
    assert config.schedule.steps_squad == 7
    assert config.overwrite is True
    assert config.out is None


def test_defaults_are_not_mutated():
    default = Config()
    apply_overrides(default, ["lr=0.5"])
    assert default.optim.lr == 0.1


def test_unknown_key_suggests_the_closest():
    with pytest.raises(UserError, match="unknown key 'step_nli': did you mean 'steps_nli'"):
        apply_overrides(Config(), ["step_nli=3"])


def test_unknown_key_without_close_match_points_at_help_not_a_wall_of_keys():
    with pytest.raises(UserError, match=r"^unknown key 'zzzzzz': no key is near it; --help lists all \d+$"):
        apply_overrides(Config(), ["zzzzzz=3"])


def test_wrong_types_and_choices_are_named():
    with pytest.raises(UserError, match=r"seed='x' is not an integer"):
        apply_overrides(Config(), ["seed=x"])
    with pytest.raises(UserError, match=r"name='sgdd' is not valid: choose one of sgd, adam"):
        apply_overrides(Config(), ["name=sgdd"])
    with pytest.raises(UserError, match=r"overwrite='maybe' is not a boolean"):
        apply_overrides(Config(), ["overwrite=maybe"])
    with pytest.raises(UserError, match=r"argument 'seed' has no value: give seed=<value>"):
        apply_overrides(Config(), ["seed"])
    with pytest.raises(UserError, match="not of the form key=value"):
        apply_overrides(Config(), ["--seed"])


def test_rules_between_fields_run_after_overrides():
    with pytest.raises(UserError, match="steps_nli=0 and steps_squad=0 cannot both be 0"):
        apply_overrides(Config(), ["steps_nli=0", "steps_squad=0"])
    assert apply_overrides(Config(), ["steps_nli=0"]).schedule.steps_nli == 0


@pytest.mark.parametrize(
    "args", [["lr=0.5", "lr=0.1"], ["lr=0.5", "optim.lr=0.1"], ["steps_squad=7", "schedule.steps_squad=7"]]
)
def test_a_key_given_twice_is_refused_naming_both(args):
    with pytest.raises(UserError, match=f"{re.escape(args[0])} and {re.escape(args[1])} set the same key"):
        apply_overrides(Config(), args)


@pytest.mark.parametrize(
    "arg, message",
    [
        (
            "steps_squad=100000000000000000000",
            "steps_squad=100000000000000000000 is too large: it must fit in 64 bits",
        ),
        ("lr=1e308", "lr=1e\\+308 is too large: it must fit in float32"),
    ],
)
def test_numbers_beyond_what_torch_and_numpy_hold_are_refused(arg, message):
    with pytest.raises(UserError, match=message):
        apply_overrides(Config(), [arg])


def test_a_gpu_run_checkpoints_and_logs_wandb_rows_at_longer_step_intervals():

    from mtl.train.config.resolve import resolve_settings
    from mtl.train.config.train_config import TrainConfig, with_overrides

    config = TrainConfig()
    sizes = dict.fromkeys(config.tasks, 1000)
    cpu = resolve_settings(config, torch.device("cpu"), sizes).run
    gpu = resolve_settings(config, torch.device("cuda"), sizes).run  # resolving needs no GPU
    assert (cpu.checkpoint_every, cpu.wandb_every) == (500, 1)
    assert (gpu.checkpoint_every, gpu.wandb_every) == (5000, 10)
    given = resolve_settings(
        with_overrides(config, ["checkpoint_every=7", "wandb_every=3"]), torch.device("cuda"), sizes
    )
    assert (given.run.checkpoint_every, given.run.wandb_every) == (7, 3)


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("max_grad_norm=-1", r"max_grad_norm=-1.0 must be 0 or more \(or none\)"),
        ("lr=nan", "lr=nan must be a finite number"),
        ("schedule=temperature temperature=nan", "temperature=nan must be a finite number"),
        ("lr=inf", "lr=inf must be a finite number"),
        ("seed=-1", "seed=-1 must be 0 or more"),
        ("eval_batch=0", "eval_batch=0 must be 1 or more"),
        ("batch_nli=0", "nli.batch=0 must be 1 or more"),
        ("dropout=1", r"dropout=1.0 must be in \[0, 1\)"),
        ("adam_patience=0", "patience=0 must be 1 or more"),
    ],
)
def test_senseless_training_settings_are_refused(tiny_data, tmp_path, capsys, arg, message):
    assert train_cli(tiny_data, tmp_path / "run", *arg.split()) == 2
    assert re.fullmatch(f"error: {message}", one_error_line(capsys))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_float_key_of_every_command_refuses_non_finite_values(command):
    from mtl.config import _paths, apply_overrides

    config = COMMANDS[command].config_class()()
    floats = [
        path
        for path, owner, field in _paths(config)
        if float in typing.get_args(typing.get_type_hints(type(owner))[field.name])
        or typing.get_type_hints(type(owner))[field.name] is float
    ]
    for path in floats:
        for value in ("nan", "inf", "-inf"):
            with pytest.raises(UserError, match="must be a finite number"):
                apply_overrides(config, [f"{path}={value}"])


@pytest.mark.parametrize(
    ("args", "message"), [(["tasks="], "tasks='' names no task"), (["tasks=,"], "tasks=',' names no task")]
)
def test_transfer_refuses_senseless_settings(capsys, args, message):
    assert main(["transfer", "baseline=glove-bow", *args]) == 2
    assert one_error_line(capsys).startswith(f"error: {message}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hidden = [1\n", r"preset file .*broken.toml is not valid TOML"),
        ("hiden = 8\n", r"preset file .*broken.toml: unknown key 'hiden': did you mean 'hidden'\?"),
        ("[nli]\nsteps = [8]\n", r"preset file .*broken.toml: 'nli' must hold plain key = value pairs"),
    ],
)
def test_a_broken_preset_names_its_file(tiny_data, tmp_path, capsys, monkeypatch, text, message):
    from mtl.train.config import presets

    monkeypatch.setattr(presets, "preset_dir", lambda: tmp_path)
    (tmp_path / "broken.toml").write_text(text)
    assert train_cli(tiny_data, tmp_path / "run", "preset=broken") == 2
    assert re.match(f"error: {message}", one_error_line(capsys))


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "..", ".", "", "x y", "/abs"])
def test_a_name_is_never_a_path(name):
    with pytest.raises(
        UserError, match=r"is not a name: use letters, digits.*to choose the folder, use out="
    ):
        apply_overrides(TrainConfig(), [f"name={name}"])


def test_a_value_made_a_name_stays_one_folder():
    assert as_name("vectors/data/glove.6B.50d.txt") == "vectors_data_glove.6B.50d.txt"
    assert as_name("tasksnli+squad") == "tasksnli+squad"
    assert as_name("..") == "__"


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (
            lambda: parse_terms("nli/dev/acc:1e308,squad/dev/acc:1e308"),
            r"select=.*the weight of nli/dev/acc, 1e308, is too large: it must fit in float32",
        ),
        (
            lambda: apply_overrides(
                TrainConfig(), ["schedule=proportional", "nli.prob=0.2", "squad.prob=0.2"]
            ),
            r"nli.prob=0.2 squad.prob=0.2 add up to 0.4: every task has a share, so they must add up to 1",
        ),
        (lambda: budget_amount("steps:inf"), r"budget=steps:inf: inf must be a finite number"),
        (lambda: budget_amount("steps:0.5"), r"budget=steps:0.5: 0.5 is not a whole number"),
        (lambda: budget_amount("minutes:inf"), r"budget=minutes:inf: inf must be a finite number"),
        (lambda: budget_amount("examples:0"), r"budget=examples:0: 0 must be 1 or more"),
        (
            lambda: matryoshka_widths(
                config_classes()["nli"](matryoshka="8,4", matryoshka_weights="1,nan"), "nli", 16
            ),
            r"nli.matryoshka_weights=1,nan: nan must be a finite number",
        ),
        (lambda: apply_overrides(TrainConfig(), ["nli.lr=x1e308"]), r"nli.lr=x1e308: give a learning rate"),
    ],
)
def test_every_number_a_command_reads_is_checked_in_one_place(read, message):
    with pytest.raises(UserError, match=message):
        read()


def test_a_number_is_read_as_its_key_needs():
    assert read_number("k", "6e2", int, Range(1)) == 600
    assert read_numbers("k", "1, 0.5", float) == [1.0, 0.5]
    assert budget_amount("minutes:2.5") == ("minutes", 2.5)
    for text, message in [("1e39", "too large"), ("nan", "finite"), ("x", "not a number")]:
        with pytest.raises(UserError, match=f"k={text} .*{message}|k={text} is {message}"):
            read_number("k", text)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["transformer_heads=4"],
            "transformer_heads=4: unknown key for encoder=bilstm (transformer_heads configures encoder=transformer)",
        ),
        (
            ["encoder=gru", "max_seq_length=64"],
            "max_seq_length=64: unknown key for encoder=gru (max_seq_length configures encoder=hf)",
        ),
        (
            ["model.gatedconv_layers=2", "encoder=bow"],
            "unknown key for encoder=bow (gatedconv_layers configures encoder=gatedconv)",
        ),
        (
            ["schedule=mixed", "gradnorm_alpha=2"],
            "gradnorm_alpha=2: unknown key for balancer=sum (gradnorm_alpha configures balancer=gradnorm)",
        ),
        (
            ["optim=sgd", "weight_decay=0.1"],
            "weight_decay=0.1: unknown key for optim=sgd (weight_decay configures optim=adamw)",
        ),
        (  # optim=auto is InferSent's SGD for a BiLSTM: judged as it will resolve
            ["hf_lr=1e-5"],
            "hf_lr=1e-5: unknown key for optim=auto, sgd here (hf_lr configures optim=adamw)",
        ),
        (
            ["optim=adam", "lr_decay=0.5"],
            "lr_decay=0.5: unknown key for lr_schedule=auto, constant here (lr_decay configures lr_schedule=infersent)",
        ),
        (
            ["optim.warmup_steps=10", "lr_schedule=infersent"],
            "unknown key for lr_schedule=infersent (warmup_steps configures lr_schedule=constant or "
            "lr_schedule=linear or lr_schedule=cosine)",
        ),
    ],
)
def test_a_key_of_another_component_is_refused_by_its_declaration(args, message):
    from mtl.train.config.train_config import with_overrides

    with pytest.raises(UserError, match=re.escape(message)):
        with_overrides(TrainConfig(), args)


def test_a_components_own_keys_pass_and_a_plugin_brings_keys_of_its_own():
    from mtl.config import NoOptions
    from mtl.train.config.train_config import with_overrides
    from mtl.train.optim.balancers import BALANCER_OPTIONS, BALANCERS, register_balancer

    for args in (
        ["encoder=transformer", "transformer_heads=2", "hidden=8"],
        ["transformer_heads=2", "encoder=transformer", "hidden=8"],  # in any order
        ["schedule=mixed", "balancer=gradnorm", "gradnorm_alpha=2"],
        ["gradnorm_alpha=2", "balancer=gradnorm", "schedule=mixed"],
        ["optim=adamw", "weight_decay=0.1", "hf_lr=1e-5", "warmup_steps=10"],  # adamw's linear schedule
        ["encoder=hf", "weight_decay=0", "warmup_steps=0"],  # auto: adamw for a pretrained encoder
        ["lr_decay=0.9", "lr_shrink=2", "lr_shrink_at=evaluation"],  # auto: sgd's infersent
        ["optim=adam", "lr_schedule=cosine", "warmup_steps=3"],
    ):
        with_overrides(TrainConfig(), args)

    @dataclass
    class VariantOptions:
        variant_beta: Annotated[float, Range(0, 1)] = 0.9  # balancer=variant: a hyperparameter

    before = dict(BALANCER_OPTIONS)
    try:
        register_balancer("variant", options=VariantOptions)(type("Variant", (), {}))
        config = with_overrides(TrainConfig(), ["schedule=mixed", "balancer=variant", "variant_beta=0.5"])
        assert config.schedule.balancer_options == VariantOptions(0.5)
        assert to_dict(config)["schedule"]["balancer_options"] == {"variant_beta": 0.5}
        assert with_overrides(config, ["max_steps=5"]).schedule.balancer_options == VariantOptions(0.5)
        defaults = with_overrides(TrainConfig(), ["schedule=mixed", "balancer=variant"])
        assert defaults.schedule.balancer_options == VariantOptions(0.9)  # recorded with its default
        assert isinstance(with_overrides(config, ["balancer=sum"]).schedule.balancer_options, NoOptions)
        with pytest.raises(UserError, match=re.escape("variant_beta=2.0 must be in [0, 1]")):
            with_overrides(TrainConfig(), ["schedule=mixed", "balancer=variant", "variant_beta=2"])
        with pytest.raises(
            UserError,
            match=re.escape("unknown key for balancer=gradnorm (variant_beta configures balancer=variant)"),
        ):
            with_overrides(TrainConfig(), ["schedule=mixed", "balancer=gradnorm", "variant_beta=0.5"])
        rows = {key: (default, text) for key, default, text in describe_keys(TrainConfig())}
        assert rows["variant_beta"] == ("0.9", "balancer=variant: a hyperparameter")
        assert rows["gradnorm_alpha"][1].startswith("balancer=gradnorm: how strongly")
    finally:
        BALANCERS.pop("variant", None)
        BALANCER_OPTIONS.clear()
        BALANCER_OPTIONS.update(before)
    with pytest.raises(TypeError, match="a dataclass of its keys"):
        register_balancer("broken", options=dict)


def test_a_run_recorded_before_balancers_had_keys_of_their_own_reads_as_it_ran():
    from mtl.train.config.train_config import recorded_config, with_overrides

    old = to_dict(TrainConfig())
    old["schedule"].pop("balancer_options")
    old["schedule"] |= {"schedule": "mixed", "balancer": "gradnorm", "gradnorm_alpha": 0.5}
    assert recorded_config(old, "config.json").schedule.balancer_options.gradnorm_alpha == 0.5
    old["schedule"] |= {"balancer": "pcgrad", "gradnorm_alpha": 1.5}  # every run recorded it; unused
    assert to_dict(recorded_config(old, "config.json"))["schedule"]["balancer_options"] == {}
    del old["model"]["options"]  # and before encoders had keys of their own
    assert recorded_config(old, "config.json").model == TrainConfig().model

    # an encoder's own keys move to model.options: the run's encoder keeps them, the others' go
    old["model"] |= {
        "encoder": "transformer",
        "hidden": 8,
        "transformer_heads": 2,
        "gru_init": "quickthoughts",
    }
    model = recorded_config(old, "config.json").model
    assert model.options == TransformerOptions(transformer_heads=2)
    assert "gru_init" not in to_dict(model) and "gru_init" not in to_dict(model)["options"]
    # so do encoder=hf's ten (every run recorded them in model, hf_model null for the others)
    hf_keys = {"hf_model": "minilm", "max_seq_length": 64, "lora_r": 4, "compile": False}
    old["model"] |= {"encoder": "hf", "pooling": "mean", **hf_keys}
    model = recorded_config(old, "config.json").model
    assert model.options == HFOptions(**hf_keys)
    assert not set(hf_keys) & set(to_dict(model)) and "transformer_heads" not in to_dict(model)["options"]
    old["model"] |= {"encoder": "bilstm", "pooling": "max"}
    assert to_dict(recorded_config(old, "config.json").model)["options"] == {}
    # a recorded config holds every key: applying other keys to it checks only those given
    recorded = with_overrides(TrainConfig(), ["encoder=transformer", "transformer_heads=2", "hidden=8"])
    assert with_overrides(recorded, ["max_steps=5"]).model.options.transformer_heads == 2


def test_a_whole_number_below_one_is_not_called_too_large():
    from mtl.config import parse_int

    with pytest.raises(UserError, match="^k=1e-50 is not a whole number$"):  # once "too large"
        parse_int("1e-50", "k=1e-50")
    assert parse_int("0e-50", "k") == 0 and parse_int("6e2", "k") == 600


def test_a_run_recorded_before_schedules_had_keys_of_their_own_reads_as_it_ran():
    """Before schedules declared options every run recorded ten flat schedule keys; the chosen
    schedule's move into schedule.schedule_options, the others' (which did nothing) are dropped."""
    from mtl.train.config.train_config import recorded_config

    flat = {
        "temperature": 3.0, "temperature_end": None, "cap": 500, "mix_every": 7, "mix_eta": None,
        "mix_batches": 2, "mix_smoothing": 0.01, "mix_reference": "runs/ref", "mix_normalize": "abs",
        "mix_target": "",
    }  # fmt: skip
    old = to_dict(TrainConfig())
    old["schedule"].pop("schedule_options")
    old["schedule"] |= {"schedule": "temperature", **flat}
    own = recorded_config(old, "config.json").schedule.schedule_options
    assert (own.temperature, own.cap, own.temperature_end) == (3.0, 500, None)
    old["schedule"] |= {"schedule": "doremi"}
    own = recorded_config(old, "config.json").schedule.schedule_options
    assert (own.mix_every, own.mix_smoothing, own.mix_reference) == (7, 0.01, "runs/ref")
    old["schedule"] |= {"schedule": "blocks"}
    assert to_dict(recorded_config(old, "config.json"))["schedule"]["schedule_options"] == {}


def test_a_schedules_keys_are_typed_flat_and_refused_with_another_schedule():
    from mtl.train.config.train_config import with_overrides

    config = with_overrides(TrainConfig(), ["schedule=temperature", "temperature=3", "cap=100"])
    assert (config.schedule.schedule_options.temperature, config.schedule.schedule_options.cap) == (3.0, 100)
    with pytest.raises(UserError, match=r"cap=100: unknown key for schedule=blocks \(cap configures"):
        with_overrides(TrainConfig(), ["cap=100"])
    with pytest.raises(UserError, match="mix_every=5: unknown key for schedule=temperature"):
        with_overrides(TrainConfig(), ["schedule=temperature", "mix_every=5"])


def test_a_key_several_components_share_is_listed_once():
    """cap= is proportional's and temperature's, mix_every= each online schedule's: --help lists
    each key once (it listed mix_every three times)."""
    from mtl.train.config.train_config import TrainConfig as Config

    names = [row[0] for row in describe_keys(Config())]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert {"cap", "mix_every", "temperature", "first_stage"} <= set(names)
