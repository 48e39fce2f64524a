"""`just maxpool`: which words max pooling picks, over a corpus, for a trained encoder and for
the same architecture untrained (InferSent, Section 5 and its Figure 5, did this one sentence
at a time with `visualize()`).

Each dimension of a max-pooled embedding comes from one position of the sentence: the
word there "wins" that dimension. Over every sentence of a corpus (SNLI dev and test by
default), a token's wins are counted relative to a uniform split (`share of dimensions x
sentence length`: 1.0 is what it would get if every word won alike), then averaged by word
frequency (the word's rank in the GloVe file, which lists words by frequency) and per word.
Parts of speech are not used: spaCy's tagger models are a download away, which offline
machines do not have; frequency separates function words from content words too.

The page (`runs/<run>/maxpool.html`) adds, for a few sentences, bars of each word's share of
dimensions, trained next to untrained.
"""

from __future__ import annotations

import copy
import html
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import MaxPoolConfig as MaxPoolConfig
from mtl.analysis.neighbours import NeighboursConfig, pool_sentences
from mtl.analysis.page import STYLE, pyplot, svg_base64
from mtl.config import apply_overrides
from mtl.data.batches import tokenize_at_most
from mtl.errors import UserError
from mtl.eval.encoder import SentenceEncoder
from mtl.eval.loading import load_encoder
from mtl.files import atomic
from mtl.runs import recorded_snli, wandb_group
from mtl.text.vectors import vector_store
from mtl.tracking.tracker import log_tables

RANK_BUCKETS = ((0, 100), (100, 1_000), (1_000, 10_000), (10_000, 100_000), (100_000, None))


def wins(states: list[np.ndarray]) -> list[np.ndarray]:
    """Per sentence, the share of dimensions each position wins under max pooling (sums to 1)."""
    shares = []
    for state in states:
        won = np.bincount(state.argmax(axis=0), minlength=len(state)).astype(np.float64)
        shares.append(won / state.shape[1])
    return shares


def by_bucket(tokens: list[list[str]], shares: list[np.ndarray], rank) -> list[tuple[str, int, float]]:
    """(bucket, tokens, mean share x length) per frequency bucket of the words' GloVe rank."""
    totals: dict[int, list[float]] = defaultdict(list)
    for words, share in zip(tokens, shares, strict=True):
        for word, value in zip(words, share * len(words), strict=True):
            index = rank(word)
            bucket = (
                len(RANK_BUCKETS)
                if index is None
                else next(i for i, (low, high) in enumerate(RANK_BUCKETS) if high is None or index < high)
            )
            totals[bucket].append(value)
    rows = []
    for i, (low, high) in enumerate((*RANK_BUCKETS, (None, None))):
        label = (
            "no vector" if low is None else (f"rank {low:,}+" if high is None else f"rank {low:,}-{high:,}")
        )
        values = totals.get(i, [])
        rows.append((label, len(values), float(np.mean(values)) if values else float("nan")))
    return rows


def by_word(
    tokens: list[list[str]], shares: list[np.ndarray], min_count: int
) -> dict[str, tuple[int, float]]:
    """word -> (occurrences, mean share x length) for words seen `min_count` times at least."""
    values: dict[str, list[float]] = defaultdict(list)
    for words, share in zip(tokens, shares, strict=True):
        for word, value in zip(words, share * len(words), strict=True):
            values[word].append(value)
    return {w: (len(v), float(np.mean(v))) for w, v in values.items() if len(v) >= min_count}


