"""mtl: multitask training of task-universal sentence encoders on SNLI and ClassifSQuAD."""


def load_encoder(path, device: str = "auto", vocab_expansion: bool = False):
    """A trained encoder from a run folder or checkpoint: `.encode(sentences) -> np.ndarray`.
    `vocab_expansion=True`: words training never saw enter trained word vectors through
    Skip-Thought's linear map (runs with embeddings=trainable or both)."""
    from mtl.eval.loading import load_encoder as load

    return load(path, device=device, vocab_expansion=vocab_expansion)


def __getattr__(name: str):  # noqa: ANN202
    """mtl.train, mtl.compare, mtl.TrainedRun: imported when first used (`import mtl` stays light)."""
    if name == "train":  # the package, callable (mtl/train/__init__.py): mtl.train("preset=...")
        import importlib

        return importlib.import_module("mtl.train")
    if name in ("compare", "TrainedRun"):
        from mtl import api

        return getattr(api, name)
    raise AttributeError(f"module 'mtl' has no attribute {name!r}")


__all__ = ["TrainedRun", "compare", "load_encoder", "train"]
