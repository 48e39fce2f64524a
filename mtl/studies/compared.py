"""A study's arms transferred and compared: `just compare`'s verdicts over their runs, seeds
grouped, computed in the study's own process (it once started `python -m mtl compare`, 3-4 s of
imports a study)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from mtl.analysis import significance
from mtl.analysis.page import forest
from mtl.analysis.significance import correct_study
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.formats.comparison import method_of
from mtl.jobs.member import Member
from mtl.studies.arms import transfer_members


def transfer_and_compare(
    members: list[Member], tasks: str, mode: str, data: str | None, out: Path
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
    arm_at = {str(m.run_dir): m.arm for m in members}
    return compared, {encoder: arm_at[paths[0]] for encoder, paths in compared["encoders"].items()}, report


def across_by_arm(compared: dict, names: dict[str, str]) -> list[dict]:
    """compare.json's verdicts across tasks (`significance.across_tasks`), each encoder named by
    its arm: what every study's page shows below its per-task verdicts."""
    rows = []
    for record in compared.get("across_tasks") or []:
        first = names.get(record["first"], record["first"])
        second = names.get(record["second"], record["second"])
        decided = record["low"] > 0 or record["high"] < 0
        verdict = (
            (f"{first} better" if record["difference"] > 0 else f"{second} better")
            if decided
            else "no evidence"
        )
        known = all(
            record.get(f"{side}_seeds", 1) > 1 or record.get(f"{side}_deterministic")
            for side in ("first", "second")
        )
        rows.append({
            "first": first, "second": second, "tasks": record["tasks"], "difference": record["difference"],
            "low": record["low"], "high": record["high"], "ahead": record["ahead"],
            "share_low": record["share_low"], "share_high": record["share_high"],
            "verdict": verdict if known or not decided else f"{verdict} (1 seed)",
        })  # fmt: skip
    return rows


def against(compared: dict, names: dict[str, str], arm: str, others: list[str]) -> list[dict]:
    """Every comparison of `arm` with one of `others` on every transfer task, Holm-corrected
    together (the study's whole family, so no comparison is spared the others' tests), each
    oriented arm - other: task, other, difference, low, high, holm_p, family, decided, seeds, method."""
    family = [
        dict(c)
        for c in compared["comparisons"]
        if arm in (names[c["first"]], names[c["second"]])
        and ({names[c["first"]], names[c["second"]]} - {arm}) & set(others)
    ]
    correct_study(family)
    rows = []
    for c in family:
        first, second = names[c["first"]], names[c["second"]]
        sign = 1 if first == arm else -1
        low, high = sorted((sign * c["low"] + 0.0, sign * c["high"] + 0.0))
        rows.append({"task": c["task"], "other": second if first == arm else first,
                     "difference": sign * (c["first_score"] - c["second_score"]) + 0.0, "low": low, "high": high,
                     "holm_p": c["holm_p"], "family": c.get("family", 1), "decided": c["holm_p"] <= 1 - c["confidence"],
                     "seeds": min(c["first_seeds"], c["second_seeds"]), "method": method_of(c)})  # fmt: skip
    return rows


def verdicts_against(
    compared: dict, names: dict[str, str], baseline: str, others: list[str], above: str, below: str, name: str
) -> list[dict]:
    """Per transfer task and arm of `others`: its difference from `baseline`, the interval and
    verdict (`above`, `below` or no evidence), Holm over every arm x task; the arm under `name`."""
    rows = []
    for row in against(compared, names, baseline, others):  # oriented baseline - arm: turned round
        difference, low, high = -row["difference"] + 0.0, -row["high"] + 0.0, -row["low"] + 0.0
        verdict = "no evidence"
        if row["decided"]:
            verdict = (above if difference > 0 else below) + (" (1 seed)" if row["seeds"] < 2 else "")
        rows.append({"task": row["task"], name: row["other"], "difference": difference, "low": low, "high": high,
                     "holm_p": row["holm_p"], "family": row["family"], "verdict": verdict,
                     "interval_method": row["method"]})  # fmt: skip
    return sorted(rows, key=lambda r: (others.index(r[name]), r["task"]))


def verdict_lines(verdicts: list[dict], noun: str, baseline: str) -> list[str]:
    """A study's verdicts against its baseline as markdown (nothing when there are none): each
    `noun` (arm, method) minus `baseline`, its interval and verdict, Holm over the whole family."""
    if not verdicts:
        return []
    family = max(r["family"] for r in verdicts)
    return [
        "",
        f"Each {noun} against {baseline}: studentized intervals (seeds, then test items), Holm over all "
        f"{family} comparisons ({noun}s x transfer tasks); points: accuracy in %, Pearson r x 100. "
        "No evidence is not evidence of no effect.",
        "",
        f"| transfer task | {noun} | {noun} - {baseline} | 95% interval (Holm) | verdict |",
        "|---|---|---:|---:|---|",
        *(
            f"| {r['task']} | {r[noun]} | {r['difference']:+.2f} | [{r['low']:+.2f}, {r['high']:+.2f}] | "
            f"{r['verdict']} |"
            for r in verdicts
        ),
    ]


def verdicts_html(
    verdicts: list[dict], arms: list[str], noun: str, baseline: str
) -> tuple[list[str], list[str]]:
    """A study page's verdicts against its baseline: the forest of differences with its caption
    (nothing when there are none), then the table under its heading."""
    family = max((r["family"] for r in verdicts), default=0)
    rows = "".join(
        f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r[noun])}</td><td>{r['difference']:+.2f}</td>"
        f"<td>[{r['low']:+.2f}, {r['high']:+.2f}]</td><td>{html.escape(r['verdict'])}</td></tr>"
        for r in verdicts
    )
    drawn = []
    if verdicts:
        image = forest(verdicts, arms, noun, baseline)
        drawn = [
            f'<img src="data:image/svg+xml;base64,{image}" alt="each {noun} minus {html.escape(baseline)}, per '
            'transfer task, with its Holm interval">',
            f"<p>Each {noun} minus {html.escape(baseline)} (points: accuracy %, Pearson r x 100), its 95% interval "
            f"over seeds then test items, Holm over all {family} comparisons: green beats {html.escape(baseline)}, "
            "red is below it, grey is no evidence (which is not evidence of no difference).</p>",
        ]
    return drawn, [
        "<h2>Verdicts</h2>",
        f'<div class="wide"><table><tr><th>transfer task</th><th>{noun}</th><th>{noun} - {html.escape(baseline)}</th>'
        f"<th>95% interval (Holm)</th><th>verdict</th></tr>{rows}</table></div>",
    ]


def across_section(rows: list[dict]) -> str:
    """The verdicts across tasks as a table (nothing when no pair had two tasks)."""
    if not rows:
        return ""
    lines = [
        "",
        "Across the transfer tasks: the mean of A - B over each pair's tasks (each seed's mean over them, "
        "one studentized test at 95%) and the share of the tasks on which A is ahead, with its interval.",
        "",
        "| A | B | tasks | A - B (mean) | 95% interval | verdict | A ahead on | share |",
        "|---|---|---:|---:|---:|---|---:|---:|",
        *(
            f"| {r['first']} | {r['second']} | {len(r['tasks'])} | {r['difference']:+.2f} | "
            f"[{r['low']:+.2f}, {r['high']:+.2f}] | {r['verdict']} | {r['ahead']} of {len(r['tasks'])} | "
            f"[{r['share_low']:.2f}, {r['share_high']:.2f}] |"
            for r in rows
        ),
    ]
    return "\n".join(lines) + "\n"
