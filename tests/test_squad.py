import json

import pytest

from mtl.data.squad import _group_rows, load_squad, parse_squad, read_squad_json
from mtl.errors import UserError

from .conftest import FIXTURES


def squad(**overrides):
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Someone", "answer_start": 0}]}
    qa.update(overrides)
    return {"data": [{"title": "T", "paragraphs": [{"context": "Someone.", "qas": [qa]}]}]}


def test_fixture_reads_as_articles_paragraphs_questions():
    splits = load_squad(str(FIXTURES / "squad_tiny"))
    assert list(splits) == ["train", "validation"]
    train = splits["train"]
    assert [article.title for article in train] == ["University_of_Notre_Dame", "Beyoncé"]
    assert sum(len(p.questions) for a in train for p in a.paragraphs) == 77
    first = train[0].paragraphs[0].questions[0]
    assert first.text.startswith("To whom did the Virgin Mary")
    assert first.answers == ("Saint Bernadette Soubirous",)


def test_mtl_data_dir_is_the_default_source(monkeypatch, tmp_path):
    monkeypatch.setenv("MTL_DATA_DIR", str(tmp_path))
    with pytest.raises(
        UserError, match=r"SQuAD file .*squad/train-v1.1.json does not exist: point squad=PATH"
    ):
        load_squad(None)


def test_malformed_json_names_the_file(tmp_path):
    path = tmp_path / "train-v1.1.json"
    path.write_text('{"data": [')
    with pytest.raises(UserError, match=r"SQuAD file .*train-v1.1.json is not valid JSON"):
        read_squad_json(path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": "1.1"}, r"top level has no 'data' field: is this SQuAD v1.1\?"),
        ({"data": [{"title": "T"}]}, r"data\[0\] has no 'paragraphs' field"),
        (
            {"data": [{"title": "T", "paragraphs": [{"context": "c"}]}]},
            r"data\[0\].paragraphs\[0\] has no 'qas'",
        ),
        ({"data": {"title": "T"}}, r"\.data must be a list, found dict"),
        (squad(answers=[]), r"qas\[0\] has no answers \(SQuAD v2.0\? use v1.1\)"),
        (squad(question="  "), r"qas\[0\].question must be a non-empty string, found '  '"),
        (squad(answers=[{"text": 3}]), r"answers\[0\].text must be a non-empty string, found 3"),
        (squad(id=None), r"qas\[0\].id must be a non-empty string"),
    ],
)
def test_schema_errors_name_the_json_path(document, message):
    with pytest.raises(UserError, match=message):
        parse_squad(json.loads(json.dumps(document)), "train-v1.1.json")


def test_unreachable_hub_says_how_to_use_local_files(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("datasets.config.HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(
        UserError, match="could not load 'rajpurkar/squad' from the Hugging Face Hub .*squad=PATH"
    ):
        load_squad("rajpurkar/squad")


def test_hub_rows_regroup_into_articles_and_paragraphs():
    rows = [
        {"id": "1", "title": "A", "context": "c1", "question": "q1", "answers": {"text": ["x"]}},
        {"id": "2", "title": "A", "context": "c1", "question": "q2", "answers": {"text": ["y", "z"]}},
        {"id": "3", "title": "A", "context": "c2", "question": "q3", "answers": {"text": ["w"]}},
        {"id": "4", "title": "B", "context": "c3", "question": "q4", "answers": {"text": ["v"]}},
    ]
    articles = _group_rows(rows)
    assert [a.title for a in articles] == ["A", "B"]
    assert [[q.id for q in p.questions] for p in articles[0].paragraphs] == [["1", "2"], ["3"]]
    assert articles[0].paragraphs[0].questions[1].answers == ("y", "z")


def test_two_questions_under_one_id_are_counted_as_two(capsys):
    document = squad()
    qas = document["data"][0]["paragraphs"][0]["qas"]
    qas.append({**qas[0], "question": "Who else?"})
    qas.append(dict(qas[0]))  # the same question again keeps its id: the builder drops repeats
    questions = parse_squad(document, "train.json")[0].paragraphs[0].questions
    assert [q.id for q in questions] == ["q1", "q1-2", "q1"]
    assert "train.json: 1 question(s) share an id with a different question" in capsys.readouterr().err


def test_a_lone_surrogate_is_named_by_its_field(tmp_path):
    path = tmp_path / "train-v1.1.json"
    path.write_text(json.dumps(squad(question="Who\ud800?")), encoding="utf-8")  # json escapes it
    with pytest.raises(
        UserError, match=r"qas\[0\].question holds a lone surrogate \(\\ud800 at character 3\)"
    ):
        read_squad_json(path)


def test_a_deeply_nested_file_is_one_line(tmp_path):
    path = tmp_path / "train-v1.1.json"
    path.write_text('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(UserError, match="nested too deeply to be SQuAD v1.1"):
        read_squad_json(path)


def test_a_byte_order_mark_is_read_past(tmp_path):
    path = tmp_path / "train-v1.1.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(squad()).encode("utf-8"))
    assert read_squad_json(path)[0].title == "T"
