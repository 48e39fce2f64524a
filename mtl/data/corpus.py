"""Ordered corpora for context objectives (Quick-Thoughts, Skip-Thought): documents of
sentences in their order, from a text file, a Hugging Face Hub dataset, or SQuAD's passages.

A text file holds one sentence per line, a blank line between documents (BookCorpus as
Kiros et al. prepared it). A Hub dataset's rows are read in order as one stream, each row's
text split into sentences (BookCorpus copies have a sentence per row, Wikipedia copies an
article). `squad` is SQuAD v1.1's passages, each a document, split into sentences: its
train split for training and its dev split for dev, so tests and benchmarks need no download.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from mtl.data.squad import load_squad, resolve_squad_source
from mtl.errors import UserError
from mtl.files.hub import looks_like_hub_id
from mtl.text.unicode import decode_utf8, text_lines

Document = list[str]
SQUAD = "squad"


def resolve_corpus(source: str) -> str:
    """`squad`, an absolute file path, or a Hub id; a missing file is said now."""
    if source == SQUAD:
        return f"{SQUAD}:{resolve_squad_source(None)}"
    if source.startswith(f"{SQUAD}:"):
        return source
    path = Path(source).expanduser()
    if path.exists() or not looks_like_hub_id(source):
        if not path.is_file():
            raise UserError(
                f"corpus {source} does not exist: give a text file (a sentence per line, a blank line "
                "between documents), a Hub dataset id, or squad"
            )
        return str(path.resolve())
    return source


def read_corpus(source: str, split: str, text_column: str = "text") -> Iterable[Document]:
    """The documents of `source` (as `resolve_corpus` returns it) for `split` (train or dev).

    A file or Hub dataset is one split (the caller holds some documents out for dev); SQuAD
    has both, and its documents come as spaCy splits its passages, so a caller that needs only
    the first ones stops the splitting there (all of SQuAD's passages take 25 s).
    """
    if source.startswith(f"{SQUAD}:"):
        return squad_documents(source.removeprefix(f"{SQUAD}:"), split)
    if Path(source).is_file():
        return file_documents(Path(source))
    return hub_documents(source, text_column)


def file_documents(path: Path) -> list[Document]:
    text = decode_utf8(path.read_bytes(), "corpus file", path)
    documents: list[Document] = [[]]
    for line in text_lines(text):
        if line.strip():
            documents[-1].append(line.strip())
        elif documents[-1]:
            documents.append([])
    return [document for document in documents if document]


def squad_documents(source: str, split: str) -> Iterator[Document]:
    articles = load_squad(source)["train" if split == "train" else "validation"]
    passages = [paragraph.context for article in articles for paragraph in article.paragraphs]
    if not any(passages):
        raise UserError(f"SQuAD at {source} holds no passages (context fields): is it SQuAD v1.1?")
    return split_sentences(passages)


def hub_documents(hub_id: str, text_column: str) -> list[Document]:
    import datasets  # a second to import: only for a Hub dataset

    try:
        rows = datasets.load_dataset(hub_id, split="train")
    except Exception as error:  # the Hub and datasets raise many types
        raise UserError(
            f"cannot load corpus {hub_id} from the Hub ({type(error).__name__}): give a local file"
        ) from None
    if text_column not in rows.column_names:
        raise UserError(
            f"corpus {hub_id} has no column {text_column!r} (it has {', '.join(rows.column_names)}): set text_column="
        )
    return [[sentence for document in split_sentences(rows[text_column]) for sentence in document]]


def split_sentences(texts: list[str]) -> Iterator[Document]:
    """Each text's sentences (spaCy's rule-based sentencizer, no model), as they are split."""
    splitter = _sentencizer()
    for doc in splitter.pipe(texts, batch_size=1000):
        yield [sentence.text.strip() for sentence in doc.sents if sentence.text.strip()]


@cache
def _sentencizer():
    import spacy  # a second to import: only for a corpus split into sentences

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp
