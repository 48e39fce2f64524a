"""`just merge-encoders`: one encoder out of several trained from one initialisation, by weight
averaging (Wortsman et al. 2022's uniform soup; two parents interpolated by `lam`), task
arithmetic (Ilharco et al. 2023: base + lam * sum of task vectors) or TIES (Yadav et al. 2023:
each task vector trimmed to its largest `density` share of entries, one sign elected per entry
by the sum of what is left, the entries agreeing with it averaged, base + lam * that).

The parents must share their architecture and how they read sentences; task arithmetic and TIES
also need the weights the parents started from (`base=`): `init` rebuilds them from the parents'
seed as training built them (mtl's encoders draw their initial weights from the torch seed
before anything else does, so single-task runs of one seed start from one point), or a run or
encoder names them. Vocabularies are joined: a parent lacking a word gives the row its own
lookup would (the vectors file's vector, else its unknown vector), so each parent's part of a
row is what that parent computes for the word. The base's row of a word is its pretrained
vector (what training started from); a word without one is a random row that differs between
runs, so its base is the parents' mean (their task vectors then cancel: the row is averaged).

`lam` is chosen on development data, never on test: the mean Spearman of cosine similarities
on the dev splits of `select=` (STS-B and SICK-R have one). The merged encoder is a normal
encoder folder (encode, transfer, export read it) whose encoder.json records its parents (paths
and SHA-256), the method, its settings and each candidate's dev score. Arithmetic is in float64,
cast back once: merging an encoder with itself (average; task arithmetic at lam = 1/n; TIES at
density 1, lam 1) returns it bitwise, and a weight of 0 leaves a parent out exactly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from mtl.config import apply_overrides, comma_list, paths_and_keys, to_dict
from mtl.correlation import rank_correlation
from mtl.errors import UserError

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import MergeConfig as MergeConfig
from mtl.eval.encoder import PretrainedSentenceEncoder, SentenceEncoder
from mtl.eval.export_encoder import ExportConfig, export_encoder
from mtl.eval.loading import encoder_file, encoder_of, own_config, read_encoder_file
from mtl.eval.transfer.suite import TransferConfig, data_root
from mtl.files import atomic
from mtl.files.digest import file_sha256
from mtl.formats import encoder_file as exported
from mtl.models.encoders.base import build_encoder, frozen_embedding
from mtl.models.encoders.concat import ConcatEncoder
from mtl.runs import RunFolder
from mtl.text.vectors import lookup
from mtl.text.vocab import Vocabulary
from mtl.transfer_tasks.tasks import read_task

EMBEDDING = "embedding.weight"
# lam= auto: each method's candidates. Task arithmetic: Ilharco et al. search [0, 1] on held-out
# data; a TIES vector is a mean of agreeing entries, not a sum, so its scale centres on the
# authors' default of 1.
GRIDS = {
    "task_arithmetic": tuple(round(0.1 * i, 1) for i in range(1, 11)),
    "ties": tuple(round(0.1 * i, 1) for i in range(5, 21)),
}


class Parent:
    """One encoder to merge (or the base): where it came from, its weights' SHA-256, what was
    read of its file and the encoder loaded from it."""

    def __init__(self, source: str, file: Path, saved: dict[str, Any], encoder: SentenceEncoder, sha256: str):
        self.source, self.file, self.saved, self.encoder, self.sha256 = source, file, saved, encoder, sha256

    @classmethod
    def read(cls, source: str, role: str) -> Parent:
        file = encoder_file(source)
        saved = read_encoder_file(file)
        loaded = encoder_of(saved, file, source, device="cpu")
        if isinstance(loaded, PretrainedSentenceEncoder):
            raise UserError(
                f"{role} {source} is a pretrained transformer: merge-encoders merges word-vector encoders"
            )
        if isinstance(loaded.encoder, ConcatEncoder):
            raise UserError(
                f"{role} {source} concatenates encoders (Quick-Thoughts' f and g): merge the runs' shared "
                "encoders by exporting them without the added part"
            )
        if loaded.expansion is not None:
            raise UserError(
                f"{role} {source} was exported with vocab_expansion=true: merge the run's own encoder "
                "(its folder), then export the merge"
            )
        weights = exported.files_of(file)[0]
        return cls(source, file, saved, loaded, file_sha256(weights))

    @property
    def seed(self) -> int | None:
        run = (self.saved.get("config") or {}).get("run")
        seed = run.get("seed") if isinstance(run, dict) else None
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    def aligned(self, words: Sequence[str]) -> dict[str, torch.Tensor]:
        """Its state with the word-vector matrix's rows in the order of `words` (which start with
        padding and the unknown word): rows it lacks are what its own lookup gives those words."""
        self.encoder.expand_vocabulary(set(words[2:]))  # words with a vector, by its own rule
        state = dict(self.encoder.encoder.state_dict())
        rows = torch.from_numpy(self.encoder.vocabulary.ids(list(words)))
        state[EMBEDDING] = state[EMBEDDING].index_select(0, rows)
        return state


def merge_states(
    parents: Sequence[dict[str, torch.Tensor]],
    method: str,
    lam: float | None,
    *,
    base: dict[str, torch.Tensor] | None = None,
    density: float = 1.0,
    trained: dict[str, torch.Tensor] | None = None,
    weights: Sequence[float] | None = None,
) -> dict[str, torch.Tensor]:
    """The merged state of `parents` (same keys and shapes). average: `weights`, else with two
    parents (1 - lam, lam), else equal weights; task_arithmetic and ties: `base` + lam * the merged task vectors.
    `trained`: per key, a mask of the entries training moves (TIES trims among those only; a
    frozen word-vector matrix would otherwise count as millions of unchanged entries)."""
    keys = list(parents[0])
    wide = [{k: state[k].double() for k in keys if state[k].is_floating_point()} for state in parents]
    if method == "average":
        if lam is not None and len(parents) != 2:
            raise UserError(f"lam={lam} interpolates two encoders; with {len(parents)} give weights= instead")
        if weights is None:
            weights = [1 - lam, lam] if lam is not None else [1 / len(parents)] * len(parents)
        merged = {
            k: _weighted_sum([(w, state[k]) for w, state in zip(weights, wide, strict=True)]) for k in wide[0]
        }
    else:
        if base is None or lam is None:
            raise UserError(f"method={method} needs a base and a lam")
        origin = {k: base[k].double() for k in wide[0]}
        vectors = [{k: state[k] - origin[k] for k in state} for state in wide]
        if method == "task_arithmetic":
            combined = {k: sum(v[k] for v in vectors) for k in origin}
        else:
            combined = ties_vector(vectors, density, trained)
        merged = {k: origin[k] + _weighted_sum([(lam, combined[k])], zero_like=origin[k]) for k in origin}
    out = {}
    for key in keys:
        first = parents[0][key]
        if key in merged:
            out[key] = merged[key].to(first.dtype)
        elif all(torch.equal(first, state[key]) for state in parents[1:]):
            out[key] = first.clone()  # integer buffers: one value, or no merge
        else:
            raise UserError(f"the encoders' {key} (not a weight) differ: they cannot be merged")
    return out


def _weighted_sum(
    terms: list[tuple[float, torch.Tensor]], zero_like: torch.Tensor | None = None
) -> torch.Tensor:
    """sum w * x over terms, leaving out w = 0 exactly (0 * x would turn -0.0 into 0.0 and inf into nan)."""
    kept = [(w, x) for w, x in terms if w != 0]
    if not kept:
        return torch.zeros_like(zero_like if zero_like is not None else terms[0][1])
    total = kept[0][1] * kept[0][0] if kept[0][0] != 1 else kept[0][1].clone()
    for weight, values in kept[1:]:
        total = total + (values * weight if weight != 1 else values)
    return total


def ties_vector(
    vectors: Sequence[dict[str, torch.Tensor]], density: float, trained: dict[str, torch.Tensor] | None = None
) -> dict[str, torch.Tensor]:
    """TIES's merged task vector (the authors' `ties_merging`: trim, elect, disjoint mean). Each
    task vector keeps its trained entries (over all its weights at once) whose magnitude is at
    least its (d - k)-th smallest, k = int(density x d), as the authors' `topk_values_mask` does
    (k + 1 entries where magnitudes are distinct: their kthvalue, not a top-k); each entry's sign is that of
    the kept entries' sum (an entry summing to 0 takes the majority of the elected signs); the
    kept entries of that sign are averaged."""
    keys = list(vectors[0])
    masks = {
        k: trained[k]
        if trained is not None and k in trained
        else torch.ones_like(vectors[0][k], dtype=torch.bool)
        for k in keys
    }
    flat_mask = torch.cat([masks[k].reshape(-1) for k in keys])
    rows = torch.stack([torch.cat([v[k].reshape(-1) for k in keys]) for v in vectors])  # (n, d)
    rows = rows * flat_mask
    size = int(flat_mask.sum())
    keep_count = int(size * density)
    if keep_count < size:
        magnitudes = rows.abs()[:, flat_mask]
        # the authors' kthvalue at d - k: the smallest magnitude still kept; ties at it are kept too
        threshold = magnitudes.kthvalue(size - keep_count, dim=1, keepdim=True).values if keep_count else None
        rows = rows * (rows.abs() >= threshold) if threshold is not None else torch.zeros_like(rows)
        rows = rows * flat_mask
    signs = torch.sign(rows.sum(dim=0))
    signs[signs == 0] = torch.sign(signs.sum())
    agreeing = torch.where(signs > 0, rows > 0, rows < 0)
    selected = rows * agreeing
    counts = (selected != 0).sum(dim=0).clamp(min=1)
    merged = selected.sum(dim=0) / counts
    out, start = {}, 0
    for key in keys:
        size_k = vectors[0][key].numel()
        out[key] = merged[start : start + size_k].reshape(vectors[0][key].shape)
        start += size_k
    return out


def joined_words(parents: Sequence[Parent]) -> list[str]:
    """Every parent's vocabulary (padding and the unknown word first), in first-seen order."""
    return list(dict.fromkeys(word for parent in parents for word in parent.encoder.vocabulary.words))


