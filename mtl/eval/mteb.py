"""mtl's encoders in MTEB: `mteb.evaluate(MTEBEncoder("runs/<run>"), mteb.get_tasks([...]))`.

MTEB takes any object that follows its encoder protocol (`mteb.models.AbsEncoder`) and a
`ModelMeta` describing it; this is that wrapper around `load_encoder`. Similarity is cosine,
as SentEval's STS and mtl's transfer suite score it. MTEB is not a dependency of mtl:
`pip install mteb` to use this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mtl.errors import UserError
from mtl.eval.contamination import mteb_training_datasets
from mtl.eval.encoder import SentenceEncoder
from mtl.eval.loading import load_encoder
from mtl.runs import RunFolder, read_summary

try:
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction
except ImportError as missing:  # one line, not a traceback into mteb
    raise UserError(f"mtl.eval.mteb needs MTEB ({missing}): pip install mteb") from None


def seen_mteb_tasks(encoder: SentenceEncoder | str | Path) -> set[str]:
    """The MTEB tasks a run folder's summary.json says it saw test sentences of."""
    if isinstance(encoder, SentenceEncoder):
        return set()
    summary = read_summary(RunFolder(Path(encoder)).summary)
    return mteb_training_datasets(summary.get("contamination") or {}) if isinstance(summary, dict) else set()


class MTEBEncoder(AbsEncoder):
    """A run folder's (or checkpoint's, or an already loaded) encoder as an MTEB model."""

    def __init__(
        self,
        encoder: SentenceEncoder | str | Path,
        device: str = "auto",
        batch_size: int = 128,
        show_progress_bar: bool = False,
    ):
        self.model = encoder if isinstance(encoder, SentenceEncoder) else load_encoder(encoder, device)
        self.batch_size, self.show_progress_bar = batch_size, show_progress_bar
        parameters = sum(p.numel() for p in self.model.encoder.parameters())
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={
                "name": f"mtl/{self.model.name}",  # MTEB's names are organization/model
                "embed_dim": self.model.dim,
                "max_tokens": self.model.max_tokens,
                "n_parameters": parameters,
                "similarity_fn_name": ScoringFunction.COSINE,
                "framework": ["PyTorch"],
                "open_weights": True,
                # MTEB's tasks whose test sentences the run trained on (its contamination ledger)
                **({"training_datasets": seen} if (seen := seen_mteb_tasks(encoder)) else {}),
            }
        )

    def encode(
        self,
        inputs: Any,  # a DataLoader of batches whose "text" holds the sentences
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        sentences = [text for batch in inputs for text in batch["text"]]
        # A model trained with "query"/"document" prompts gets them, as sentence-transformers' wrapper does.
        kind = getattr(prompt_type, "value", None)
        prompt_name = kind if kind in getattr(self.model, "prompts", {}) else None
        return self.model.encode(
            sentences,
            prompt_name=prompt_name,
            batch_size=self.batch_size,
            show_progress_bar=self.show_progress_bar,
        )
