"""Mtl's encoders run in MTEB through `mtl.eval.mteb.MTEBEncoder`, offline."""

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from mtl.eval.loading import baseline_encoder, load_encoder
from mtl.eval.mteb import MTEBEncoder

from .conftest import start_run


def test_a_trained_run_passes_every_offline_mteb_text_task(tiny_data, tmp_path):
    from mteb.mocks.mock_run import mock_run

    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    model = MTEBEncoder(run_dir, device="cpu")
    assert model.mteb_model_meta.name == "mtl/run"
    assert model.mteb_model_meta.embed_dim == load_encoder(run_dir).dim
    results = mock_run(model)
    text = {name: result for name, result in results.items() if "Mock" in name and result is not None}
    assert len(text) >= 20  # classification, clustering, STS, retrieval, reranking, ... (image/audio skipped)
    assert results.all_passed, results.to_markdown()


def sts14_images(folder):
    """MTEB's STS task type on SentEval's copy of STS14 images (the Hub is out of reach)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    pairs = (folder / "STS.input.images.txt").read_text(encoding="utf-8").splitlines()
    scores = [float(s) for s in (folder / "STS.gs.images.txt").read_text().splitlines()]

    class STS14Images(AbsTaskSTS):
        metadata = TaskMetadata(
            type="STS", name="STS14Images", main_score="cosine_spearman", description="STS14 images",
            reference="https://alt.qcri.org/semeval2014/task10/", dataset={"path": "NA", "revision": "NA"},
            category="t2t", eval_splits=["test"], eval_langs=["eng-Latn"], date=("2014-01-01", "2014-12-31"),
            dialect=[], domains=[], task_subtypes=[], license="not specified", annotations_creators="human-annotated",
            modalities=["text"], sample_creation="found", bibtex_citation="",
        )  # fmt: skip
        min_score, max_score = 0, 5

        def load_data(self, **kwargs):
            first, second = zip(*(pair.split("\t") for pair in pairs), strict=True)
            self.dataset = DatasetDict(
                {"test": Dataset.from_dict({"sentence1": first, "sentence2": second, "score": scores})}
            )
            self.data_loaded = True

    return STS14Images(), pairs, scores


def test_mteb_scores_mtl_embeddings_as_computed_directly(shared_data):
    import mteb

    encoder = baseline_encoder("glove-bow", str(shared_data / "glove" / "glove.6B.50d.zip"), device="cpu")
    task, pairs, gold = sts14_images(shared_data / "senteval" / "downstream" / "STS" / "STS14-en-test")
    result = mteb.evaluate(MTEBEncoder(encoder), [task], cache=None, show_progress_bar=False)
    scored = result.task_results[0].scores["test"][0]
    first, second = zip(*(pair.split("\t") for pair in pairs), strict=True)
    a, b = (
        encoder.encode(list(first), normalize_embeddings=True),
        encoder.encode(list(second), normalize_embeddings=True),
    )
    expected = spearmanr((a * b).sum(axis=1), gold).statistic
    assert len(pairs) == 750
    assert scored["cosine_spearman"] == pytest.approx(expected, abs=1e-6)
    assert 0.5 < expected < 0.9  # GloVe-BoW on STS14 images (SentEval: 0.63 Spearman with 840B)
    assert np.isfinite(scored["main_score"])


def test_just_mteb_writes_a_report_the_run_page_and_wandb_read(tiny_data, tmp_path, monkeypatch, capsys):
    """`just mteb` on MTEB's own offline tasks (its mocks: the Hub is out of reach here): the
    scores land in the run folder as a transfer report, in `just report`'s row and in W&B."""
    import json

    from mteb.mocks.mock_run import ALL_MOCK_TASK_TEST_GRID

    from mtl.cli import main
    from mtl.errors import UserError
    from mtl.eval import mteb_run
    from mtl.tracking.wandb_file import by_kind, run_files

    mocks = {task.metadata.name: task for task in ALL_MOCK_TASK_TEST_GRID}
    monkeypatch.setattr(mteb_run, "resolve_tasks", lambda names: [mocks[name] for name in names])
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    tasks = "tasks=MockSTSTask,MockClassificationTask,MockRetrievalTask"
    assert main(["mteb", f"run={run_dir}", tasks, "device=cpu", "wandb=offline"]) == 0
    report = json.loads((run_dir / "transfer-mteb.json").read_text())
    assert set(report["results"]) == {"MockSTSTask", "MockClassificationTask", "MockRetrievalTask"}
    assert all(-1 <= values["main_score"] <= 1 for values in report["results"].values())
    assert report["results"]["MockClassificationTask"]["metric"] == "accuracy"
    assert report["evaluated"][0]["file"] == "encoder.json" and report["dim"] == 16
    sts = report["results"]["MockSTSTask"]["main_score"]
    assert f"| MockSTSTask | cosine_spearman | {100 * sts:.2f} |" in capsys.readouterr().out
    page = tmp_path / "page.html"
    assert main(["report", str(run_dir), f"out={page}"]) == 0
    assert (
        "<th>MockSTSTask (mteb)</th>" in page.read_text() and f"<td>{100 * sts:.2f}</td>" in page.read_text()
    )
    (run_file,) = run_files(run_dir / "mteb")  # its own W&B run, beside the training run's
    records = by_kind(run_file)
    assert records["run"][0]["job_type"] == "mteb-eval"
    assert any(a["type"] == "run_table" and "mteb" in a["name"] for a in records["artifact"])
    monkeypatch.undo()  # MTEB's own task list: the names the docs give resolve, superseded ones too
    assert [t.metadata.name for t in mteb_run.resolve_tasks(["STSBenchmark", "Banking77Classification"])] == [
        "STSBenchmark", "Banking77Classification"
    ]  # fmt: skip
    # a name it lacks is one line with the nearest
    with pytest.raises(UserError, match=r"MTEB has no task STSBenchmarc \(did you mean STSBenchmark"):
        mteb_run.resolve_tasks(["STSBenchmarc"])


