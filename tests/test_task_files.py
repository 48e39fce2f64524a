"""The rows of task files, corpora and SNLI files are checked as they are read (file and
line in every error), scores are hashed as they are, and text keeps separators JSON allows."""

import json

import numpy as np
import pytest

from mtl.data import corpus
from mtl.data.snli import load_snli
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.tasks import build_task
from mtl.tasks.pairs import PairsConfig
from mtl.tasks.qt import QTConfig
from mtl.tasks.skipthought import SkipThoughtConfig
from mtl.tasks.sts import STSConfig
from mtl.train.data.training_data import changed_inputs, texts_digest
from mtl.train.loop.run import resume

from .conftest import FIXTURES, one_error_line, start_run

LABELS = "entailment,neutral,contradiction"


def sts_folder(tmp_path, rows: str, header: str = "sentence1\tsentence2\tscore\n"):
    folder = tmp_path / "sts"
    folder.mkdir(exist_ok=True)
    (folder / "train.tsv").write_text(header + rows)
    (folder / "dev.tsv").write_text(header + rows)
    return folder


def sts(folder, **keys):
    return build_task("sts", STSConfig(source=str(folder), **keys))


@pytest.mark.parametrize(
    "rows, keys, message",
    [
        ("a .\tb .\t4.2\nc .\td .\t47\n", {}, r"train.tsv line 3 has score 47, outside sts's scale \[0, 5\]"),
        ("a .\tb .\t4.2\n", {"low": 0, "high": 1}, r"line 2 has score 4.2, outside sts's scale \[0, 1\]"),
        ("a .\tb .\tnan\n", {}, r"line 2 has score 'nan', not a finite number"),
        ("a .\tb .\t4.2\nc .\td .\n", {}, r"train.tsv line 3 has 2 tsv columns where its header names 3"),
    ],
)
def test_bad_sts_rows_name_the_file_and_line(tmp_path, rows, keys, message):
    with pytest.raises(UserError, match=message):
        sts(sts_folder(tmp_path, rows), **keys).load("train")


def test_a_headerless_row_one_column_short_names_its_line(tmp_path):
    folder = sts_folder(tmp_path, "a .\tb .\t4.2\nc .\td .\n", header="")
    with pytest.raises(UserError, match=r"train.tsv line 2 has 2 tsv columns where the longest row has 3"):
        sts(folder, header=False, first="0", second="1", score="2").load("train")


def pairs_folder(tmp_path, lines: list[str]):
    folder = tmp_path / "pairs"
    folder.mkdir()
    for split in ("train", "dev"):
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


GOOD = json.dumps({"sentence1": "a man sings .", "sentence2": "a man makes music .", "label": "entailment"})


@pytest.mark.parametrize(
    "bad, message",
    [
        ('["a man sings .", "a man makes music .", "entailment"]', r"train.jsonl line 2 is a JSON list, not an object"),
        ('{"sentence1": "a man sings .", "label": "neutral"}', r"train.jsonl line 2 has no column 'sentence2'"),
        ('{"sentence1": ["a"], "sentence2": "b", "label": "neutral"}', r"line 2: column 'sentence1' holds list"),
        ('{"sentence1": "a", "sentence2": "b", "label": "neutral"', r"train.jsonl line 2 is not JSON"),
    ],
)  # fmt: skip
def test_bad_pairs_rows_name_the_file_and_line(tmp_path, bad, message):
    task = build_task("pairs", PairsConfig(source=str(pairs_folder(tmp_path, [GOOD, bad])), labels=LABELS))
    with pytest.raises(UserError, match=message):
        task.load("train")


def test_a_task_without_a_dev_file_is_one_line(tiny_data, tmp_path, capsys):
    from mtl.cli import main
    from tests.conftest import args_for

    args = args_for(
        tiny_data, tmp_path / "run", "tasks=nli,sts", f"sts.source={FIXTURES / 'sts_tiny'}", "sts.dev="
    )
    assert main(["train-multitask", *args]) == 2
    assert "task sts has no dev split (is sts.dev= empty?)" in one_error_line(capsys)


def test_text_keeps_line_separators_that_json_strings_hold(tmp_path):
    """U+2028 and U+0085 are text inside a JSON string (json.dumps(ensure_ascii=False) writes them)."""
    premise = "a man\u2028sings\x85 ."
    row = {"sentence1": premise, "sentence2": "a man makes music .", "gold_label": "entailment"}
    folder = tmp_path / "snli"
    folder.mkdir()
    (folder / "snli_1.0_train.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_snli(str(folder), "train").columns[0] == [premise]
    pairs = pairs_folder(tmp_path, [json.dumps({**row, "label": "entailment"}, ensure_ascii=False)])
    assert build_task("pairs", PairsConfig(source=str(pairs), labels=LABELS)).load("train").columns[0] == [
        premise
    ]


def test_scores_are_fingerprinted_exactly_and_classes_as_before():
    def digest(labels):
        return texts_digest({"train": LabelledTexts([["a", "b"]], labels)})

    assert digest([0.2, 0.7]) != digest([0.3, 0.6])  # as int64 both were [0, 0]
    assert digest([1, 2]) == digest([1.0, 2.0]) == digest([1, 2]) != digest([2, 1])
    splits = {"train": LabelledTexts([["a", "b"]], [0.2, 0.7])}
    legacy = texts_digest(splits, legacy=True)
    now = {"sts": {"sha256": texts_digest(splits), "legacy_sha256": legacy}}
    assert changed_inputs({"sts": {"sha256": legacy}}, now, {}) == []  # a run recorded before the fix
    assert changed_inputs(
        {"sts": {"sha256": texts_digest({"train": LabelledTexts([["a", "b"]], [0.3, 0.6])})}}, now, {}
    )


def test_resume_after_sts_scores_changed_is_refused(tiny_data, tmp_path):
    folder = tmp_path / "sts"
    folder.mkdir()
    for split in ("train", "dev"):
        (folder / f"{split}.tsv").write_text((FIXTURES / "sts_tiny" / f"{split}.tsv").read_text())
    keys = ("tasks=nli,sts", f"sts.source={folder}", "sts.steps=2", "max_steps=8")
    run_dir, _ = start_run(tiny_data, tmp_path / "run", *keys, killed_after=4)
    text = (folder / "train.tsv").read_text()
    (folder / "train.tsv").write_text(text.replace("\t4.2\n", "\t4.3\n", 1))  # 0.84 -> 0.86 of the scale
    with pytest.raises(UserError, match=r"the sts data .* differs|changed"):
        resume(run_dir, progress=False)


@pytest.mark.parametrize(
    "text, message",
    [
        ("one sentence .\n", r"is one document of 1 sentence: .* so at least 4"),
        ("one .\ntwo .\n", r"is one document of 2 sentences: .*dev is the corpus's last 1% of documents"),
        (
            "a .\nb .\n\nc .\n",
            r"the dev part of corpus .* \(without qt.dev=, dev is .*\) holds no document of two",
        ),
    ],
)
def test_a_corpus_too_small_to_split_says_what_it_needs(tmp_path, text, message):
    path = tmp_path / "corpus.txt"
    path.write_text(text)
    task = build_task("qt", QTConfig(corpus=str(path)))
    task = build_task("qt", task.resolve_inputs())
    with pytest.raises(UserError, match=message):
        for split in ("train", "dev"):
            task.load(split)


def test_a_corpus_of_one_document_of_four_sentences_trains_and_evaluates(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("one .\ntwo .\nthree .\nfour .\n")
    task = build_task("qt", build_task("qt", QTConfig(corpus=str(path))).resolve_inputs())
    assert len(task.load("train")) == 2 and len(task.load("dev")) == 2
    assert np.isfinite(np.asarray(task.load("train").labels, dtype=float)).all()


@pytest.mark.parametrize("kind, config", [("qt", QTConfig), ("skipthought", SkipThoughtConfig)])
def test_squad_passages_are_split_only_until_the_first_examples_a_run_reads(kind, config, monkeypatch):
    """qt.max_train=N (or max_eval=) splits SQuAD's passages until they hold N examples, and those
    are the first N of every passage's (all of SQuAD took 25 s of each such run's start)."""
    split = []
    every_passage = corpus.split_sentences

    def counted(texts):
        for document in every_passage(texts):
            split.append(document)
            yield document

    monkeypatch.setattr(corpus, "split_sentences", counted)
    task = build_task(kind, config(corpus=f"squad:{FIXTURES / 'squad_tiny'}"))
    whole = task.load("train")
    passages = len(split)
    for examples in range(1, len(whole) + 2):
        split.clear()
        first = task.load("train", examples)
        assert first.head(examples).columns == whole.head(examples).columns
        assert first.head(examples).labels == whole.head(examples).labels
        if examples < len(whole) // 2:
            assert len(split) < passages, examples


def test_classifsquad_max_train_reads_only_the_first_rows_of_the_build_and_the_same_ones(
    tmp_path, monkeypatch
):
    """squad.max_train=N reads a build's Arrow streams until they hold N rows (2,000 of a million
    triples took 0.53 s of each such run's start): the same rows as the whole split's first N,
    across record batches and files."""
    import datasets
    import pyarrow as pa

    from mtl.tasks.squad import SquadConfig

    rows = 2_500
    columns = {
        "question": [f"question {i} ?" for i in range(rows)],
        "answer1": [f"first answer {i} ." for i in range(rows)],
        "answer2": [f"second answer {i} ." for i in range(rows)],
        "label": [i % 2 for i in range(rows)],
    }
    build = tmp_path / "classifsquad"
    splits = datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(columns) for name in ("train", "validation")}
    )
    splits.save_to_disk(str(build), num_shards={"train": 3, "validation": 1})  # 3 files of 1,000-row batches
    task = build_task("squad", SquadConfig(source=str(build)))
    whole = task.load("train")
    assert len(whole) == rows
    batches = []
    every_stream = pa.ipc.open_stream
    monkeypatch.setattr(pa.ipc, "open_stream", lambda source: batches.append(source) or every_stream(source))
    for first in (1, 999, 1000, 1001, 1234, 2499, 2500, 4000):
        batches.clear()
        read = task.load_first("train", first)
        assert read.columns == whole.head(first).columns and read.labels == whole.head(first).labels, first
        if first < 834:  # within the first file of three
            assert len(batches) == 1, first


