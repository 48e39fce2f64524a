"""`just sweep`: a grid of training runs in one W&B group, one after another or `parallel=N` at once
on this machine, or as one SLURM job array (`launcher=slurm`, mtl/jobs/slurm.py).

    just sweep fig2 preset=cpu-small max_steps=600       # experiments/sweeps/fig2.toml, CPU-sized
    just sweep steps_nli=250,500,1000 steps_squad=500 preset=cpu-small sweep=nli-ratio
    just sweep lr=1e-3,3e-4 preset=cpu-small seeds=3        # each value trained with seeds 1, 2, 3

A key with comma-separated values is an axis of the grid; a named sweep's file gives its
axes as lists and its fixed keys as plain values, and later keys override it. Each member
trains in `<out>/<member>` (out: runs/sweeps/<sweep>) as its own `train-multitask` process.
Running the sweep again skips finished members, resumes interrupted ones and starts the rest.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.config import as_name, check_name, comma_list, paths_and_keys, to_dict
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.files.atomic import check_output_dir
from mtl.files.locks import FolderLock

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.jobs.configs import SweepConfig as SweepConfig
from mtl.jobs.launchers import Launcher, check_outcomes, is_launcher_key, launcher_from
from mtl.jobs.local import LocalLauncher
from mtl.jobs.member import Member
from mtl.jobs.seeds import seed_list
from mtl.runs import RunFolder, read_summary
from mtl.train.config.command_line import config_from_args, config_from_command
from mtl.train.config.presets import preset_dir, preset_name

SHELL_KEYS = ("slurm.setup", "slurm.extra")  # text a SLURM job runs, or passes to sbatch, as is
SWEEP_KEYS = (
    "sweep",
    "out",
    "seeds",
)  # the sweep's own keys (and the launcher's); the rest go to every member


@dataclass
class Sweep:
    name: str
    axes: dict[str, list[str]]
    fixed: list[str]
    out: Path
    launcher: Launcher = field(default_factory=LocalLauncher)

    def members(self) -> list[Member]:
        members = []
        named: dict[str, str] = {}  # member name -> the values that made it
        for values in itertools.product(*self.axes.values()):
            chosen = dict(zip(self.axes, values, strict=True))
            # a value may be a path (vectors=/data/a.txt): its member's folder is still one name
            name = as_name("-".join(f"{key}{value}" for key, value in chosen.items())) or self.name
            given = " ".join(f"{key}={value}" for key, value in chosen.items())
            if name in named:  # two members in one folder would train over each other
                raise UserError(
                    f"{named[name]} and {given} make the same run folder name ({name}): give values that "
                    "differ in letters or digits, not only in '/' or other characters a name cannot hold"
                )
            named[name] = given
            run_dir = self.out / name
            overrides = [
                *self.fixed,
                *(f"{key}={value}" for key, value in chosen.items()),
                f"name={name}",
                f"group={self.name}",
                f"out={run_dir}",
            ]
            members.append(Member(name, overrides, run_dir))
        return members


def sweep_dir() -> Path:
    return preset_dir() / "sweeps"


def sweep_names() -> list[str]:
    return sorted(path.stem for path in sweep_dir().glob("*.toml"))


def parse(args: list[str]) -> Sweep:
    """A named sweep (its file first, then `args`) or a sweep made of `args` alone."""
    named, keys = paths_and_keys(args)
    if len(named) > 1:
        raise UserError(f"one sweep at a time, not {' and '.join(named)}")
    pairs: list[tuple[str, str]] = []
    if named:
        pairs += _sweep_file(named[0])
        # A sweep file travels between colleagues: the keys that put shell text into every job
        # come from the command line only, where the person submitting typed them.
        if runs_shell := [key for key, _ in pairs if key in SHELL_KEYS]:
            raise UserError(
                f"sweep file {named[0]} sets {runs_shell[0]}, which runs its text in every job: a sweep "
                f"file may not; give {runs_shell[0]}= on the command line, where you see it"
            )
    # A key the sweep file sweeps stays an axis when the command line gives it one value: the
    # sweep shrinks to those members (`just sweep objectives tasks=nli+squad`), it does not vanish.
    file_axes = {key for key, value in pairs if "," in value}
    pairs += [tuple(a.split("=", 1)) for a in keys]  # type: ignore[misc]
    settings: dict[str, str] = {}
    axes: dict[str, list[str]] = {}
    fixed: dict[str, str] = {}
    launcher_keys: list[str] = []
    for key, value in pairs:
        if key in SWEEP_KEYS:
            settings[key] = value
        elif is_launcher_key(key):
            launcher_keys.append(f"{key}={value}")
        elif "," in value or key in file_axes:
            axes[key] = comma_list(value)
            if repeated := sorted({v for v in axes[key] if axes[key].count(v) > 1}):
                raise UserError(
                    f"{key}={value} names {repeated[0]} twice: each value makes one run folder, give it once"
                )
            fixed.pop(key, None)
        else:
            fixed[key] = value
            axes.pop(key, None)
    if "seeds" in settings:  # the seed axis: seeds=K, or seed=1,2,3 given as a list
        listed = ",".join(axes.pop("seed", [])) or fixed.pop("seed", None)
        axes["seed"] = [str(seed) for seed in seed_list(settings["seeds"], listed)]
    if not axes:
        raise UserError("a sweep needs an axis: a key with several values, e.g. steps_nli=250,500,1000")
    if taken := [key for key in ("name", "group", "resume") if key in fixed or key in axes]:
        raise UserError(f"{taken[0]}= is set by the sweep for each member: leave it out")
    if "sweep" in settings:
        name = check_name("sweep", settings["sweep"])
    else:
        name = as_name(preset_name(named[0])) if named else "sweep"
    launcher = launcher_from(launcher_keys)
    out = check_output_dir(Path(settings.get("out") or Path("runs") / "sweeps" / name), "out")
    return Sweep(name, axes, [f"{k}={v}" for k, v in fixed.items()], out, launcher)


def _sweep_file(name: str) -> list[tuple[str, str]]:
    """The keys of a sweep in experiments/sweeps/, or of the TOML file `name` names (`./mine.toml`)."""
    path = Path(name).expanduser() if name.endswith(".toml") or "/" in name else sweep_dir() / f"{name}.toml"
    if path.parent != sweep_dir() and not path.is_file():
        raise UserError(f"sweep file {path} does not exist: give a TOML file of key = [values] lines")
    if not path.is_file():
        choices = ", ".join(sweep_names()) or "none"
        raise UserError(f"unknown sweep {name!r}: choose one of {choices}, or give key=v1,v2 axes")
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"sweep file {path} is not valid TOML ({error}): fix it") from None
    return [
        (key, ",".join(_text(v) for v in value) if isinstance(value, list) else _text(value))
        for key, value in values.items()
    ]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def run(sweep: Sweep) -> dict[str, str]:
    """Train every member that has not finished; return each member's outcome."""
    members = sweep.members()
    for member in members:  # a wrong key or value stops the sweep before any run starts
        config_from_args(member.overrides)
    with FolderLock(sweep.out, "sweep folder", "out"):
        check_same_fixed_keys(sweep, members)
        return train_members(sweep, members)


