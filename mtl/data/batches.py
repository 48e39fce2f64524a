"""Sentences as token ids, and each task's seeded, resumable walk through its examples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mtl.runtime.device import to_device
from mtl.text.token_cache import cached_tokenize
from mtl.text.tokenizer import Tokenizer
from mtl.text.vocab import Vocabulary


class SentenceTable:
    """Distinct sentences, tokenized once, stored as one flat id array with offsets."""

    def __init__(
        self, texts: Sequence[str], tokenizer: Tokenizer | None = None, max_tokens: int | None = None
    ):
        """`tokenizer`: words for a vocabulary (`index_with`); None when ids come whole (`set_ids`).

        `max_tokens`: sentences longer than that are cut to it (`truncated` counts them).
        """
        self.texts = list(dict.fromkeys(texts))
        self.row = {text: i for i, text in enumerate(self.texts)}
        self.tokens, self.truncated = (
            tokenize_at_most(tokenizer, self.texts, max_tokens, dataset=True) if tokenizer else ([], 0)
        )
        self.ids: np.ndarray | None = None

    def rows(self, texts: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.row[t] for t in texts), dtype=np.int64, count=len(texts))

    def index_with(self, vocabulary: Vocabulary) -> None:
        # An empty sentence becomes one unknown token so every sentence has length >= 1.
        self.set_ids([vocabulary.ids(tokens) if tokens else np.array([1]) for tokens in self.tokens])

    def set_ids(self, pieces: Sequence[np.ndarray]) -> None:
        """Each sentence's ids, in the order of `texts` (a subword tokenizer's, special tokens included)."""
        self.lengths = np.array([len(p) for p in pieces], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded token ids (n, T) and lengths (n,) for sentence `rows`."""
        lengths = self.lengths[rows]
        tokens = np.zeros((len(rows), int(lengths.max())), dtype=np.int64)
        for i, (row, length) in enumerate(zip(rows, lengths, strict=True)):
            start = self.offsets[row]
            tokens[i, :length] = self.ids[start : start + length]
        return torch.from_numpy(tokens), torch.from_numpy(lengths)

    def batch_columns(
        self, rows: np.ndarray, device: torch.device
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """For (B, k) example rows: one padded (tokens, lengths) pair per sentence position.

        Tokens go to `device`; lengths stay on the CPU, where packing sequences for cuDNN reads
        them without waiting for the GPU (encoders move what they derive from them).
        """
        columns = (self.batch(rows[:, k]) for k in range(rows.shape[1]))
        return [(to_device(tokens, device), lengths) for tokens, lengths in columns]


CHARACTERS_PER_TOKEN = 64  # a text is cut to this many characters per allowed token before tokenizing
# A list of at least this many texts is a dataset's (a transfer task's sentences): its tokens are
# kept on disk ($MTL_CACHE_DIR/tokens), so the next process reads them instead of tokenizing again
# (each transfer run). Shorter lists (queries) are not kept. A training's sentences are a dataset's
# whatever their number: each sweep member, resume and torchrun rank reads them (a small task's
# too, which spares that process importing spaCy: 1.3 s here).
DISK_CACHED_TEXTS = 1000


def tokenize_at_most(
    tokenizer: Tokenizer, texts: Sequence[str], max_tokens: int | None, dataset: bool = False
) -> tuple[list[list[str]], int]:
    """Each text's tokens, at most `max_tokens` of them, and how many texts were cut; `dataset`:
    the texts are a dataset's, kept in the token cache however few.

    One 5 MB line would otherwise take the tokenizer minutes and make a step that never ends
    (a recurrent encoder walks every position). The text is cut by characters first, far
    beyond any real sentence of `max_tokens` words, so the tokenizer's time stays bounded too.
    """
    if max_tokens is None:
        return _tokenized(tokenizer, texts, dataset), 0
    limit = max_tokens * CHARACTERS_PER_TOKEN
    tokens = _tokenized(tokenizer, [text[:limit] for text in texts], dataset)
    truncated = sum(
        len(words) > max_tokens or len(text) > limit for words, text in zip(tokens, texts, strict=True)
    )
    return [words[:max_tokens] for words in tokens], truncated


def _tokenized(tokenizer: Tokenizer, texts: Sequence[str], dataset: bool) -> list[list[str]]:
    if (dataset or len(texts) >= DISK_CACHED_TEXTS) and hasattr(tokenizer, "description"):
        return cached_tokenize(tokenizer, texts)
    return tokenizer.tokenize(texts)


@dataclass
class TaskExamples:
    """Examples of one task: `sentences[i]` holds the table rows of example i's sentences."""

    sentences: np.ndarray  # (N, k) rows into a SentenceTable
    labels: np.ndarray  # (N,)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: np.ndarray) -> TaskExamples:
        return TaskExamples(self.sentences[indices], self.labels[indices])


class TaskStream:
    """The batches of one task, epoch after epoch, in an order fixed by (seed, epoch).

    Within an epoch examples are shuffled, grouped into windows of `window` batches, sorted
    by length inside each window (less padding), cut into batches, and the batches are
    shuffled. `contiguous`: each batch is instead a run of consecutive examples (a corpus's
    sentences in order, as Quick-Thoughts builds its batches), the runs shuffled. `distinct`
    ((N, P) sentence rows of each example): no sentence twice in a batch, for losses that score
    each example against the batch's others (a repeated anchor is a false negative). Its whole
    state is (epoch, position), so resuming is exact.
    """

    def __init__(
        self,
        examples: TaskExamples,
        lengths: np.ndarray,
        batch_size: int,
        seed: Sequence[int],
        window: int = 50,
        contiguous: bool = False,
        distinct: np.ndarray | None = None,
    ):
        self.examples, self.batch_size, self.seed, self.window = examples, batch_size, list(seed), window
        self.contiguous, self.distinct = contiguous, None if contiguous else distinct
        self.example_lengths = lengths  # (N,) sort key: similar keys, similar padded lengths
        self.epoch, self.position = 0, 0
        self._batches: list[np.ndarray] | None = None

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position, self._batches = state["epoch"], state["position"], None

    @property
    def batches_per_epoch(self) -> int:
        """Of the current epoch (no-duplicate batching can add a short batch or two)."""
        if self.distinct is None:
            return -(-len(self.examples) // self.batch_size)
        if self._batches is None:
            self._batches = self.epoch_batches(self.epoch)
        return len(self._batches)

    def peek(self) -> np.ndarray:
        """Indices of the batch `next` will give, without moving on."""
        if self._batches is None:
            self._batches = self.epoch_batches(self.epoch)
        return self._batches[self.position]

    def next(self) -> tuple[np.ndarray, bool]:
        """Indices of the next batch, and whether it ended an epoch."""
        if self._batches is None:
            self._batches = self.epoch_batches(self.epoch)
        batch = self._batches[self.position]
        self.position += 1
        if self.position == len(self._batches):
            self.epoch, self.position, self._batches = self.epoch + 1, 0, None
            return batch, True
        return batch, False

    def seen(self) -> np.ndarray:
        """Indices of the examples the batches given so far held (all of them after an epoch)."""
        if self.epoch > 0:
            return np.arange(len(self.examples))
        given = self.epoch_batches(0)[: self.position]
        return np.unique(np.concatenate(given)) if given else np.zeros(0, dtype=np.int64)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([*self.seed, epoch])
        if self.contiguous:
            runs = contiguous_batches(len(self.examples), self.batch_size)
            return [runs[i] for i in rng.permutation(len(runs))]
        windows = self._windows(rng)
        if self.distinct is None:
            batches = [w[i : i + self.batch_size] for w in windows for i in range(0, len(w), self.batch_size)]
        else:
            batches, carried = [], np.zeros(0, dtype=np.int64)
            for number, window in enumerate(windows):
                made = without_repeats(np.concatenate([carried, window]), self.distinct, self.batch_size)
                if number < len(windows) - 1:  # a short last batch waits for the next window's examples
                    full = [b for b in made if len(b) == self.batch_size]
                    carried = np.concatenate([b for b in made if len(b) < self.batch_size] or [carried[:0]])
                    made = full
                batches += made
        return [batches[i] for i in rng.permutation(len(batches))]

    def _windows(self, rng: np.random.Generator) -> list[np.ndarray]:
        """The epoch's examples shuffled, cut into windows of `window` batches, each sorted by length."""
        order = rng.permutation(len(self.examples))
        span = self.batch_size * self.window
        windows = []
        for start in range(0, len(order), span):
            chunk = order[start : start + span]
            windows.append(chunk[np.argsort(self.example_lengths[chunk], kind="stable")])
        return windows

    def false_negative_share(self, epoch: int = 0) -> float:
        """The share of the epoch's in-batch negatives (as batched) that are a positive of their
        anchor elsewhere in the data (see `false_negative_share`)."""
        return false_negative_share(self.examples.sentences, self.epoch_batches(epoch))

    def repeats_share(self, epoch: int = 0) -> float:
        """The share of the epoch's plain batches (`distinct` not applied) that held a sentence
        twice: the batches no-duplicate batching changed."""
        if self.distinct is None:
            return 0.0
        windows = self._windows(np.random.default_rng([*self.seed, epoch]))
        plain = [w[i : i + self.batch_size] for w in windows for i in range(0, len(w), self.batch_size)]
        return sum(holds_repeats(self.distinct[b]) for b in plain) / max(1, len(plain))


def false_negative_share(sentences: np.ndarray, batches: Sequence[np.ndarray]) -> float:
    """For rows (anchor, positive[, negatives...]) of sentence ids ((N, P) `sentences`) batched as
    `batches`: the share of each anchor's in-batch negatives (the sentences of the batch's other
    rows: their positives and negatives) that some row of the data pairs with that anchor as its
    positive. Labelled pairs say so, with no model: on SNLI-derived triples, a hypothesis another
    premise's annotator wrote that this premise's annotator also wrote as entailed ("A man is
    outside."). A repeated sentence is counted each time it is a candidate."""
    if sentences.shape[1] < 2 or not len(batches):
        return 0.0
    # every (anchor, positive) pair of the data as one integer, so a batch is checked at once
    width = int(sentences.max()) + 1
    pairs = np.unique(sentences[:, 0].astype(np.int64) * width + sentences[:, 1])
    false = total = 0
    for rows in batches:
        block = sentences[rows].astype(np.int64)
        candidates = block[:, 1:]  # (B, P - 1): each row's positive and negatives
        asked = block[:, :1] * width + candidates.reshape(1, -1)  # anchor i x every candidate of the batch
        others = ~np.repeat(np.eye(len(block), dtype=bool), candidates.shape[1], axis=1)  # not i's own
        false += int(np.isin(asked[others], pairs, assume_unique=False).sum())
        total += int(others.sum())
    return false / total if total else 0.0


def holds_repeats(rows: np.ndarray) -> bool:
    """Whether a sentence of one example ((B, P) rows) is also one of another's."""
    return sum(len(set(example.tolist())) for example in rows) > len(np.unique(rows))


def without_repeats(order: np.ndarray, sentences: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """`order` cut into batches of `batch_size` in which no sentence row of `sentences` ((N, P))
    appears twice: an example that would repeat one waits for the next batch that has room for it
    (sentence-transformers' NoDuplicatesBatchSampler, in order, so length bucketing holds). Every
    example is kept; only the last batches can be short."""
    batches: list[np.ndarray] = []
    waiting = list(order)
    while waiting:
        batch: list[int] = []
        seen: set[int] = set()
        deferred: list[int] = []
        position = 0
        while position < len(waiting) and len(batch) < batch_size:
            index = waiting[position]
            rows = sentences[index].tolist()
            if seen.isdisjoint(rows):
                batch.append(index)
                seen.update(rows)
            else:
                deferred.append(index)
            position += 1
        batches.append(np.asarray(batch, dtype=order.dtype))
        waiting = deferred + waiting[position:]
    return batches


def contiguous_batches(count: int, batch_size: int) -> list[np.ndarray]:
    """Runs of `batch_size` consecutive indices of `count` items (the last one shorter)."""
    return [np.arange(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


def longest_first_batches(
    lengths: np.ndarray, batch_size: int, batch_tokens: int | None = None
) -> list[np.ndarray]:
    """Positions of sentences of `lengths`, sorted longest first and cut into batches of at most
    `batch_size` sentences and, when given, `batch_tokens` padded tokens (at least one sentence
    each: one longer than the budget goes alone)."""
    order = np.argsort(-lengths, kind="stable")
    if batch_tokens is None:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    batches, start = [], 0
    while start < len(order):
        width = max(int(lengths[order[start]]), 1)  # the batch's longest: its first
        size = min(batch_size, max(batch_tokens // width, 1))
        batches.append(order[start : start + size])
        start += size
    return batches
