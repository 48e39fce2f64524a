"""Plugins: experiments/plugins/example.py registers a task kind, an encoder, a transfer task and a
callback from outside the package; a run with all four trains, resumes exactly, transfers and
reports, and a run folder never imports its plugin by itself."""

import ast
import contextlib
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from mtl import cli, plugins
from mtl.errors import UserError
from mtl.jobs.launchers import LAUNCHER_OPTIONS, LAUNCHERS
from mtl.models.encoders.base import ENCODERS, TRAITS
from mtl.runs import read_metrics
from mtl.tasks import KINDS
from mtl.train.callbacks.base import CALLBACK_OPTIONS, CALLBACKS
from mtl.train.data.scheduler import SCHEDULE_OPTIONS, SCHEDULES
from mtl.train.loop import run
from mtl.train.optim.balancers import BALANCER_OPTIONS, BALANCERS
from mtl.train.optim.optimizer_registry import DEFAULTS as OPTIMIZER_DEFAULTS
from mtl.train.optim.optimizer_registry import OPTIMIZERS
from mtl.transfer_tasks.registry import TRANSFER_TASKS

from .browser import can_look, look_at
from .conftest import FIXTURES, args_for, deterministic_summary, exported_weights, one_error_line, start_run

EXAMPLE = Path(__file__).parents[1] / "experiments" / "plugins" / "example.py"


# The plugin API a plugin written for an earlier round used, frozen: it must keep loading, training,
# resuming and transferring (the example above may grow with the API; this copy never changes).
PINNED = Path(__file__).parent / "fixtures" / "plugins" / "api_2026_11.py"


@pytest.fixture
def example():
    """The example plugin loaded as `plugins=` loads it; everything it registered removed after."""
    with loaded_plugin(EXAMPLE):
        yield EXAMPLE


@pytest.fixture(params=[EXAMPLE, PINNED], ids=["example", "pinned-2026-11"])
def each_plugin(request):
    """The example plugin, then the frozen copy of the last round's."""
    with loaded_plugin(request.param):
        yield request.param


@contextlib.contextmanager
def loaded_plugin(path: Path):
    before = {
        "kinds": dict(KINDS),
        "encoders": dict(ENCODERS),
        "traits": dict(TRAITS),
        "transfer": dict(TRANSFER_TASKS),
        "callbacks": dict(CALLBACKS),
        "callback_options": dict(CALLBACK_OPTIONS),
        "launchers": dict(LAUNCHERS),
        "launcher_options": dict(LAUNCHER_OPTIONS),
        "balancers": dict(BALANCERS),
        "balancer_options": dict(BALANCER_OPTIONS),
        "optimizers": dict(OPTIMIZERS),
        "optimizer_defaults": dict(OPTIMIZER_DEFAULTS),
        "schedules": dict(SCHEDULES),
        "schedule_options": dict(SCHEDULE_OPTIONS),
    }
    plugins.load(str(path))
    try:
        yield
    finally:
        for registry, saved in (
            (KINDS, before["kinds"]),
            (ENCODERS, before["encoders"]),
            (TRAITS, before["traits"]),
            (TRANSFER_TASKS, before["transfer"]),
            (CALLBACKS, before["callbacks"]),
            (CALLBACK_OPTIONS, before["callback_options"]),
            (LAUNCHERS, before["launchers"]),
            (LAUNCHER_OPTIONS, before["launcher_options"]),
            (BALANCERS, before["balancers"]),
            (BALANCER_OPTIONS, before["balancer_options"]),
            (OPTIMIZERS, before["optimizers"]),
            (OPTIMIZER_DEFAULTS, before["optimizer_defaults"]),
            (SCHEDULES, before["schedules"]),
            (SCHEDULE_OPTIONS, before["schedule_options"]),
        ):
            registry.clear()
            registry.update(saved)
        plugins._loaded.pop(str(path.resolve()), None)
        for name in [n for n in sys.modules if n.startswith(f"mtl_plugin_{path.stem}")]:
            sys.modules.pop(name)