def test_a_hub_out_of_reach_is_one_line_without_retries(tiny_data, tmp_path, monkeypatch, capsys):
    """MTEB's data from the Hub, which cannot be reached: the cache at once, then one line, not
    minutes of "Retrying in 8s" (the Hub made unreachable here whatever the network)."""
    import os
    import time

    import huggingface_hub.constants

    from mtl.cli import main
    from mtl.files import hub

    def unreachable(*args, **kwargs):
        raise OSError("no route to host")

    monkeypatch.setattr(hub.socket, "create_connection", unreachable)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    started = time.perf_counter()
    code = main(["mteb", f"run={run_dir}", "tasks=STSBenchmark", "device=cpu", "wandb=disabled"])
    err = capsys.readouterr().err
    assert "Retrying in" not in err and time.perf_counter() - started < 60
    if code:  # (a cache that holds the task's data lets it run)
        assert code == 2 and "the Hugging Face Hub is out of reach from here" in err
        assert "score STSBenchmark from SentEval's copies with data=local" in err
    # the offline mode was this command's only: the process is as it was
    assert "HF_HUB_OFFLINE" not in os.environ and huggingface_hub.constants.HF_HUB_OFFLINE is False


def test_local_sts_tasks_hold_mtebs_own_pairs(shared_data):
    """data=local reads SentEval's copies; MTEB recorded statistics of its own copies (pair count,
    unique pairs, mean score, characters per column): the local build matches them, text included
    where the report says it is MTEB's text."""
    import mteb

    from mtl.eval.mteb_local import LOCAL_TASKS, SAME_TEXT, pairs

    root = shared_data / "senteval" / "downstream"
    for name, source in LOCAL_TASKS.items():
        first, second, scores = pairs(name, root)
        recorded = mteb.get_task(name).metadata.descriptive_stats["test"]
        assert len(scores) == recorded["num_samples"], name
        assert len(set(zip(first, second, strict=True))) == recorded["unique_pairs"], name
        assert sum(scores) / len(scores) == pytest.approx(recorded["label_statistics"]["avg_score"], abs=1e-9)
        same_text = [
            sum(map(len, first)) == recorded["text1_statistics"]["total_text_length"],
            sum(map(len, second)) == recorded["text2_statistics"]["total_text_length"],
        ]
        # STSBenchmark and SICK-R: SentEval's script tokenized them, and the report says so
        assert all(same_text) == (source.note == SAME_TEXT), name


