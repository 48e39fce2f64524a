"""What every study reads first from its command line: the launcher's keys (`launcher=`,
`slurm.*`) apart from the rest, the study's own keys and the training keys its runs share (the
study's `parse`), the seeds of every arm, and the warning when a seed plan (`plan=`, a `just
plan-seeds` record, for the studies that take one) asks for more seeds per arm than given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from mtl.analysis.power import warn_below
from mtl.console import say
from mtl.jobs.launchers import Launcher, launcher_from, split_launcher_keys
from mtl.jobs.seeds import SeededStudy, study_seeds

Config = TypeVar("Config", bound=SeededStudy)


class Opening(NamedTuple, Generic[Config]):
    launcher: Launcher
    config: Config
    train: list[str]  # the training keys every run of the study gets
    seeds: list[int]
    below_plan: str | None  # the warning said (the study's .md says it again), or None


def open_study(
    args: Sequence[str], parse: Callable[[Sequence[str]], tuple[Config, list[str]]]
) -> Opening[Config]:
    launcher_keys, args = split_launcher_keys(args)
    launcher = launcher_from(launcher_keys)
    config, train = parse(args)
    seeds = study_seeds(config)
    below_plan = warn_below(getattr(config, "plan", None), len(seeds))  # no plan= key: no plan
    if below_plan:
        say(below_plan)  # escaped: a shared plan= file's task names are its author's text
    return Opening(launcher, config, train, seeds, below_plan)
