"""Skip-Thought's vocabulary expansion (Kiros et al. 2015, Section 2.2): a linear map from the
pretrained word-vector space to the space training moved the word embeddings into, fitted over
the words training saw, applied to every word it did not see.

With `embeddings=trainable` (or the trained half of `both`) a word new to the encoder would
otherwise enter with its raw GloVe vector beside trained ones, which live in another space.
The map is an unregularised least-squares regression with an intercept: the paper writes
v' = Wv, the authors' code (skip-thoughts' `tools.train_regressor`, TensorFlow's
`vocabulary_expansion.py`) fits scikit-learn's `LinearRegression`, which fits an intercept by
default; mtl follows the code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mtl.errors import UserError


@dataclass(frozen=True)
class ExpansionMap:
    """v' = v @ weight + bias, from (E,) pretrained vectors to (E_t,) trained ones."""

    weight: np.ndarray  # (E, E_t)
    bias: np.ndarray  # (E_t,)
    words: int  # how many words it was fitted on

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        return (vectors.astype(np.float64) @ self.weight + self.bias).astype(np.float32)

    def tensors(self) -> dict[str, torch.Tensor]:
        """What an exported encoder stores (float64: the map is applied as it was fitted)."""
        return {"weight": torch.from_numpy(self.weight), "bias": torch.from_numpy(self.bias)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], words: int, source: str) -> ExpansionMap:
        weight, bias = tensors.get("weight"), tensors.get("bias")
        if (
            not isinstance(weight, torch.Tensor)
            or not isinstance(bias, torch.Tensor)
            or weight.dim() != 2
            or bias.shape != (weight.shape[1],)
            or not bool(torch.isfinite(weight).all() and torch.isfinite(bias).all())
        ):
            raise UserError(f"{source}: its vocabulary-expansion map is damaged: export the encoder again")
        return cls(weight.double().numpy(), bias.double().numpy(), words)


def fit_expansion(pretrained: np.ndarray, trained: np.ndarray) -> ExpansionMap:
    """The least-squares map (with intercept) from `pretrained` (n, E) rows to `trained` (n, E_t)
    rows of the same n words. Fewer words than E + 1 leave it underdetermined: then the
    minimum-norm solution, as scikit-learn's lstsq-based fit gives."""
    if len(pretrained) != len(trained) or len(pretrained) == 0:
        raise UserError(
            "vocab_expansion: the encoder's vocabulary has no word with a pretrained vector to fit the map "
            "on: point vectors= at the file it was trained with"
        )
    design = np.hstack([pretrained.astype(np.float64), np.ones((len(pretrained), 1))])
    solution = np.linalg.lstsq(design, trained.astype(np.float64), rcond=None)[0]
    return ExpansionMap(solution[:-1], solution[-1], len(pretrained))
