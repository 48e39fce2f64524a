"""`just cancel <study or run>`: stop a study's SLURM jobs; each run checkpoints and stays resumable."""

from __future__ import annotations

from collections.abc import Sequence

from mtl.jobs import status


def command(args: Sequence[str]) -> None:
    status.cancel(args)
