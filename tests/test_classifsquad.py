import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import numpy as np
import pytest

from dataset_builders import classifsquad
from dataset_builders.classifsquad import (
    BuildConfig,
    build,
    build_split,
    contains,
    count_oov,
    joined,
    negative_candidates,
    padded,
    pick_answer,
    squad_texts,
)
from mtl.config import apply_overrides
from mtl.data.squad import Article, Paragraph, Question, load_squad
from mtl.errors import UserError
from mtl.text.tokenizer import Tokenizer

from .conftest import (
    FIXTURES,
    copy_classifsquad,
    one_error_line,
    train_cli,
    write_glove,
)

VOCAB = frozenset("what who when did the a cat dog sat on mat ran in park at home big red was ? .".split())


# ---- pure filters ------------------------------------------------------------------------


def test_count_oov():
    assert count_oov(["the", "cat", "zebra", "zebra"], VOCAB) == 2
    assert count_oov([], VOCAB) == 0


def test_pick_answer_takes_the_longest_in_vocabulary_answer():
    answers = [["the", "cat"], ["the", "big", "zebra"], ["the", "big", "cat"], ["a", "big", "cat"]]
    assert pick_answer(answers, VOCAB, max_oov=0) == 2  # first of the two longest in-vocabulary
    assert pick_answer(answers, VOCAB, max_oov=1) == 1
    assert pick_answer([["zebra"]], VOCAB, max_oov=0) is None


def test_contains_works_on_whole_tokens():
    assert contains(["the", "cat"], ["the", "cat", "sat"])
    assert contains(["cat", "sat", "on"], ["sat"])
    assert not contains(["cat"], ["concatenate"])
    assert not contains(["the", "cat"], ["cat", "the"])


def test_negative_candidates_skip_the_answer_itself_and_overlapping_answers():
    pool = [("the", "cat", "sat"), ("cat",), ("a", "dog"), ("the", "cat", "sat", "on"), ("concat",)]
    assert negative_candidates(0, [padded(tokens) for tokens in pool]) == ([2, 4], 2)
    assert negative_candidates(1, [joined(tokens) for tokens in pool]) == ([2], 3)  # "cat" in "concat"


# ---- one split ---------------------------------------------------------------------------


def q(qid, text, *answers):
    return Question(qid, text, answers)


ARTICLES = [
    Article(
        "First",
        (
            Paragraph(
                (
                    q("1", "Who sat on the mat?", "the big red cat sat", "cat"),
                    q("2", "What ran in the park?", "a big red dog ran"),
                    q("3", "who sat on the mat ?", "a cat sat on a mat"),  # duplicate of 1 once tokenized
                )
            ),
            Paragraph(
                (
                    q("4", "When was the cat at home?", "the cat was at home ."),
                    q("5", "What zebra ran?", "the dog ran in the park"),  # question out of vocabulary
                    q("6", "What sat?", "the cat"),  # answer too short
                    q("7", "What was big?", "the big red zebra dog"),  # answer out of vocabulary
                    q("8", "What was red?", "the big red cat sat on"),  # contains answer of 1
                )
            ),
        ),
    ),
    Article("Second", (Paragraph((q("9", "Who ran?", "the dog ran in the park"),)),)),
]


def run_split(seed=0, **overrides):
    config = BuildConfig(**{"min_answer_tokens": 4, **overrides})
    tokenizer = Tokenizer()
    texts = squad_texts(ARTICLES)
    tokens_of = dict(zip(texts, tokenizer.tokenize(texts), strict=True))
    return build_split(ARTICLES, tokens_of, VOCAB, config, np.random.default_rng(seed))


def pairs(result):
    columns = result.columns
    return sorted(
        (qid, a1 if label == 0 else a2)  # (question, wrong answer)
        for qid, a1, a2, label in zip(
            columns["question_id"], columns["answer1"], columns["answer2"], columns["label"], strict=True
        )
    )


