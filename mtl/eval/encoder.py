"""Sentence embeddings out of a run: `load_encoder(run).encode(sentences)` (loading: mtl.eval.loading).

Words the encoder never saw in training take their GloVe vector when the vectors file has
one, else the unknown vector. Frozen GloVe inputs make that exact; for trained word vectors
(`embeddings=trainable|both`) `load_encoder(run, vocab_expansion=True)` maps the GloVe vector
into the trained space first, as Skip-Thought does (mtl.eval.vocab_expansion).
"""

from __future__ import annotations

import typing
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from mtl.data.batches import longest_first_batches, tokenize_at_most
from mtl.data.config import DataConfig
from mtl.errors import UserError
from mtl.eval.embeddings import checked_options, finished
from mtl.eval.transfer.progress import stage
from mtl.eval.vocab_expansion import ExpansionMap, fit_expansion
from mtl.models.encoders.base import (
    Bottleneck,
    Encoder,
    EncoderConfig,
    Pooling,
    build_encoder,
    frozen_embedding,
    pooled_dim,
)
from mtl.models.encoders.concat import ConcatEncoder
from mtl.models.encoders.hf import HFEncoder
from mtl.models.precision import DTYPES, autocast, bf16_supported
from mtl.runtime.device import resolve_device, to_device
from mtl.text.coverage import Coverage
from mtl.text.subwords import SubwordTokenizer
from mtl.text.tokenizer import Tokenizer
from mtl.text.unicode import invalid_unicode
from mtl.text.vectors import lookup
from mtl.text.vocab import UNK, Vocabulary

TOKEN_CACHE_SENTENCES = 200_000  # ~870 bytes each at SNLI's 10 words a sentence: ~0.17 GB at most


