"""mtl: multitask training of task-universal sentence encoders on SNLI and ClassifSQuAD."""


def load_encoder(path, device: str = "auto", vocab_expansion: bool = False):
    """A trained encoder from a run folder or checkpoint: `.encode(sentences) -> np.ndarray`.
    `vocab_expansion=True`: words training never saw enter trained word vectors through
    Skip-Thought's linear map (runs with embeddings=trainable or both)."""
    from mtl.eval.loading import load_encoder as load

    return load(path, device=device, vocab_expansion=vocab_expansion)


__all__ = ["load_encoder"]
