"""`just readme-picture`: what README.md's first screen shows, made from a real run: the last lines
of `just train-multitask` and `just transfer` as they printed them, and a thumbnail of `just
report`'s page (its top, at a laptop's 1280 px, in headless chromium).

    just readme-picture run=runs/<a cpu-small run>     # transfer it, report it, draw it
    just readme-picture                                 # train preset=cpu-small first

Writes docs/images/first-run.txt and docs/images/report.png (or under out=); the README quotes
the one and shows the other. Developer tool: needs chromium and playwright (the dev extra).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import atomic
from mtl.files.atomic import atomic_path

WIDTH, HEIGHT = 1280, 900  # the page's first screen at a laptop's width
THUMBNAIL_WIDTH = 640


@dataclass
class ReadmePictureConfig:
    run: str = ""  # a finished run to show; empty: train one with preset=cpu-small first (3 minutes)
    out: str = "docs/images"  # where first-run.txt and report.png go
    lines: int = 6  # the last lines of each command's output kept
    tasks: str = "MR,CR,TREC,STS14"  # the transfer tasks shown (mode=fast)
    data: str = ""  # SentEval's downstream folder; empty: $MTL_DATA_DIR/senteval/downstream


def command(args: Sequence[str]) -> None:
    config = apply_overrides(ReadmePictureConfig(), list(args))
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = []
    run = Path(config.run).expanduser() if config.run else None
    if run is None:
        run = Path("runs") / "readme-picture"
        printed = _printed(["train-multitask", "preset=cpu-small", f"out={run}", "wandb=disabled"])
        shown += ["$ just train-multitask preset=cpu-small", *printed[-config.lines :]]
    elif not (run / "summary.json").is_file():
        raise UserError(f"run={config.run}: not a finished run (no summary.json): train it first")
    transfer = ["mode=fast", f"tasks={config.tasks}"]
    printed = _printed(
        [
            "transfer",
            f"run={run}",
            *transfer,
            *([f"data={config.data}"] if config.data else []),
            "wandb=disabled",
        ]
    )
    shown += [f"$ just transfer run={run} {' '.join(transfer)}", *printed[-config.lines :]]
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        _printed(["report", str(run), f"out={page}"])
        with atomic_path(out / "report.png", "thumbnail") as png:  # whole, or not there
            thumbnail(page, png)
    atomic.write_text(out / "first-run.txt", "\n".join(shown) + "\n", "README's output")
    print(f"wrote {out / 'first-run.txt'} and {out / 'report.png'}")


def _printed(arguments: list[str]) -> list[str]:
    """A command of mtl run here, as a user would see it: its printed lines (the bars' last state)."""
    from mtl.cli import main

    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        status = main(arguments)
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in captured.getvalue().splitlines()]
    if status != 0:
        raise UserError(f"just {arguments[0]} failed: {' '.join(lines[-1:])}")
    return last_bar_states([line for line in lines if line.strip()])


def last_bar_states(lines: list[str]) -> list[str]:
    """`lines` with each progress bar's last state only (a bar redrawn on close prints twice)."""
    return [
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if not (
            "|" in line and line.split("|", 1)[0].strip() and line.split("|", 1)[0] == after.split("|", 1)[0]
        )
    ]


def thumbnail(page: Path, png: Path) -> None:
    """The page's first screen at 1280 px, scaled to THUMBNAIL_WIDTH."""
    from playwright.sync_api import sync_playwright

    browser_path = (
        os.environ.get("MTL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if browser_path is None:
        raise UserError("readme-picture needs chromium: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            scale = THUMBNAIL_WIDTH / WIDTH
            tab = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=scale)
            tab.goto(page.resolve().as_uri(), wait_until="load")
            tab.screenshot(path=str(png), type="png")  # (written under a temporary name)
        finally:
            browser.close()
