"""Named feature recipes: how a transfer task's sentence embeddings become one row of features per
example, before a classifier reads them.

A task's registry entry names its recipe (`SentEvalQuirks.features`; SNLI's is `nli`), else a
one-sentence task reads its embedding as it is (`sentence`) and a pair task SentEval's
`senteval-pair`; `features=` of `just transfer` may name another (Skip-Thought's
`skipthought-mrpc`). A plugin adds one with `register_feature_recipe(name)` on a function of the
split's embeddings (one array per sentence position) and the split's sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mtl.eval.transfer.skipthought_features import pair_statistics
from mtl.text.tokenizer import make_tokenizer

# name -> (columns' embeddings, the split's sentences per column) -> (N, features)
FeatureRecipe = Callable[[Sequence[np.ndarray], Sequence[Sequence[str]]], np.ndarray]
FEATURE_RECIPES: dict[str, FeatureRecipe] = {}


def register_feature_recipe(name: str) -> Callable[[FeatureRecipe], FeatureRecipe]:
    def add(recipe: FeatureRecipe) -> FeatureRecipe:
        FEATURE_RECIPES[name] = recipe
        return recipe

    return add


@register_feature_recipe("sentence")
def sentence(columns, texts) -> np.ndarray:
    """A one-sentence task's embeddings as they are."""
    (u,) = columns
    return u


def relatedness_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[|u-v|, u*v]: what SentEval's code feeds SICK-E, MRPC and its relatedness tasks (sick.py,
    mrpc.py), though its paper writes <u, v, |u-v|, u*v> for inference: mtl follows the code,
    which made its numbers."""
    return np.concatenate([np.abs(u - v), u * v], axis=1)


@register_feature_recipe("senteval-pair")
def senteval_pair(columns, texts) -> np.ndarray:
    return relatedness_features(*columns)


@register_feature_recipe("nli")
def nli(columns, texts) -> np.ndarray:
    """[u, v, u*v, |u-v|]: SentEval's SNLI (snli.py)."""
    u, v = columns
    return np.concatenate([u, v, u * v, np.abs(u - v)], axis=1)


@register_feature_recipe("skipthought-mrpc")
def skipthought_mrpc(columns, texts) -> np.ndarray:
    """Skip-Thought 3.3: [|u-v|, u*v] and Socher et al.'s six pair statistics on spaCy's tokens."""
    tokenizer = make_tokenizer("spacy", lowercase=False)
    a, b = (tokenizer.tokenize(column) for column in texts)
    return np.concatenate([relatedness_features(*columns), pair_statistics(a, b)], axis=1)


def recipe_name(task_recipe: str | None, columns: int, asked: str = "senteval") -> str:
    """The recipe of a task: `asked` where it names one (features=skipthought-mrpc), else the
    task entry's own, else by its sentence positions."""
    if asked in FEATURE_RECIPES:
        return asked
    return task_recipe or ("sentence" if columns == 1 else "senteval-pair")
