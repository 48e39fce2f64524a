"""A study as one class: arms of training runs, each with seeds, at equal compute, transferred
with one protocol and judged against a baseline arm with `just compare`'s verdicts.

What a study is made of is what differs between studies: its keys (a `StudyConfig`), its arms
(each a name and the training keys that make it) and the arm the others are judged against. The
rest is this module's, the same for every study: the command line read (launcher, seeds, a seed
plan), the runs built and trained (resumed where they stopped, on any launcher), the runs short of
the budget left out, the transfer, the verdicts (Holm over every arm x transfer task) and the
verdict across tasks, and the record (`<out>/<name>.md`, `.json`, a W&B table). As torchtune's
recipes, a study is a protocol a plugin fills in one file that imports only `mtl.registry`:

    from mtl.registry import Study, StudyConfig, register_study

    @register_study
    class Depth(Study):
        name = "depth"
        summary = "one encoder layer against two at equal compute"
        baseline = "one"

        def arms(self, config, train):
            return {"one": ["layers=1"], "two": ["layers=2"]}

and `just study depth plugins=./depth.py preset=cpu-small budget=steps:300 seeds=3` runs it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.jobs.configs import StudyConfig as StudyConfig  # its keys' module imports no torch (--help)
from mtl.jobs.member import Member
from mtl.jobs.sweep import train_study
from mtl.studies.arms import (
    arm_members,
    budget_amount,
    check_transfer_keys,
    closing_lines,
    equal_compute,
    refuse_run_keys,
    study_arguments,
    study_folder,
    summary_seconds,
    wandb_mode,
)
from mtl.studies.compared import across_by_arm, across_section, transfer_and_compare, verdict_lines
from mtl.studies.mixture import verdicts_against
from mtl.studies.opening import open_study
from mtl.tracking.tracker import log_tables
from mtl.train.config.command_line import config_from_args


class Study:
    """One study: fill in `name`, `summary`, `baseline` and `arms` (and `config` for keys of its own)."""

    name: ClassVar[str]  # the command: `just study <name>` (a built-in one also `just <name>`)
    summary: ClassVar[str]  # a line for --help and the command list
    baseline: ClassVar[str]  # the arm every other one is judged against
    config: ClassVar[type[StudyConfig]] = StudyConfig
    above: ClassVar[str] = "beats {baseline}"  # the verdicts' words
    below: ClassVar[str] = "below {baseline}"

    def arms(self, config: Any, train: list[str]) -> dict[str, list[str]]:
        """Each arm's name and the training keys that make it (beside the keys every run gets)."""
        raise NotImplementedError

    def arm_keys(self) -> tuple[str, ...]:
        """Keys the arms set, refused on the command line (the arms would override them unseen)."""
        return ()


STUDIES: dict[str, type[Study]] = {}


def register_study(study: type[Study]) -> type[Study]:
    """Add a study (a class decorator); a name already taken by another study is refused."""
    for attribute in ("name", "summary", "baseline"):
        if not isinstance(getattr(study, attribute, None), str) or not getattr(study, attribute):
            raise UserError(f"study {study.__name__}: give it a {attribute} (a text)")
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,63}", study.name):  # it names the study's record files
        raise UserError(
            f"study {study.__name__}: name={study.name!r} must be lowercase letters, digits, - and _ (a file name)"
        )
    if not dataclasses.is_dataclass(study.config) or not issubclass(study.config, StudyConfig):
        raise UserError(f"study {study.name}: its config must be a dataclass subclassing StudyConfig")
    taken = STUDIES.get(study.name)
    if taken is not None and taken.__qualname__ != study.__qualname__:
        raise UserError(
            f"study {study.name!r} is taken by {taken.__module__}.{taken.__qualname__}: choose another name"
        )
    STUDIES[study.name] = study
    return study


def study_named(name: str) -> type[Study]:
    if name not in STUDIES:
        known = ", ".join(sorted(STUDIES)) or "none registered"
        raise UserError(f"unknown study {name!r}: choose one of {known}, or load yours with plugins=")
    return STUDIES[name]


