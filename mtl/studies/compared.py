"""A study's arms transferred and compared: `just compare`'s verdicts over their runs, seeds
grouped, computed in the study's own process (it once started `python -m mtl compare`, 3-4 s of
imports a study)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mtl.analysis import significance
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.jobs.arms import transfer_members
from mtl.jobs.member import Member


def transfer_and_compare(
    members: list[Member], tasks: str, mode: str, data: str | None, out: Path, arm_of: Callable[[Member], str]
) -> tuple[dict, dict[str, str], str]:
    """Transfer each run (`transfer_tasks=`, `transfer_mode=`, `transfer_data=`), then compare them
    as `just compare` does into out/compare.md and .json: (its record, encoder name -> arm, the
    report's name)."""
    report = transfer_members(members, tasks, mode, data)
    compared_path = out / "compare.md"
    keys = [f"report={report}", f"out={compared_path}", "wandb=disabled"]
    try:
        significance.run(
            [str(m.run_dir) for m in members], apply_overrides(significance.SignificanceConfig(), keys)
        )
    except UserError as error:
        raise UserError(f"just compare failed: {error}") from None
    compared = json.loads(compared_path.with_suffix(".json").read_text(encoding="utf-8"))
    # compare names an encoder (its seeds) by the keys its runs differ in (tasks=nli): here, by arm
    arm_at = {str(m.run_dir): arm_of(m) for m in members}
    return compared, {encoder: arm_at[paths[0]] for encoder, paths in compared["encoders"].items()}, report
