"""`just bench-build`: wall time of a full ClassifSQuAD build, caches (vectors, tokens) cold and
warm, and with `authors=PATH` the authors' own sampler timed beside it on the same data.

Each build runs as its own `python -m mtl build-classifsquad` process, so the times are
what a user waits for, imports included. Cold runs get an empty cache directory each;
warm runs share one that an untimed build filled first. The contenders alternate within each
round, so a machine that slows down slows them alike.
"""

from __future__ import annotations

import json
import os
import shutil
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
from mtl.data.squad import SPLITS, resolve_squad_source
from mtl.errors import UserError
from mtl.text.vectors import open_lines, resolve_vectors_path
from tools import authors_sampler

TARGET_WARM_SECONDS = 30.0


@dataclass
class BenchBuildConfig:
    runs: AtLeast1 = 3  # builds per cache state
    preset: str | None = None  # as build-classifsquad (classifsquad-paper: the authors' build)
    scope: Literal["article", "paragraph"] = "article"  # as build-classifsquad
    squad: str | None = None  # as build-classifsquad
    vectors: str | None = None  # as build-classifsquad
    authors: str | None = None  # their squad_preprocess/sample_dataset.py: time it too (runs its code)


def run(config: BenchBuildConfig) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Seconds per run of each contender (mtl with caches cold and warm, and the authors' sampler
    under each NLTK engine when `authors=` is given), and what the sampler's last run said."""
    if config.authors and not Path(config.authors).is_file():
        raise UserError(
            f"authors={config.authors} is not a file: give the path of the authors' "
            "squad_preprocess/sample_dataset.py (github.com/kolchinski/NLI_2018)"
        )
    with tempfile.TemporaryDirectory(prefix="mtl-bench-build-") as scratch:
        scratch = Path(scratch)
        warm_cache = scratch / "warm-cache"
        _build_once(config, scratch / "out", warm_cache)  # fills the warm cache
        authors = _authors_inputs(config, scratch) if config.authors else None
        times: dict[str, list[float]] = {"cold": [], "warm": []}
        sampler: dict[str, object] = {}
        for index in range(config.runs):
            times["cold"].append(_build_once(config, scratch / "out", scratch / f"cold-cache-{index}"))
            times["warm"].append(_build_once(config, scratch / "out", warm_cache))
            if authors is not None:
                for engine in authors_sampler.ENGINES:
                    seconds, sampler = _authors_once(config, *authors, engine)
                    times.setdefault(f"authors-{engine}", []).append(seconds)
    return times, sampler


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
    args += [f"{key}={value}" for key in ("preset", "squad", "vectors") if (value := getattr(config, key))]
    started = time.perf_counter()
    result = subprocess.run(
        args, env={**os.environ, "MTL_CACHE_DIR": str(cache)}, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise UserError(f"the benchmarked build failed: {result.stderr.strip().splitlines()[-1]}")
    return seconds


def _authors_inputs(config: BenchBuildConfig, scratch: Path) -> tuple[Path, Path]:
    """The SQuAD folder and a plain-text vectors file, as the authors' driver reads them: a zipped
    or gzipped file is unpacked once, untimed (their driver opened a .txt)."""
    squad = Path(resolve_squad_source(config.squad))
    if not all((squad / name).is_file() for name, _ in SPLITS.values()):
        raise UserError(f"authors= needs SQuAD's JSON files in a folder: squad={squad} is not one")
    vectors = resolve_vectors_path(config.vectors)
    if vectors.suffix in (".zip", ".gz"):
        text = scratch / "vectors" / vectors.name.removesuffix(vectors.suffix)
        text.parent.mkdir(parents=True, exist_ok=True)
        with open_lines(vectors) as packed, open(text, "wb") as unpacked:
            shutil.copyfileobj(packed, unpacked, 1 << 20)
        vectors = text
    return squad, vectors


def _authors_once(
    config: BenchBuildConfig, squad: Path, vectors: Path, engine: str
) -> tuple[float, dict[str, object]]:
    """Seconds the authors' sampler took, and what it said (punkt used, lines written per split)."""
    with tempfile.TemporaryDirectory(prefix="mtl-bench-authors-") as out:
        args = [sys.executable, "-m", "tools.authors_sampler", config.authors, str(squad), str(vectors)]
        started = time.perf_counter()
        result = subprocess.run([*args, out, engine], capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise UserError(f"the authors' sampler failed: {last}")
        lines = {split: _count_lines(Path(out) / f"{split}.tsv") for split in authors_sampler.SPLIT_FILES}
    return seconds, {**json.loads(result.stdout.strip().splitlines()[-1]), "lines": lines}


def _count_lines(path: Path) -> int:
    with open(path, "rb") as file:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b""))


def report(times: dict[str, list[float]], config: BenchBuildConfig, sampler: dict[str, object]) -> str:
    preset = f", preset {config.preset}" if config.preset else ""
    lines = [
        f"ClassifSQuAD build, train + validation, scope {config.scope}{preset}, {config.runs} runs each "
        f"({os.cpu_count()} CPUs)"
    ]
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    for kind, values in times.items():
        lines.append(
            f"  {LABELS.get(kind, kind):<44} median {medians[kind]:6.1f} s "
            f"(min {min(values):.1f}, max {max(values):.1f})"
        )
    for engine in authors_sampler.ENGINES:
        if (theirs := medians.get(f"authors-{engine}")) is not None:
            lines.append(
                f"  against the authors' sampler ({engine}): mtl cold {theirs / medians['cold']:.2f}x, "
                f"warm {theirs / medians['warm']:.2f}x as fast"
            )
    if sampler:
        counts = " / ".join(f"{count:,}" for count in sampler["lines"].values())
        punkt = "" if sampler["punkt"] else "; no punkt model here: each text one sentence, as mtl"
        lines.append(f"  the authors' sampler wrote {counts} train / dev triples{punkt}")
    warm = medians["warm"]
    verdict = "meets" if warm < TARGET_WARM_SECONDS else "MISSES"
    lines.append(f"  warm median {warm:.1f} s {verdict} the {TARGET_WARM_SECONDS:.0f} s target")
    return "\n".join(lines)


LABELS = {
    "cold": "mtl, caches cold (a first build)",
    "warm": "mtl, caches warm (a rebuild)",
    "authors-installed": "authors' sampler, NLTK as installed",
    "authors-re": "authors' sampler, NLTK's patterns on re",
}


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchBuildConfig; run; print what it gives."""
    config = apply_overrides(BenchBuildConfig(), args)
    times, sampler = run(config)
    print(report(times, config, sampler))
