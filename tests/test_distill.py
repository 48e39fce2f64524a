"""`distill`: a student learns a teacher encoder's embeddings (mse, margin_mse, kl), the teacher's
embeddings computed once and cached, any encoder mtl loads as the teacher."""

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.tasks import build_task, named_config
from mtl.train.data import teacher
from mtl.train.loop import run

from .conftest import FIXTURES, exported_encoder, start_run, straight_and_resumed

SNLI = FIXTURES / "snli_tiny"


def distill(*keys):
    entry, config = named_config("distill")
    return build_task(entry, apply_overrides(config, ["teacher=somewhere", *keys]))


def with_teacher(task, embeddings: np.ndarray, example_rows: np.ndarray):
    task.example_rows = example_rows
    task.teacher_texts = [str(i) for i in range(len(embeddings))]
    task.take_teacher(embeddings)
    return task


# ---- the losses by hand -------------------------------------------------------------------------


def test_mse_is_the_mean_squared_distance_to_the_teacher_per_example():
    generator = torch.Generator().manual_seed(0)
    teacher_table = torch.randn(5, 4, generator=generator)
    task = with_teacher(distill("loss=mse"), teacher_table.numpy(), np.array([[0, 1], [2, 3], [4, 0]]))
    student = torch.randn(3, 2, 4, generator=generator)
    labels = torch.tensor([2, 0])  # examples 2 and 0: teacher rows (4, 0) and (0, 1)
    expected = [
        ((student[0] - teacher_table[[4, 0]]) ** 2).mean(),
        ((student[1] - teacher_table[[0, 1]]) ** 2).mean(),
    ]
    torch.testing.assert_close(task.losses(student[:2], labels), torch.stack(expected))
    assert task.metric == "mse" and not task.in_batch


def test_margin_mse_matches_the_teachers_cosine_margin():
    generator = torch.Generator().manual_seed(1)
    teacher_table = torch.randn(3, 4, generator=generator)
    task = with_teacher(distill("loss=margin_mse"), teacher_table.numpy(), np.array([[0, 1, 2]]))
    student = torch.randn(1, 3, 4, generator=generator)
    cos = torch.nn.functional.cosine_similarity

    def margin(q, p, n):
        return cos(q, p, dim=0) - cos(q, n, dim=0)

    expected = (margin(*student[0]) - margin(*teacher_table)) ** 2
    torch.testing.assert_close(task.losses(student, torch.tensor([0])), expected.reshape(1))


def test_kl_compares_each_anchors_softmax_over_the_batch_candidates():
    generator = torch.Generator().manual_seed(2)
    teacher_table = torch.randn(6, 4, generator=generator)
    rows = np.array([[0, 1, 2], [3, 4, 5]])  # (anchor, positive, negative) per example
    task = with_teacher(distill("loss=kl", "scale=10"), teacher_table.numpy(), rows)
    student = torch.randn(2, 3, 4, generator=generator)

    def scores(embeddings):  # candidates: the positives, then the negatives
        candidates = torch.cat([embeddings[:, 1], embeddings[:, 2]])
        n = torch.nn.functional.normalize
        return 10 * n(embeddings[:, 0], dim=-1) @ n(candidates, dim=-1).T

    p_teacher = scores(teacher_table[torch.from_numpy(rows)]).softmax(dim=1)
    log_p_student = scores(student).log_softmax(dim=1)
    expected = (p_teacher * (p_teacher.log() - log_p_student)).sum(dim=1)
    torch.testing.assert_close(task.losses(student, torch.tensor([0, 1])), expected)
    assert task.in_batch and task.metric == "kl"


def test_a_distill_task_says_what_it_needs():
    with pytest.raises(UserError, match=r"distill.teacher= is empty"):
        build_task("distill", named_config("distill")[1])
    with pytest.raises(UserError, match=r"loss='cosine' is not valid: choose one of mse, margin_mse, kl"):
        distill("loss=cosine")


def test_a_corpus_line_must_hold_the_sentences_its_loss_needs(tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"query {i}\tpositive {i}\n" for i in range(20)))
    with pytest.raises(
        UserError, match=r"3 \(query, positive, negative\) for distill.loss=margin_mse; found \[2\]"
    ):
        distill(f"corpus={corpus}", "loss=margin_mse").splits(1, None)
    found = distill(f"corpus={corpus}", "loss=kl").splits(1, None)
    assert (len(found["train"]), len(found["dev"])) == (18, 2)  # a tenth held out of a small file
    assert sorted(found["train"].columns[0] + found["dev"].columns[0]) == sorted(
        f"query {i}" for i in range(20)
    )


# ---- end to end ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teacher_run(tiny_data, tmp_path_factory):
    folder, _ = start_run(
        tiny_data, tmp_path_factory.mktemp("teacher") / "run", "tasks=nli", "hidden=4", "max_steps=4"
    )
    return folder


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """A cache of its own: the test's first run computes the teacher's embeddings, later ones read them."""
    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_student_learns_from_an_mtl_run_and_the_teachers_embeddings_are_cached(
    tiny_data, tmp_path, teacher_run, fresh_cache, monkeypatch
):
    keys = ("tasks=distill", f"distill.teacher={teacher_run}", f"distill.source={SNLI}", "distill.batch=8")
    _, summary = start_run(tiny_data, tmp_path / "student", *keys, "max_steps=6", "eval_every=3")
    cached = list((fresh_cache / "teachers").glob("*.npy"))
    assert len(cached) == 1 and np.load(cached[0]).shape[1] == 8  # the teacher: BiLSTM 2 x 4
    assert summary["best/distill/dev/mse"] > 0
    student = exported_encoder(tmp_path / "student")
    assert not any(key.startswith("projection") for key in student["encoder"])  # the map stays with the task
    # A second run reads the cache: the teacher is not loaded again.
    monkeypatch.setattr(teacher, "load_any_encoder", lambda *a: pytest.fail("the teacher was loaded again"))
    start_run(tiny_data, tmp_path / "again", *keys, "max_steps=2")


