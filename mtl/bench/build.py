"""`just bench-build`: wall time of a full ClassifSQuAD build, caches (vectors, tokens) cold and warm.

Each build runs as its own `python -m mtl build-classifsquad` process, so the times are
what a user waits for, imports included. Cold runs get an empty cache directory each;
warm runs share one that an untimed build filled first.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mtl.config import AtLeast1, apply_overrides
from mtl.errors import UserError

TARGET_WARM_SECONDS = 30.0


@dataclass
class BenchBuildConfig:
    runs: AtLeast1 = 3  # builds per cache state
    scope: Literal["article", "paragraph"] = "article"  # as build-classifsquad
    squad: str | None = None  # as build-classifsquad
    vectors: str | None = None  # as build-classifsquad


def run(config: BenchBuildConfig) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="mtl-bench-build-") as scratch:
        scratch = Path(scratch)
        warm_cache = scratch / "warm-cache"
        _build_once(config, scratch / "out", warm_cache)  # fills the warm cache
        times: dict[str, list[float]] = {"cold": [], "warm": []}
        for index in range(config.runs):
            times["cold"].append(_build_once(config, scratch / "out", scratch / f"cold-cache-{index}"))
            times["warm"].append(_build_once(config, scratch / "out", warm_cache))
    return times


def _build_once(config: BenchBuildConfig, out: Path, cache: Path) -> float:
    args = [
        sys.executable,
        "-m",
        "mtl",
        "build-classifsquad",
        f"out={out}",
        "overwrite=true",
        "wandb=disabled",
        f"scope={config.scope}",
    ]
    args += [f"{key}={value}" for key in ("squad", "vectors") if (value := getattr(config, key))]
    started = time.perf_counter()
    result = subprocess.run(
        args, env={**os.environ, "MTL_CACHE_DIR": str(cache)}, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise UserError(f"the benchmarked build failed: {result.stderr.strip().splitlines()[-1]}")
    return seconds


def report(times: dict[str, list[float]], config: BenchBuildConfig) -> str:
    lines = [
        f"ClassifSQuAD build, train + validation, scope {config.scope}, {config.runs} runs each "
        f"({os.cpu_count()} CPUs)"
    ]
    for kind, values in times.items():
        lines.append(
            f"  cache {kind}: median {statistics.median(values):6.1f} s "
            f"(min {min(values):.1f}, max {max(values):.1f})"
        )
    warm = statistics.median(times["warm"])
    verdict = "meets" if warm < TARGET_WARM_SECONDS else "MISSES"
    lines.append(f"  warm median {warm:.1f} s {verdict} the {TARGET_WARM_SECONDS:.0f} s target")
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchBuildConfig; run; print what it gives."""
    config = apply_overrides(BenchBuildConfig(), args)
    print(report(run(config), config))
