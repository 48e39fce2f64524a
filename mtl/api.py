"""mtl from Python: train, transfer and compare as the commands do, in a notebook.

    import mtl

    run = mtl.train("preset=cpu-small", max_steps=300, nli__batch=32)   # nli__batch: nli.batch=
    report = run.transfer(tasks="MR,CR,STS14", mode="fast")
    other = mtl.train("preset=cpu-small-nli", max_steps=300)
    verdicts = mtl.compare(run, other, report="transfer-fast")
    encoder = run.encoder()                                              # .encode(["a sentence"])

Keys are the commands' own (`just train-multitask --help`): given as "key=value" strings, as
keyword arguments (a double underscore for a dot: `nli__steps=200` is `nli.steps=200`; lists
joined by commas; True/False as true/false), or both. Each function calls what its command
calls (mtl.train.loop.run.start, mtl.eval.transfer.suite.run, mtl.analysis.significance.run), so a
run made here is the same folder the CLI makes, and `just report` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _keys(keys: Sequence[str], settings: dict[str, Any]) -> list[str]:
    """`keys` ("key=value") and `settings` (key=value keywords) as the command line's arguments,
    after the command line's preamble: each key text, and the plugins it names (`plugins=`, or
    the environment's, or installed ones) loaded, as `mtl.cli.main` does before any command."""
    from mtl import plugins
    from mtl.errors import UserError

    for key in keys:
        if not isinstance(key, str):
            raise UserError(f"{key!r} is not a key=value text: give keys as 'key=value' strings or keywords")
    found = list(keys)
    for key, value in settings.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | tuple):
            text = ",".join(str(v) for v in value)
        else:
            text = str(value)
        found.append(f"{key.replace('__', '.')}={text}")
    return plugins.load_for_command(found)


@dataclass(frozen=True)
class TrainedRun:
    """A run folder `mtl.train` made (or any run folder: `TrainedRun(Path('runs/x'))`)."""

    folder: Path
    summary: dict[str, Any]

    @classmethod
    def of(cls, folder: str | Path) -> TrainedRun:
        from mtl.runs import RunFolder, read_summary

        return cls(Path(folder), read_summary(RunFolder(Path(folder)).summary) or {})

    def encoder(self, device: str = "auto", vocab_expansion: bool = False):  # noqa: ANN201
        """The run's encoder: `.encode(sentences) -> np.ndarray`."""
        from mtl.eval.loading import load_encoder

        return load_encoder(self.folder, device=device, vocab_expansion=vocab_expansion)

    def transfer(self, *keys: str, **settings: Any) -> dict[str, Any]:
        """`just transfer run=<this run> ...`: its report (results per task, the aggregate)."""
        from mtl.config import apply_overrides
        from mtl.eval.transfer.suite import TransferConfig, run

        config = apply_overrides(TransferConfig(), [*_keys(keys, settings), f"run={self.folder}"])
        _, report = run(config)
        return report

    def __fspath__(self) -> str:
        return str(self.folder)


def train(*keys: str, progress: bool = True, **settings: Any) -> TrainedRun:
    """`just train-multitask ...`: a new run trained to its end; `resume=<folder>` continues one."""
    from mtl.train.config.command_line import config_from_args, resumed_run
    from mtl.train.loop.run import resume, start

    args = _keys(keys, settings)
    resume_from, rest = resumed_run(args)
    if resume_from is not None:
        folder, summary = resume(resume_from, progress=progress, overrides=rest)
    else:
        folder, summary = start(config_from_args(args), command=args, progress=progress)
    return TrainedRun(Path(folder), summary)


def compare(*runs: str | Path | TrainedRun, **settings: Any) -> dict[str, Any]:
    """`just compare <runs> ...`: the record compare-<time>.json keeps (its `comparisons`, each
    with its interval, p, Holm's p and verdict; `encoders`: which runs each one groups)."""
    from mtl.analysis.significance import SignificanceConfig, run
    from mtl.config import apply_overrides

    settings.setdefault("wandb", "disabled")
    out, _ = run([str(Path(r)) for r in runs], apply_overrides(SignificanceConfig(), _keys((), settings)))
    return json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
