"""An encoder as a sentence-transformers folder: `SentenceTransformer(folder)` gives mtl's embeddings
without mtl installed.

sentence-transformers' own modules express mtl's GloVe recurrent encoders exactly:
`WordEmbeddings` (the trained vocabulary and its vectors, frozen or trained, looked up by a
Hugging Face word-level tokenizer) → `LSTM` (the same `nn.LSTM` weights, run over packed
sequences as mtl runs them on CUDA) → `Pooling` (max,
mean, max+mean over real tokens; last for a left-to-right LSTM) → `Dense` (a bottleneck); a bag
of words is `WordEmbeddings` → `WordWeights` (the unknown word weighs 0, as mtl leaves it out) →
`Pooling`. One difference remains there: max over a bag of words that mixes known and unknown
words pools the unknown one as a zero vector, where mtl leaves it out.
Everything is safetensors + JSON: loading runs no code from the folder. The names are the
long-standing ones (`sentence_transformers.models.*`); the tokenizer needs sentence-transformers 5.0
or later (its `WordEmbeddings` takes a Hugging Face tokenizer since then).

Why a Hugging Face tokenizer (`tokenizer.json`: a word-level model, its normalizer and splitting
rules) and not sentence-transformers' `WhitespaceTokenizer`: that one drops every word it lacks,
where mtl reads it as the unknown word, so a sentence with an unknown word embedded differently and
one with none at all embedded to -inf. The word-level model maps any other word to `<unk>` as
mtl does; a blank text gets one `<unk>` as mtl gives it (the normalizer for whitespace; for "",
which no tokenizer normalizes, the folder's default prompt of one space, invisible to the
splitting). The splitting rules approximate mtl's spaCy and Treebank tokenizers (punctuation and
English contractions apart, decimals kept whole): the export equals `encode()` on text the two
split alike: 99.8% of SNLI's dev sentences, 97.1% of SQuAD's dev questions (tests/test_export.py).

What no built-in module computes (GRU, the Siamese transformer, decomposable attention,
inner attention, the hierarchical ConvNet, self-attentive pooling, a BiLSTM's final
states, Quick-Thoughts' concatenated encoders) gets no folder: a folder that only loads
with `trust_remote_code` would run the code it ships, which mtl's files never ask for.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel

from mtl.files.atomic import safetensors_errors
from mtl.models.card import CardFacts, write_card
from mtl.models.encoders.base import Bottleneck, Encoder
from mtl.models.encoders.bilstm import BiLSTMEncoder
from mtl.models.encoders.bow import BagOfWordsEncoder
from mtl.models.encoders.lstm import LSTMEncoder
from mtl.text.vocab import PAD, UNK, UNKNOWN_ID

# mtl's tokenizers (spaCy, Penn Treebank) split these off a word: English contractions at its end,
# quotes written '', ellipses, and any other punctuation mark except one between two digits (3.5).
_SPLIT_OFF = r"n't$|'s$|'re$|'ll$|'ve$|'m$|'d$|''|\.\.+|(?<!\d)[^\w\s]|[^\w\s](?!\d)"
_NO_WORD = "\x00"  # what a blank text becomes: one word outside every vocabulary
BLANK_PROMPT = " "  # prepended to every text: "" becomes a blank text, which reads as one <unk>

_POOLINGS = {"max": ("max",), "mean": ("mean",), "max+mean": ("max", "mean")}


def unsupported(encoder: Encoder) -> str | None:
    """Why `encoder` has no sentence-transformers form, or None when it has one."""
    inner = encoder.inner if isinstance(encoder, Bottleneck) else encoder
    # These classes exactly, not their subclasses: inner attention is a BiLSTM with its own
    # pooling, which a folder of LSTM + Pooling would silently replace by max pooling.
    if type(inner) not in (BiLSTMEncoder, LSTMEncoder, BagOfWordsEncoder):
        return f"sentence-transformers has no module for {type(inner).__name__}"
    if inner.pooling == "last" and isinstance(inner, LSTMEncoder):
        return None
    if inner.pooling not in _POOLINGS:
        over = "word vectors" if isinstance(inner, BagOfWordsEncoder) else f"{type(inner).__name__}'s states"
        return f"sentence-transformers' Pooling has no {inner.pooling} pooling over the {over}"
    return None


def write_sentence_transformer(
    encoder: Encoder,
    vocabulary: list[str],
    lowercase: bool,
    folder: Path,
    card: CardFacts,
    rows: list[int] | None = None,
    max_tokens: int = 512,
) -> None:
    """Write `encoder` into `folder`; `vocabulary` (padding, unknown, then words) names the rows it
    exports: all of its embedding's, or the rows `rows` (an export that keeps some words); `max_tokens`:
    the words per sentence mtl's encoder reads (data.max_tokens), sentence-transformers' limit."""
    if reason := unsupported(encoder):
        raise ValueError(reason)
    inner = encoder.inner if isinstance(encoder, Bottleneck) else encoder
    modules = [("", "WordEmbeddings")]
    weight = inner.embedding.weight if rows is None else inner.embedding.weight[torch.tensor(rows)]
    _weights(folder, {"emb_layer.weight": weight})
    _json(folder / "wordembedding_config.json", {
        "tokenizer_class": "sentence_transformers.models.tokenizer.WordTokenizer.TransformersTokenizerWrapper",
        "update_embeddings": False,
        "max_seq_length": max_tokens,
    })  # fmt: skip
    _word_tokenizer(vocabulary, lowercase).save(str(folder / "tokenizer.json"))
    _json(folder / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNK, "pad_token": PAD,
    })  # fmt: skip
    if isinstance(inner, BagOfWordsEncoder):
        # mtl's bag of words leaves the unknown word out: weight 0 takes it out of the mean (whose
        # divisor is the weights' sum) and makes it a zero vector for max
        modules.append(("1_WordWeights", "WordWeights"))
        _json(folder / "1_WordWeights" / "config.json", {
            "vocab": vocabulary,
            "word_weights": {PAD: 0.0, UNK: 0.0},
            "unknown_word_weight": 1.0,
        })  # fmt: skip
        known = torch.ones(len(weight), 1)
        known[: UNKNOWN_ID + 1] = 0.0
        _weights(folder / "1_WordWeights", {"emb_layer.weight": known})
    else:  # a recurrent encoder: its LSTM runs over the word vectors
        lstm = inner.lstm
        modules.append(("1_LSTM", "LSTM"))
        _json(folder / "1_LSTM" / "lstm_config.json", {
            "word_embedding_dimension": lstm.input_size,
            "hidden_dim": lstm.hidden_size,
            "num_layers": lstm.num_layers,
            "dropout": 0.0,
            "bidirectional": lstm.bidirectional,
        })  # fmt: skip
        _weights(folder / "1_LSTM", {f"encoder.{key}": value for key, value in lstm.state_dict().items()})
    modes = ("lasttoken",) if inner.pooling == "last" else _POOLINGS[inner.pooling]
    pooling = f"{len(modules)}_Pooling"
    modules.append((pooling, "Pooling"))
    _json(folder / pooling / "config.json", {
        "word_embedding_dimension": inner.state_width,
        "pooling_mode_cls_token": False,
        "pooling_mode_max_tokens": "max" in modes,
        "pooling_mode_mean_tokens": "mean" in modes,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_lasttoken": "lasttoken" in modes,
    })  # fmt: skip
    if isinstance(encoder, Bottleneck):
        dense = f"{len(modules)}_Dense"
        modules.append((dense, "Dense"))
        _json(folder / dense / "config.json", {
            "in_features": encoder.project.in_features,
            "out_features": encoder.project.out_features,
            "bias": True,
            "activation_function": "torch.nn.modules.linear.Identity",
        })  # fmt: skip
        _weights(folder / dense, {f"linear.{k}": v for k, v in encoder.project.state_dict().items()})
    _json(folder / "modules.json", [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(modules)
    ])  # fmt: skip
    write_card(folder, card, encoder.output_dim, [kind for _, kind in modules], BLANK_PROMPT)


def exported_words(texts: list[str], lowercase: bool = True) -> list[list[str]]:
    """The words the exported tokenizer splits each text into (before its vocabulary is looked up)."""
    tokenizer = _word_tokenizer([PAD, UNK], lowercase)
    return [
        [
            word
            for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text))
        ]
        for text in texts
    ]


def _word_tokenizer(vocabulary: list[str], lowercase: bool) -> Tokenizer:
    """Word -> row of the exported matrix (mtl's ids: 0 padding, 1 the unknown word, then words),
    any other word -> <unk>."""
    rows: dict[str, int] = {}
    for row, word in enumerate(vocabulary):
        rows.setdefault(word, row)  # a word twice (never in mtl's vocabularies): its first row, as mtl
    rows.pop(_NO_WORD, None)  # never a word of mtl's: its tokenizers drop control characters
    tokenizer = Tokenizer(WordLevel(rows, unk_token=UNK))
    # a blank text (spaces, tabs) has no word: mtl reads it as one unknown word, so the normalizer
    # writes one character the splitting keeps whole and the vocabulary lacks
    blank = normalizers.Replace(Regex(r"^\s*$"), _NO_WORD)
    tokenizer.normalizer = normalizers.Sequence([normalizers.Lowercase(), blank] if lowercase else [blank])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(_SPLIT_OFF), behavior="isolated"),
    ])  # fmt: skip
    return tokenizer


def _weights(folder: Path, tensors: dict[str, torch.Tensor]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with safetensors_errors(folder / "model.safetensors"):
        save_file(
            {k: v.detach().cpu().float().contiguous() for k, v in tensors.items()},
            folder / "model.safetensors",
        )


def _json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