def members(study: Study, config: StudyConfig, train: list[str], seeds: list[int], out: Path) -> list[Member]:
    """Every arm with every seed at the budget (stop=max_steps: no arm stops early), named
    `<arm>-seed<N>`, each carrying its arm and seed."""
    arms = study.arms(config, train)
    if study.baseline not in arms or len(arms) < 2:
        raise UserError(
            f"study {study.name}: its arms ({', '.join(arms) or 'none'}) must hold its baseline "
            f"{study.baseline!r} and another arm to judge"
        )
    found = arm_members(arms, train, config.budget, seeds, out)
    for member in found:
        config_from_args(member.overrides)  # a key that does not fit an arm stops everything before work
    return found


def run(name: str, args: Sequence[str]) -> tuple[Path, dict]:
    """The whole study (resumed where it stopped): its folder and its result."""
    study = study_named(name)()

    def parse(given: Sequence[str]) -> tuple[StudyConfig, list[str]]:
        own, train = study_arguments(list(given), name, tuple(study.config.__dataclass_fields__))
        refuse_run_keys(train, name, "run")
        if taken := [a for a in train if a.partition("=")[0] in study.arm_keys()]:
            raise UserError(f"{taken[0]}: study {name} sets it for each arm")
        config = apply_overrides(study.config(), own)
        check_transfer_keys(config.transfer_tasks, config.transfer_mode)
        budget_amount(config.budget)
        return config, train

    launcher, config, train, seeds, below_plan = open_study(args, parse)
    out = study_folder(config.out, name)
    found = members(study, config, train, seeds, out)
    train_study(found, [*train, f"budget={config.budget}"], out / "arms", launcher, f"study {name}")
    compared_runs, short = equal_compute(found, config.budget)
    compared, names, _ = transfer_and_compare(
        compared_runs, config.transfer_tasks, config.transfer_mode, config.transfer_data, out
    )
    arms = list(dict.fromkeys(m.arm for m in found))
    others = [arm for arm in arms if arm != study.baseline]
    result = {
        "study": name,
        "baseline": study.baseline,
        "arms": {
            arm: {
                "seeds": len([m for m in compared_runs if m.arm == arm]),
                "train_seconds": sum(summary_seconds(m) for m in compared_runs if m.arm == arm),
            }
            for arm in arms
        },
        "budget": config.budget,
        "seeds": seeds,
        "runs": {m.name: str(m.run_dir.relative_to(out)) for m in found},
        "left_out": short,
        "equal_compute": "every run trained the whole budget with stop=max_steps",
        "verdicts": verdicts_against(
            compared,
            names,
            study.baseline,
            others,
            study.above.format(baseline=study.baseline),
            study.below.format(baseline=study.baseline),
            "arm",
        ),
        "across_tasks": across_by_arm(compared, names),
        "below_plan": below_plan,
    }
    atomic.write_text(out / f"{name}.md", markdown(result), f"study {name}")
    atomic.write_text(out / f"{name}.json", jsonfile.dumps(result, indent=2) + "\n", f"study {name}")
    log_tables(
        job_type=f"study-{name}",
        name=out.name,
        config={k: result[k] for k in ("study", "baseline", "budget", "seeds")},
        tables={
            "verdicts": (
                ["task", "arm", "difference", "low", "high", "verdict"],
                [
                    [r["task"], r["arm"], r["difference"], r["low"], r["high"], r["verdict"]]
                    for r in result["verdicts"]
                ],
            )
        },
        directory=out,
        mode=wandb_mode(found),
        group=out.name,
    )
    return out, result


def markdown(result: dict) -> str:
    baseline = result["baseline"]
    lines = [
        f"# Study {result['study']}: each arm against {baseline}",
        "",
        f"Budget {result['budget']} per run, seeds {', '.join(map(str, result['seeds']))}; "
        f"{result['equal_compute']}.",
        "",
        "| arm | seeds compared | training seconds (all seeds) |",
        "|---|---:|---:|",
        *(f"| {arm} | {r['seeds']} | {r['train_seconds']:.0f} |" for arm, r in result["arms"].items()),
        *verdict_lines(result["verdicts"], "arm", baseline),
    ]
    lines += closing_lines(result)
    return "\n".join(lines) + "\n" + across_section(result.get("across_tasks") or [])


def command(args: Sequence[str]) -> None:
    """`just study NAME key=value ...`."""
    if not args or "=" in args[0]:
        known = ", ".join(sorted(STUDIES)) or "none registered: load one with plugins="
        raise UserError(f"name the study first: just study NAME key=value ... ({known})")
    out, result = run(args[0], args[1:])
    print(markdown(result) + f"\nwritten to {out / (args[0] + '.md')} and .json")
