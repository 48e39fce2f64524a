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
import functools
import html
import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from mtl.analysis.page import STYLE
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import atomic, jsonfile

# Their keys' module imports no torch (--help)
from mtl.jobs.configs import StudyConfig as StudyConfig
from mtl.jobs.configs import StudyKeys as StudyKeys
from mtl.jobs.launchers import Launcher
from mtl.jobs.member import Member
from mtl.jobs.seeds import study_seeds
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
from mtl.studies.compared import (
    across_by_arm,
    across_section,
    transfer_and_compare,
    verdict_lines,
    verdicts_against,
    verdicts_html,
)
from mtl.studies.opening import open_study
from mtl.tracking.tracker import log_tables
from mtl.train.config.command_line import config_from_args


class Study:
    """One study: fill in `name`, `summary`, `baseline` and `arms` (and `config` for keys of its own).

    The steps below are the pipeline's, each a method a study may fill in where it does more
    (tuning trials before its arms, a planted task, a table of its own); `run` calls them in order
    and writes what they give."""

    name: ClassVar[str]  # the command: `just study <name>` (a built-in one also `just <name>`)
    summary: ClassVar[str]  # a line for --help and the command list
    baseline: ClassVar[str]  # the arm every other one is judged against
    config: ClassVar[type[StudyConfig]] = StudyConfig
    above: ClassVar[str] = "beats {baseline}"  # the verdicts' words
    below: ClassVar[str] = "below {baseline}"
    noun: ClassVar[str] = "arm"  # what the verdicts call an arm (compare-balancers: method)
    record: ClassVar[str] = ""  # the record files' stem (<out>/<record>.md, .json); empty: the name
    folder: ClassVar[str] = ""  # runs/<folder>-<time> when out= is not given; empty: the name
    equal_compute: ClassVar[str] = "every run trained the whole budget with stop=max_steps"
    runs: ClassVar[str] = "run"  # what a refusal of a run key calls one of its runs (train-groups: network)

    def arms(self, config: Any, train: list[str]) -> dict[str, list[str]]:
        """Each arm's name and the training keys that make it (beside the keys every run gets)."""
        raise NotImplementedError

    def arm_keys(self) -> tuple[str, ...]:
        """Keys the arms set, refused on the command line (the arms would override them unseen)."""
        return ()

    def training_keys(self, config: Any, train: list[str]) -> list[str]:
        """The training keys every run gets, after the study's own checks of its keys (before any work)."""
        return train

    def prepare(self, config: Any, train: list[str], out: Path) -> list[str]:
        """What the study writes before its runs (a planted task file): the training keys then."""
        return train

    def fixed(self, config: Any, train: list[str]) -> list[str]:
        """The keys every run shares, which a folder trained before must share too (its budget)."""
        return [*train, f"budget={config.budget}"]

    def train(
        self, config: Any, train: list[str], seeds: list[int], out: Path, launcher: Launcher
    ) -> list[Member]:
        """Every arm with every seed trained (resumed where it stopped): the runs to judge."""
        found = members(self, config, train, seeds, out)
        train_study(found, self.fixed(config, train), out / "arms", launcher, f"study {self.name}")
        return found

    def merged(self, config: Any, train: list[str], kept: list[Member], out: Path) -> list[Member]:
        """Arms made from the trained runs without training (merged encoders), judged with them."""
        return []

    def judge(self, config: Any, train: list[str], kept: list[Member], out: Path) -> dict:
        """The verdicts, judged on transfer (a study whose config has no transfer keys judges its
        runs' own scores): every run transferred, then compared with `just compare`'s statistics,
        each arm against the baseline (Holm over arms x tasks) and across tasks."""
        compared, names, _ = transfer_and_compare(
            kept, config.transfer_tasks, config.transfer_mode, config.transfer_data, out
        )
        arms = list(dict.fromkeys(m.arm for m in kept))
        return {
            "verdicts": verdicts_against(
                compared,
                names,
                self.baseline,
                [arm for arm in arms if arm != self.baseline],
                self.above.format(baseline=self.baseline),
                self.below.format(baseline=self.baseline),
                self.noun,
            ),
            "across_tasks": across_by_arm(compared, names),
        }

    def described(self, config: Any, train: list[str], found: list[Member], kept: list[Member]) -> dict:
        """The study's own part of its record, beside the verdicts (`kept`: the runs compared)."""
        arms = list(dict.fromkeys(m.arm for m in found))
        return {
            "arms": {
                arm: {
                    "seeds": len([m for m in kept if m.arm == arm]),
                    "train_seconds": sum(summary_seconds(m) for m in kept if m.arm == arm),
                }
                for arm in arms
            }
        }

    def markdown(self, result: dict) -> str:
        """The record as the study's .md and what the command prints."""
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
            *verdict_lines(result["verdicts"], self.noun, baseline),
        ]
        lines += closing_lines(result)
        return "\n".join(lines) + "\n" + across_section(result.get("across_tasks") or [])

    def tables(self, result: dict) -> dict[str, tuple[list[str], list[list[Any]]]]:
        """The W&B tables of its record (none: no W&B run): the verdicts' (a study judging in its
        own way logs its own, or none)."""
        if not self.judges_on_transfer():
            return {}
        noun = self.noun
        return {
            "verdicts": (
                ["task", noun, "difference", "low", "high", "verdict"],
                [
                    [r["task"], r[noun], r["difference"], r["low"], r["high"], r["verdict"]]
                    for r in result["verdicts"]
                ],
            )
        }

    def judges_on_transfer(self) -> bool:
        """Whether its verdicts are the default judge's (each arm against the baseline on transfer)."""
        return type(self).judge is Study.judge

    def wandb_config(self, result: dict) -> dict:
        return {k: result[k] for k in ("study", "baseline", "budget", "seeds")}

    def page(self, result: dict) -> str | None:
        """The HTML page beside the .md (<out>/<record>.html; None: none): the verdicts' forest,
        each arm's seeds and seconds, the verdicts (a study judging in its own way writes its own, or none)."""
        if not self.judges_on_transfer():
            return None
        baseline = result["baseline"]
        drawn, verdicts = verdicts_html(
            result["verdicts"], [a for a in result["arms"] if a != baseline], self.noun, baseline
        )
        arms = "".join(
            f"<tr><td>{html.escape(arm)}</td><td>{r['seeds']}</td><td>{r['train_seconds']:.0f}</td></tr>"
            for arm, r in result["arms"].items()
        )
        intro = f"Budget {result['budget']} per run, seeds {', '.join(map(str, result['seeds']))}; {result['equal_compute']}."
        return "\n".join([
            "<!doctype html>", f'<html lang="en"><head><meta charset="utf-8"><title>mtl study {html.escape(self.name)}</title>',
            f"<style>{STYLE}</style></head><body>",
            f"<h1>Study {html.escape(self.name)}: each {self.noun} against {html.escape(baseline)}</h1>",
            f"<p>{html.escape(intro)}</p>",
            *drawn,
            f"<h2>{self.noun.capitalize()}s</h2>",
            f'<div class="wide"><table><tr><th>{self.noun}</th><th>seeds compared</th>'
            f"<th>training seconds (all seeds)</th></tr>{arms}</table></div>",
            *verdicts,
            "</body></html>",
        ]) + "\n"  # fmt: skip


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
    if not dataclasses.is_dataclass(study.config) or not issubclass(study.config, StudyKeys):
        raise UserError(
            f"study {study.name}: its config must be a dataclass subclassing StudyConfig (StudyKeys: judged "
            "without transfer)"
        )
    taken = STUDIES.get(study.name)
    if taken is not None and taken.__qualname__ != study.__qualname__:
        raise UserError(
            f"study {study.name!r} is taken by {taken.__module__}.{taken.__qualname__}: choose another name"
        )
    STUDIES[study.name] = study
    return study


