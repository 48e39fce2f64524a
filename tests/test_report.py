"""`just report`: run folders (or a sweep folder, or a W&B group) turned into one HTML page."""

import base64
import json
from html.parser import HTMLParser

import pytest

from mtl.cli import main

from .conftest import start_run


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.cells = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        self.cells.append(data)


def test_the_report_of_a_sweep_holds_one_image_per_plot_and_every_run(sweep_dir, tmp_path):
    out, _ = sweep_dir
    page_path = tmp_path / "report.html"
    assert main(["report", str(out), f"out={page_path}"]) == 0
    text = page_path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    titles = [image["alt"] for image in page.images]
    # Every run overlaid in one set of curves, the recovery after block switches, Figure 2 (steps_nli differs).
    assert len(titles) == 3 and titles[1].startswith("Loss recovery") and titles[2].startswith("Figure 2")
    for image in page.images:
        prefix = "data:image/svg+xml;base64,"
        assert image["src"].startswith(prefix)
        svg = base64.b64decode(image["src"][len(prefix) :]).decode()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    curves = base64.b64decode(page.images[0]["src"].split(",", 1)[1]).decode()
    assert "steps_nli2" in curves and "steps_nli4" in curves  # both runs in one chart's legend
    assert {"steps_nli2", "steps_nli4", "tasks.nli.steps"} <= set(page.cells)  # the swept key is a column
    # (the two tiny runs may tie on a score: a tied column has no best run in bold, tested below)


def member_copy(sweep_dir, tmp_path, name, change):
    """A copy of the sweep's first member whose recorded config `change` edits."""
    import shutil

    out, _ = sweep_dir
    copy = tmp_path / name
    shutil.copytree(out / "steps_nli2", copy, ignore=shutil.ignore_patterns("wandb", "checkpoints"))
    record = json.loads((copy / "config.json").read_text())
    change(record["config"])
    (copy / "config.json").write_text(json.dumps(record))
    return copy


def test_figure_2_needs_runs_that_differ_in_the_swept_key_alone(sweep_dir, tmp_path):
    out, _ = sweep_dir

    def wider(config):
        config["tasks"]["nli"]["steps"] = 8
        config["model"]["hidden"] = 64

    other = member_copy(sweep_dir, tmp_path, "wide", wider)
    page_path = tmp_path / "report.html"
    assert (
        main(["report", str(out / "steps_nli2"), str(out / "steps_nli4"), str(other), f"out={page_path}"])
        == 0
    )
    text = page_path.read_text(encoding="utf-8")
    assert "<h2>Figure 2" not in text
    assert "No Figure 2: the finished runs differ in tasks.nli.steps but also in model.hidden" in text


def test_every_transfer_report_and_the_pretrained_models_name_reach_the_table(sweep_dir, tmp_path):
    def pretrained(config):
        config["model"].update(encoder="hf", hf_model="../shared/data/models/all-MiniLM-L6-v2")

    run = member_copy(sweep_dir, tmp_path, "minilm", pretrained)
    for name, accuracy in (("transfer", 0.81), ("transfer-fast", 0.79), ("transfer-fast-pool-mean", 0.75)):
        (run / f"{name}.json").write_text(json.dumps({"results": {"MR": {"acc": accuracy}}}))
    page_path = tmp_path / "report.html"
    assert main(["report", str(run), f"out={page_path}"]) == 0
    page = Page()
    page.feed(page_path.read_text(encoding="utf-8"))
    for cell in ("all-MiniLM-L6-v2", "MR", "MR (fast)", "MR (fast-pool-mean)", "81.00", "79.00", "75.00"):
        assert cell in page.cells, cell
    assert "hf 8" not in page.cells


def test_report_finds_a_group_and_names_a_folder_that_is_not_a_run(sweep_dir, tmp_path, capsys):
    out, _ = sweep_dir
    assert main(["report", "group=tiny", f"runs={out.parent}", f"out={tmp_path / 'g.html'}"]) == 0
    assert (tmp_path / "g.html").read_text().count("<img") == 3
    assert main(["report", str(tmp_path)]) == 2
    assert "is not a run folder" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["{not json", '{"members": 3}', "[1, 2]", '{"sweep": "x"}'])