def test_an_error_quoting_a_line_break_of_the_file_stays_one_line(tmp_path):
    bad = json.dumps({"sentence1": "a", "se\ntence2\u2028": "b", "label": "neutral"})
    task = build_task("pairs", PairsConfig(source=str(pairs_folder(tmp_path, [GOOD, bad])), labels=LABELS))
    with pytest.raises(UserError) as error:
        task.load("train")
    assert str(error.value).splitlines() == [str(error.value)]
    assert "se\\ntence2\\u2028" in str(error.value)


ROWS = [
    {"sentence1": "a man sings .", "sentence2": "a man makes music .", "label": "entailment"},
    {"sentence1": "a dog runs .", "sentence2": "a cat sleeps .", "label": "contradiction"},
]


def test_a_saved_dataset_and_parquet_and_arrow_files_are_task_sources(tmp_path):
    """What `datasets` users have: a save_to_disk folder (its splits by name; dev.jsonl finds
    `validation`), Parquet files and Arrow files (IPC file or stream), read as the jsonl rows are."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = build_task(
        "pairs", PairsConfig(source=str(pairs_folder(tmp_path, map(json.dumps, ROWS))), labels=LABELS)
    )
    want = expected.load("train")
    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS), "validation": datasets.Dataset.from_list(ROWS[:1])}
    ).save_to_disk(str(saved))
    task = build_task("pairs", PairsConfig(source=str(saved), labels=LABELS))
    assert task.load("train") == want and task.load("dev").labels == [0]
    with pytest.raises(
        UserError, match=r"has no split 'heldout.jsonl': it has train, validation; set pairs.train_file="
    ):
        build_task("pairs", PairsConfig(source=str(saved), labels=LABELS, test="heldout.jsonl")).load("test")
    one = tmp_path / "one"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(one))
    task = build_task("pairs", PairsConfig(source=str(one), labels=LABELS))
    assert task.load("train") == want
    with pytest.raises(
        UserError, match=r"is one saved Dataset, without splits: it gives the training rows only"
    ):
        task.load("dev")  # never the training rows again
    tables = tmp_path / "tables"
    tables.mkdir()
    table = pa.Table.from_pylist(ROWS)
    pq.write_table(table, tables / "train.parquet")
    with pa.OSFile(str(tables / "dev.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)  # the stream format, as datasets writes its cache files
    with pa.OSFile(str(tables / "test.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    task = build_task(
        "pairs",
        PairsConfig(
            source=str(tables), labels=LABELS, train_file="train.parquet", dev="dev.arrow", test="test.arrow"
        ),
    )
    assert task.load("train") == want == task.load("dev") == task.load("test")
    whole = (tables / "dev.arrow").read_bytes()
    (tables / "dev.arrow").write_bytes(whole[:-8])  # cut where a batch ends: pyarrow reads it
    with pytest.raises(UserError, match=r"dev.arrow is an Arrow stream cut short \(no end-of-stream marker"):
        task.load("dev")
    (tables / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(UserError, match=r"pairs: .*bad.parquet is not a readable parquet file"):
        build_task("pairs", PairsConfig(source=str(tables), labels=LABELS, train_file="bad.parquet")).load(
            "train"
        )


def test_the_qqp_task_file_trains_on_glues_tsv_layout(tiny_data, tmp_path, monkeypatch):
    """experiments/tasks/qqp.toml, pointed at a hand-written 50-pair copy of GLUE's QQP files as
    its comment says; its Hub default names GLUE's qqp configuration."""
    from mtl.train.config.presets import preset_dir
    from mtl.train.loop import run
    from tests.conftest import args_for

    qqp = preset_dir() / "tasks" / "qqp.toml"
    local = (
        f"qqp.source={FIXTURES / 'qqp_tiny'}", "qqp.format=tsv", "qqp.train_file=train.tsv",
        "qqp.dev=dev.tsv", "qqp.label=is_duplicate",
    )  # fmt: skip
    config = run.config_from_args(
        args_for(tiny_data, tmp_path / "run", f"tasks=nli,{qqp}", *local, "qqp.steps=2")
    )
    task = build_task("qqp", config.tasks["qqp"])
    train, dev = task.load("train"), task.load("dev")
    assert (len(train), len(dev)) == (40, 10) and sum(train.labels) == 20 and task.title == "QQP"
    assert train.columns[0][0] == "How do I learn Python quickly?" and train.labels[:2] == [1, 0]
    _, summary = run.start(config, progress=False)
    assert "best/qqp/dev/acc" in summary and summary["steps/qqp"] > 0
    hub = run.config_from_args(args_for(tiny_data, tmp_path / "hub", f"tasks=nli,{qqp}")).tasks["qqp"]
    assert (hub.source, hub.subset, hub.dev, hub.test) == ("nyu-mll/glue", "qqp", "validation", "")


