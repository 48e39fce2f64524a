"""A run folder: every path in it, where its run stands, and its lock. The one place that knows
the layout, for training, resume, sweeps, reports and transfer.

    <run>/config.json        the resolved config, the command and the inputs' fingerprints
    <run>/metrics.jsonl      one record per step and event, cut to the checkpoint on resume
    <run>/checkpoints/       latest.pt (previous-latest.pt), best.pt
    <run>/wandb/             the offline W&B run
    <run>/summary.json       written last: the run has finished
    <run>/encoder.json       the exported encoder, with encoder.safetensors (older runs: encoder.pt)
    <run>/encoder/           the same encoder for sentence-transformers (encoder=hf: its model folder)
"""

from __future__ import annotations

import enum
import shutil
from dataclasses import dataclass
from pathlib import Path

from mtl.locks import FolderLock


class RunStatus(enum.Enum):
    EMPTY = "empty"  # no folder, or nothing in it
    NEVER_CHECKPOINTED = "never checkpointed"  # stopped before its first checkpoint: safe to start again
    INTERRUPTED = "interrupted"  # has a checkpoint to resume from
    FINISHED = "finished"  # has its summary
    NOT_A_RUN = "not a run"  # holds something else


@dataclass(frozen=True)
class RunFolder:
    path: Path

    # What a run writes before it finishes: a folder of these alone, without a checkpoint,
    # is a run that died early.
    STARTED_FILES = ("config.json", "metrics.jsonl", "checkpoints", "wandb")

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path).expanduser())

    @property
    def record(self) -> Path:
        return self.path / "config.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def latest(self) -> Path:
        return self.checkpoints / "latest.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    @property
    def encoder(self) -> Path:
        return self.path / "encoder.json"

    @property
    def legacy_encoder(self) -> Path:
        """What runs exported before encoder.json: a torch.save dict."""
        return self.path / "encoder.pt"

    @property
    def pretrained_encoder(self) -> Path:
        """The encoder for sentence-transformers; encoder=hf: its fine-tuned model folder, which
        encoder.json names."""
        return self.path / "encoder"

    def status(self) -> RunStatus:
        if not self.path.is_dir() or not any(self.path.iterdir()):
            return RunStatus.EMPTY
        if self.summary.is_file():
            return RunStatus.FINISHED
        if self.checkpoints.is_dir() and any(p.suffix == ".pt" for p in self.checkpoints.iterdir()):
            return RunStatus.INTERRUPTED
        names = {entry.name for entry in self.path.iterdir()}
        if "config.json" in names and names <= set(self.STARTED_FILES):
            return RunStatus.NEVER_CHECKPOINTED
        return RunStatus.NOT_A_RUN

    def lock(self, key: str) -> FolderLock:
        """The folder's one-writer lock; `key` is the option a refusal names (`out`, `resume`)."""
        return FolderLock(self.path, "run folder", key)

    def remove_partial_files(self) -> None:
        """The temporary files of writes a killed process never finished (call with the lock held)."""
        for folder in (self.path, self.checkpoints):
            if folder.is_dir():
                for leftover in folder.glob(".*.partial"):
                    leftover.unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove what a run that died before its first checkpoint wrote (call with the lock held)."""
        for name in self.STARTED_FILES:
            path = self.path / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def run_folder_of(path: Path) -> Path | None:
    """The run folder that holds `path` (a checkpoint, an encoder file), or None."""
    return next((p for p in Path(path).resolve().parents if RunFolder(p).record.is_file()), None)