class SentenceEncoder:
    """A trained (or baseline) encoder with its tokenizer and vocabulary."""

    def __init__(
        self,
        encoder: Encoder,
        vocabulary: Vocabulary,
        tokenizer: Tokenizer | None,  # None: token_ids is overridden (subwords)
        vectors: str | None,
        device: torch.device,
        name: str,
        max_tokens: int = DataConfig.max_tokens,  # the limit the encoder was trained with
    ):
        self.encoder = encoder.to(device).eval()
        self.token_counts: Counter[str] = Counter()  # every token encoded so far
        self.warned_missing_vectors = False
        self.warned_prompt = False
        self.max_tokens = max_tokens
        self.prompts: dict[str, str] = {}  # sentence-transformers' names; only encoder=hf runs take prompts
        self.default_prompt_name: str | None = None
        self.truncated = 0  # distinct sentences cut to max_tokens so far
        # Each sentence's tokens once tokenized, for the next encode() of it: the transfer suite
        # and monitor= encode the same sentences again and again (keyed by what made them).
        self.token_cache: dict[str, list[str]] = {}
        self.token_cache_key: tuple[object, int | None] | None = None
        self.word_embeddings = "frozen"  # the run's embeddings=: frozen, trainable or both
        self.expansion: ExpansionMap | None = None  # set: new words' vectors go through it (vocab_expansion)
        self.expansion_remapped = (
            0  # vocabulary words no batch reached, put through the map when it was fitted
        )
        self.vocabulary, self.tokenizer, self.vectors, self.device, self.name = (
            vocabulary,
            tokenizer,
            vectors,
            device,
            name,
        )

    @property
    def dim(self) -> int:
        return self.encoder.output_dim

    @property
    def max_seq_length(self) -> int:
        """The most tokens of a sentence the encoder reads (the rest is cut), as sentence-transformers names it."""
        return self.max_tokens

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.max_tokens = checked_length(value)

    similarity_fn_name = "cosine"  # what mtl's STS and retrieval evaluations score with

    def get_sentence_embedding_dimension(self) -> int:
        """The width of `encode()`'s embeddings (sentence-transformers' name for `dim`)."""
        return self.dim

    def get_embedding_dimension(self) -> int:
        """The width of `encode()`'s embeddings (sentence-transformers 6's name for it)."""
        return self.dim

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """(N, M) cosine similarities of every row of `embeddings1` with every row of `embeddings2`."""
        return cosine_similarities(embeddings1, embeddings2, pairwise=False)

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """(N,) cosine similarities of row i of `embeddings1` with row i of `embeddings2`."""
        return cosine_similarities(embeddings1, embeddings2, pairwise=True)

    def prompted(self, sentences: list[str], prompt_name: str | None, prompt: str | None) -> list[str]:
        """`sentences` as they are: word-vector encoders were trained without prompts, whose words
        would be averaged or read into every embedding. A prompt given is ignored with one warning
        per encoder, as sentence-transformers lets a model that has no use for one go on."""
        if (prompt is not None or prompt_name is not None) and not self.warned_prompt:
            asked = f"prompt={prompt!r}" if prompt is not None else f"prompt_name={prompt_name!r}"
            warnings.warn(
                f"encode({asked}): {self.name} reads words through fixed word vectors, not a prompted "
                "transformer: the prompt is ignored (prompts apply to encoder=hf runs)",
                stacklevel=3,
            )
            self.warned_prompt = True
        return sentences

    def encode(
        self,
        sentences: str | Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 128,
        show_progress_bar: bool | None = None,
        output_value: str | None = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: str | None = None,
        normalize_embeddings: bool = False,
        truncate_dim: int | None = None,
        *,
        pooling: str | None = None,
        progress: bool | None = None,
        batch_tokens: int | None = None,
        compute_dtype: str = "fp32",
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """(N, D) float32 embeddings in input order; one string: (D,). The arguments mean what they
        mean in `SentenceTransformer.encode` (3.0 and later), positions included, so code written for
        it runs on mtl's encoders; `pooling` (mtl's own) replaces the trained pooling for this call.
        `prompt` (text put before each sentence) or `prompt_name` (a key of `prompts`) apply to
        encoder=hf runs. No bar
        unless asked (`show_progress_bar=True`; `progress` is its older name).

        `batch_tokens` (mtl's own) sizes batches by tokens: each holds at most that many padded
        tokens (sentences x its longest), and at most `batch_size` sentences. Short sentences then
        go in large batches, long ones in small ones: fewer, fuller calls where a GPU's time goes
        to launching them, with memory bounded by the tokens. None: `batch_size` sentences each.

        `compute_dtype` (mtl's own): `bf16` (or `fp16` on a GPU) runs the encoder's arithmetic under
        autocast at that precision, embeddings still returned as float32 (`precision=` keeps
        sentence-transformers' meaning: how the result is quantised)."""
        if isinstance(sentences, str):  # as sentence-transformers: one sentence, not its characters
            many = self.encode(
                [sentences], prompt_name, prompt, batch_size, show_progress_bar, output_value, precision, convert_to_numpy,
                convert_to_tensor, device, normalize_embeddings, truncate_dim, pooling=pooling, progress=progress,
                batch_tokens=batch_tokens, compute_dtype=compute_dtype,
            )  # fmt: skip
            return many[0]
        check_prompt_arguments(prompt_name, prompt)
        sentences = self.prompted(checked_sentences(sentences), prompt_name, prompt)
        check_batch_limit("batch_size", batch_size, "sentences")
        if batch_tokens is not None:
            check_batch_limit("batch_tokens", batch_tokens, "tokens")
        if pooling is not None and pooling not in typing.get_args(Pooling):
            raise UserError(
                f"encode(pooling={pooling!r}) is not a pooling: choose one of {', '.join(typing.get_args(Pooling))}"
            )
        if device is not None:
            self.to(device)
        computing = self.compute_precision(compute_dtype)
        show = bool(progress if show_progress_bar is None else show_progress_bar)
        if output_value == "token_embeddings":
            return [
                torch.from_numpy(states)
                for states in self.token_states(sentences, batch_size, show, batch_tokens=batch_tokens)
            ]
        width = pooled_width(self.encoder, pooling)
        checked_options(precision, truncate_dim, width, output_value)
        ids = self.token_ids(sentences)
        out = torch.zeros((len(ids), width), dtype=torch.float32, device=self.device)
        for chosen, embedded in self._encoded(ids, batch_size, pooling, show, batch_tokens, computing):
            # Kept on the device and copied back once; the index goes up pinned, so no batch waits.
            out[to_device(torch.from_numpy(chosen), self.device)] = embedded.float()
        if not bool(torch.isfinite(out).all()):  # never hand NaN on to a classifier or an index
            bad = int((~torch.isfinite(out).all(dim=1)).sum())
            raise UserError(
                f"{self.name}: {bad:,} of {len(out):,} embeddings hold NaN or infinite values: its weights "
                "overflow on these sentences; use an earlier checkpoint of the run"
            )
        return finished(
            out,
            normalize=normalize_embeddings,
            truncate_dim=truncate_dim,
            precision=precision,
            to_numpy=convert_to_numpy,
            to_tensor=convert_to_tensor,
        )

    def compute_precision(self, compute_dtype: str) -> str:
        """`encode(compute_dtype=)` checked for this encoder and device."""
        if compute_dtype not in DTYPES:
            raise UserError(f"encode(compute_dtype={compute_dtype!r}): choose one of {', '.join(DTYPES)}")
        if compute_dtype == "fp16" and self.device.type != "cuda":
            raise UserError("encode(compute_dtype='fp16') is for GPUs: on the CPU use bf16 or fp32")
        has_lstm = any(isinstance(m, torch.nn.LSTM) for m in self.encoder.modules())
        if (
            compute_dtype == "bf16"
            and not bf16_supported(self.device)
            and (has_lstm or self.device.type == "cuda")
        ):
            where = (
                "this GPU"
                if self.device.type == "cuda"
                else "this CPU (no AVX512-BF16 or AMX, which its LSTM needs)"
            )
            raise UserError(
                f"encode(compute_dtype='bf16'): {where} has no native bf16: use compute_dtype='fp32'"
            )
        return compute_dtype

    def to(self, device: str | torch.device) -> SentenceEncoder:
        """Move the encoder to `device` (cpu, cuda, cuda:N; auto picks CUDA when there is one)."""
        self.device = resolve_device(str(device))
        self.encoder.to(self.device)
        return self

    def token_states(
        self,
        sentences: Sequence[str],
        batch_size: int = 128,
        progress: bool = False,
        *,
        batch_tokens: int | None = None,
    ) -> list[np.ndarray]:
        """Each sentence's (T_i, D) states before pooling, in input order: what a pooling trained
        after the fact (transfer's pooling=selfattn) reads."""
        if self.encoder.fixed_pooling or isinstance(self.encoder, Bottleneck):
            raise UserError(
                f"{type(self.encoder).__name__} has no token states to pool otherwise: it pools its own way"
            )
        ids = self.token_ids(checked_sentences(sentences))
        states: list[np.ndarray] = [np.empty(0)] * len(ids)
        for chosen, padded in self._encoded(ids, batch_size, "none", progress, batch_tokens, "fp32"):
            padded = padded.float().cpu().numpy()  # (B, T, D)
            for row, index in enumerate(chosen):
                states[index] = padded[row, : len(ids[index])].copy()
        return states

    def _encoded(
        self,
        ids: list[np.ndarray],
        batch_size: int,
        pooling: str | None,
        progress: bool,
        batch_tokens: int | None,
        compute_dtype: str,
    ):
        """(positions in `ids`, the encoder's output at `compute_dtype`) per batch of similar lengths,
        longest first."""
        lengths = np.array([len(i) for i in ids])
        saved_pooling = getattr(self.encoder, "pooling", None)
        if pooling is not None:
            self.encoder.pooling = pooling
        try:
            with (
                torch.inference_mode(),
                autocast(compute_dtype, self.device),
                tqdm(
                    total=len(ids), desc=f"encode {self.name}", disable=not progress, unit=" sentences"
                ) as bar,
            ):
                done = 0
                for chosen in longest_first_batches(lengths, batch_size, batch_tokens):
                    batch = np.zeros((len(chosen), lengths[chosen].max()), dtype=np.int64)
                    for row, index in enumerate(chosen):
                        batch[row, : lengths[index]] = ids[index]
                    yield (
                        chosen,
                        self.encoder(
                            to_device(torch.from_numpy(batch), self.device), torch.from_numpy(lengths[chosen])
                        ),
                    )
                    bar.update(len(chosen))
                    done += len(chosen)
                    # the transfer bar's words, when a suite listens: a transformer takes minutes on a task
                    stage(f"embedding {done:,}/{len(ids):,} sentences")
        finally:
            if pooling is not None:
                self.encoder.pooling = saved_pooling

    def token_ids(self, sentences: Sequence[str]) -> list[np.ndarray]:
        """Each sentence's ids, at most `max_tokens` of them; words new to the vocabulary take their
        GloVe vector when there is one."""
        tokens = self.cached_tokens(sentences)
        self.expand_vocabulary({word for words in tokens for word in words})
        self.token_counts.update(word for words in tokens for word in words)
        return [
            self.vocabulary.ids(words) if words else np.array([self.vocabulary.index[UNK]])
            for words in tokens
        ]

    def cached_tokens(self, sentences: Sequence[str]) -> list[list[str]]:
        """Each sentence's tokens (at most `max_tokens`), tokenizing only those not seen before;
        the cache holds at most TOKEN_CACHE_SENTENCES (emptied when it would hold more)."""
        if self.token_cache_key != (key := (self.tokenizer, self.max_tokens)):
            self.token_cache, self.token_cache_key = {}, key
        cache = self.token_cache
        new = [sentence for sentence in dict.fromkeys(sentences) if sentence not in cache]
        tokens, truncated = tokenize_at_most(self.tokenizer, new, self.max_tokens) if new else ([], 0)
        self.truncated += truncated
        fresh = dict(zip(new, tokens, strict=True))
        found = [fresh[sentence] if sentence in fresh else cache[sentence] for sentence in sentences]
        if len(cache) + len(fresh) > TOKEN_CACHE_SENTENCES:
            cache.clear()
        if len(fresh) <= TOKEN_CACHE_SENTENCES:
            cache.update(fresh)
        return found

    def _grown(self, weight: torch.Tensor, vectors: np.ndarray) -> torch.Tensor:
        """`weight` with a row for each of `vectors` (n, E) added below."""
        copies, remainder = divmod(weight.shape[1], vectors.shape[1])
        if remainder or copies not in (1, 2):
            raise UserError(
                f"{self.vectors} holds {vectors.shape[1]}-d vectors but {self.name} reads "
                f"{weight.shape[1]}-d word vectors: point at the vectors file it was trained with"
            )
        # embeddings=both: a row is [frozen ; trained copy], and a word no step trained is its
        # pretrained vector in both halves, or in the trained half its vector mapped there
        trained = self.expansion(vectors) if self.expansion is not None else vectors
        rows = torch.from_numpy(np.hstack([vectors, trained]) if copies == 2 else trained)
        return torch.cat([weight, rows.to(weight.device, weight.dtype)])

    def fit_vocab_expansion(self) -> ExpansionMap:
        """Fit Skip-Thought's map from the vectors file's space to the trained word embeddings over
        the vocabulary's words that training moved, and use it for every word added from now on
        and for the vocabulary's words no batch reached (their rows still GloVe's)."""
        if self.tokenizer is None:  # a transformer's subwords: every word has ids already
            raise UserError(
                f"vocab_expansion: {self.name} reads subwords, so no word is new to it: leave vocab_expansion out"
            )
        if self.word_embeddings == "frozen":
            raise UserError(
                f"vocab_expansion: {self.name} reads frozen GloVe vectors, so a new word's vector is already "
                "in its space: leave vocab_expansion out (it is for embeddings=trainable or both)"
            )
        if isinstance(self.encoder, ConcatEncoder) or self.encoder.embedding is None:
            raise UserError(
                f"vocab_expansion: {self.name} concatenates encoders with word vectors of their own: "
                "expansion maps one trained table (export the part you need)"
            )
        if not self.vectors or not Path(self.vectors).is_file():
            raise UserError(
                f"vocab_expansion: the vectors file {self.vectors} {self.name} was trained with is not here: "
                "give vectors=PATH (encode(): encoder.vectors = PATH before fitting)"
            )
        found = lookup(self.vectors, self.vocabulary.words[2:])
        weight = self.encoder.embedding.weight.detach().float().cpu().numpy()
        trained = weight[self.vocabulary.ids(found.words)]
        if self.word_embeddings == "both":
            trained = trained[:, found.dim :]  # [frozen ; trained]: the frozen half is the vector itself
        # The words training saw: their rows moved. A vocabulary word no batch reached (a dev
        # sentence's) still holds its GloVe vector and would pull the map towards the identity.
        pretrained = found.matrix.astype(np.float32)
        seen = np.any(trained != pretrained, axis=1)
        if not seen.any():
            self.expansion = fit_expansion(pretrained, trained)
            return self.expansion
        self.expansion = fit_expansion(pretrained[seen], trained[seen])
        # ... and, being in GloVe space beside trained rows (a fifth of a CPU run's vocabulary),
        # those words enter through the map as new words do.
        unreached = [word for word, moved in zip(found.words, seen, strict=True) if not moved]
        if unreached:
            rows = torch.as_tensor(
                self.vocabulary.ids(unreached), device=self.encoder.embedding.weight.device
            )
            mapped = torch.from_numpy(self.expansion(pretrained[~seen]))
            with torch.no_grad():
                weight = self.encoder.embedding.weight
                weight[rows, weight.shape[1] - mapped.shape[1] :] = mapped.to(weight.device, weight.dtype)
        self.expansion_remapped = len(unreached)
        return self.expansion

    @property
    def coverage(self) -> Coverage | None:
        """How many of the tokens encoded so far the vocabulary (trained words and vectors) knows."""
        if not self.token_counts:
            return None
        source = Path(self.vectors).name if self.vectors else "the encoder's vocabulary"
        return Coverage.of(
            [self.token_counts.elements()],
            self.vocabulary.index.__contains__,
            "the encoded sentences",
            source,
        )

    def expand_vocabulary(self, words: set[str]) -> int:
        """Add the words that have a GloVe vector; return how many were added."""
        unseen = {w for w in words if w not in self.vocabulary.index}
        if not unseen or not self.vectors:
            return 0
        if not Path(self.vectors).is_file():
            if not self.warned_missing_vectors:
                warnings.warn(
                    f"the vectors file {self.vectors} that {self.name} was trained with is not here: "
                    f"{len(unseen):,} words new to its vocabulary get the unknown vector (scores drop); "
                    "point at the same file (transfer: vectors=PATH; encode(): encoder.vectors = PATH)",
                    stacklevel=3,
                )
                self.warned_missing_vectors = True
            return 0
        found = lookup(self.vectors, unseen)  # the file's memory-mapped store: no re-read
        if not len(found):
            return 0
        # Concatenated encoders (Quick-Thoughts' f and g) share frozen word vectors, or each has
        # its trained ones: every table grows by the same rows.
        grown: dict[int, nn.Embedding] = {}
        for module in self.encoder.modules():
            if isinstance(module, Encoder) and module.embedding is not None:
                old = module.embedding
                if id(old) not in grown:
                    grown[id(old)] = frozen_embedding(self._grown(old.weight, found.matrix))
                module.embedding = grown[id(old)]
        self.vocabulary = Vocabulary(self.vocabulary.words[2:] + found.words)
        return len(found)


class PretrainedSentenceEncoder(SentenceEncoder):
    """encoder=hf: the model's own subword tokenizer, so every word has ids (no vocabulary to expand)."""

    def __init__(
        self,
        encoder: HFEncoder,
        subwords: SubwordTokenizer,
        device: torch.device,
        name: str,
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
    ):
        super().__init__(encoder, Vocabulary([]), None, None, device, name)  # no words, no spaCy
        self.subwords = subwords
        self.prompts = dict(prompts or {})  # prompt name -> the text put before a sentence
        self.default_prompt_name = default_prompt_name

    def token_ids(self, sentences: Sequence[str]) -> list[np.ndarray]:
        return self.subwords.ids(list(sentences))

    @property
    def max_seq_length(self) -> int:
        return self.subwords.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.subwords.max_seq_length = checked_length(value)

    def prompted(self, sentences: list[str], prompt_name: str | None, prompt: str | None) -> list[str]:
        """As sentence-transformers: `prompt` wins over `prompt_name`; neither given, the default prompt."""
        if prompt is None:
            if prompt_name is None:
                prompt_name = self.default_prompt_name
            if prompt_name is not None:
                if prompt_name not in self.prompts:
                    known = ", ".join(map(repr, self.prompts)) or "none: set encoder.prompts = {name: text}"
                    raise UserError(
                        f"encode(prompt_name={prompt_name!r}) is not a prompt of {self.name} ({known})"
                    )
                prompt = self.prompts[prompt_name]
        return sentences if not prompt else [prompt + sentence for sentence in sentences]

    @property
    def coverage(self) -> Coverage | None:
        return None


def pretrained_encoder(
    config: EncoderConfig, device: str | torch.device, name: str, state: dict | None = None
) -> PretrainedSentenceEncoder:
    """An encoder=hf model from `config.options.hf_model`, with `state` (fine-tuned weights) loaded when given."""
    encoder = build_encoder(None, config)
    if state is not None:
        encoder.load_state_dict(state)
    subwords = SubwordTokenizer(config.options.hf_model, config.options.max_seq_length)
    return PretrainedSentenceEncoder(encoder, subwords, resolve_device(device), name)


def cosine_similarities(embeddings1, embeddings2, *, pairwise: bool) -> torch.Tensor:
    """Cosine similarity of float embeddings given as numpy arrays, tensors or lists of rows."""
    first, second = as_matrix(embeddings1), as_matrix(embeddings2)
    if first.shape[1] != second.shape[1] or (pairwise and len(first) != len(second)):
        raise UserError(
            f"similarity: the embeddings are {tuple(first.shape)} and {tuple(second.shape)}: "
            f"{'give as many rows on each side and ' if pairwise else ''}the same width on both"
        )
    first = torch.nn.functional.normalize(first, dim=1)
    second = torch.nn.functional.normalize(second, dim=1)
    return (first * second).sum(dim=1) if pairwise else first @ second.T


def as_matrix(embeddings) -> torch.Tensor:
    """(N, D) float32 on the CPU out of an array, a tensor, a list of rows or one row."""
    if isinstance(embeddings, list | tuple):
        embeddings = torch.stack([torch.as_tensor(row).detach().cpu() for row in embeddings])
    matrix = torch.as_tensor(embeddings).detach().to("cpu", torch.float32)
    return matrix[None] if matrix.ndim == 1 else matrix


def checked_length(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise UserError(f"max_seq_length={value!r}: give a positive number of tokens")
    return int(value)


def check_prompt_arguments(prompt_name: object, prompt: object) -> None:
    """A one-line error for code that passed batch_size second, as mtl and sentence-transformers 2 did."""
    if prompt_name is not None and not isinstance(prompt_name, str):
        raise UserError(
            f"encode(prompt_name={prompt_name!r}): prompt_name is encode's second argument and "
            "batch_size its fourth, as in sentence-transformers 3 and later: pass batch_size="
            f"{prompt_name!r} by name"
        )
    if prompt is not None and not isinstance(prompt, str):
        raise UserError(f"encode(prompt={prompt!r}): give the prompt's text (a str)")


def check_batch_limit(name: str, value: object, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise UserError(f"encode({name}={value!r}): give a positive number of {unit} per batch")


def checked_sentences(sentences: object) -> list[str]:
    """`sentences` as a list of str (numpy strings included), or a one-line error naming the bad one."""
    # A dict or a set would give its keys in an order that is not the caller's rows.
    if isinstance(sentences, bytes | dict | set | frozenset) or not isinstance(sentences, Iterable):
        raise UserError(f"encode() takes a list of sentences (str), not {type(sentences).__name__}")
    texts = []
    for position, sentence in enumerate(sentences):
        if not isinstance(sentence, str):  # np.str_ is a str
            raise UserError(
                f"encode(): sentence {position} is a {type(sentence).__name__} ({sentence!r:.40}), not a str"
            )
        if bad := invalid_unicode(sentence):
            raise UserError(
                f"encode(): sentence {position} holds a lone surrogate ({bad}), which is not text"
            )
        texts.append(str(sentence))
    return texts


def pooled_width(encoder: Encoder, pooling: str | None) -> int:
    """The embedding width of `encoder` with its pooling replaced by `pooling` (None: its own)."""
    if pooling is None or pooling == encoder.pooling:
        return encoder.output_dim
    if isinstance(encoder, ConcatEncoder):
        return sum(pooled_width(part, pooling) for part in encoder.parts)
    if encoder.fixed_pooling:
        raise UserError(
            f"encode(pooling={pooling!r}): {type(encoder).__name__} pools its own way; leave pooling unset"
        )
    if pooling == "selfattn" and encoder.attention is None:
        raise UserError(
            "encode(pooling='selfattn'): this encoder was trained with another pooling, so it has no "
            "attention; just transfer ... pooling=selfattn trains one per transfer task"
        )
    if pooling == "selfattn":
        return encoder.attention.output_dim
    return pooled_dim(encoder.state_width, pooling)
