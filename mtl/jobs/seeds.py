"""The seeds axis every study takes: `seeds=K` (seeds seed..seed+K-1, seed= 1 unless given) or a
list `seed=1,2,3`. A verdict about a configuration needs several training seeds: the variance
between seeds is often larger than the effect a study looks for (Reimers & Gurevych 2017)."""

from __future__ import annotations

from typing import Protocol

from mtl.config import Range, comma_list, read_number
from mtl.errors import UserError

MAX_SEEDS = 200


def seed_list(seeds: str | None, seed: str | None) -> list[int]:
    """The training seeds of `seeds=` and `seed=` (a value or comma-separated values); one-line
    errors naming the key."""
    values = comma_list(seed)
    given = [read_number("seed", v, int, Range(0), f"seed={seed}: {v}") for v in values]
    if len(set(given)) < len(given):
        raise UserError(f"seed={seed} names a seed twice: each seed trains one run, give it once")
    if seeds is None:
        return given or [1]
    # bounded: each seed is a training run per member (seeds=1e6 would queue a million of them)
    count = read_number("seeds", seeds, int, Range(1, MAX_SEEDS), f"seeds={seeds}")
    if len(given) > 1:
        raise UserError(f"seeds={seeds} with seed={seed}: give the number of seeds or their list, not both")
    first = given[0] if given else 1
    if first + count - 1 >= 2**63:
        raise UserError(f"seed={seed} with seeds={seeds}: the last seed must fit in 64 bits (below 2**63)")
    return list(range(first, first + count))


class SeededStudy(Protocol):
    seeds: int | None  # seeds seed..seed+K-1
    seed: str  # the first seed, or a list (1,2,3)


def study_seeds(config: SeededStudy) -> list[int]:
    """The seeds of a study's configuration (its `seeds=` and `seed=`)."""
    return seed_list(str(config.seeds) if config.seeds is not None else None, config.seed)
