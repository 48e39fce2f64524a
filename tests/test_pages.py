"""Every HTML page mtl writes, opened in chromium at 1280 and 1920 px (tests/browser.py): no
console error, every chart loads and draws something, nothing wider than the window, every table
whole in view (no cell cut at an edge or clipped), no text over text. The mixture-search page is looked at where its search runs (tests/test_mixture.py)."""

import json
import shutil
from pathlib import Path

import pytest

from mtl.cli import main

from .browser import SCREENSHOTS, chromium, look_at
from .conftest import FIXTURES, senteval_folder, start_run


@pytest.fixture(scope="module")
def pages(tiny_data, sweep_dir, tmp_path_factory) -> dict:
    """name -> an HTML page mtl wrote: each kind of page, from tiny runs."""
    chromium()  # skip (or, on CI, fail) before training anything
    root = tmp_path_factory.mktemp("pages")
    senteval = senteval_folder(root)
    run_dir, _ = start_run(tiny_data, root / "run", "pooling=max")
    assert (
        main(["transfer", f"run={run_dir}", "tasks=MR,CR", "mode=fast", f"data={senteval}", "wandb=disabled"])
        == 0
    )
    mixed_dir, _ = start_run(tiny_data, root / "mixed", "schedule=mixed", "balancer=pcgrad", "max_steps=8")
    wide = wide_runs(
        root / "wide", [run_dir, *sorted(p for p in sweep_dir[0].iterdir() if (p / "config.json").is_file())]
    )
    made = {
        "report-one-run": ["report", str(run_dir)],
        "report-wide": ["report", *map(str, wide)],
        "report-sweep": ["report", str(sweep_dir[0])],
        "report-mixed-run": ["report", str(mixed_dir)],
        "maxpool": ["maxpool", f"run={run_dir}", f"pool={FIXTURES / 'snli_tiny' / 's1.train'}", "min_count=3",
                    "wandb=disabled"],
        "tsne": ["tsne", f"run={run_dir}", "task=MR", f"data={senteval}", "limit=40"],
    }  # fmt: skip
    paths = {}
    for name, command in made.items():
        paths[name] = root / f"{name}.html"
        assert main([*command, f"out={paths[name]}"]) == 0, name
    return paths


# The full suite's headline tasks (Table 2's columns and more), as a user's report shows them
FULL_SUITE = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "SICK-E", "SICK-R", "STS-B", "STS14", "STS15",
              "STS16")  # fmt: skip


def wide_runs(root: Path, runs: list[Path]) -> list[Path]:
    """Copies of `runs`, each with a transfer report of the full suite's headline tasks (its
    numbers made up, its form the suite's): the table a laptop's window must hold whole."""
    copies = []
    for index, run in enumerate(runs):
        copy = root / run.name
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("transfer*"))
        results = {}
        for number, task in enumerate(FULL_SUITE):
            value = 0.5 + 0.03 * number + 0.01 * index
            if task.startswith("STS1"):
                results[task] = {"all/pearson": value, "all/spearman": value - 0.02}
            elif task in ("SICK-R", "STS-B"):
                results[task] = {"pearson": value, "spearman": value - 0.01, "mse": 0.4}
            elif task == "MRPC":
                results[task] = {"acc": value, "f1": value + 0.05}
            else:
                results[task] = {"acc": value, "dev_acc": value + 0.01}
        report = {
            "results": results,
            "dim": 8,
            "encoder": run.name,
            "mode": "fast",
            "pooling": None,
            "seconds": 1.0,
        }
        (copy / "transfer.json").write_text(json.dumps(report))
        copies.append(copy)
    return copies


@pytest.mark.parametrize(
    "name", ["report-one-run", "report-sweep", "report-wide", "report-mixed-run", "maxpool", "tsne"]
)
def test_a_page_reads_cleanly_in_a_browser(pages, name):
    problems = look_at(pages[name], name)
    assert not problems, f"{name} ({SCREENSHOTS / name}-<width>.png):\n" + "\n".join(problems)


def test_the_browser_check_finds_what_it_looks_for(tmp_path):
    """Each check fails on a page with that fault: not a check that cannot fail."""
    import base64
    import io

    from mtl.analysis.page import pyplot

    plt = pyplot()

    def svg(draw: bool) -> str:
        figure, axis = plt.subplots(figsize=(3, 2))
        axis.grid(alpha=0.3)
        if draw:
            axis.plot([0, 1, 2], [1, 3, 2])
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg")
        plt.close(figure)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    empty, drawn_one = svg(False), svg(True)
    page = tmp_path / "faulty.html"
    page.write_text(
        "<html><body style='margin:0'>"
        f'<img src="data:image/svg+xml;base64,{drawn_one}"><img src="data:image/svg+xml;base64,{empty}">'
        '<img src="missing.png" alt="gone">'
        "<table style='width:2000px'><tr><td>too wide</td></tr></table>"
        "<div style='width:300px;overflow-x:auto'><table><tr><th>seen</th><th style='min-width:400px'>cut</th></tr></table></div>"
        "<table><tr><td style='max-width:30px;overflow:hidden;text-overflow:ellipsis'>stopped by</td></tr></table>"
        "<p style='position:absolute;top:0;left:0'>on top</p><p style='position:absolute;top:0;left:0'>under</p>"
        "<script>console.error('broken script')</script></body></html>"
    )
    problems = "\n".join(look_at(page, "faulty"))
    for expected in ("chart 2 draws nothing", "console: broken script", 'does not load: img "gone"',
                     'wider than the window: table "too wide"', 'out of view until the table scrolls: th "cut"',
                     'text over text: p "on top" over p "under"', 'clipped in its cell: td "stopped by"',
                     "the page scrolls sideways"):  # fmt: skip
        assert expected in problems, expected
    assert "chart 1 draws nothing" not in problems


def test_readme_picture_quotes_the_commands_and_draws_the_report(pages, tiny_data, tmp_path):
    """`just readme-picture` (what README's first screen shows) on a finished run: the transfer's
    last lines as it printed them, and a thumbnail of the report's first screen."""
    from PIL import Image

    run_dir = pages["report-one-run"].parent / "run"
    senteval = pages["report-one-run"].parent / "downstream"
    out = tmp_path / "images"
    assert main(["readme-picture", f"run={run_dir}", f"out={out}", "tasks=MR,CR", f"data={senteval}"]) == 0
    text = (out / "first-run.txt").read_text()
    assert text.startswith(f"$ just transfer run={run_dir} mode=fast tasks=MR,CR\n") and "MR" in text
    assert "\r" not in text and "\x1b" not in text
    with Image.open(out / "report.png") as image:
        assert image.size == (640, 450)
    assert not (out / "report.html").exists()