PLUGIN_ARGS = (
    "tasks=nli,hypothesis_only",
    f"hypothesis_only.source={FIXTURES / 'snli_tiny'}",
    "hypothesis_only.steps=2",
    "hypothesis_only.batch=8",
    "encoder=bow_projection",
    "callbacks=loss_watch",
    "max_steps=12",
)


def test_a_run_of_every_plugin_extension_resumes_exactly_and_needs_its_plugin_again(
    each_plugin, tiny_data, tmp_path, capsys
):
    run_dir, straight = start_run(tiny_data, tmp_path / "straight", *PLUGIN_ARGS)
    assert straight["steps/hypothesis_only"] == 4 and 0 <= straight["best/hypothesis_only/test/acc"] <= 1
    record = json.loads((run_dir / "config.json").read_text())
    plugin_sha256 = hashlib.sha256(each_plugin.read_bytes()).hexdigest()
    name = each_plugin.stem
    assert record["plugins"] == [
        {"name": name, "source": str(each_plugin.resolve()), "sha256": plugin_sha256}
    ]
    assert record["metrics"]["hypothesis_only"] == {"metric": "acc", "higher_is_better": True}
    assert json.loads((run_dir / "encoder.json").read_text())["plugins"] == record["plugins"]
    watched = [json.loads(line) for line in (run_dir / "loss_watch.jsonl").read_text().splitlines()]
    assert [row["task"] for row in watched] == ["nli", "hypothesis_only"] * 2  # blocks end at 3, 5, 8, 10

    killed, _ = start_run(tiny_data, tmp_path / "killed", *PLUGIN_ARGS, killed_after=7)
    with pytest.MonkeyPatch.context() as patch:  # a process not given plugins=: the folder imports nothing
        patch.setattr(plugins, "_loaded", {})
        patch.setattr(plugins, "_installed_loaded", True)
        with pytest.raises(UserError, match=rf"made with the plugin {name}: give plugins={name}"):
            run.resume(killed, progress=False)
        assert cli.main(["train-multitask", f"resume={killed}"]) == 2
        assert f"plugins={name}" in capsys.readouterr().err
    _, resumed = run.resume(killed, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)


# fp32: DWA's weights are compared with numbers, the same with and without a CPU's native bf16
OWN_KEYS = (
    "encoder=bow_projection", "schedule=mixed", "balancer=dwa", "max_steps=8", "checkpoint_every=3",
    "precision=fp32",
)  # fmt: skip


def test_a_plugins_encoder_and_balancer_bring_keys_of_their_own(
    example, tiny_data, tmp_path, capsys, monkeypatch
):
    """`bow_activation=` and `dwa_temperature=` exist because the example registered them: given
    flat, recorded in config.json, read by the plugin's own code, resumed exactly."""
    monkeypatch.setenv(plugins.ENVIRONMENT, "")  # what main sets for plugins= is undone after the test
    run_dir, straight = start_run(
        tiny_data, tmp_path / "relu", *OWN_KEYS, "bow_activation=relu", "dwa_temperature=0.5"
    )
    record = json.loads((run_dir / "config.json").read_text())["config"]
    assert record["model"]["options"] == {"bow_activation": "relu"}
    assert record["schedule"]["balancer_options"] == {"dwa_temperature": 0.5}
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if "balance/nli/weight" in r]
    weights = [(r["balance/nli/weight"], r["balance/squad/weight"]) for r in rows]
    assert weights[:2] == [(1.0, 1.0), (1.0, 1.0)]  # DWA's first two steps: no loss ratio yet
    assert all(abs(a + b - 2) < 1e-5 for a, b in weights) and any(abs(a - 1) > 1e-3 for a, _ in weights[2:])
    # the activation is the plugin's: each run's own key reached its builder
    start_run(tiny_data, tmp_path / "tanh", *OWN_KEYS, "dwa_temperature=0.5")
    relu, tanh = exported_weights(run_dir), exported_weights(tmp_path / "tanh")
    assert any(not torch.equal(relu[k], tanh[k]) for k in relu)
    cut_dir, _ = start_run(
        tiny_data, tmp_path / "cut", *OWN_KEYS, "bow_activation=relu", "dwa_temperature=0.5", killed_after=5
    )
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    # a key of the plugin's encoder with another encoder, or out of its range: one line
    for args, message in (
        (
            ("bow_activation=relu",),
            "bow_activation=relu: unknown key for encoder=bilstm (bow_activation configures encoder=bow_projection)",
        ),
        (("schedule=mixed", "dwa_temperature=0"), "dwa_temperature=0: unknown key for balancer=sum"),
        (("schedule=mixed", "balancer=dwa", "dwa_temperature=0"), "dwa_temperature=0.0 must be positive"),
        (("encoder=bow_projection", "bow_activation=gelu"), "bow_activation='gelu' is not valid"),
    ):
        assert cli.main(["train-multitask", f"plugins={EXAMPLE}", *args, "--print-config"]) == 2
        assert message in one_error_line(capsys)
    assert cli.main(["train-multitask", f"plugins={EXAMPLE}", "--help"]) == 0
    text = capsys.readouterr().out
    assert "dwa_temperature" in text and "bow_activation" in text and "tanh | relu | identity" in text


