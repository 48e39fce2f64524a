"""Weights & Biases behind a small API that works offline, never prompts, never crashes a job.

Mode `auto` is online when an API key is configured (WANDB_API_KEY or a netrc entry)
and offline otherwise; offline runs land in `<dir>/wandb/` and can be uploaded later
with `wandb sync` or browsed with `wandb leet`.
"""

from __future__ import annotations

import netrc
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mtl.console import say
from mtl.tracking import wandb_file


def resolve_mode(requested: str) -> str:
    if os.environ.get("WANDB_MODE") and requested == "auto":
        requested = os.environ["WANDB_MODE"]
    if requested == "auto":
        return "online" if _has_api_key() else "offline"
    return "offline" if requested == "dryrun" else requested


def _has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].rstrip("/")
    try:
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


class Tracker:
    """One W&B run; every call is a no-op when disabled and a warning when W&B fails."""

    def __init__(self, run: Any = None, mode: str = "disabled"):
        self.run, self.mode = run, mode
        self.directory = Path(".")

    @classmethod
    def start(
        cls,
        *,
        job_type: str,
        config: dict[str, Any],
        project: str,
        directory: str | Path,
        mode: str = "auto",
        name: str | None = None,
        run_id: str | None = None,
        resume: bool = False,
        group: str | None = None,
        tags: Sequence[str] = (),
        notes: str | None = None,
        entity: str | None = None,
        console: bool = True,
    ) -> Tracker:
        """A W&B run; `resume` continues the run `run_id` (marked resumed only then). `console`:
        W&B keeps what the job prints (its Logs tab). Where the run lives is said at its start."""
        mode = resolve_mode(mode)
        if mode == "disabled":
            return cls(None)
        os.environ.setdefault("WANDB_SILENT", "true")
        tracker = cls(None, mode)

        def init() -> Any:
            Path(directory).mkdir(parents=True, exist_ok=True)  # inside the guard: may fail like W&B
            return _wandb().init(
                project=project,
                job_type=job_type,
                config=config,
                dir=str(directory),
                mode=mode,
                name=name,
                id=run_id,
                resume="allow" if resume else None,
                group=group,
                tags=list(tags) or None,
                notes=notes,
                entity=entity or None,
                settings=_wandb().Settings(silent=True, console="auto" if console else "off"),
            )

        tracker.run = tracker._call(init)
        tracker.directory = Path(directory)
        if tracker.run is not None and tracker.mode == "online":  # its page, to watch it live
            say(tracker.where())
        return tracker

    def where(self) -> str:
        """One line: the run's page (online), or its offline folder and the command that uploads it."""
        if self.mode == "online":
            return f"W&B run: {getattr(self.run, 'url', None) or self.run.id}"
        folder = Path(self.run.dir).parent  # <dir>/wandb/offline-run-<time>-<id>/files -> the run's folder
        return f"W&B offline run in {folder}: upload it with `wandb sync {folder}`, or browse it with `wandb leet`"

    def last_history_step(self) -> int | None:
        """The last step W&B already holds for this run: a resumed run logs only what follows."""
        if self.run is None:
            return None
        if self.mode == "online":
            starting = getattr(self.run, "starting_step", 0) or 0
            return starting - 1 if starting else None
        return wandb_file.last_history_step(wandb_file.run_files(self.directory, self.run.id))

    @property
    def active(self) -> bool:
        return self.run is not None

    def log(self, values: dict[str, Any], step: int | None = None) -> None:
        self._when_active(lambda: self.run.log(values, step=step))

    def mark_preempting(self) -> None:
        """A stop to be resumed (Ctrl-C, SIGTERM): W&B shows it preempted, not failed."""
        self._when_active(lambda: self.run.mark_preempting())

    def alert(self, title: str, text: str) -> None:
        self._when_active(lambda: self.run.alert(title=title, text=text))

    def define_metric(self, name: str, **kwargs: Any) -> None:
        self._when_active(lambda: self.run.define_metric(name, **kwargs))

    def config_update(self, values: dict[str, Any]) -> None:
        self._when_active(lambda: self.run.config.update(values, allow_val_change=True))

    def summary(self, values: dict[str, Any]) -> None:
        self._when_active(lambda: self.run.summary.update(values))

    def table(
        self, key: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], step: int | None = None
    ) -> None:
        self._when_active(
            lambda: self.run.log({key: _wandb().Table(columns=list(columns), data=list(rows))}, step=step)
        )

    def heatmap(
        self,
        key: str,
        columns: tuple[str, str, str],
        cells: Sequence[Sequence[Any]],
        title: str,
        step: int | None = None,
    ) -> None:
        """A matrix given as (row, column, value) cells, drawn by W&B as a heatmap: its
        confusion-matrix chart colours any value by its cell (`wandb.plot.confusion_matrix` only
        counts labels into such a table first); the axes carry the names in `columns`."""

        def log() -> None:
            wandb = _wandb()
            chart = wandb.plot_table(
                "wandb/confusion_matrix/v1",
                wandb.Table(columns=list(columns), data=[list(cell) for cell in cells]),
                dict(zip(("Actual", "Predicted", "nPredictions"), columns, strict=True)),
                {"title": title},
            )
            self.run.log({key: chart}, step=step)

        self._when_active(log)

    def save_file(self, path: Path) -> None:
        """A copy of `path` among the run's files (W&B's Files tab; offline, `wandb sync` uploads
        it). A copy in the run's folder, not `run.save`'s absolute symlink, which a moved or
        shared run folder would leave dangling."""

        def save() -> None:
            copy = Path(self.run.dir) / Path(path).name
            shutil.copyfile(path, copy)
            self.run.save(str(copy), base_path=self.run.dir, policy="now")  # in the run's file list

        self._when_active(save)

    def log_artifact(
        self,
        name: str,
        kind: str,
        path: Path | Sequence[Path],
        metadata: dict[str, Any],
        reference: bool = False,
        aliases: Sequence[str] = (),
    ) -> None:
        """Log `path` (a file, folder, or several) as a version of artifact `name`; `reference`
        records checksums only.

        Files are copied when logged, so each version keeps the file of that moment even when
        the path is written again later (checkpoints). W&B gives the newest version `latest`.
        """

        def log() -> None:
            artifact = _artifact(name, kind, path, reference, metadata)
            self.run.log_artifact(artifact, aliases=list(aliases) or None)

        self._when_active(log)

    def use_input(
        self, name: str, kind: str, path: Path | Sequence[Path], reference: bool = False
    ) -> str | None:
        """Declare `path` as this run's input, as the exact version W&B knows by its content digest.

        Online, W&B links the run to the version with that digest (logging it when new); an
        offline run cannot use artifacts, so the digest is kept in its config
        (`input_artifacts`), which is what a later `wandb sync` shows. Returns the digest.
        """

        def use() -> str:
            artifact = _artifact(name, kind, path, reference)
            if self.mode == "online":
                self.run.use_artifact(artifact)
            self.run.config.update({"input_artifacts": {name: artifact.digest}}, allow_val_change=True)
            return artifact.digest

        return self._call(use) if self.run is not None else None

    def finish(self, exit_code: int = 0) -> None:
        """End the run and wait until W&B's writer has flushed it (its service process exits)."""
        if self.run is None:
            return
        where = self._call(self.where) if self.mode != "online" else None  # online: said at the start
        self._call(lambda: self.run.finish(exit_code=exit_code))
        if where:  # once, at the end: where the offline run is and how to upload it
            say(where)
        self.run = None
        self._call(lambda: _wandb().teardown())

    def _when_active(self, action: Callable[[], Any]) -> None:
        if self.run is not None:
            self._call(action)

    def _call(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except Exception as error:  # tracking must never stop the job it observes
            warnings.warn(f"W&B call failed, continuing without it: {error}", stacklevel=3)
            return None


def log_tables(
    *,
    job_type: str,
    name: str,
    config: dict[str, Any],
    tables: dict[str, tuple[Sequence[str], Sequence[Sequence[Any]]]],
    directory: str | Path,
    mode: str = "auto",
    project: str = "mtl",
    group: str | None = None,
) -> None:
    """One short W&B run that holds an analysis's tables (`just compare`, `decompose`, `maxpool`),
    in `group`: the W&B group of the training run it reads, so W&B shows them together."""
    tracker = Tracker.start(
        job_type=job_type, config=config, project=project, directory=directory, mode=mode, name=name,
        group=group,
    )  # fmt: skip
    for key, (columns, rows) in tables.items():
        tracker.table(key, columns, rows)
    tracker.finish()


def _artifact(
    name: str, kind: str, paths: Path | Sequence[Path], reference: bool, metadata: dict | None = None
) -> Any:
    artifact = _wandb().Artifact(name, type=kind, metadata=metadata)
    for path in [paths] if isinstance(paths, str | Path) else paths:
        if reference:
            artifact.add_reference(Path(path).resolve().as_uri())
        elif Path(path).is_dir():
            artifact.add_dir(str(path), name=Path(path).name if not isinstance(paths, str | Path) else None)
        else:
            artifact.add_file(str(path))
    return artifact


def _wandb() -> Any:
    import wandb  # seconds to import: only once a job logs

    return wandb