def run(config: MaxPoolConfig) -> tuple[Path, str]:
    if not config.run:
        raise UserError("just maxpool needs run=runs/<run>: a run whose encoder max-pools")
    trained = load_encoder(config.run, device="cpu")
    if getattr(trained.encoder, "pooling", None) != "max" or trained.tokenizer is None:
        raise UserError(
            f"{config.run} pools with {getattr(trained.encoder, 'pooling', 'its own')}: just maxpool reads "
            "encoders trained with pooling=max"
        )
    untrained = _untrained(trained, config.seed)
    # the SNLI copy the run recorded, before $MTL_DATA_DIR or the Hub: as resume= finds its data
    snli = config.snli or (None if config.pool else recorded_snli(config.run))
    sentences = pool_sentences(NeighboursConfig(pool=config.pool, snli=snli))[: config.limit]
    examples = [e.strip() for e in config.examples.split("|") if e.strip()]
    tokens, _ = tokenize_at_most(trained.tokenizer, sentences, trained.max_tokens)
    kept = [i for i, words in enumerate(tokens) if words]
    sentences, tokens = [sentences[i] for i in kept], [tokens[i] for i in kept]
    store = vector_store(trained.vectors) if trained.vectors and Path(trained.vectors).is_file() else None
    rank = (lambda w: store.index.get(w)) if store is not None else (lambda w: None)
    example_tokens, _ = tokenize_at_most(trained.tokenizer, examples, trained.max_tokens)
    results = {}
    for label, encoder in (("trained", trained), ("untrained", untrained)):
        shares = wins(encoder.token_states(sentences))
        results[label] = (
            by_bucket(tokens, shares, rank),
            by_word(tokens, shares, config.min_count),
            list(zip(example_tokens, wins(encoder.token_states(examples)), strict=True)),
        )
    text = summary(config, len(sentences), results)
    out = Path(config.out).expanduser() if config.out else Path(config.run).expanduser() / "maxpool.html"
    atomic.write_text(out, page(config, text, results), "max-pooling page")
    buckets = [
        [label, count, trained, untrained]
        for (label, count, trained), (_, _, untrained) in zip(
            results["trained"][0], results["untrained"][0], strict=True
        )
    ]
    words = [[label, w, n, v] for label in results for w, (n, v) in results[label][1].items()]
    log_tables(
        job_type="maxpool",
        name=f"maxpool-{Path(config.run).name}",
        config={"run": config.run, "sentences": len(sentences), "min_count": config.min_count},
        tables={
            "maxpool/by_frequency": (["words by GloVe rank", "tokens", "trained", "untrained"], buckets),
            "maxpool/by_word": (["encoder", "word", "occurrences", "share x length"], words),
        },
        directory=Path(config.run).expanduser() / "transfer",
        mode=config.wandb,
        group=wandb_group(Path(config.run).expanduser()),
    )
    return out, text


def _share(value: float) -> str:
    """A bucket's share, or a dash where the sentences held no word of that rank (no share to give)."""
    return "–" if np.isnan(value) else f"{value:.2f}"


def _untrained(trained, seed: int):
    """`trained`'s architecture and word vectors, every other weight drawn again as at initialization."""
    fresh = copy.deepcopy(trained.encoder)
    torch.manual_seed(seed)
    for module in fresh.modules():
        if module is not fresh.embedding and module is not fresh and hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return SentenceEncoder(
        fresh,
        trained.vocabulary,
        trained.tokenizer,
        trained.vectors,
        trained.device,
        "untrained",
        trained.max_tokens,
    )


def summary(config: MaxPoolConfig, count: int, results) -> str:
    lines = [
        f"{config.run}: dimensions won per token under max pooling, relative to a uniform split "
        f"(1.00 = its share if every word won alike), over {count:,} sentences",
        "",
        "| words by GloVe rank | tokens | trained | untrained |",
        "|---|---:|---:|---:|",
    ]
    for (label, n, trained), (_, _, untrained) in zip(
        results["trained"][0], results["untrained"][0], strict=True
    ):
        lines.append(f"| {label} | {n:,} | {_share(trained)} | {_share(untrained)} |")
    for label in ("trained", "untrained"):
        words = sorted(results[label][1].items(), key=lambda item: -item[1][1])
        lines += [
            "",
            f"{label}: most picked words (seen {config.min_count}+ times): "
            + ", ".join(f"{w} {v:.2f}" for w, (_, v) in words[:15]),
        ]
        lines.append(f"{label}: least picked: " + ", ".join(f"{w} {v:.2f}" for w, (_, v) in words[-10:]))
    return "\n".join(lines)