def train_study(members: list[Member], fixed: list[str], out: Path, launcher: Launcher, what: str) -> None:
    """Every run of a study trained (each resumed where it stopped, a finished one never again) in
    `out`, whose `fixed` keys (the budget among them) a folder trained before must share; one
    line naming the runs that failed."""
    sweep = Sweep(out.name, {}, fixed, out, launcher)
    with FolderLock(out, f"{what} folder", "out"):
        check_same_fixed_keys(sweep, members)
        outcomes = train_members(sweep, members)
    check_outcomes(outcomes)


def check_same_fixed_keys(sweep: Sweep, members: list[Member]) -> None:
    """Refuse to reuse members that an earlier run of this sweep trained with other fixed keys.

    A member's folder is named by its axis values only, so after a change of a fixed key
    (`max_steps=600` -> `1200`) its old results would be reported as this sweep's.
    """
    path = sweep.out / "sweep.json"
    if not path.is_file() or not any(m.run_dir.exists() for m in members):
        return
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
        old = before["fixed"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        raise UserError(f"{path} is damaged: remove it or choose another out= for this sweep") from None
    if changed := sorted(_result_keys(old) ^ _result_keys(sweep.fixed)):
        raise UserError(
            f"sweep folder {sweep.out} was trained with other fixed keys ({', '.join(changed)}): "
            "its runs would not be this sweep's; choose another out= or sweep="
        )


# Keys that never change what a run trains: where it runs and logs (as resume), and what the affinity
# measures beside it (a run trains the same bits with or without it: tests/test_affinity_targets.py)
NOT_RESULT_KEYS = tuple(
    f"{section}{key}="
    for key in ("device", "wandb", "affinity_estimators", "affinity_k")
    for section in ("", "run.")
)


def _result_keys(fixed: list[str]) -> set[str]:
    """The fixed keys that can change a run's results."""
    return {arg for arg in fixed if not arg.startswith(NOT_RESULT_KEYS)}


def train_members(sweep: Sweep, members: list[Member]) -> dict[str, str]:
    """Train each of `members` that has not finished (resume the interrupted) with the sweep's
    launcher; each one's outcome. (The caller holds the folder's lock.)"""
    sweep.out.mkdir(parents=True, exist_ok=True)
    record = {
        "sweep": sweep.name,
        "axes": sweep.axes,
        "fixed": sweep.fixed,
        # inside the study folder: relative to it, so a moved or copied study reads its own runs
        "members": {m.name: _recorded_path(m.run_dir, sweep.out) for m in members},
        "launcher": sweep.launcher.name,
    }
    atomic.write_text(sweep.out / "sweep.json", jsonfile.dumps(record, indent=2) + "\n", "sweep record")
    return sweep.launcher.run(members, sweep.out, f"sweep {sweep.name}")


def _recorded_path(run_dir: Path, study: Path) -> str:
    try:
        return run_dir.resolve().relative_to(study.resolve()).as_posix()
    except ValueError:
        return str(run_dir.resolve())


def summary(sweep: Sweep, outcomes: dict[str, str]) -> str:
    lines = [f"sweep {sweep.name} ({sweep.out}):"]
    parts = set()  # how the scores marked § were measured
    for member in sweep.members():
        results = ""
        values = read_summary(RunFolder(member.run_dir).summary)
        if isinstance(values, dict):
            scored = metrics.scored_on({}, values)
            shown = []
            for key, value in values.items():
                if metrics.is_best_evaluation(key) and "/dev/" in key and value is not None:
                    name, how = metrics.without_prefix(key), metrics.sample_of(scored, key)
                    shown.append(f"{name} {metrics.shown(key, value)}" + (" §" if how else ""))
                    if how:
                        parts.add(f"{name.rsplit('/', 1)[0]} on {how}")
            results = ", ".join(shown)
        lines.append(
            f"  {member.name}: {outcomes.get(member.name, 'not run')}{'; ' + results if results else ''}"
        )
    if parts:
        lines.append(f"  § scored on a part of the split (max_eval=): {'; '.join(sorted(parts))}")
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """`just sweep NAME key=v1,v2 ...`."""
    spec = parse(list(args))
    outcomes = run(spec)
    print(summary(spec, outcomes))
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{len(failed)} of the sweep's runs failed ({', '.join(failed)}): see their logs")
    check_outcomes(outcomes)  # runs interrupted, resumable (a SLURM job cancelled)


def member_configs(args: Sequence[str]) -> dict[str, Any]:
    """Each member's config, by member name: what `just sweep args` would train (--print-config)."""
    return {
        member.name: to_dict(config_from_command(member.overrides)) for member in parse(list(args)).members()
    }
