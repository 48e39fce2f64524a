"""`just mine-negatives`: hard negatives for in-batch ranking, mined by an encoder.

As sentence-transformers' `mine_hard_negatives`: every positive of the (anchor, positive)
pairs is a candidate; each anchor's candidates are ranked by the cosine of their embeddings
with it, its own positives left out; the negatives are taken from the ranks
`range_min`..`range_max` (the very nearest are often unlabelled positives: Qu et al. 2021,
RocketQA, skip them) whose cosine is at least `margin` below the anchor's positive's (a
candidate nearly as close as the positive is likely a false negative), the nearest first
(`sampling=top`) or at random among them (`sampling=random`, seeded). Anchors with no such
candidate are left out and counted.

The output is a triples file (anchor<TAB>positive<TAB>negative, a line per negative) and a task
file beside it (`kind = "mnrl"`, `triples =` that file, `provenance =` the miner and its
settings), to name in `tasks=`; a run records the provenance with its config.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from mtl.config import apply_overrides
from mtl.data.snli import load_snli
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import MineConfig as MineConfig
from mtl.eval.loading import load_any_encoder
from mtl.files.atomic import write_text
from mtl.tasks import KINDS
from mtl.tasks.ranking import snli_triples
from mtl.text.unicode import decode_utf8, text_lines


def anchor_pairs(config: MineConfig) -> list[tuple[str, str]]:
    """(anchor, positive) pairs: a file's, or SNLI's (premise, entailed hypothesis)."""
    if config.pairs:
        path = Path(config.pairs).expanduser()
        if not path.is_file():
            raise UserError(f"pairs={config.pairs}: no such file; give anchor<TAB>positive lines")
        pairs = []
        for number, line in enumerate(
            text_lines(decode_utf8(path.read_bytes(), "pairs file", path)), start=1
        ):
            if line.strip():
                fields = [f.strip() for f in line.split("\t")]
                if len(fields) != 2 or not all(fields):
                    raise UserError(f"pairs={path}: line {number} is not anchor<TAB>positive")
                pairs.append((fields[0], fields[1]))
        if not pairs:
            raise UserError(f"pairs={path} holds no anchor<TAB>positive line: give a file of pairs")
        return pairs
    snli = load_snli(config.source, config.split, "mine-negatives", keys=("source", "split"))
    entailed = snli_triples(snli, hard_negatives=False)
    if not len(entailed):
        raise UserError(
            f"mine-negatives: {config.split} of {config.source or 'SNLI'} holds no entailed pair to mine for: "
            "give split= or source= of data with entailment labels, or pairs="
        )
    return list(zip(*entailed.columns, strict=True))


def mine(config: MineConfig, pairs: list[tuple[str, str]], embed) -> tuple[list[tuple[str, str, str]], int]:
    """(triples, anchors left without a negative); `embed(texts)` gives (N, D) embeddings."""
    anchors = list(dict.fromkeys(anchor for anchor, _ in pairs))
    candidates = list(dict.fromkeys(positive for _, positive in pairs))
    anchor_row = {text: i for i, text in enumerate(anchors)}
    candidate_row = {text: i for i, text in enumerate(candidates)}
    own: list[set[int]] = [set() for _ in anchors]  # every positive of an anchor is never its negative
    for anchor, positive in pairs:
        own[anchor_row[anchor]].add(candidate_row[positive])
    normalized = torch.nn.functional.normalize
    anchor_vectors = normalized(torch.as_tensor(embed(anchors), dtype=torch.float32), dim=1)
    candidate_vectors = normalized(torch.as_tensor(embed(candidates), dtype=torch.float32), dim=1)
    width = min(len(candidates), config.range_max + max(len(o) for o in own))
    random = np.random.default_rng(config.seed)
    chosen: dict[int, list[int]] = {}
    for start in tqdm(range(0, len(anchors), 1024), desc="rank candidates", unit="chunk", leave=False):
        scores = anchor_vectors[start : start + 1024] @ candidate_vectors.T
        values, indices = scores.topk(width, dim=1)
        for offset, (row_values, row_indices) in enumerate(
            zip(values.tolist(), indices.tolist(), strict=True)
        ):
            row = start + offset
            ranked = [(v, i) for v, i in zip(row_values, row_indices, strict=True) if i not in own[row]]
            ceiling = _negative_ceiling(scores[offset], own[row], config.margin)
            chosen[row] = [i for v, i in ranked[config.range_min : config.range_max] if v <= ceiling]
    triples, left_out = [], 0
    for anchor, positive in pairs:
        row = anchor_row[anchor]
        qualifying = chosen[row]
        if not qualifying:
            left_out += 1
            continue
        if config.sampling == "random":
            picked = random.choice(qualifying, size=min(config.num_negatives, len(qualifying)), replace=False)
        else:
            picked = qualifying[: config.num_negatives]
        triples += [(anchor, positive, candidates[int(i)]) for i in picked]
    return triples, left_out


def _negative_ceiling(scores: torch.Tensor, positives: set[int], margin: float) -> float:
    """The highest cosine a negative may have: the anchor's least similar positive's, less the margin."""
    return min(float(scores[i]) for i in positives) - margin


def checked_out(config: MineConfig) -> Path:
    """out=, refused before any work when it cannot be the task file written."""
    task_file = Path(config.out).expanduser()
    if task_file.stem in KINDS:  # its stem names the task, which would be taken for the built-in one
        raise UserError(
            f"out={config.out}: {task_file.stem} is a built-in task of mtl and the file's name names the task: "
            f"choose another name (mined_{task_file.stem}.toml)"
        )
    if task_file.suffix != ".toml" or not task_file.stem.isidentifier():
        raise UserError(
            f"out={config.out}: give a task file such as mined_snli.toml (its stem names the task)"
        )
    if task_file.exists() and not config.overwrite:
        raise UserError(f"{task_file} exists: choose another out= or set overwrite=true")
    return task_file


def write(config: MineConfig, triples: list[tuple[str, str, str]], provenance: dict) -> tuple[Path, Path]:
    task_file = checked_out(config)
    triples_file = task_file.with_suffix(".tsv")
    write_text(triples_file, "".join(f"{a}\t{p}\t{n}\n" for a, p, n in triples), "triples file")
    summary = json.dumps(provenance, sort_keys=True)
    write_text(
        task_file,
        "# Hard negatives mined by `just mine-negatives`; name this file in tasks= (dev and test: SNLI's).\n"
        'kind = "mnrl"\n'
        f"triples = {json.dumps(str(triples_file.resolve()))}\n"
        f"provenance = {json.dumps(summary)}\n",
        "task file",
    )
    return task_file, triples_file


def command(args: Sequence[str]) -> None:
    config = apply_overrides(MineConfig(), args)
    if not config.encoder or not config.out:
        raise UserError(
            "mine-negatives needs encoder=<run folder or Hugging Face model> and out=<task file .toml>"
        )
    checked_out(config)
    pairs = anchor_pairs(config)
    encoder = load_any_encoder(config.encoder, config.max_seq_length, config.device)
    triples, left_out = mine(
        config,
        pairs,
        lambda texts: encoder.encode(texts, batch_size=config.batch_size, show_progress_bar=True),
    )
    if not triples:
        raise UserError(
            f"no anchor of {len(pairs):,} pairs has a candidate in ranks {config.range_min}-{config.range_max} "
            f"at least {config.margin} below its positive: lower range_min= or margin="
        )
    settings = {
        k: v for k, v in asdict(config).items() if k not in ("out", "overwrite", "batch_size", "device")
    }
    provenance = {"miner": "mtl mine-negatives", **settings, "pairs_in": len(pairs), "left_out": left_out}
    task_file, triples_file = write(config, triples, provenance)
    print(
        f"{len(triples):,} triples for {len(pairs) - left_out:,} of {len(pairs):,} pairs "
        f"({left_out:,} without a negative in ranks {config.range_min}-{config.range_max} at margin {config.margin}) "
        f"written to {triples_file}; train on them with tasks=nli,{task_file}"
    )