def test_just_mteb_on_local_data_scores_as_transfer_does(shared_data, tiny_data, tmp_path, capsys):
    """`just mteb ... data=local` on MTEB's STS tasks without the Hub: each score equals the
    Spearman correlation of the same cosines `just transfer` wrote per pair (its STS12-16 items,
    pooled over subsets as MTEB pools them), or of the encoder's cosines (STS-B and SICK-R, which
    `just transfer` scores with a trained regressor instead)."""
    import json

    from mtl.cli import main

    glove = shared_data / "glove" / "glove.6B.50d.zip"
    run_dir, _ = start_run(tiny_data, tmp_path / "run", f"vectors={glove}")
    years = ["STS12", "STS13", "STS14", "STS15", "STS16"]
    names = ",".join([*years, "STSBenchmark", "SICKR"])  # the transfer suite's own spellings work too
    assert (
        main(["mteb", f"run={run_dir}", f"tasks={names}", "data=local", "device=cpu", "wandb=disabled"]) == 0
    )
    out = capsys.readouterr().out
    assert "tokenized by SentEval's script" in out and "written to" in out
    report = json.loads((run_dir / "transfer-mteb-local.json").read_text())
    # as MTL_DATA_DIR names it (README's is relative to the clone)
    assert Path(report["data"]).resolve() == shared_data / "senteval" / "downstream"
    scores = {task: values["main_score"] for task, values in report["results"].items()}
    assert set(scores) == {*years, "STSBenchmark", "SICK-R"}

    downstream = shared_data / "senteval" / "downstream"
    assert (
        main(["transfer", f"run={run_dir}", f"tasks={','.join(years)}", "mode=fast", f"data={downstream}"])
        == 0
    )
    items = np.load(run_dir / "transfer-fast.items.npz")
    # MTEB takes its cosines in float32, the suite in float64: near ties may swap ranks (1e-5 here)
    for year in years:
        predicted = np.concatenate(
            [items[k] for k in sorted(items) if k.startswith(f"{year}/") and k.endswith("/predicted")]
        )
        gold = np.concatenate(
            [items[k] for k in sorted(items) if k.startswith(f"{year}/") and k.endswith("/gold")]
        )
        assert scores[year] == pytest.approx(spearmanr(predicted, gold).statistic, abs=1e-4), year

    from mtl.eval.mteb_local import pairs

    encoder = load_encoder(run_dir, device="cpu")
    for name in ("STSBenchmark", "SICK-R"):
        first, second, gold = pairs(name, downstream)
        a, b = (
            encoder.encode(first, normalize_embeddings=True),
            encoder.encode(second, normalize_embeddings=True),
        )
        assert scores[name] == pytest.approx(spearmanr((a * b).sum(axis=1), gold).statistic, abs=1e-4), name
    assert (
        0.2 < scores["STS12"] < 0.9
    )  # a GloVe 50d encoder barely trained: between noise and the state of the art

    # both reports side by side on the run's page: two columns, never merged
    page = tmp_path / "page.html"
    assert main(["report", str(run_dir), f"out={page}"]) == 0
    assert "<th>STS12 (mteb-local)</th>" in page.read_text()


def test_local_data_names_what_it_lacks_in_one_line(tiny_data, tmp_path, monkeypatch, capsys):
    from mtl.cli import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert main(["mteb", f"run={run_dir}", "tasks=STS12,Banking77Classification", "data=local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "error: data=local: no local copy of Banking77Classification; SentEval's data gives STS12"
    )
    monkeypatch.delenv("MTL_DATA_DIR", raising=False)
    assert main(["mteb", f"run={run_dir}", "tasks=STS12", f"data={tmp_path / 'nowhere'}"]) == 2
    assert "SentEval's downstream folder" in capsys.readouterr().err


def test_an_mteb_score_of_a_task_named_as_senteval_s_is_its_main_score():
    """`just mteb data=local` scores STS12-16 under SentEval's names: its report's cell is MTEB's
    main score (was n/a: SentEval's Pearson/Spearman keys were looked for)."""
    from mtl.formats.transfer_report import headline

    assert headline("STS14", {"main_score": 0.5256, "metric": "cosine_spearman"}) == "52.56"
    assert (
        headline("STS14", {"all/pearson": 0.6, "all/spearman": 0.58}) == "60.00/58.00"
    )  # SentEval's own, in points