def test_the_example_plugin_needs_nothing_of_mtl_but_its_registry():
    """One of each extension (a task, an encoder, a balancer and a schedule with keys, an
    optimizer, a transfer task, a callback with a key) written against `mtl.registry` alone, and
    the registry's parts a protocol plugin needs there too."""
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert {name for name in imported if name.split(".")[0] == "mtl"} == {"mtl.registry"}
    import mtl.registry

    assert all(getattr(mtl.registry, name) for name in mtl.registry.__all__)


def test_a_plugins_schedule_brings_a_key_of_its_own(example, tiny_data, tmp_path, capsys, monkeypatch):
    """register_schedule(options=) from the example plugin: `main_first_steps=` exists once
    schedule=main_first is chosen, is recorded, reaches the rule, resumes exactly, and given with
    another schedule is one line naming the schedule that takes it."""
    monkeypatch.setenv(plugins.ENVIRONMENT, "")
    keys = ("schedule=main_first", "main_first_steps=3", "max_steps=7")
    run_dir, straight = start_run(tiny_data, tmp_path / "run", *keys)
    record = json.loads((run_dir / "config.json").read_text())["config"]
    assert record["schedule"]["schedule_options"] == {"main_first_steps": 3}
    steps = [
        r for r in read_metrics(run_dir / "metrics.jsonl") if "phase/event" not in r and "global_step" in r
    ]
    stepped = [task for r in steps for task in ("nli", "squad") if f"{task}/train/loss" in r]
    assert stepped == ["nli", "nli", "nli", "nli", "squad", "nli", "squad"]
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *keys, killed_after=4)
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    assert cli.main(["train-multitask", f"plugins={EXAMPLE}", "main_first_steps=3", "--print-config"]) == 2
    said = one_error_line(capsys)
    assert (
        "main_first_steps=3: unknown key for schedule=blocks (main_first_steps configures schedule=main_first)"
        in said
    )


def test_a_plugins_optimizer_brings_its_defaults_and_resumes_exactly(example, tiny_data, tmp_path):
    """optim=nesterov: the example's SGD with Nesterov momentum. Its defaults are what the run's
    `auto` keys become, its momentum buffers are checkpointed, and a killed run resumes exactly."""
    extra = ("optim=nesterov", "precision=fp32")
    run_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    optim = json.loads((run_dir / "config.json").read_text())["config"]["optim"]
    assert (optim["optim"], optim["lr"], optim["max_grad_norm"], optim["lr_schedule"], optim["stop"]) == (
        "nesterov", 0.1, 5.0, "infersent", "min_lr",
    )  # fmt: skip
    saved = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    groups = [group for state in saved["optimizers"].values() for group in state["param_groups"]]
    assert groups and all(group["nesterov"] and group["momentum"] == 0.9 for group in groups)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    sgd_dir, _ = start_run(tiny_data, tmp_path / "sgd", "optim=sgd", "precision=fp32")
    nesterov, sgd = exported_weights(run_dir), exported_weights(sgd_dir)
    assert any(not torch.equal(nesterov[k], sgd[k]) for k in nesterov)  # the momentum moved them