def test_a_streamed_hub_task_fetches_only_max_train_training_rows(monkeypatch):
    """pairs.streaming=true with max_train=N: the Hub split is opened as a stream and only its
    first N rows are taken (counted on a stand-in stream; the Hub is out of reach here)."""
    import datasets

    taken, opened = [], []

    def stream(source, subset, split, streaming=False):
        opened.append((source, subset, split, streaming))

        def rows():
            for number in range(10**9):  # as long as a dataset too large to download
                taken.append(number)
                yield {"sentence1": f"a man number {number} .", "sentence2": "a man .", "label": "entailment"}

        return rows() if streaming else list(itertools.islice(rows(), 5))

    import itertools

    monkeypatch.setattr(datasets, "load_dataset", stream)
    config = PairsConfig(source="someone/huge-nli", labels=LABELS, streaming=True, max_train=7, subset="en")
    train = build_task("pairs", config).load("train")
    assert len(train) == 7 and len(taken) == 7 and opened == [("someone/huge-nli", "en", "train.jsonl", True)]
    taken.clear()
    build_task("pairs", config).load("dev")  # dev is read whole, not streamed
    assert opened[-1][3] is False


def test_a_saved_datasets_class_labels_are_read_by_their_names(tmp_path):
    # SNLI as `datasets` holds it: the label a ClassLabel (0 entailment ... 2 contradiction, -1 none)
    import datasets

    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
        }
    )
    rows = [
        {"premise": "a man sings .", "hypothesis": "a man makes music .", "label": 0},
        {"premise": "a dog runs .", "hypothesis": "a cat sleeps .", "label": 2},
        {"premise": "a dog runs .", "hypothesis": "a dog moves .", "label": -1},  # no gold label
    ]
    saved = tmp_path / "snli"
    split = datasets.Dataset.from_list(rows, features=features)
    datasets.DatasetDict({"train": split, "validation": split}).save_to_disk(str(saved))
    keys = {"source": str(saved), "first": "premise", "second": "hypothesis", "label": "label"}
    by_name = build_task("pairs", PairsConfig(**keys, labels="entailment,neutral,contradiction")).load(
        "train"
    )
    assert by_name.labels == [0, 2] and by_name.columns[0] == ["a man sings .", "a dog runs ."]
    # labels= given as the numbers, as before the names were read, still works
    assert build_task("pairs", PairsConfig(**keys, labels="0,1,2")).load("train").labels == [0, 2]
    # the task's own class order decides, whatever order the dataset numbers them in
    reordered = build_task("pairs", PairsConfig(**keys, labels="contradiction,entailment")).load("train")
    assert reordered.labels == [1, 0]
    # the same splits as Parquet files `datasets` writes (the Hub's export): the names come along
    parquet = tmp_path / "parquet"
    parquet.mkdir()
    split.to_parquet(str(parquet / "train.parquet"))
    keys = {**keys, "source": str(parquet), "format": "parquet"}
    assert build_task("pairs", PairsConfig(**keys, labels="contradiction,entailment")).load(
        "train"
    ).labels == [1, 0]
    assert build_task("pairs", PairsConfig(**keys, labels="0,1,2")).load("train").labels == [0, 2]


