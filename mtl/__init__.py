"""mtl: multitask training of task-universal sentence encoders on SNLI and ClassifSQuAD."""


def load_encoder(path, device: str = "auto"):
    """A trained encoder from a run folder or checkpoint: `.encode(sentences) -> np.ndarray`."""
    from mtl.eval.encoder import load_encoder as load

    return load(path, device=device)


__all__ = ["load_encoder"]