def page(config: MaxPoolConfig, text: str, results) -> str:
    """The finding first (share of dimensions by GloVe frequency rank, trained against untrained,
    as a chart and a table), then the most and least picked words, then example sentences."""
    plt = pyplot()
    buckets = list(zip(results["trained"][0], results["untrained"][0], strict=True))
    figure, axis = plt.subplots(figsize=(10, 3.4))
    positions = np.arange(len(buckets))
    for offset, (label, color) in enumerate((("trained", "#08519c"), ("untrained", "#bdbdbd"))):
        values = [row[offset][2] for row in buckets]  # (bucket, tokens, share) of each encoder
        axis.bar(positions + (offset - 0.5) * 0.4, values, width=0.4, label=label, color=color)
    axis.axhline(1.0, color="#636363", linewidth=0.8, linestyle="--")  # every word winning alike
    axis.set_xticks(positions, [row[0][0] for row in buckets], fontsize=9)
    axis.set_ylabel("dimensions won / uniform share")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize=8)
    figure.tight_layout()
    by_rank = svg_base64(figure)
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{count:,}</td><td>{_share(trained)}</td><td>{_share(untrained)}</td></tr>"
        for (label, count, trained), (_, _, untrained) in buckets
    )
    words = "".join(
        f"<p><b>{label}</b>, most picked (seen {config.min_count}+ times): "
        + html.escape(", ".join(f"{w} {v:.2f}" for w, (_, v) in ranked[:15]))
        + "<br>least picked: "
        + html.escape(", ".join(f"{w} {v:.2f}" for w, (_, v) in ranked[-10:]))
        + "</p>"
        for label in ("trained", "untrained")
        for ranked in [sorted(results[label][1].items(), key=lambda item: -item[1][1])]
    )
    examples = results["trained"][2]
    figure, axes = plt.subplots(len(examples), 1, figsize=(10, 2.6 * len(examples)), squeeze=False)
    for row, (tokens, trained_share) in enumerate(examples):
        _, untrained_share = results["untrained"][2][row]
        places = np.arange(len(tokens))
        axis = axes[row][0]
        axis.bar(places - 0.2, 100 * trained_share, width=0.4, label="trained", color="#08519c")
        axis.bar(places + 0.2, 100 * untrained_share, width=0.4, label="untrained", color="#bdbdbd")
        axis.set_xticks(places, tokens, fontsize=9)
        axis.set_ylabel("% of dimensions")
        axis.grid(alpha=0.3, axis="y")
        axis.legend(fontsize=8)
    figure.tight_layout()
    image = svg_base64(figure)
    first_line = html.escape(text.splitlines()[0])
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>what max pooling picks</title>'
        f"<style>{STYLE}</style></head><body><h1>What max pooling picks</h1>"
        f"<p>{first_line}; written {html.escape(time.strftime('%Y-%m-%d %H:%M'))}.</p>"
        "<h2>Dimensions won per token, by the word's GloVe frequency rank</h2>"
        f'<img src="data:image/svg+xml;base64,{by_rank}" alt="dimensions won per token by GloVe rank, '
        'trained and untrained">'
        "<table><tr><th>words by GloVe rank</th><th>tokens</th><th>trained</th><th>untrained</th></tr>"
        f"{rows}</table><h2>Words</h2>{words}<h2>Share of dimensions per word, example sentences</h2>"
        f'<img src="data:image/svg+xml;base64,{image}" alt="share of dimensions each word wins"></body></html>\n'
    )


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto MaxPoolConfig; run; print what it gives."""
    out, text = run(apply_overrides(MaxPoolConfig(), args))
    print(text)
    print(f"page written to {out}")