def test_article_scope_pairs_across_paragraphs_with_every_filter_counted():
    result = run_split(scope="article")
    assert result.stats["dropped_questions"] == {
        "question_oov": 1,
        "answer_oov": 1,
        "answer_too_short": 1,
        "duplicate_question": 1,
        "duplicate_answer": 0,  # rules=original only
        "no_negatives": 1,  # question 9 is alone in its article
    }
    assert result.stats["skipped_pairs"] == {"equal_answer": 0, "substring": 2, "over_cap": 0}
    assert pairs(result) == [
        ("1", "a big red dog ran"),
        ("1", "the cat was at home ."),
        ("2", "the big red cat sat"),
        ("2", "the big red cat sat on"),
        ("2", "the cat was at home ."),
        ("4", "a big red dog ran"),
        ("4", "the big red cat sat"),
        ("4", "the big red cat sat on"),
        ("8", "a big red dog ran"),
        ("8", "the cat was at home ."),
    ]
    assert result.stats["unique_questions"] == 4
    assert result.stats["examples"] == 10


def test_paragraph_scope_pairs_only_within_a_paragraph():
    result = run_split(scope="paragraph")
    assert pairs(result) == [
        ("1", "a big red dog ran"),
        ("2", "the big red cat sat"),
        ("4", "the big red cat sat on"),
        ("8", "the cat was at home ."),
    ]


def test_correct_answer_side_is_seeded_and_labels_match_the_side():
    first, again, other = run_split(seed=5), run_split(seed=5), run_split(seed=6)
    assert first.columns == again.columns
    assert pairs(first) == pairs(other)
    assert first.columns["label"] != other.columns["label"]
    answer_of = {
        "1": "the big red cat sat",
        "2": "a big red dog ran",
        "4": "the cat was at home .",
        "8": "the big red cat sat on",
    }
    for qid, a1, a2, label in zip(
        *(first.columns[k] for k in ("question_id", "answer1", "answer2", "label")), strict=True
    ):
        assert (a1 if label == 1 else a2) == answer_of[qid]


def test_cap_on_negatives_per_question():
    result = run_split(max_negatives_per_question=1)
    assert Counter(result.columns["question_id"]) == {"1": 1, "2": 1, "4": 1, "8": 1}
    assert result.stats["skipped_pairs"]["over_cap"] == 6


def test_identical_answers_are_not_paired():
    articles = [
        Article(
            "A",
            (
                Paragraph(
                    (
                        q("1", "Who ran?", "the dog ran in the park"),
                        q("2", "What ran?", "the dog ran in the park"),
                        q("3", "Who sat?", "a cat sat on a mat"),
                    )
                ),
            ),
        )
    ]
    texts = squad_texts(articles)
    tokens_of = dict(zip(texts, Tokenizer().tokenize(texts), strict=True))
    result = build_split(articles, tokens_of, VOCAB, BuildConfig(), np.random.default_rng(0))
    assert result.stats["skipped_pairs"]["equal_answer"] == 2
    assert Counter(result.columns["question_id"]) == {"1": 1, "2": 1, "3": 1}


def test_config_rules():
    with pytest.raises(UserError, match="max_oov=-1 must be 0 or more"):
        apply_overrides(BuildConfig(), ["max_oov=-1"])
    with pytest.raises(UserError, match="min_answer_tokens=0 must be 1 or more"):
        apply_overrides(BuildConfig(), ["min_answer_tokens=0"])
    with pytest.raises(UserError, match="scope='sentence' is not valid: choose one of article, paragraph"):
        apply_overrides(BuildConfig(), ["scope=sentence"])


# ---- the whole build, on the tiny SQuAD fixture -------------------------------------------


@pytest.fixture
def tiny_vectors(tmp_path):
    """Vectors for every fixture word except 'notre', so some questions are out of vocabulary."""
    texts = [
        t for articles in load_squad(str(FIXTURES / "squad_tiny")).values() for t in squad_texts(articles)
    ]
    words = sorted({w for tokens in Tokenizer().tokenize(texts) for w in tokens} - {"notre"})
    return write_glove(tmp_path / "tiny.txt", words)