def test_plugins_on_the_command_line_register_before_the_keys_are_checked(tmp_path, capsys):
    assert cli.main(["train-multitask", "encoder=bow_projection", "--print-config"]) == 2
    assert "is not valid: choose one of bilstm" in (err := capsys.readouterr().err) and "plugins=" in err
    assert cli.main(["train-multitask", "plugins=./no-such-plugin.py", "--help"]) == 2
    assert "plugins=./no-such-plugin.py: no such file" in capsys.readouterr().err
    assert cli.main(["train-multitask", "plugins=no_such_module_anywhere", "--help"]) == 2
    assert "no module 'no_such_module_anywhere'" in capsys.readouterr().err


def test_a_plugin_given_on_the_command_line_lists_its_names_in_help(example, capsys, monkeypatch):
    monkeypatch.setenv(plugins.ENVIRONMENT, "")  # undone after the test, with what main sets
    assert cli.main(["train-multitask", f"plugins={EXAMPLE}", "--help"]) == 0
    text = capsys.readouterr().out
    assert "bow_projection" in text
    assert os.environ[plugins.ENVIRONMENT] == str(EXAMPLE)  # passed on to torchrun's ranks and a sweep's runs


def test_a_plugin_transfer_task_is_evaluated_and_reported_with_no_other_edit(
    each_plugin, tiny_data, tmp_path, shared_data
):
    from mtl.analysis.report import ReportConfig
    from mtl.analysis.report import run as report
    from mtl.eval.transfer.suite import TransferConfig
    from mtl.eval.transfer.suite import run as transfer
    from mtl.formats.transfer_report import markdown

    run_dir, _ = start_run(tiny_data, tmp_path / "run", *PLUGIN_ARGS)
    config = TransferConfig(
        run=str(run_dir),
        tasks="SUBJ-1K",
        mode="fast",
        data=str(shared_data / "senteval" / "downstream"),
        wandb="disabled",
    )
    _, results = transfer(config)
    assert results["results"]["SUBJ-1K"]["ntest"] == 1000
    assert "SUBJ-1K" in markdown(results) and "SUBJ-1K" in (run_dir / "transfer-fast.json").read_text()
    page = report([str(run_dir)], ReportConfig(out=str(tmp_path / "report.html"))).read_text()
    assert "SUBJ-1K (fast)" in page
    assert "SNLI hypothesis only" in page


def test_a_registry_lists_its_builtin_names_without_importing_them(tmp_path, monkeypatch):
    (tmp_path / "registry_holder.py").write_text(
        "from mtl.plugins import Registry\nNAMES = Registry({'lazy': 'lazy_entry'})\n"
    )
    (tmp_path / "lazy_entry.py").write_text(
        "from mtl.plugins import adds_to\nfrom registry_holder import NAMES\nadds_to(NAMES, 'lazy')('the entry')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("registry_holder", "lazy_entry"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    names = importlib.import_module("registry_holder").NAMES
    assert list(names) == ["lazy"] and "lazy" in names and names.loaded() == {}
    assert "lazy_entry" not in sys.modules
    assert names["lazy"] == "the entry" and "lazy_entry" in sys.modules
    names["added"] = "by a plugin"
    assert list(names) == ["lazy", "added"] and len(names) == 2
    assert names.loaded() == {"lazy": "the entry", "added": "by a plugin"}


def test_a_plugin_is_its_file_and_content_not_its_name(tmp_path, monkeypatch):
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(plugins, "_installed_loaded", True)
    for folder, text in (("a", "A = 1\n"), ("b", "B = 2\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "example.py").write_text(text)
    first, second = tmp_path / "a" / "example.py", tmp_path / "b" / "example.py"
    assert plugins.load(f"{first},{second}") == ["example", "example"]  # the second is not dropped
    assert {p["source"] for p in plugins.records()} == {str(first.resolve()), str(second.resolve())}
    made_with_first = [plugins.records()[0]]
    monkeypatch.setattr(plugins, "_loaded", {})
    plugins.load(str(second))
    with pytest.raises(
        UserError, match=r"made with the plugin example of content \w{12} .*give the file it was made"
    ):
        plugins.require(made_with_first, "run runs/x")
    moved = tmp_path / "moved.py"
    moved.write_text(first.read_text())
    monkeypatch.setattr(plugins, "_loaded", {})
    plugins.load(str(moved))
    plugins.require([{**made_with_first[0], "name": "moved"}], "run runs/x")  # the same content elsewhere
    with pytest.raises(UserError, match=r"records its plugins damaged"):
        plugins.require(["example", 3], "run runs/x")


def test_a_run_record_whose_plugins_are_text_is_one_line(tiny_data, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=4)
    record = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**record, "plugins": "example"}))
    assert cli.main(["train-multitask", f"resume={run_dir}"]) == 2
    assert "config.json, plugins: Input should be a valid list" in capsys.readouterr().err


