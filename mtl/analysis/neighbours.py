"""`just neighbours`: the sentences of a pool nearest to a query, by the cosine of their
embeddings (Quick-Thoughts, Table 5: nearest neighbours as a look at what an encoder keeps).

The pool is a text file, one sentence per line, or by default the distinct sentences of
SNLI's dev and test splits. Several runs (`run=runs/a,runs/b`) are searched with their
embeddings concatenated, as transfer combines them.

`analogy=true` reads the query as three sentences a|b|c and ranks the pool by the cosine with
v(b) - v(a) + v(c), the three themselves left out: "a is to b as c is to ?" (Quick-Thoughts,
Appendix A and Table 5; Skip-Thought's analogies by vector arithmetic).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import NeighboursConfig as NeighboursConfig
from mtl.config import apply_overrides
from mtl.data.snli import snli_sentences
from mtl.errors import UserError
from mtl.eval.transfer.suite import TransferConfig, make_encoder
from mtl.runs import wandb_group
from mtl.tracking.tracker import log_tables


def pool_sentences(config: NeighboursConfig) -> list[str]:
    if config.pool:
        path = Path(config.pool).expanduser()
        if not path.is_file():
            raise UserError(f"pool={path} does not exist: give a text file with one sentence per line")
        sentences = list(
            dict.fromkeys(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
        )
        return [s for s in sentences if s]
    return snli_sentences(config.snli)


def nearest(
    queries: np.ndarray, pool: np.ndarray, k: int, excluded: Sequence[int] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the `k` pool rows of highest cosine (indices and cosines, best first);
    the pool rows `excluded` are never among them."""

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    similarity = unit(queries) @ unit(pool).T
    similarity[:, list(excluded)] = -np.inf
    k = min(k, pool.shape[0] - len(set(excluded)))
    top = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(similarity, top, axis=1), axis=1, kind="stable")
    indices = np.take_along_axis(top, order, axis=1)
    return indices, np.take_along_axis(similarity, indices, axis=1)


def run(config: NeighboursConfig) -> str:
    queries = [q.strip() for q in config.query.split("|") if q.strip()]
    if not config.run or not queries:
        raise UserError('just neighbours needs run=runs/<run> and query="a sentence" (several: a|b)')
    if config.analogy and len(queries) != 3:
        raise UserError(
            f'analogy=true reads query="a|b|c" (a is to b as c is to ?): {len(queries)} sentences given'
        )
    encoder = make_encoder(TransferConfig(run=config.run, device=config.device))
    pool = pool_sentences(config)
    pool_embeddings = encoder.encode(pool, batch_size=config.batch_size, show_progress_bar=True)
    embedded = encoder.encode(queries, batch_size=config.batch_size)
    excluded: list[int] = []
    if config.analogy:
        embedded = (embedded[1] - embedded[0] + embedded[2])[None]
        excluded = [row for row, sentence in enumerate(pool) if sentence in queries]
        queries = [f"{queries[0]} : {queries[1]} :: {queries[2]} : ?"]
    indices, cosines = nearest(embedded, pool_embeddings, config.k, excluded)
    log_tables(
        job_type="neighbours",
        name=f"neighbours-{encoder.name}",
        config={
            "run": config.run,
            "pool": config.pool or "SNLI dev+test",
            "k": config.k,
            "analogy": config.analogy,
        },
        tables={
            "neighbours": (
                ["query", "rank", "cosine", "sentence"],
                [
                    [query, rank + 1, float(value), pool[row]]
                    for query, rows, values in zip(queries, indices, cosines, strict=True)
                    for rank, (row, value) in enumerate(zip(rows, values, strict=True))
                ],
            )
        },
        directory=Path(config.run.split(",")[0]).expanduser() / "transfer",
        mode=config.wandb,
        group=wandb_group(Path(config.run.split(",")[0]).expanduser()),
    )
    lines = [f"{encoder.name}: {len(pool):,} pool sentences, cosine of {encoder.dim}-d embeddings"]
    for query, rows, values in zip(queries, indices, cosines, strict=True):
        lines += ["", f"query: {query}"]
        lines += [f"  {value:.3f}  {pool[row]}" for row, value in zip(rows, values, strict=True)]
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto NeighboursConfig; run; print what it gives."""
    print(run(apply_overrides(NeighboursConfig(), args)))
