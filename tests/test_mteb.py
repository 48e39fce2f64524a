"""Mtl's encoders run in MTEB through `mtl.eval.mteb.MTEBEncoder`, offline."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from mtl.eval.encoder import baseline_encoder, load_encoder
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
    assert records["run"][0].job_type == "mteb-eval"
    assert any(a.type == "run_table" and "mteb" in a.name for a in records["artifact"])
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
    # the offline mode was this command's only: the process is as it was
    assert "HF_HUB_OFFLINE" not in os.environ and huggingface_hub.constants.HF_HUB_OFFLINE is False
