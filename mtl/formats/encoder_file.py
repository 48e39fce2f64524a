"""The exported encoder: `encoder.json` (config, vocabulary, vectors, layout) and
`encoder.safetensors` (the weights), which loading reads without unpickling anything.

safetensors holds tensors only, under string keys: `encoder/<parameter>` for the shared
encoder, `parts/<path>/<parameter>` for the encoders a task adds to the embedding (Quick-
Thoughts' g), `expansion/weight` and `expansion/bias` for an export's vocabulary-expansion map.
The JSON names the weights file and its SHA-256, so a damaged or swapped file is refused
instead of loaded. Runs exported before this format have `encoder.pt` (a torch.save dict read
with `weights_only=True`), which loading still reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from mtl.config import from_dict
from mtl.data.config import DataConfig
from mtl.errors import UserError
from mtl.files import atomic, jsonfile
from mtl.files.digest import file_sha256
from mtl.models.encoders.config import EncoderConfig

FORMAT = 2  # 1: encoder.pt
EMBEDDING_SUFFIX = "embedding.weight"  # a word-embedding matrix, one row per word of the vocabulary
# What each entry of encoder.json holds when present (the vocabulary and the configs are checked
# where they are used: against the weights, and as an OwnConfig). `config` is the whole training
# run's (for its model card and provenance); loading reads `encoder_config`.
ENTRIES = {
    "config": dict,
    "encoder_config": dict,
    "prompts": dict,
    "vocabulary": list,
    "vectors": str,
    "embedding_parts": list,
    "plugins": list,
    "vocab_expansion": dict,
    "pretrained": str,
    "weights": str,
    "weights_sha256": str,
    "merged": dict,  # just merge-encoders: its method, settings, parents (paths, SHA-256) and dev scores
}


@dataclass
class OwnConfig:
    """The encoder's own config, all that loading it needs of the run that trained it (the entry
    `encoder_config` of encoder.json and of a checkpoint): the architecture (the run's model
    section) and how its sentences were read (its data section: tokenizer, case, words per
    sentence). No training schema: an encoder loads where the trainer's keys have changed."""

    model: EncoderConfig = field(default_factory=EncoderConfig)
    data: DataConfig = field(default_factory=DataConfig)


def own_config(values: Any, source: str) -> OwnConfig:
    """`values` (an `encoder_config` entry) checked key by key; a one-line error naming `source`."""
    return from_dict(OwnConfig, values, source)


def checked_prompts(values: Any, source: str) -> dict[str, str]:
    """The prompts entry: each task's `prompt=` by task name (encode(prompt_name=<task>))."""
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in [*values, *values.values()]):
        raise UserError(f"{source}: its prompts are not task names with their text: export the encoder again")
    return values


def write(
    path: Path,
    metadata: dict[str, Any],
    encoder: dict[str, torch.Tensor],
    parts: dict[str, dict[str, torch.Tensor]],
    pretrained: str | None = None,
    expansion: dict[str, torch.Tensor] | None = None,
) -> list[Path]:
    """`path` (encoder.json) and its weights beside it; returns the files written. A pretrained
    encoder's weights are in its Hugging Face folder `pretrained`, which the JSON names."""
    weights_path = path.with_suffix(".safetensors")
    tensors = {f"encoder/{k}": v for k, v in encoder.items()}
    tensors.update({f"parts/{p}/{k}": v for p, state in parts.items() for k, v in state.items()})
    tensors.update({f"expansion/{k}": v for k, v in (expansion or {}).items()})
    files = [path]
    record = {"format": FORMAT, **metadata, "pretrained": pretrained}
    if tensors:
        with (
            atomic.atomic_path(weights_path, "encoder weights") as partial,
            atomic.safetensors_errors(partial),
        ):
            save_file({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}, partial)
        record.update(weights=weights_path.name, weights_sha256=file_sha256(weights_path))
        files.insert(0, weights_path)
    atomic.write_text(path, jsonfile.dumps(record, indent=1) + "\n", "encoder")
    return files


def read(path: Path) -> dict[str, Any]:
    """What `load_encoder` needs, in the layout of a checkpoint: config, vocabulary, vectors,
    `encoder` (its state dict), `parts`, `pretrained`."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise UserError(
            f"encoder {path} cannot be read ({error}): export it again or use checkpoints/best.pt"
        ) from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise UserError(f"{path} is not an encoder exported by mtl (no format {FORMAT})")
    for key, kinds in ENTRIES.items():
        if record.get(key) is not None and not isinstance(record[key], kinds):
            raise UserError(
                f"{path}: its {key} entry is a {type(record[key]).__name__}, which mtl never writes there: "
                "export the encoder again"
            )
    order = record.get("embedding_parts") or []  # the concatenation's order, as trained
    if not all(isinstance(part, str) for part in order):
        raise UserError(f"{path}: its embedding_parts are not names of parts: export the encoder again")
    # every part named, weights or not (a bag of words over the shared frozen vectors has none)
    record["encoder"], record["parts"], record["expansion"] = {}, {part: {} for part in order}, {}
    if weights := record.get("weights"):
        weights_path = path.parent / weights
        if Path(weights).name != weights or not weights_path.is_file():
            raise UserError(f"{path} names {weights!r} as its weights, which are not beside it")
        if file_sha256(weights_path) != record.get("weights_sha256"):
            raise UserError(
                f"{weights_path} is damaged or not the one {path} was written with (SHA-256 differs)"
            )
        try:
            tensors = load_file(weights_path)
        except (SafetensorError, OSError, ValueError) as error:
            raise UserError(f"{weights_path} is damaged ({error})") from None
        for key, value in tensors.items():
            if key.startswith("encoder/"):
                record["encoder"][key.removeprefix("encoder/")] = value
            elif key.startswith("parts/"):
                part, _, name = key.removeprefix("parts/").rpartition("/")
                record["parts"].setdefault(part, {})[name] = value
            elif key.startswith("expansion/"):
                record["expansion"][key.removeprefix("expansion/")] = value
    record["parts"] = dict(
        sorted(
            record["parts"].items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)
        )
    )
    if record.get("pretrained") is None:
        record.pop("pretrained", None)
    return record


def files_of(path: Path) -> list[Path]:
    """The files of an exported encoder (JSON and weights; the JSON alone for a pretrained one)."""
    weights = path.with_suffix(".safetensors")
    return [weights, path] if weights.is_file() else [path]


def pruned_state(state: Mapping[str, torch.Tensor], rows: np.ndarray, vocabulary_size: int) -> dict:
    """`state` with every word-embedding matrix (`*embedding.weight` with a row per word) cut to `rows`."""
    index = torch.from_numpy(rows)
    return {
        key: value.index_select(0, index.to(value.device))
        if key.endswith(EMBEDDING_SUFFIX) and value.dim() == 2 and value.shape[0] == vocabulary_size
        else value
        for key, value in state.items()
    }
