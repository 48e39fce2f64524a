"""A pretrained model's own tokenizer: sentences -> subword ids with its special tokens, truncated."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from mtl.errors import UserError
from mtl.files.hub import load_pretrained

CHUNK = 10_000  # sentences per call of the fast tokenizer: bounded memory, same result


class SubwordTokenizer:
    def __init__(self, model: str, max_seq_length: int):
        from transformers import AutoTokenizer  # seconds to import: only for encoder=hf

        self.tokenizer = load_pretrained(AutoTokenizer.from_pretrained, model, "tokenizer")
        limit = positions(model, self.tokenizer)
        if limit is not None and max_seq_length > limit:
            raise UserError(
                f"max_seq_length={max_seq_length} is more than the {limit} positions of {model}: "
                f"give max_seq_length={limit} or less"
            )
        self.max_seq_length = max_seq_length
        self.truncated = 0  # sentences cut to max_seq_length so far

    def ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's ids, [CLS] ... [SEP] (or the model's equivalents), at most `max_seq_length`."""
        pieces: list[np.ndarray] = []
        for start in range(0, len(texts), CHUNK):
            chunk = list(texts[start : start + CHUNK])
            encoded = self.tokenizer(chunk, add_special_tokens=True)["input_ids"]
            # Long sentences are rare: only they are tokenized again, truncated by the tokenizer's rules.
            long = [i for i, ids in enumerate(encoded) if len(ids) > self.max_seq_length]
            if long:
                cut = self.tokenizer(
                    [chunk[i] for i in long], truncation=True, max_length=self.max_seq_length
                )["input_ids"]
                for i, ids in zip(long, cut, strict=True):
                    encoded[i] = ids
            self.truncated += len(long)
            pieces += [np.asarray(ids, dtype=np.int64) for ids in encoded]
        return pieces

    def digest(self) -> str:
        """SHA-256 of the vocabulary: resuming refuses a different tokenizer."""
        vocabulary = sorted(self.tokenizer.get_vocab().items(), key=lambda item: item[1])
        return hashlib.sha256("\n".join(token for token, _ in vocabulary).encode("utf-8")).hexdigest()


def positions(model: str, tokenizer) -> int | None:
    """The longest input `model` takes: its position table, or its tokenizer's limit when smaller
    (RoBERTa's table has 514 rows for 512 tokens); None when neither says."""
    from transformers import AutoConfig  # as above: only for encoder=hf

    config = load_pretrained(AutoConfig.from_pretrained, model, "config")
    limits = [getattr(config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    known = [int(limit) for limit in limits if isinstance(limit, int) and 0 < limit < 1_000_000]
    return min(known) if known else None