def test_report_of_a_damaged_sweep_record_is_one_line(tmp_path, capsys, text):
    (tmp_path / "sweep.json").write_text(text)
    assert main(["report", str(tmp_path)]) == 2
    assert f"error: {tmp_path / 'sweep.json'} is damaged" in capsys.readouterr().err


def test_transfer_against_embedding_size_is_drawn_per_encoder(sweep_dir, tmp_path):
    runs = []
    for dim, micro in ((64, 70.0), (128, 72.5), (256, 73.0)):
        run = member_copy(
            sweep_dir, tmp_path, f"b{dim}", lambda config, dim=dim: config["model"].update(bottleneck=dim)
        )
        report = {
            "dim": dim,
            "aggregate": {"micro": micro, "macro": micro, "tasks": ["MR"]},
            "results": {"MR": {"acc": 0.7}},
        }
        (run / "transfer-fast.json").write_text(json.dumps(report))
        runs.append(str(run))
    page_path = tmp_path / "sizes.html"
    assert main(["report", *runs, f"out={page_path}"]) == 0
    page = Page()
    page.feed(page_path.read_text(encoding="utf-8"))
    (image,) = [i for i in page.images if i["alt"].startswith("Transfer against embedding dimension")]
    svg = base64.b64decode(image["src"].split(",", 1)[1]).decode()
    assert "bilstm max (transfer-fast)" in svg  # one line for the encoder, its three sizes
    assert main(["report", runs[0], f"out={tmp_path / 'one.html'}"]) == 0
    assert "Transfer against embedding dimension" not in (tmp_path / "one.html").read_text()


def test_bold_marks_a_columns_best_run_and_a_tie_marks_none(sweep_dir, tmp_path):
    runs = []
    for name, mr, cr in (("a", 0.70, 0.80), ("b", 0.75, 0.80)):
        run = member_copy(sweep_dir, tmp_path, name, lambda config: None)
        (run / "transfer.json").write_text(json.dumps({"results": {"MR": {"acc": mr}, "CR": {"acc": cr}}}))
        runs.append(str(run))
    page_path = tmp_path / "bold.html"
    assert main(["report", *runs, f"out={page_path}"]) == 0
    text = page_path.read_text(encoding="utf-8")
    assert text.count("<strong>75.00</strong>") == 1  # MR: b is ahead
    assert "<strong>80.00</strong>" not in text and text.count("<td>80.00</td>") == 2  # CR: a tie


def test_no_bold_where_just_compare_tells_no_run_apart(sweep_dir, tmp_path):
    """A bold best where the significance test says "no evidence" would claim what it does not."""
    from mtl.analysis.report import _results_table, _undecided
    from mtl.analysis.significance import Comparison, SignificanceConfig
    from mtl.runs import Run

    runs = []
    for name, mr, cr in (("a", 0.70, 0.70), ("b", 0.75, 0.80)):
        run = member_copy(sweep_dir, tmp_path, name, lambda config: None)
        (run / "transfer.json").write_text(json.dumps({"results": {"MR": {"acc": mr}, "CR": {"acc": cr}}}))
        runs.append(Run.read(run))
    # CR's interval excludes 0 (b better); MR's holds it (no evidence)
    comparisons = [
        Comparison("MR", "a", "b", 70.0, 75.0, low=-9.0, high=1.0, first_seeds=3, second_seeds=3),
        Comparison("CR", "a", "b", 70.0, 80.0, low=-14.0, high=-6.0, first_seeds=3, second_seeds=3),
    ]
    undecided = _undecided((SignificanceConfig(report="transfer"), [], comparisons, []))
    assert undecided == {("transfer", "MR")}
    table = _results_table(runs, undecided)
    assert "<strong>75.00</strong>" not in table and "<td>75.00</td>" in table  # MR: not told apart
    assert "<strong>80.00</strong>" in table  # CR: b better
    assert "no bold where it tells no run from the first" in table
    assert "no bold where" not in _results_table(runs)  # without a test, bold as before


