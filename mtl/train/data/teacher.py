"""A teacher's embeddings of a distillation task's sentences, computed once and cached on disk.

The teacher is any encoder mtl loads: a run folder or exported encoder (`load_encoder`), or a
Hugging Face model folder or Hub id (encoder=hf's loading, mean pooling). Its embeddings go to
`$MTL_CACHE_DIR/teachers/`, keyed by the teacher's files (name, size, modification time) and the
sentences, so a second run, a resumed one or the other processes of a torchrun read them back.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from mtl.errors import UserError
from mtl.eval.loading import encoder_files, is_mtl_encoder, load_any_encoder
from mtl.files.atomic import atomic_path
from mtl.files.paths import cache_dir


def teacher_identity(source: str, max_seq_length: int) -> dict:
    """What the cached embeddings depend on, short of reading every weight: the teacher's files'
    names, sizes and modification times (a Hub id: the id), and an hf teacher's sentence length."""
    path = Path(source).expanduser()
    if is_mtl_encoder(source):
        files = encoder_files(path)
    elif path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.is_file())
    else:
        return {"hub_id": source, "max_seq_length": max_seq_length}
    stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return {"files": stats, "max_seq_length": None if is_mtl_encoder(source) else max_seq_length}


def teacher_embeddings(
    source: str, max_seq_length: int, texts: list[str], device: str, progress: bool = True
) -> np.ndarray:
    """(len(texts), D) float32: the teacher's embeddings of `texts`, from the cache when there."""
    digest = hashlib.sha256(json.dumps(teacher_identity(source, max_seq_length)).encode())
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    file = cache_dir() / "teachers" / f"{digest.hexdigest()[:32]}.npy"
    if file.is_file():
        cached = np.load(file, allow_pickle=False)
        if cached.ndim == 2 and len(cached) == len(texts):
            return cached
    if progress:
        print(f"teacher {source}: embedding {len(texts):,} sentences (cached in {file.parent})")
    # Building the teacher draws random numbers (initial weights, then replaced): without the fork a
    # run that computes the embeddings would start from other weights than one that reads the cache.
    cuda = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        teacher = load_any_encoder(source, max_seq_length, device)
        embeddings = teacher.encode(texts, batch_size=128, show_progress_bar=progress)
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or len(embeddings) != len(texts):
        raise UserError(
            f"teacher {source} gave embeddings of shape {embeddings.shape} for {len(texts)} sentences"
        )
    # (np.save given a path would add .npy to the temporary name)
    with atomic_path(file, "teacher embeddings") as partial, open(partial, "wb") as out:
        np.save(out, embeddings, allow_pickle=False)
    return embeddings