# The studies mtl ships as `Study`s (also commands of their own: `just compare-balancers`),
# imported when a study is named: each imports this module.
BUILT_IN = (
    "mtl.studies.compare_balancers",
    "mtl.studies.compare_mixing",
    "mtl.studies.groups",
    "mtl.studies.affinity_check",
    "mtl.studies.mixture",
    "mtl.studies.versus",
    "mtl.studies.negatives",
    "mtl.studies.batches",
)


def registered() -> dict[str, type[Study]]:
    """Every study: the built-in ones and those a plugin registered."""
    for module in BUILT_IN:
        importlib.import_module(module)
    return STUDIES


def study_named(name: str) -> type[Study]:
    if name not in registered():
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


def parse(study: Study, given: Sequence[str]) -> tuple[StudyConfig, list[str]]:
    """A study's arguments: its own keys (checked, with its own checks) and the training keys
    every run gets; one line for a key a study sets itself."""
    name = study.name
    own, train = study_arguments(list(given), name, tuple(study.config.__dataclass_fields__))
    refuse_run_keys(train, name, study.runs)
    if taken := [a for a in train if a.partition("=")[0] in study.arm_keys()]:
        raise UserError(f"{taken[0]}: study {name} sets it for each arm")
    config = apply_overrides(study.config(), own)
    study_seeds(config)  # a bad seeds= or seed= stops the study before any work
    if isinstance(config, StudyConfig):
        check_transfer_keys(config.transfer_tasks, config.transfer_mode)
    budget_amount(config.budget)
    return config, study.training_keys(config, train)