@pytest.mark.parametrize("layout", ["flat", "hub"])
def test_a_folder_of_parquet_files_is_read_without_naming_them(tmp_path, layout):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "parquet"
    (folder / "data").mkdir(parents=True)
    table = pa.Table.from_pylist(ROWS)
    if layout == "flat":  # train.parquet, validation.parquet
        pq.write_table(table, folder / "train.parquet")
        pq.write_table(table.slice(0, 1), folder / "validation.parquet")
    else:  # as the Hub exports a dataset: data/<split>-0000N-of-0000M.parquet, shards in order
        pq.write_table(table.slice(0, 1), folder / "data" / "train-00000-of-00002.parquet")
        pq.write_table(table.slice(1, 1), folder / "data" / "train-00001-of-00002.parquet")
        pq.write_table(table.slice(0, 1), folder / "data" / "validation-00000-of-00001.parquet")
    for keys in ({}, {"format": "parquet"}):
        task = build_task("pairs", PairsConfig(source=str(folder), labels=LABELS, **keys))
        assert task.load("train").labels == [0, 2] and task.load("dev").labels == [0]


def test_a_saved_test_split_the_run_leaves_unscored_is_said(tmp_path, capsys):
    """test= is empty by default: a DatasetDict's (or a Parquet folder's) test split would go
    unused without a word."""
    import datasets

    saved = tmp_path / "saved"
    split = datasets.Dataset.from_list(ROWS)
    datasets.DatasetDict({"train": split, "validation": split, "test": split}).save_to_disk(str(saved))
    capsys.readouterr()  # (datasets' own progress bars)
    build_task("qqp", PairsConfig(source=str(saved), labels="entailment,contradiction")).resolve_inputs()
    assert capsys.readouterr().err.strip() == (
        f"note: qqp: {saved} holds a test split this run does not score: qqp.test=test scores it once, at the end"
    )
    build_task(
        "qqp", PairsConfig(source=str(saved), test="test", labels="entailment,contradiction")
    ).resolve_inputs()
    assert capsys.readouterr().err == ""
    assert build_task(
        "qqp", PairsConfig(source=str(saved), test="test", labels="entailment,contradiction")
    ).load("test").columns[0] == [r["sentence1"] for r in ROWS]