def test_distillation_lowers_the_distance_to_the_teacher(tiny_data, tmp_path, teacher_run):
    keys = ("tasks=distill", f"distill.teacher={teacher_run}", f"distill.source={SNLI}", "distill.batch=8")
    start_run(tiny_data, tmp_path / "student", *keys, "max_steps=20", "eval_every=5", "optim=adam", "lr=0.01")
    dev = [
        r["distill/dev/mse"]
        for r in read_metrics(tmp_path / "student" / "metrics.jsonl")
        if "distill/dev/mse" in r
    ]
    assert len(dev) == 4 and dev[-1] < 0.8 * dev[0]


@pytest.mark.parametrize("loss", ["mse", "kl"])  # mse: a head with a map of its own; kl: in-batch
def test_a_distill_run_resumes_exactly(tiny_data, tmp_path, teacher_run, fresh_cache, loss):
    keys = (
        "tasks=nli,distill",
        f"distill.teacher={teacher_run}",
        f"distill.source={SNLI}",
        f"distill.loss={loss}",
        "distill.batch=6",
        "distill.steps=2",
    )
    _, straight = start_run(tiny_data, tmp_path / "straight", *keys, "max_steps=12", "eval_every=5")
    killed, _ = start_run(
        tiny_data, tmp_path / "killed", *keys, "max_steps=12", "eval_every=5", killed_after=7
    )
    _, resumed = run.resume(killed, progress=False)
    assert {k: v for k, v in resumed.items() if k.startswith("best/")} == {
        k: v for k, v in straight.items() if k.startswith("best/")
    }
    first, second = (exported_encoder(d) for d in (tmp_path / "straight", killed))
    for key in first["encoder"]:
        assert torch.equal(first["encoder"][key], second["encoder"][key]), key


@pytest.mark.skipif(
    not os.environ.get("MTL_DATA_DIR"), reason="MTL_DATA_DIR unset: the shared MiniLM is not here"
)
def test_a_hugging_face_model_teaches_a_bilstm(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))
    minilm = Path(os.environ["MTL_DATA_DIR"]) / "models" / "all-MiniLM-L6-v2"
    _, summary = start_run(
        tiny_data,
        tmp_path / "student",
        "tasks=distill",
        f"distill.teacher={minilm}",
        f"distill.source={SNLI}",
        "distill.loss=kl",
        "distill.batch=6",
        "max_steps=3",
    )
    (cached,) = (tmp_path / "cache" / "teachers").glob("*.npy")
    assert np.load(cached).shape[1] == 384  # MiniLM's width; kl needs no map onto it
    assert summary["best/distill/dev/kl"] >= 0


def test_resuming_against_other_teacher_embeddings_is_refused(tiny_data, tmp_path, teacher_run, fresh_cache):
    keys = ("tasks=distill", f"distill.teacher={teacher_run}", f"distill.source={SNLI}", "distill.batch=8")
    killed, _ = start_run(tiny_data, tmp_path / "killed", *keys, "max_steps=8", killed_after=4)
    (cached,) = (fresh_cache / "teachers").glob("*.npy")
    np.save(cached, 2 * np.load(cached))  # the teacher's targets are not those the run started with
    with pytest.raises(
        UserError, match=r"the distillation teacher's embeddings \(.*/run\) changed since the run started"
    ):
        run.resume(killed, progress=False)


def test_another_tasks_sentences_are_distilled_as_that_task_splits_them(tiny_data, tmp_path, teacher_run):
    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.data.training_data import prepare
    from mtl.train.loop.run import config_from_args

    from .conftest import args_for

    keys = ("tasks=nli,squad,distill", f"distill.teacher={teacher_run}", "distill.sentences_of=squad")
    config = resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "run", *keys)))
    data = prepare(config, progress=False)
    squad, distilled = data.examples["squad"], data.examples["distill"]
    assert squad.keys() == distilled.keys()
    for split in squad:  # the same examples, each question with both its answers
        assert np.array_equal(squad[split].sentences, distilled[split].sentences), split
    texts = {data.table.texts[row] for split in squad for row in squad[split].sentences.ravel()}
    assert set(data.tasks["distill"].teacher_texts) == texts
    _, summary = start_run(tiny_data, tmp_path / "student", *keys, "max_steps=6", "distill.batch=8")
    assert summary["best/distill/dev/mse"] > 0
    with pytest.raises(UserError, match=r"distill.sentences_of=squad: .* use distill.loss=mse"):
        distill("sentences_of=squad", "loss=kl")
    with pytest.raises(
        UserError, match=r"distill.sentences_of=qt: the run has no such task .* \(its others: nli\)"
    ):
        other = ("tasks=nli,distill", *keys[1:2], "distill.sentences_of=qt")
        resolve_inputs(config_from_args(args_for(tiny_data, tmp_path / "other", *other)))


def test_a_run_distilling_another_tasks_sentences_resumes_exactly(
    tiny_data, tmp_path, teacher_run, fresh_cache
):
    keys = ("tasks=nli,squad,distill", f"distill.teacher={teacher_run}", "distill.sentences_of=squad")
    keys += ("distill.batch=6", "distill.steps=2", "max_steps=12", "eval_every=5")
    _, straight, resumed = straight_and_resumed(tiny_data, tmp_path, *keys)
    best = lambda summary: {k: v for k, v in summary.items() if k.startswith("best/")}  # noqa: E731
    assert "best/distill/dev/mse" in best(straight) and best(resumed) == best(straight)
