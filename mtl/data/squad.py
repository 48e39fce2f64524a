"""SQuAD v1.1 as articles -> paragraphs (passage, questions), from the Hub or the official JSON files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl.console import say
from mtl.errors import UserError
from mtl.files.hub import looks_like_hub_id
from mtl.files.paths import data_dir
from mtl.text.unicode import decode_utf8, invalid_unicode

HUB_ID = "rajpurkar/squad"
# Our split name -> (official file name, Hub split name).
SPLITS = {"train": ("train-v1.1.json", "train"), "validation": ("dev-v1.1.json", "validation")}


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class Paragraph:
    questions: tuple[Question, ...]
    context: str = ""  # the passage (Quick-Thoughts and Skip-Thought read its sentences in order)


@dataclass(frozen=True)
class Article:
    title: str
    paragraphs: tuple[Paragraph, ...]


def load_squad(source: str | None) -> dict[str, list[Article]]:
    """Both splits of SQuAD v1.1: `source` is a local folder, the Hub id, or None.

    None means `$MTL_DATA_DIR/squad` when MTL_DATA_DIR is set, else the Hub.
    """
    source = resolve_squad_source(source)
    folder = Path(source).expanduser()
    if folder.exists() or not looks_like_hub_id(source):
        return {split: read_squad_json(folder / name) for split, (name, _) in SPLITS.items()}
    return _load_from_hub(source)


def resolve_squad_source(source: str | None) -> str:
    """`source` itself, or for None `$MTL_DATA_DIR/squad` when MTL_DATA_DIR is set, else the Hub id.

    A local folder must hold both files: said now, before other inputs are fetched.
    """
    if source is None:
        local = data_dir()
        source = str(local / "squad") if local is not None else HUB_ID
    folder = Path(source).expanduser()
    if folder.exists() or not looks_like_hub_id(source):
        for name, _ in SPLITS.values():
            if not (folder / name).is_file():
                raise _missing(folder / name)
    return source


def _missing(path: Path) -> UserError:
    return UserError(
        f"SQuAD file {path} does not exist: point squad=PATH at a folder holding "
        f"{' and '.join(name for name, _ in SPLITS.values())}"
    )


def read_squad_json(path: Path) -> list[Article]:
    if not path.is_file():
        raise _missing(path)
    try:
        document = json.loads(decode_utf8(path.read_bytes(), "SQuAD file", path))
    except json.JSONDecodeError as error:
        raise UserError(f"SQuAD file {path} is not valid JSON: {error}") from None
    except RecursionError:
        raise UserError(
            f"SQuAD file {path} is nested too deeply to be SQuAD v1.1: is it the right file?"
        ) from None
    return parse_squad(document, path.name)


def parse_squad(document: Any, name: str) -> list[Article]:
    """Validate the official layout, naming the first offending field by its JSON path.

    Ids are made unique per question: a second, different question under an id already
    used becomes `<id>-2` (and so on), with a warning, so it is counted as the question it is.
    """
    articles = []
    question_of_id: dict[str, str] = {}
    renamed = 0
    for a, article in enumerate(_list(document, "data", name)):
        title = _text(article, "title", name, a)
        paragraphs = []
        for p, paragraph in enumerate(_list(article, "paragraphs", name, a)):
            questions = []
            for q, qa in enumerate(_list(paragraph, "qas", name, a, p)):
                answers = _list(qa, "answers", name, a, p, q)
                if not answers:
                    raise UserError(f"{name}: {_where(a, p, q)} has no answers (SQuAD v2.0? use v1.1)")
                question_id, text = _text(qa, "id", name, a, p, q), _text(qa, "question", name, a, p, q)
                if question_of_id.setdefault(question_id, text) != text:
                    question_id = _unused_id(question_id, text, question_of_id)
                    renamed += 1
                questions.append(
                    Question(
                        id=question_id,
                        text=text,
                        answers=tuple(
                            _text(answer, "text", name, a, p, q, i) for i, answer in enumerate(answers)
                        ),
                    )
                )
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            paragraphs.append(Paragraph(tuple(questions), context if isinstance(context, str) else ""))
        articles.append(Article(title, tuple(paragraphs)))
    if renamed:
        say(
            f"warning: {name}: {renamed} question(s) share an id with a different question; "
            "each is counted under its id with a suffix (-2, -3, ...)"
        )
    return articles


def _unused_id(question_id: str, text: str, question_of_id: dict[str, str]) -> str:
    """`<id>-N` for the first N whose id is free or already names this same question."""
    n = 2
    while question_of_id.setdefault(f"{question_id}-{n}", text) != text:
        n += 1
    return f"{question_id}-{n}"


def _where(*indices: int) -> str:
    """The JSON path of the field at these indices (article, paragraph, question, answer), made
    only for an error message: a build checks some 300,000 fields."""
    parts = ("data", "paragraphs", "qas", "answers")
    return ".".join(f"{part}[{index}]" for part, index in zip(parts, indices, strict=False))


def _list(container: Any, key: str, name: str, *indices: int) -> list:
    if not isinstance(container, dict) or key not in container:
        where = _where(*indices) or "top level"
        raise UserError(f"{name}: {where} has no {key!r} field: is this SQuAD v1.1?")
    value = container[key]
    if not isinstance(value, list):
        raise UserError(f"{name}: {_where(*indices)}.{key} must be a list, found {type(value).__name__}")
    return value


def _text(container: Any, key: str, name: str, *indices: int) -> str:
    if not isinstance(container, dict) or key not in container:
        raise UserError(f"{name}: {_where(*indices)} has no {key!r} field: is this SQuAD v1.1?")
    value = container[key]
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{name}: {_where(*indices)}.{key} must be a non-empty string, found {value!r:.80}")
    if bad := invalid_unicode(value):
        raise UserError(
            f"{name}: {_where(*indices)}.{key} holds a lone surrogate ({bad}), which is not text: fix it"
        )
    return value


def _load_from_hub(hub_id: str) -> dict[str, list[Article]]:
    import datasets  # a second to import: only for a Hub dataset

    try:
        loaded = datasets.load_dataset(hub_id)
    except Exception as error:  # the Hub raises many types; all mean the same to the user
        raise UserError(
            f"could not load {hub_id!r} from the Hugging Face Hub ({type(error).__name__}): "
            "point squad=PATH at a folder with train-v1.1.json and dev-v1.1.json, or set MTL_DATA_DIR"
        ) from None
    return {split: _group_rows(loaded[hub_split]) for split, (_, hub_split) in SPLITS.items()}


def _group_rows(rows: Any) -> list[Article]:
    """Rebuild articles (consecutive titles) and paragraphs (consecutive contexts) from flat rows."""
    articles: list[Article] = []
    title = context = None
    paragraphs: list[Paragraph] = []
    questions: list[Question] = []

    def close_paragraph() -> None:
        if questions:
            paragraphs.append(Paragraph(tuple(questions), context or ""))
            questions.clear()

    def close_article() -> None:
        close_paragraph()
        if paragraphs:
            articles.append(Article(title, tuple(paragraphs)))
            paragraphs.clear()

    for row in rows:
        if row["title"] != title:
            close_article()
            title, context = row["title"], None
        if row["context"] != context:
            close_paragraph()
            context = row["context"]
        questions.append(Question(row["id"], row["question"], tuple(row["answers"]["text"])))
    close_article()
    return articles
