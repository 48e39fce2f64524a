"""An encoder as a sentence-transformers folder: `SentenceTransformer(folder)` gives mtl's embeddings
without mtl installed.

sentence-transformers' own modules express mtl's GloVe recurrent encoders exactly:
`WordEmbeddings` (the trained vocabulary and its vectors, frozen or trained) → `LSTM` (the same
`nn.LSTM` weights, run over packed sequences as mtl runs them on CUDA) → `Pooling` (max,
mean, max+mean over real tokens; last for a left-to-right LSTM) → `Dense` (a bottleneck); a bag
of words is `WordEmbeddings` → `Pooling`.
Everything is safetensors + JSON: loading runs no code from the folder. The names are the
long-standing ones (`sentence_transformers.models.*`), which every version from 2.x reads.

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

from mtl.files.atomic import safetensors_errors
from mtl.models.card import CardFacts, write_card
from mtl.models.encoders.base import Bottleneck, Encoder
from mtl.models.encoders.bilstm import BiLSTMEncoder
from mtl.models.encoders.bow import BagOfWordsEncoder
from mtl.models.encoders.lstm import LSTMEncoder

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
    """Write `encoder` into `folder`; `vocabulary` (padding, unknown, then words) names its embedding
    rows, or the rows `rows` of it when given (an export that keeps some words only); `max_tokens`:
    the words per sentence mtl's encoder reads (data.max_tokens), sentence-transformers' limit."""
    if reason := unsupported(encoder):
        raise ValueError(reason)
    inner = encoder.inner if isinstance(encoder, Bottleneck) else encoder
    modules = [("", "WordEmbeddings")]
    weight = inner.embedding.weight if rows is None else inner.embedding.weight[torch.tensor(rows)]
    _weights(folder, {"emb_layer.weight": weight})
    _json(folder / "wordembedding_config.json", {
        "tokenizer_class": "sentence_transformers.models.tokenizer.WhitespaceTokenizer.WhitespaceTokenizer",
        "update_embeddings": False,
        "max_seq_length": max_tokens,
    })  # fmt: skip
    # mtl's ids: 0 padding, 1 the unknown word; no stop words (sentence-transformers' default drops 318)
    _json(folder / "whitespacetokenizer_config.json", {
        "vocab": vocabulary, "stop_words": [], "do_lower_case": lowercase,
    })  # fmt: skip
    if not isinstance(inner, BagOfWordsEncoder):  # a bag of words pools the word vectors themselves
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
    write_card(folder, card, encoder.output_dim, [kind for _, kind in modules])


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