def tiny_config(tmp_path, tiny_vectors, **overrides):
    return BuildConfig(
        squad=str(FIXTURES / "squad_tiny"),
        vectors=str(tiny_vectors),
        out=str(tmp_path / "out"),
        wandb="disabled",
        **overrides,
    )


def test_build_writes_dataset_stats_and_card(tmp_path, tiny_vectors, caplog):
    summary = build(tiny_config(tmp_path, tiny_vectors))
    loaded = datasets.load_from_disk(str(tmp_path / "out"))
    assert set(loaded) == {"train", "validation"}
    train = loaded["train"]
    assert train.column_names == ["question", "answer1", "answer2", "label", "title", "question_id"]
    assert train.features["label"].names == ["answer2", "answer1"]
    assert len(train) == summary["splits"]["train"]["examples"] > 0
    assert summary["splits"]["train"]["dropped_questions"]["question_oov"] > 0
    assert (tmp_path / "out" / "stats.json").is_file()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| examples |" in card and "tiny.txt" in card
    assert "with `just build-classifsquad`." in card  # no key changed from its default
    from dataset_builders.classifsquad import build_command

    recorded = {"max_oov": 1, "lowercase": False, "squad": "/data/squad", "seed": 1234}
    assert build_command(recorded) == "just build-classifsquad max_oov=1 lowercase=false"
    from huggingface_hub import DatasetCard

    data = DatasetCard.load(tmp_path / "out" / "README.md").data  # the YAML the Hub reads
    assert data.license == "cc-by-sa-4.0" and data.pretty_name == "ClassifSQuAD"
    assert [s["num_examples"] for s in data.dataset_info["splits"]] == [
        len(loaded["train"]),
        len(loaded["validation"]),
    ]
    label = next(f for f in data.dataset_info["features"] if f["name"] == "label")
    assert label["dtype"]["class_label"]["names"] == {"0": "answer2", "1": "answer1"}
    assert all(split["num_bytes"] > 0 for split in data.dataset_info["splits"])
    assert "lowercased; the columns hold SQuAD's own text (cased, untokenized)" in card
    # The Hub's way of reading the folder (its configs: the Arrow files of each split) gives the
    # build, and reads the card's splits without a warning
    datasets.utils.logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING):
            hub_view = datasets.load_dataset(str(tmp_path / "out"))
    finally:
        datasets.utils.logging.disable_propagation()
    assert not [r for r in caplog.records if "dataset_info" in r.getMessage()], caplog.text
    assert (
        hub_view["train"]["question_id"] == train["question_id"]
        and hub_view["train"].features == train.features
    )
    assert [p.name for p in tmp_path.glob(".out.*")] == [".out.lock"]  # no temporary folder, the lock file


def test_a_splits_fingerprint_follows_its_content():
    """`datasets` caches map() results under a dataset's fingerprint: the build derives it from
    the Arrow buffers, so equal content gives an equal one and any change another."""
    from mtl.data.classifsquad import to_dataset_dict

    def fingerprint(**changes):
        columns = {"question": ["q1", "q1"], "answer1": ["a", "b"], "answer2": ["b", "a"], "label": [1, 0]}
        columns |= {"title": ["t", "t"], "question_id": ["1", "1"]} | changes
        return to_dataset_dict({"train": columns})["train"]._fingerprint

    assert fingerprint() == fingerprint()
    assert len({fingerprint(), fingerprint(label=[0, 0]), fingerprint(answer1=["a", "c"])}) == 3


def file_digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith(".lock")
    }