def test_the_size_chart_joins_runs_that_differ_in_size_alone(sweep_dir, tmp_path):
    # a 64-d and a 256-d run that also differ in their learning rate: a line through them would
    # draw the learning rate's effect as the size's (a false trend); a run of another encoder with
    # one size is named, not dropped in silence
    def sized(name, dim, change):
        def edit(config):
            config["model"].update(bottleneck=dim)
            change(config)

        run = member_copy(sweep_dir, tmp_path, name, edit)
        report = {"dim": dim, "aggregate": {"micro": 70.0 + dim / 100, "macro": 70.0, "tasks": ["MR"]},
                  "results": {"MR": {"acc": 0.7}}}  # fmt: skip
        (run / "transfer-fast.json").write_text(json.dumps(report))
        return str(run)

    runs = [
        sized("small", 64, lambda config: None),
        sized("large", 256, lambda config: config["optim"].update(lr=0.5)),
        sized("other", 384, lambda config: config["model"].update(encoder="gru")),
    ]
    page_path = tmp_path / "sizes.html"
    assert main(["report", *runs, f"out={page_path}"]) == 0
    text = page_path.read_text(encoding="utf-8")
    assert "Transfer against embedding dimension" not in text
    assert (
        "No size line for bilstm max (transfer-fast): its runs differ in optim.lr besides their size" in text
    )
    assert "Not in the size chart (transfer-fast): other (384-d), the only size of gru max here." in text


def test_transfer_against_the_first_dimensions_is_a_curve_per_run_and_task(sweep_dir, tmp_path):
    run = member_copy(sweep_dir, tmp_path, "matryoshka", lambda config: None)
    for name, dim, acc in (
        ("transfer-fast", 16, 0.75),
        ("transfer-fast-dim8", 8, 0.72),
        ("transfer-fast-dim4", 4, 0.6),
    ):
        report = {"dim": dim, "results": {"MR": {"acc": acc}, "CR": {"acc": acc - 0.1}}}
        (run / f"{name}.json").write_text(json.dumps(report))
    page_path = tmp_path / "widths.html"
    assert main(["report", str(run), f"out={page_path}"]) == 0
    page = Page()
    page.feed(page_path.read_text(encoding="utf-8"))
    (image,) = [
        i for i in page.images if i["alt"].startswith("Transfer against the embedding's first dimensions")
    ]
    svg = base64.b64decode(image["src"].split(",", 1)[1]).decode()
    assert "matryoshka (transfer-fast)" in svg
    (run / "transfer-fast-dim8.json").unlink()
    (run / "transfer-fast-dim4.json").unlink()
    assert main(["report", str(run), f"out={page_path}"]) == 0  # one width: no curve
    assert "first dimensions" not in page_path.read_text(encoding="utf-8")