def check_compatible(parents: Sequence[Parent]) -> None:
    """One line naming the first parent that another could not be merged with."""
    first = parents[0]
    for other in parents[1:]:
        if first.saved.get("encoder_config") != other.saved.get("encoder_config"):
            raise UserError(
                f"{other.source} and {first.source} differ in architecture or in how they read sentences "
                "(their encoder_config): merge encoders trained with one model and data setting"
            )
        if Path(str(first.encoder.vectors)).name != Path(str(other.encoder.vectors)).name:
            raise UserError(
                f"{other.source} read {other.encoder.vectors} and {first.source} {first.encoder.vectors}: "
                "merge encoders trained on one vectors file"
            )


def check_one_initialisation(parents: Sequence[Parent]) -> None:
    """A weight average is a soup of fine-tunings of one starting point (Wortsman et al. 2022);
    encoders of different seeds started from different random weights, whose average is no model
    of either (the hidden units of two initialisations are not aligned). Refused unless asked."""
    seeds = {parent.seed for parent in parents}
    if len(seeds - {None}) > 1:
        shown = ", ".join(f"{p.source} (seed {p.seed})" for p in parents)
        raise UserError(
            f"{shown} were trained from different initialisations: their average is no soup; average runs "
            "of one seed= (or one run's checkpoints), or set different_seeds=true to average them all the same"
        )