def test_a_broken_installed_plugin_is_one_warning_and_every_command_still_works(
    tmp_path, monkeypatch, capsys
):
    info = tmp_path / "broken_mtl_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-mtl-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mtl.plugins]\nbroken = no_such_module_for_mtl\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_installed_loaded", False)
    monkeypatch.setenv(plugins.ENVIRONMENT, "")
    assert cli.main(["train-multitask", "--help"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: the mtl plugin 'broken' of broken-mtl-plugin cannot be loaded (ModuleNotFoundError" in err
    )
    assert len(err.strip().splitlines()) == 1


LAUNCHER_PLUGIN = Path(__file__).parent / "fixtures" / "plugins" / "launcher_in_order.py"


def test_a_launcher_from_a_plugin_trains_a_study_with_its_own_key(tiny_data, tmp_path, capsys):
    """register_launcher from a plugin that imports only mtl.registry: launcher=in_order and its
    key in_order_reversed=true are the study's, its runs finish as launcher=local's do; the key
    given with another launcher is one line naming its owner."""
    base = [a for a in args_for(tiny_data, tmp_path) if not a.startswith("out=")]
    out = tmp_path / "study"
    with loaded_plugin(LAUNCHER_PLUGIN):
        keys = ["sweep", *base, "steps_nli=2,3", f"out={out}", "launcher=in_order", "in_order_reversed=true"]
        assert cli.main(keys) == 0
        assert (out / "in_order.txt").read_text().split() == ["steps_nli3", "steps_nli2"]
        for name in ("steps_nli2", "steps_nli3"):
            assert json.loads((out / name / "summary.json").read_text())["global_step"] == 10
        assert json.loads((out / "sweep.json").read_text())["launcher"] == "in_order"
        capsys.readouterr()
        assert (
            cli.main(["sweep", *base, "steps_nli=2,3", f"out={tmp_path / 'b'}", "in_order_reversed=true"])
            == 2
        )
        assert one_error_line(capsys) == (
            "error: in_order_reversed=true: a key of launcher=in_order, not of launcher=local"
        )
    assert "in_order" not in LAUNCHERS


def test_a_registry_refuses_a_name_already_taken():
    """register_launcher("local") from a plugin once silently replaced mtl's own launcher (every
    register_* overwrote by name): now one line; the same definition entered again is no clash."""
    from mtl.errors import UserError
    from mtl.jobs.launchers import LAUNCHERS
    from mtl.registry import register_launcher, register_schedule

    def local(config):  # a plugin's launcher under mtl's name
        return None

    with pytest.raises(
        UserError, match=r"'local' is taken \(by mtl\.jobs\.launchers.*register it under a name of its own"
    ):
        register_launcher("local")(local)
    assert LAUNCHERS["local"] is not local

    def mine(config):
        return None

    try:
        assert register_launcher("mine-once")(mine) is mine
        assert register_launcher("mine-once")(mine) is mine  # the same definition again

        def other(config):
            return None

        with pytest.raises(UserError, match="'mine-once' is taken"):
            register_launcher("mine-once")(other)
    finally:
        del LAUNCHERS["mine-once"]
    with pytest.raises(UserError, match="'blocks' is taken"):
        register_schedule("blocks")(type("Blocks", (), {}))


def test_a_plugin_package_is_identified_by_all_its_modules(tmp_path, monkeypatch):
    """A package was identified by its __init__.py alone: a changed module kept its hash."""
    package = tmp_path / "pkgplugin"
    package.mkdir()
    (package / "__init__.py").write_text("from . import part\n")
    (package / "part.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = plugins._package_sha256(package)
    (package / "part.py").write_text("X = 2\n")
    assert plugins._package_sha256(package) != first
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.delitem(sys.modules, "pkgplugin", raising=False)
    monkeypatch.delitem(sys.modules, "pkgplugin.part", raising=False)
    loaded = plugins._import("pkgplugin", "pkgplugin", "pkgplugin")
    assert loaded.sha256 == plugins._package_sha256(package)
    plugins._loaded["pkgplugin"] = loaded  # a run of before 2026-12-02 recorded __init__.py's hash
    old = {"name": "pkgplugin", "source": "pkgplugin", "sha256": loaded.init_sha256}
    plugins.require([old], "an older run")  # still readable


STUDY_PLUGIN = Path(__file__).parent / "fixtures" / "plugins" / "study_depth.py"


def test_a_study_from_one_plugin_file_trains_its_arms_and_judges_them(tiny_data, senteval, tmp_path, capsys):
    """A new study is one file that imports only mtl.registry (register_study): `just study depth`
    trains both arms with every seed at equal compute (each member carries its arm and seed),
    judges the other arm against the baseline with compare's verdicts, writes its record, and
    resumes without retraining; a key its arms set is refused in one line."""
    from mtl.studies.study import STUDIES

    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(STUDY_PLUGIN.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert {name for name in imported if name.startswith("mtl")} == {"mtl.registry"}
    out = tmp_path / "depth"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps=", "hidden="))]
    command = [
        "study", "depth", f"plugins={STUDY_PLUGIN}", *train, "budget=steps:3", "seeds=2", "depth_hidden=6",
        "transfer_tasks=MR", f"transfer_data={senteval}", f"out={out}",
    ]  # fmt: skip
    try:
        assert cli.main(command) == 0, capsys.readouterr().err
        result = json.loads((out / "depth.json").read_text())
        assert result["baseline"] == "one" and {a: r["seeds"] for a, r in result["arms"].items()} == {
            "one": 2,
            "two": 2,
        }
        assert sorted(result["runs"]) == ["one-seed1", "one-seed2", "two-seed1", "two-seed2"]
        config = json.loads((out / "arms" / "two-seed2" / "config.json").read_text())["config"]
        assert config["model"]["encoder"] == "bilstm2" and config["model"]["hidden"] == 6
        assert config["run"]["seed"] == 2 and config["optim"]["max_steps"] == 3
        assert [(r["task"], r["arm"]) for r in result["verdicts"]] == [("MR", "two")]
        assert result["verdicts"][0]["verdict"] in ("beats one", "below one", "no evidence")
        assert "| MR | two |" in (out / "depth.md").read_text()
        page = (out / "depth.html").read_text()  # the base's page: its forest, arms and verdicts
        assert "<td>MR</td><td>two</td>" in page and "<td>one</td><td>2</td>" in page
        if can_look():
            assert not (problems := look_at(out / "depth.html", "study depth")), problems
        trained = (out / "arms" / "one-seed1" / "summary.json").stat().st_mtime_ns
        capsys.readouterr()
        assert cli.main(command) == 0  # again: every run is finished, none trains again
        assert (out / "arms" / "one-seed1" / "summary.json").stat().st_mtime_ns == trained
        assert cli.main([*command[:-1], f"out={tmp_path / 'other'}", "hidden=4"]) == 2
        assert one_error_line(capsys) == "error: hidden=4: study depth sets it for each arm"
    finally:
        STUDIES.pop("depth", None)


def test_a_study_must_name_itself_as_a_file_can_be_named():
    """A study's name names its record files (<out>/<name>.md): a path in it is refused."""
    from mtl.registry import Study, register_study

    class Escaping(Study):
        name, summary, baseline = "../../escape", "a study whose name is a path", "a"

    with pytest.raises(UserError, match=r"name='../../escape' must be lowercase letters, digits"):
        register_study(Escaping)
