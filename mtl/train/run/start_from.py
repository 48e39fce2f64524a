"""`start_from=`: a run's shared encoder begins from another run's trained network instead of its
seed's random one (continued training, as BOOM's incremental update adds a task to a trained
encoder). The word vectors stay the run's own (its vocabulary's rows of the vectors file); the
task heads start fresh. Read with the same safe readers as every encoder file: nothing in it runs.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from mtl.errors import UserError
from mtl.files.digest import file_sha256
from mtl.formats import checkpoint, encoder_file
from mtl.runs import RunFolder

WORD_VECTORS = "embedding."  # the word vectors' weights (frozen, trained or both): the run's own


def source_file(source: str) -> Path:
    """The encoder file `start_from=` names: a finished run's encoder.json (an unfinished one's
    best checkpoint), an encoder.json, or a checkpoint."""
    path = Path(source).expanduser()
    if path.is_file():
        return path
    folder = RunFolder(path)
    found = next((f for f in (folder.encoder, folder.best) if f.is_file()), None)
    if found is None:
        raise UserError(
            f"start_from={source}: no encoder there (encoder.json or checkpoints/best.pt): give a run folder, "
            "an encoder.json or a checkpoint that mtl wrote"
        )
    return found


def network_weights(source: str) -> tuple[dict[str, torch.Tensor], Path]:
    """The encoder's weights but its word vectors, out of `start_from=`'s file, and the file."""
    file = source_file(source)
    saved = encoder_file.read(file) if file.suffix == ".json" else checkpoint.load(file, "cpu")
    state = saved.get("encoder") or {
        key.removeprefix("encoder."): value
        for key, value in (saved.get("model") or {}).items()
        if isinstance(key, str) and key.startswith("encoder.")
    }
    network = {key: value for key, value in state.items() if not key.startswith(WORD_VECTORS)}
    if not network:
        raise UserError(f"start_from={source}: {file} holds no encoder weights: give an encoder mtl wrote")
    return network, file


def start_encoder_from(encoder: nn.Module, source: str) -> dict[str, str]:
    """Copy `source`'s network into `encoder` in place (its optimizers keep their parameters), after
    checking that every weight has its counterpart of the same shape; what the run records of it."""
    network, file = network_weights(source)
    own = {key: value for key, value in encoder.state_dict().items() if not key.startswith(WORD_VECTORS)}
    for key in sorted(set(own) | set(network)):
        mine, theirs = own.get(key), network.get(key)
        if mine is None or theirs is None or mine.shape != theirs.shape:
            raise UserError(
                f"start_from={source}: its encoder differs from this run's at {key} ({_shape(theirs)} against "
                f"{_shape(mine)}): give the encoder=, hidden= and pooling= it was trained with"
            )
        if theirs.is_floating_point() and not torch.isfinite(theirs).all():
            raise UserError(
                f"start_from={source}: its {key} holds weights that are not finite: it cannot be a start"
            )
    with torch.no_grad():
        for key, value in encoder.state_dict(keep_vars=True).items():
            if key in network:
                value.copy_(network[key].to(value.dtype))
    return {"path": str(file.resolve()), "sha256": file_sha256(file)}


def _shape(weight: torch.Tensor | None) -> str:
    return "none" if weight is None else "x".join(map(str, weight.shape)) or "a scalar"