def check_finite(state: dict[str, torch.Tensor], config: MergeConfig, lam: float | None) -> None:
    """The merged weights, before anything is written: every one finite."""
    broken = sum(int((~torch.isfinite(value)).sum()) for value in state.values() if value.is_floating_point())
    if broken:
        at = f" at lam {lam:g}" if lam is not None else ""
        raise UserError(
            f"the {config.method} merge{at} has {broken:,} weights that are not finite (they overflow the "
            "weights' precision): nothing was written; give a smaller lam="
        )


def trained_entries(state: dict[str, torch.Tensor], word_embeddings: str) -> dict[str, torch.Tensor]:
    """Per weight, the entries training moves: all but the frozen word vectors (embeddings=both:
    the trained half of each row)."""
    masks = {k: torch.ones_like(v, dtype=torch.bool) for k, v in state.items() if v.is_floating_point()}
    if word_embeddings == "frozen":
        masks[EMBEDDING][:] = False
    elif word_embeddings == "both":
        masks[EMBEDDING][:, : masks[EMBEDDING].shape[1] // 2] = False
    return masks


def initial_state(
    parents: Sequence[Parent], words: Sequence[str], states: Sequence[dict[str, torch.Tensor]]
) -> tuple[dict[str, torch.Tensor], str]:
    """base=init: the weights training started the parents from, rebuilt from their seed, and
    what to record of it. Word rows: the vectors file's vector (both halves for embeddings=both),
    else the parents' mean."""
    seeds = {parent.seed for parent in parents}
    if None in seeds or len(seeds) != 1:
        shown = ", ".join(f"{p.source}: {p.seed}" for p in parents)
        raise UserError(
            f"base=init rebuilds one initialisation from the parents' seed, but their seeds differ ({shown}): "
            "train the single-task runs with one seed=, or give base=<run or encoder they started from>"
        )
    own, _ = own_config(parents[0].saved, parents[0].file)
    rows = torch.stack([state[EMBEDDING].double() for state in states]).mean(dim=0)
    vectors = parents[0].encoder.vectors
    if vectors and Path(vectors).is_file():
        found = lookup(vectors, words[2:])
        if len(found):
            at = torch.from_numpy(Vocabulary(words[2:]).ids(found.words))
            matrix = torch.from_numpy(np.asarray(found.matrix, dtype=np.float64))
            copies = rows.shape[1] // matrix.shape[1]
            rows[at] = torch.cat([matrix] * copies, dim=1)
    torch.manual_seed(seeds.pop())  # as the trainer does, before it builds the encoder first
    module = build_encoder(frozen_embedding(torch.zeros(states[0][EMBEDDING].shape)), own.model)
    state = dict(module.state_dict())
    state[EMBEDDING] = rows.to(states[0][EMBEDDING].dtype)
    return state, f"init (seed {parents[0].seed})"


def dev_pairs(names: Sequence[str], root: Path) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
    """Each select= task's dev sentence pairs and gold scores."""
    pairs = {}
    for name in names:
        task = read_task(name, root)
        dev = task.splits.get("dev")
        labels = np.asarray(dev.labels) if dev is not None else None
        if dev is None or len(dev.sentences) != 2 or labels is None or labels.dtype.kind != "f":
            raise UserError(
                f"select={name}: it has no dev split of scored sentence pairs; choose among tasks that do (STS-B, SICK-R)"
            )
        pairs[name] = (list(dev.sentences[0]), list(dev.sentences[1]), labels)
    return pairs


def dev_scores(encoder: SentenceEncoder, pairs: dict) -> dict[str, float]:
    """Spearman x 100 of the cosine similarities on each task's dev pairs."""
    scores = {}
    for name, (first, second, gold) in pairs.items():
        a = encoder.encode(first, convert_to_tensor=True, normalize_embeddings=True)
        b = encoder.encode(second, convert_to_tensor=True, normalize_embeddings=True)
        similarity = (a * b).sum(dim=1).double().cpu().numpy()
        scores[name] = 100 * rank_correlation(similarity, gold)
    return scores


def as_encoder(
    template: SentenceEncoder, own, state: dict[str, torch.Tensor], words: Sequence[str], name: str
):
    """A SentenceEncoder of `state`, reading sentences as `template` does."""
    module = build_encoder(frozen_embedding(state[EMBEDDING]), own.model)
    module.load_state_dict(state)
    encoder = SentenceEncoder(
        module, Vocabulary(words[2:]), template.tokenizer, template.vectors, torch.device("cpu"), name,
        max_tokens=template.max_tokens,
    )  # fmt: skip
    encoder.word_embeddings = template.word_embeddings
    # one tokenization of the dev sentences for every candidate: the template's cache, shared
    encoder.token_cache, encoder.token_cache_key = (
        template.token_cache,
        (template.tokenizer, template.max_tokens),
    )
    return encoder


def candidates(config: MergeConfig, count: int) -> list[float | None]:
    """The lam values to try: given, or the method's grid (average: equal weights, no choice)."""
    if config.lam == "auto":
        return [None] if config.method == "average" else list(GRIDS[config.method])
    values = []
    for text in config.lam.split(","):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not np.isfinite(value) or value < 0 or (config.method == "average" and value > 1):
            most = "1" if config.method == "average" else "any size"
            raise UserError(f"lam={config.lam}: {text!r} is not a number from 0 to {most}")
        values.append(value)
    if config.method == "average" and count != 2:
        raise UserError(f"lam= interpolates two encoders; {count} are given: use weights= (or leave lam out)")
    return values


def average_weights(config: MergeConfig, count: int) -> list[float] | None:
    if not config.weights:
        return None
    try:
        weights = [float(text) for text in config.weights.split(",")]
    except ValueError:
        weights = []
    if len(weights) != count or not all(np.isfinite(w) and w >= 0 for w in weights) or max(weights) <= 0:
        raise UserError(
            f"weights={config.weights}: give {count} non-negative numbers, one per encoder in the order given"
        )
    # over the largest first: 1e308 + 1e308 overflows, and every weight over inf was 0 (a zero encoder)
    scaled = [w / max(weights) for w in weights]
    return [w / sum(scaled) for w in scaled]


@dataclass
class Merged:
    out: Path
    chosen: float | None
    dev: dict[str, dict[str, float]]  # lam -> task -> dev Spearman
    words: int
    edge: str | None = None  # the chosen lam at its grid's end: what to try next


def edge_note(lams: Sequence[float | None], chosen: float | None, most: float | None = None) -> str | None:
    """Where the dev-chosen lam is an end of its grid (3 values at least), a line naming the next
    values to try: the best may lie beyond (TIES chose lam 2, the last value, dev still rising);
    `most`: the largest lam the method takes (an average's: 1), none beyond it named."""
    values = sorted(lam for lam in lams if lam is not None)
    if chosen is None or len(values) < 3 or chosen not in (values[0], values[-1]):
        return None
    step = float(np.median(np.diff(values)))
    if chosen == values[-1]:
        beyond = [chosen + step * k for k in range(1, 5)]
        beyond = [value for value in beyond if most is None or value <= most + 1e-12]
        if not beyond:
            return None  # the method's end: no edge to go past
        side = "largest"
    else:
        if chosen <= 0:
            return None  # 0 is no edge to go past
        beyond = [chosen * f for f in (0.75, 0.5, 0.25)]
        side = "smallest"
    shown = ",".join(f"{value:.4g}" for value in beyond)
    return f"lam {chosen:g} is the {side} value tried, so the best may lie beyond it: try lam={shown}"


def merge_encoders(config: MergeConfig, sources: Sequence[str]) -> Merged:
    """Merge `sources` per `config` and write the encoder folder `config.out`."""
    need = 2 if config.method == "average" else 1
    if len(sources) < need or not config.out:
        raise UserError(
            f"merge-encoders needs out=<new folder> and at least {need} encoders: run=A run=B ... (runs or encoder files)"
        )
    if config.method == "average" and config.base != "init":
        raise UserError("base= is for task_arithmetic and ties: averaging takes no base (leave base= out)")
    out = atomic.check_output_dir(Path(config.out), "out")
    target = RunFolder(out).encoder
    if out.is_dir() and (
        others := sorted(
            p.name for p in out.iterdir() if p.name not in WRITTEN and not p.name.startswith(".")
        )
    ):
        raise UserError(
            f"out={out} holds files that are not a merged encoder ({', '.join(others[:3])}): choose a new folder"
        )
    if target.exists() and not config.overwrite:
        raise UserError(f"{target} exists: choose another out= or set overwrite=true")
    weights = average_weights(config, len(sources))
    if weights is not None and (config.method != "average" or config.lam != "auto"):
        raise UserError("weights= sets an average's weights: give it without lam= and with method=average")
    if config.greedy and (config.method != "average" or config.lam != "auto" or weights is not None):
        raise UserError(
            "greedy=true chooses which encoders an average keeps: give it with method=average alone"
        )
    lams = candidates(config, len(sources))
    parents = [Parent.read(source, "encoder") for source in sources]
    check_compatible(parents)
    if config.method == "average" and not config.different_seeds:
        check_one_initialisation(parents)
    words = joined_words(parents)
    base_parent = None
    if config.method != "average" and config.base != "init":
        base_parent = Parent.read(config.base, "base=")
        check_compatible([parents[0], base_parent])
        words = joined_words([*parents, base_parent])
    states = [parent.aligned(words) for parent in parents]
    base, base_record = None, None
    if config.method != "average":
        if base_parent is not None:
            base, base_record = (
                base_parent.aligned(words),
                {"path": str(base_parent.file.resolve()), "sha256": base_parent.sha256},
            )
        else:
            base, described = initial_state(parents, words, states)
            base_record = {"rebuilt": described}
    own, prompts = own_config(parents[0].saved, parents[0].file)
    trained = trained_entries(states[0], parents[0].encoder.word_embeddings)

    def merged_at(lam: float | None) -> dict[str, torch.Tensor]:
        return merge_states(
            states, config.method, lam, base=base, density=config.density, trained=trained, weights=weights
        )

    dev: dict[str, dict[str, float]] = {}
    chosen = lams[0]
    greedy = None
    if config.greedy:
        pairs = dev_pairs(comma_list(config.select), data_root(TransferConfig(data=config.data)))
        weights, greedy = greedy_soup(
            states, [p.source for p in parents], parents[0].encoder, own, words, pairs
        )
    if len(lams) > 1:
        pairs = dev_pairs(
            comma_list(config.select),
            data_root(TransferConfig(data=config.data)),
        )
        best = -np.inf
        for lam in tqdm(lams, desc=f"{config.method}: lam on dev", unit=" lam"):
            scores = dev_scores(as_encoder(parents[0].encoder, own, merged_at(lam), words, "merge"), pairs)
            dev[f"{lam:g}"] = scores
            if (mean := float(np.mean(list(scores.values())))) > best:  # an equal score keeps the earlier
                best, chosen = mean, lam
    state = merged_at(chosen)
    check_finite(state, config, chosen)
    edge = edge_note(lams, chosen, most=1.0 if config.method == "average" else None) if dev else None
    metadata = {
        "config": parents[0].saved.get("config"),  # the first parent's run, for the card
        "encoder_config": to_dict(own),
        "prompts": prompts,
        "vocabulary": words,
        "vectors": parents[0].encoder.vectors,
        "embedding_parts": [],
        "merged": {
            "method": config.method,
            "lam": chosen,
            "weights": weights,
            "density": config.density if config.method == "ties" else None,
            "base": base_record,
            # relative to the merge's folder: a study copied whole reads its own parents
            "parents": [
                {"path": os.path.relpath(p.file.resolve(), out.resolve()), "sha256": p.sha256}
                for p in parents
            ],
            "greedy": greedy,  # greedy=true: the order tried, each encoder's own dev score, what was kept
            "select": config.select if dev or greedy else None,
            "dev_spearman": dev or None,
            "edge": edge,
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    exported.write(target, metadata, state, {})
    sentence_transformers_folder(out)
    return Merged(out, chosen, dev, len(words), edge)


def greedy_soup(
    states: Sequence[dict[str, torch.Tensor]],
    sources: Sequence[str],
    template: SentenceEncoder,
    own: Any,
    words: Sequence[str],
    pairs: dict,
) -> tuple[list[float], dict[str, Any]]:
    """Wortsman et al. (2022)'s greedy soup: the encoders in order of their own mean dev score
    (the first of equals first), the best alone to start, then each added where the uniform
    average with it scores no lower. The average's weights (0 for one left out, exactly) and the
    record: the order, each one's own score and the soup's after each try."""

    def score(weights: list[float]) -> float:
        state = merge_states(states, "average", None, weights=weights)
        return float(
            np.mean(list(dev_scores(as_encoder(template, own, state, words, "soup"), pairs).values()))
        )

    alone = [score([float(i == j) for j in range(len(states))]) for i in range(len(states))]
    order = sorted(range(len(states)), key=lambda i: -alone[i])
    kept, best, tried = [order[0]], alone[order[0]], []
    for i in tqdm(order[1:], desc="greedy soup", unit=" encoder"):
        with_it = score([1 / (len(kept) + 1) if j in (*kept, i) else 0.0 for j in range(len(states))])
        tried.append({"source": sources[i], "soup_dev": with_it, "kept": with_it >= best})
        if with_it >= best:
            kept, best = [*kept, i], with_it
    weights = [1 / len(kept) if j in kept else 0.0 for j in range(len(states))]
    record = {
        "order": [sources[i] for i in order],
        "own_dev": {sources[i]: alone[i] for i in range(len(states))},
        "tried": tried,
        "kept": [sources[i] for i in sorted(kept)],
        "dev": best,
    }
    return weights, record


WRITTEN = ("encoder.json", "encoder.safetensors", "encoder")


def sentence_transformers_folder(out: Path) -> None:
    """The merged encoder as sentence-transformers loads it (`encoder/`, with its model card), as an
    exported run has one: built by the export's own code from the merged encoder.json in a staging
    folder beside `out`, then moved in whole (an encoder the format cannot hold gets none, as in
    an export)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-st-", dir=out.parent))
    try:
        export_encoder(ExportConfig(run=str(out), out=str(staging / "export"), vocabulary="trained"))
        built = RunFolder(staging / "export").pretrained_encoder
        if built.is_dir():
            target = RunFolder(out).pretrained_encoder
            if target.exists():
                shutil.rmtree(target)
            os.replace(built, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def split_sources(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The encoders (paths given bare, or each as run=PATH) and the other key=value arguments."""
    paths, keys = paths_and_keys(args)
    sources = [*paths, *(a.partition("=")[2] for a in keys if a.startswith("run="))]
    return sources, [a for a in keys if not a.startswith("run=")]


def command(args: Sequence[str]) -> None:
    """`just merge-encoders run=A run=B method=ties out=...`."""
    sources, keys = split_sources(args)
    config = apply_overrides(MergeConfig(), keys)
    merged = merge_encoders(config, sources)
    for lam, scores in merged.dev.items():
        shown = ", ".join(f"{task} {score:.2f}" for task, score in scores.items())
        print(f"  lam {lam}: dev Spearman {shown}")
    setting = (
        f", lam {merged.chosen:g}" + (" (chosen on dev)" if merged.dev else "")
        if merged.chosen is not None
        else ""
    )
    print(
        f"{config.method} of {len(sources)} encoders{setting} written to {merged.out} ({merged.words:,} words)"
    )
    if merged.edge:
        print(f"note: {merged.edge}")
