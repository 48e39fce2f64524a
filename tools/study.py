"""`just bench-study`: what a study costs beyond its members' training steps.

    just bench-study members=4 max_steps=20 repeats=3 preset=cpu-small

Trains the same small study (`members=` runs of the given training keys, one seed each) with
`launcher=local` twice per repeat, side by side, the order alternating so that machine noise
falls on both alike: each member forked from the study's server (what studies do,
mtl/member_server.py) and each started as a fresh `python -m mtl` (what they did). For each:
the study's wall time, the sum of its members' training seconds (summary.json's
train_seconds: their steps alone), and the rest per member (imports, data, evaluation,
checkpoints, the study's own work). Reported: medians over the repeats, and the forked
study's wall time as a share of the fresh one's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mtl.config import apply_overrides, paths_and_keys
from mtl.errors import UserError
from mtl.jobs import local
from mtl.jobs.member import Member
from mtl.runs import RunFolder, read_summary
from mtl.train.config.command_line import config_from_args
from tools.configs import BenchStudyConfig

MODES = ("forked", "fresh")


def members(train: list[str], count: int, max_steps: int, out: Path) -> list[Member]:
    found = []
    for seed in range(1, count + 1):
        name = f"seed{seed}"
        keys = [
            *train,
            f"max_steps={max_steps}",
            "stop=max_steps",
            f"seed={seed}",
            f"name={name}",
            f"out={out / name}",
        ]
        config_from_args(keys)  # a wrong key stops the benchmark before any run
        found.append(Member(name, keys, out / name))
    return found


def train_seconds(member: Member) -> float:
    summary = read_summary(RunFolder(member.run_dir).summary)
    if not isinstance(summary, dict) or not isinstance(summary.get("train_seconds"), int | float):
        raise UserError(f"{member.run_dir}: the run did not finish (see its output above)")
    return float(summary["train_seconds"])


def study_once(mode: str, train: list[str], config: BenchStudyConfig, root: Path) -> dict[str, float]:
    """One study in a folder of its own: its wall time and its members' training seconds."""
    out = root / mode
    found = members(train, config.members, config.max_steps, out)
    out.mkdir(parents=True)
    started = time.perf_counter()
    outcomes = local.run_local(found, 1, out, f"{mode} study", fork=mode == "forked")
    wall = time.perf_counter() - started
    if failed := [name for name, outcome in outcomes.items() if outcome != "finished"]:
        raise UserError(f"{failed[0]} failed in the {mode} study: see its output above")
    steps = sum(train_seconds(m) for m in found)
    return {"wall": wall, "train": steps, "rest_per_member": (wall - steps) / config.members}


def run(config: BenchStudyConfig, train: list[str]) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-study-") as scratch:
        for repeat in range(config.repeats):
            order = MODES if repeat % 2 == 0 else MODES[::-1]
            for mode in order:
                results[mode].append(study_once(mode, train, config, Path(scratch) / f"r{repeat}"))
    return results


def report(results: dict[str, list[dict[str, float]]], config: BenchStudyConfig) -> str:
    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    lines = [
        f"a study of {config.members} runs of {config.max_steps} steps, launcher=local, {config.repeats} "
        "repeats side by side (order alternating); medians (s):",
        f"  {'members':<8} {'wall':>8} {'training steps':>15} {'rest per member':>16}",
        *(
            f"  {mode:<8} {median(mode, 'wall'):8.1f} {median(mode, 'train'):15.1f} {median(mode, 'rest_per_member'):16.1f}"
            for mode in MODES
        ),
        f"forked study = {median('forked', 'wall') / median('fresh', 'wall'):.2f}x the fresh study's wall time; "
        f"its wall = {median('forked', 'wall') / median('forked', 'train'):.1f}x its members' training steps",
    ]
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    named, keys = paths_and_keys(list(args))
    if named:
        raise UserError(f"{named[0]}: bench-study takes key=value arguments only (preset=NAME for a preset)")
    own_names = set(BenchStudyConfig.__dataclass_fields__)
    own = [a for a in keys if a.partition("=")[0] in own_names]
    train = [a for a in keys if a.partition("=")[0] not in own_names]
    if taken := [a for a in train if a.partition("=")[0] in ("out", "name", "seed", "stop")]:
        raise UserError(f"{taken[0]}: bench-study sets it for each run")
    config = apply_overrides(BenchStudyConfig(), own)
    print(report(run(config, train), config))