def run(name: str, args: Sequence[str]) -> tuple[Path, dict]:
    """The whole study (resumed where it stopped): its folder and its result."""
    out, result, _ = conduct(name, args)
    return out, result


def conduct(name: str, args: Sequence[str]) -> tuple[Path, dict, list[Path]]:
    """The whole study: its folder, its result and the record files it wrote (.md first)."""
    study = study_named(name)()
    launcher, config, train, seeds, below_plan = open_study(args, functools.partial(parse, study))
    out = study_folder(config.out, study.folder or name)
    train = study.prepare(config, train, out)
    found = study.train(config, train, seeds, out, launcher)
    kept, short = equal_compute(found, config.budget)
    made = study.merged(config, train, kept, out)
    found, kept = found + made, kept + made
    result = {
        "study": name,
        "baseline": study.baseline,
        "budget": config.budget,
        "seeds": seeds,
        "runs": {m.name: relative(m.run_dir, out) for m in found},
        "left_out": short,
        "equal_compute": study.equal_compute,
        **study.described(config, train, found, kept),
        **study.judge(config, train, kept, out),
        "below_plan": below_plan,
    }
    record = out / (study.record or name)
    written = [record.with_suffix(".md"), record.with_suffix(".json")]
    atomic.write_text(written[0], study.markdown(result), f"study {name}")
    atomic.write_text(written[1], jsonfile.dumps(result, indent=2) + "\n", f"study {name}")
    if (page := study.page(result)) is not None:
        written.append(record.with_suffix(".html"))
        atomic.write_text(written[2], page, f"study {name} page")
    if tables := study.tables(result):
        log_tables(
            job_type=study.record or f"study-{name}",
            name=out.name,
            config=study.wandb_config(result),
            tables=tables,
            directory=out,
            mode=wandb_mode(found),
            group=out.name,
        )
    return out, result, written


def table_of(rows: dict[str, dict], key: str, columns: Sequence[str]) -> tuple[list[str], list[list[Any]]]:
    """A W&B table of a record's rows (each a name -> its values): the name under `key`, then `columns`."""
    return [key, *columns], [[name, *(row[column] for column in columns)] for name, row in rows.items()]


def relative(path: Path, out: Path) -> str:
    """A run's folder as the record keeps it: inside the study's folder (it moves with it)."""
    return str(path.relative_to(out)) if path.is_relative_to(out) else str(path)


def command(args: Sequence[str]) -> None:
    """`just study NAME key=value ...`."""
    if not args or "=" in args[0]:
        known = ", ".join(sorted(registered())) or "none registered: load one with plugins="
        raise UserError(f"name the study first: just study NAME key=value ... ({known})")
    _, _, written = conduct(args[0], args[1:])
    print(written[0].read_text(encoding="utf-8") + f"\nwritten to {', '.join(map(str, written))}")