def test_a_learning_curve_over_the_share_of_training_data(tiny_data, senteval, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    common = ["transfer", f"run={run_dir}", "mode=fast", "tasks=MR,CR", f"data={senteval}", "wandb=disabled"]
    for fraction in ("0.25", "0.5", "1"):
        assert main([*common, f"train_fraction={fraction}", f"vectors={tiny_data['vectors']}"]) == 0
    names = sorted(p.name for p in run_dir.glob("transfer-fast*.json") if ".senteval" not in p.name)
    assert names == ["transfer-fast-frac0.25.json", "transfer-fast-frac0.5.json", "transfer-fast.json"]
    report = json.loads((run_dir / "transfer-fast-frac0.25.json").read_text())
    assert report["results"]["MR"]["ntest"] == 60  # every item is still predicted, from a quarter of its fold
    assert main(["report", str(run_dir), f"out={tmp_path / 'curve.html'}"]) == 0
    page = Page()
    page.feed((tmp_path / "curve.html").read_text(encoding="utf-8"))
    assert any(i["alt"].startswith("Transfer against the share of each task") for i in page.images)
    senteval_mode = [a for a in common if a != "mode=fast"] + ["mode=senteval"]
    assert main([*senteval_mode, "train_fraction=0.5"]) == 2
    assert "train_fraction=0.5 subsamples scikit-learn's training sets" in capsys.readouterr().err


def test_results_come_before_the_keys_and_paths_show_their_file_name(sweep_dir, tmp_path):
    """On a narrow screen the results must be what shows: run, dev/test, transfer, then the keys,
    then the verdict against the paper."""

    def elsewhere(config):
        config["data"]["vectors"] = "/home/someone/embeddings/glove.840B.300d.txt"

    other = member_copy(sweep_dir, tmp_path, "other-vectors", elsewhere)
    out, _ = sweep_dir
    (other / "transfer.json").write_text(json.dumps({"results": {"MR": {"acc": 0.7}}}))
    page_path = tmp_path / "report.html"
    assert main(["report", str(out / "steps_nli2"), str(other), f"out={page_path}"]) == 0
    text = page_path.read_text(encoding="utf-8")
    headers = [part.split("</tr>", 1)[0] for part in text.split("<tr><th>run</th>")[1:]]
    tables = [["run", *(cell.split("</th>")[0] for cell in header.split("<th>")[1:])] for header in headers]
    # the results' tables (training tasks, then each kind of transfer task), then how each run was trained
    assert tables[0] == ["run", "SNLI dev", "SNLI test", "ClassifSQuAD dev"], tables
    assert tables[1] == ["run", "MR"], tables
    assert "encoder" in tables[2] and "<h3>Transfer: classification (accuracy, %)</h3>" in text
    # the keys before the paper's verdict (a sentence, the widest cell: it pushed them out of view)
    assert tables[2][-2:] == ["data.vectors", "vs paper"], tables
    assert '<td title="/home/someone/embeddings/glove.840B.300d.txt">glove.840B.300d.txt</td>' in text
    assert ">/home/someone/" not in text  # no machine path shown in a cell


def test_a_diverged_run_does_not_flatten_the_others_and_an_untrained_task_says_so(sweep_dir, tmp_path):
    def with_losses(name, change):
        run = member_copy(sweep_dir, tmp_path, name, lambda config: None)
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        for row in rows:
            change(row)
        (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        return str(run)

    def diverged(row):
        if "nli/train/loss" in row:
            row["nli/train/loss"] *= 400

    def squad_untrained(row):
        row.pop("squad/train/loss", None)

    runs = [with_losses("fine", squad_untrained), with_losses("also-fine", squad_untrained),
            with_losses("diverged", lambda row: (diverged(row), squad_untrained(row)))]  # fmt: skip
    page_path = tmp_path / "curves.html"
    assert main(["report", *runs, f"out={page_path}"]) == 0
    page = Page()
    page.feed(page_path.read_text(encoding="utf-8"))
    curves = base64.b64decode(page.images[0]["src"].split(",", 1)[1]).decode()
    assert "off the chart: diverged (up to" in curves
    assert "never trained in these runs" in curves


def test_a_score_on_a_sample_of_its_split_is_marked_so(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "sampled", "max_eval=20")
    whole_dir, _ = start_run(tiny_data, tmp_path / "whole")
    page_path = tmp_path / "report.html"
    assert main(["report", str(run_dir), str(whole_dir), f"out={page_path}"]) == 0
    page = page_path.read_text()
    results = page.split("How each run was trained")[0]  # the results' tables
    rows = {row.split("</td>", 1)[0]: row.split("</tr>", 1)[0] for row in results.split("<tr><td")[1:]}
    sampled = next(row for name, row in rows.items() if "sampled" in name)
    whole = next(row for name, row in rows.items() if "whole" in name)
    assert sampled.count(" §</") == 2 and "§" not in whole  # SNLI dev, ClassifSQuAD dev; test whole
    assert "<strong>" in page  # a marked score is still compared (the best of a column in bold)
    assert "SNLI dev: a seeded sample of 20 of 100 (sampled)" in page
    assert (
        '<h3>How each run was trained</h3><div class="wide"><table>' in page
    )  # (a sampled split once hid it)


def test_the_seeds_of_one_configuration_are_one_row_with_mean_and_sd(tiny_data, tmp_path):
    """Runs that differ in seed= alone: one row, each score their mean ± sample sd; another
    configuration keeps its own row; two copies of one seed are not two seeds."""
    import shutil

    import numpy as np

    seeds = [start_run(tiny_data, tmp_path / f"lr-seed{seed}", f"seed={seed}")[1] for seed in (1, 2, 3)]
    other, _ = start_run(tiny_data, tmp_path / "wide", "hidden=16")
    page_path = tmp_path / "report.html"
    runs = [str(tmp_path / f"lr-seed{seed}") for seed in (1, 2, 3)]
    assert main(["report", *runs, str(other), f"out={page_path}"]) == 0
    page = page_path.read_text()
    results, how = page.split('<table class="results">')[1], page.split("How each run was trained")[1]
    rows = [row.split("</tr>", 1)[0] for row in results.split("</table>")[0].split("<tr><td")[1:]]
    assert len(rows) == 2 and rows[0].startswith(">lr (3 seeds)</td>")
    dev = [100 * s["best/nli/dev/acc"] for s in seeds]
    assert f"{np.mean(dev):.2f} ±\u00a0{np.std(dev, ddof=1):.2f}" in rows[0]
    trained = [row.split("</tr>", 1)[0] for row in how.split("</table>")[0].split("<tr><td")[1:]]
    assert len(trained) == 2 and "1, 2, 3" in trained[0]  # the seed column lists them
    assert "mean ± sample standard deviation over its seeds" in page
    page_parser = Page()
    page_parser.feed(page)
    curves = base64.b64decode(page_parser.images[0]["src"].split(",", 1)[1]).decode()
    assert "lr (3 seeds)" in curves and "lr-seed2" not in curves  # one curve, the seeds' range shaded
    shutil.copytree(tmp_path / "lr-seed1", tmp_path / "copy")
    assert main(["report", runs[0], str(tmp_path / "copy"), f"out={page_path}"]) == 0
    assert "seeds)" not in page_path.read_text().split("<h2>", 2)[1]


def test_a_baselines_folder_is_a_row_beside_the_runs(tiny_data, senteval, tmp_path, capsys):
    """What `just compare` reads, `just report` shows: a `just transfer baseline=...` folder is a
    row (its transfer scores, no training) and an encoder of the significance table."""
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    baseline = tmp_path / "baseline-glove-bow"
    common = [
        "mode=fast",
        "tasks=MR",
        f"data={senteval}",
        f"vectors={tiny_data['vectors']}",
        "wandb=disabled",
    ]
    assert main(["transfer", f"run={run_dir}", *common]) == 0
    assert main(["transfer", "baseline=glove-bow", f"out={baseline}", *common]) == 0
    page_path = tmp_path / "report.html"
    assert main(["report", str(run_dir), str(baseline), f"out={page_path}"]) == 0
    page = page_path.read_text()
    rows: dict[str, str] = {}  # a run's rows of every table (results, then how it was trained), joined
    for row in page.split("<tr><td")[1:]:
        name = row.split("</td>", 1)[0]
        rows[name] = rows.get(name, "") + row.split("</tr>", 1)[0]
    mr = json.loads((baseline / "transfer-fast.json").read_text())["results"]["MR"]["acc"]
    assert f"{100 * mr:.2f}</" in rows[">baseline-glove-bow"]  # its MR accuracy, in its column
    assert "baseline (just transfer)" in rows[">baseline-glove-bow"]
    assert "1 run(s) and 1 baseline(s)" in page
    assert "Is the difference real? (transfer-fast" in page
    capsys.readouterr()
    assert main(["compare", str(run_dir), str(baseline), "wandb=disabled"]) == 2  # report=transfer: none here
    assert "holds transfer reports transfer-fast, not transfer.json: give report=transfer-fast" in (
        capsys.readouterr().err
    )


def test_a_decomposition_cell_carries_its_wilson_interval_and_items():
    """`100.00 (1)` once stood without an interval: each part's accuracy now has SciPy's 95%
    Wilson interval, which at one item spans 20.7-100 (the normal one collapses to a point)."""
    from mtl.analysis.decompose import accuracy_cell, wilson_interval

    assert accuracy_cell(100.0, 1) == "100.00 [20.7, 100.0] (1)"
    assert accuracy_cell(62.5, 8) == "62.50 [30.6, 86.3] (8)"  # 5 of 8 (by hand: Wilson 1927)
    assert accuracy_cell(None, 0) == "– (0)"
    low, high = wilson_interval(84.0, 10_000)
    assert 83.2 < low < 84.0 < high < 84.8
