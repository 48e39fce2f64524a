"""What the context objectives (Quick-Thoughts, Skip-Thought) share: an ordered corpus as a task's splits."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mtl.data.corpus import Document, read_corpus
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.tasks.configs import CorpusConfig

DEV_SHARE = 100  # a file or Hub corpus without a dev file keeps its last 1/100 documents for dev
MIN_PART = 2  # sentences of a one-document corpus's train and dev parts each: one has no neighbour


class CorpusTask:
    """Mixin: a task whose examples come from an ordered corpus (documents of sentences)."""

    name: str
    config: CorpusConfig

    @property
    def source(self) -> str:
        return self.config.corpus

    def documents(self, split: str, examples: int | None = None) -> list[Document] | None:
        """train and dev documents (no test: a context objective is judged by its transfer).

        `examples`: SQuAD's passages are split only until the documents hold that many of the
        task's examples (`examples_in`): a run with `max_train=` or `max_eval=` reads the same
        first examples as from every passage, without waiting for all of them to be split.
        """
        if split == "test":
            return None
        config = self.config
        if config.corpus.startswith("squad:"):
            documents = read_corpus(config.corpus, split, config.text_column)
        elif split == "dev" and config.dev:
            documents = read_corpus(config.dev, split, config.text_column)
        else:
            documents = read_corpus(config.corpus, split, config.text_column)
            if not config.dev:
                documents = self._held_out(list(documents), split)
        documents = (document for document in documents if len(document) > 1)  # no context to learn from
        if examples is not None:
            documents = self._holding(documents, examples)
        documents = list(documents)
        if not documents:
            how = "" if config.dev or config.corpus.startswith("squad:") else f" ({self._split_rule()})"
            raise UserError(
                f"{self.name}: the {split} part of corpus {config.corpus}{how} holds no document of two or "
                "more sentences: a context objective learns from neighbouring sentences; give a corpus "
                f"with more (a blank line between documents), or a dev file with {self.name}.dev="
            )
        return documents

    def _holding(self, documents: Iterable[Document], examples: int) -> Iterator[Document]:
        """The first documents, up to the one that brings their examples to `examples` (at least one)."""
        held = 0
        for document in documents:
            yield document
            held += self.examples_in(document)
            if held >= examples:
                return

    def examples_in(self, document: Document) -> int:
        """How many of the task's examples `document` gives."""
        raise NotImplementedError

    def _held_out(self, documents: list[Document], split: str) -> list[Document]:
        """The train or dev part of a corpus without a dev file (`_split_rule`)."""
        if len(documents) == 1:  # one stream: dev is its tail
            sentences = documents[0]
            if len(sentences) < 2 * MIN_PART:
                raise UserError(
                    f"{self.name}: corpus {self.config.corpus} is one document of {len(sentences)} "
                    f"sentence{'s' * (len(sentences) != 1)}: a context objective needs neighbouring sentences "
                    f"in train and in dev ({self._split_rule()}), so at least {2 * MIN_PART}; give a longer "
                    f"corpus, or a dev file with {self.name}.dev="
                )
            cut = len(sentences) - max(MIN_PART, len(sentences) // DEV_SHARE)
            return [sentences[:cut]] if split == "train" else [sentences[cut:]]
        held_out = max(1, len(documents) // DEV_SHARE)
        return documents[:-held_out] if split == "train" else documents[-held_out:]

    def _split_rule(self) -> str:
        return (
            f"without {self.name}.dev=, dev is the corpus's last 1% of documents, at least one; "
            f"a corpus of one document gives dev its last 1% of sentences, at least {MIN_PART}"
        )

    def splits(self, seed: int, max_eval: int | None) -> dict[str, LabelledTexts]:
        """As `Task.splits`, but dev is cut to its first examples: a corpus keeps its order."""
        found = {}
        for split in ("train", "dev"):
            examples = self.config.max_train if split == "train" else max_eval
            texts = self.load(split, examples)
            if texts is not None:
                found[split] = texts.head(examples)
                # dev's first max_eval examples: a part, of a corpus read only as far as they go
                found[split].part = split == "dev" and examples is not None
        return found

    def load(self, split: str, examples: int | None = None) -> LabelledTexts | None:
        """The split's examples: all of them, or at least the first `examples` (`documents`)."""
        raise NotImplementedError