@pytest.mark.parametrize("rules", [[], ["preset=classifsquad-paper"]])
def test_a_seed_gives_byte_identical_output_across_processes(tmp_path, tiny_vectors, rules):
    # Two processes with different hash seeds: an order taken from a set or a dict of strings
    # would differ between them (one process would hide it: its hash seed is fixed).
    builds = {  # side by side: each process mostly imports
        hash_seed: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mtl",
                "build-classifsquad",
                *rules,
                f"squad={FIXTURES / 'squad_tiny'}",
                f"vectors={tiny_vectors}",
                f"out={tmp_path / f'out{hash_seed}'}",
                "wandb=disabled",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )  # fmt: skip
        for hash_seed in ("1", "2")
    }
    for process in builds.values():
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    digests = [file_digests(tmp_path / f"out{hash_seed}") for hash_seed in builds]
    assert digests[0] == digests[1] and any(name.endswith(".arrow") for name in digests[0])


def test_an_existing_build_is_replaced_only_with_overwrite(tmp_path, tiny_vectors):
    (tmp_path / "out").mkdir()  # an empty folder is fine to build into
    build(tiny_config(tmp_path, tiny_vectors))
    with pytest.raises(UserError, match=r"output folder .*out already holds a build: pass overwrite=true"):
        build(tiny_config(tmp_path, tiny_vectors, seed=9))
    build(tiny_config(tmp_path, tiny_vectors, overwrite=True, seed=9))
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["config"]["seed"] == 9


def test_the_same_build_again_has_nothing_to_do(tmp_path, tiny_vectors):
    """README's first command builds data/classifsquad; its Build section shows the command again:
    the same settings from the same files leave the build as it is. A changed setting or a changed
    input file is still refused without overwrite=true."""
    from dataset_builders.classifsquad import format_summary

    first = build(tiny_config(tmp_path, tiny_vectors))
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "out").rglob("*")}
    again = build(tiny_config(tmp_path, tiny_vectors))
    assert again["unchanged"] and again["splits"] == first["splits"]
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "out").rglob("*")} == written
    assert format_summary(again).startswith(f"{tmp_path / 'out'} already holds this build")
    with pytest.raises(UserError, match=r"already holds a build: pass overwrite=true"):
        build(tiny_config(tmp_path, tiny_vectors, seed=9))
    changed = tmp_path / tiny_vectors.name  # the same file name, one value changed
    lines = tiny_vectors.read_text().splitlines()
    changed.write_text("\n".join([lines[0].rsplit(" ", 1)[0] + " 0.5", *lines[1:]]) + "\n")
    with pytest.raises(UserError, match=r"already holds a build: pass overwrite=true"):
        build(tiny_config(tmp_path, changed))
    recorded = json.loads((tmp_path / "out" / "stats.json").read_text())
    del recorded["input_sha256"]  # a build made before builds recorded their inputs
    (tmp_path / "out" / "stats.json").write_text(json.dumps(recorded))
    with pytest.raises(UserError, match=r"already holds a build: pass overwrite=true"):
        build(tiny_config(tmp_path, tiny_vectors))


@pytest.mark.parametrize("extra", ["train-v1.1.json", "notes.txt"])
def test_overwrite_never_deletes_a_folder_that_is_not_a_build(tmp_path, tiny_vectors, extra):
    # A trap once: classifsquad=<the SQuAD folder> -> "build it" -> overwrite=true deleted SQuAD.
    squad_copy = tmp_path / "out"
    shutil.copytree(FIXTURES / "squad_tiny", squad_copy)
    if extra == "notes.txt":  # a real build with a file of the user's in it is not replaced either
        shutil.rmtree(squad_copy)
        build(tiny_config(tmp_path, tiny_vectors))
        (squad_copy / extra).write_text("mine")
    before = sorted(p.name for p in squad_copy.iterdir())
    with pytest.raises(
        UserError, match=r"output folder .*out exists and is not a ClassifSQuAD build \(it holds"
    ):
        build(tiny_config(tmp_path, tiny_vectors, overwrite=True))
    assert sorted(p.name for p in squad_copy.iterdir()) == before


def test_a_build_killed_midway_leaves_a_folder_the_next_build_removes(tmp_path, tiny_vectors):
    leftover = tmp_path / ".out.partial-999999999"  # no such process
    (leftover / "train").mkdir(parents=True)
    build(tiny_config(tmp_path, tiny_vectors))
    assert not leftover.exists() and (tmp_path / "out" / "stats.json").is_file()


def test_interrupted_write_leaves_no_output(tmp_path, tiny_vectors, monkeypatch):
    def crash(self, path, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", crash)
    with pytest.raises(KeyboardInterrupt):
        build(tiny_config(tmp_path, tiny_vectors))
    assert sorted(tmp_path.iterdir()) == sorted([tiny_vectors, tmp_path / ".out.lock"])  # and the lock file


def test_interrupted_overwrite_keeps_the_previous_output(tmp_path, tiny_vectors, monkeypatch):
    build(tiny_config(tmp_path, tiny_vectors))
    before = (tmp_path / "out" / "stats.json").read_text()
    monkeypatch.setattr(classifsquad, "dataset_card", lambda summary: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        build(tiny_config(tmp_path, tiny_vectors, overwrite=True, seed=9))
    assert (tmp_path / "out" / "stats.json").read_text() == before


def test_filters_that_empty_a_split_are_an_error(tmp_path, tiny_vectors):
    with pytest.raises(
        UserError, match="the filters left the train split empty .* loosen max_oov or min_answer_tokens"
    ):
        build(tiny_config(tmp_path, tiny_vectors, min_answer_tokens=500))
    assert not (tmp_path / "out").exists()


def test_original_rules_pick_by_characters_drop_repeated_answers_and_test_containment_on_strings():
    from collections import Counter

    from dataset_builders.classifsquad import (
        Candidate,
        contains,
        contains_text,
        pick_answer,
        unique_questions,
    )

    vocabulary = {"a", "bb", "ccc", "cat", "concatenate"}
    answers = [("a", "a", "a"), ("ccc", "bb")]
    assert pick_answer(answers, vocabulary, 0) == 0  # 3 tokens beat 2
    assert pick_answer(answers, vocabulary, 0, by_characters=True) == 1  # "ccc bb" beats "a a a"
    assert contains_text(("cat",), ("concatenate",)) and not contains(("cat",), ("concatenate",))

    def candidate(question, answer):
        return Candidate((0,), "t", question, question, answer, (question,), (answer,))

    members = [candidate("q1", "x"), candidate("q2", "x"), candidate("q1", "y"), candidate("q3", "y")]
    dropped = Counter()
    assert [c.question_id for c in unique_questions(members, "original", dropped).values()] == ["q1", "q3"]
    assert dropped == {"duplicate_answer": 1, "duplicate_question": 1}
    dropped = Counter()
    assert len(unique_questions(members, "mtl", dropped)) == 3 and dropped == {"duplicate_question": 1}


def test_training_refuses_a_classifsquad_folder_that_is_not_a_build(tiny_data, tmp_path, capsys):
    squad = tmp_path / "squad"
    shutil.copytree(FIXTURES / "squad_tiny", squad)
    assert train_cli(tiny_data, tmp_path / "run", f"classifsquad={squad}") == 2
    error = one_error_line(capsys)
    assert re.match(
        rf"error: {squad} is not a ClassifSQuAD build \(it holds dev-v1.1.json.*\): point squad.source= at",
        error,
    )
    assert "overwrite" not in error
    assert sorted(p.name for p in squad.iterdir()) == sorted(
        p.name for p in (FIXTURES / "squad_tiny").iterdir()
    )


def test_a_damaged_classifsquad_build_is_one_line(tiny_data, tmp_path, capsys):
    folder = copy_classifsquad(tiny_data, tmp_path)
    for arrow in (folder / "train").glob("*.arrow"):
        arrow.write_bytes(arrow.read_bytes()[:64])
    assert train_cli(tiny_data, tmp_path / "run", f"classifsquad={folder}") == 2
    assert re.match(
        rf"error: ClassifSQuAD folder {folder} is damaged \(.*\): rebuild it", one_error_line(capsys)
    )
