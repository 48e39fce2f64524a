"""Any encoder through mtl's transfer suite, from Python (SentEval's `prepare`/`batcher` idea):

    import mtl.transfer
    results = mtl.transfer.evaluate(lambda sentences: model.encode(sentences), name="my-model",
                                    tasks=["MR", "CR", "STS14"], mode="fast")

`encode` takes a list of sentences (str) and returns their embeddings as a 2-D array (N, D),
numpy or torch. The reports are the ones `just transfer` writes (`runs/external-<name>/transfer-
<mode>.json`, `.md`, per-item results), scored by the same code as mtl's runs and baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtl.config import check_fields
from mtl.errors import UserError
from mtl.eval.transfer import suite

MODES = ("standard", "fast", "senteval", "senteval-prototyping")


class CallableEncoder:
    """A function from sentences to embeddings, with what the transfer suite asks of an encoder."""

    vectors = None  # no vectors file: nothing to expand
    coverage = None  # no vocabulary to report on

    def __init__(self, encode: Callable[[list[str]], Any], name: str):
        if not callable(encode):
            raise UserError(
                f"mtl.transfer.evaluate takes a function of a list of sentences, not {type(encode).__name__}"
            )
        self.function, self.name, self.dim = encode, name, None
        self.dim = self.encode(["a sentence ."]).shape[1]

    def encode(
        self, sentences: Sequence[str], batch_size: int = 128, pooling: str | None = None, **_: Any
    ) -> np.ndarray:
        if pooling is not None:
            raise UserError(f"{self.name} pools its own way: leave pooling unset")
        parts = [
            self._batch(list(sentences[start : start + batch_size]))
            for start in range(0, len(sentences), batch_size)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    def _batch(self, sentences: list[str]) -> np.ndarray:
        embedded = self.function(sentences)
        if hasattr(embedded, "detach"):  # a torch tensor, on any device
            embedded = embedded.detach().float().cpu().numpy()
        embedded = np.asarray(embedded, dtype=np.float32)
        if embedded.ndim != 2 or len(embedded) != len(sentences) or embedded.shape[1] == 0:
            raise UserError(
                f"{self.name}: encode gave an array of shape {embedded.shape} for {len(sentences)} sentences: "
                "return one row per sentence, (N, D) with D of at least 1"
            )
        if self.dim is not None and embedded.shape[1] != self.dim:
            raise UserError(
                f"{self.name}: encode gave {embedded.shape[1]} dimensions, and {self.dim} for the first "
                "sentences: return the same D for every batch"
            )
        if not np.isfinite(embedded).all():
            raise UserError(f"{self.name}: encode gave NaN or infinite values")
        return embedded

    def token_states(self, *args: Any, **kwargs: Any) -> Any:
        raise UserError(f"{self.name} gives sentence embeddings only: pooling=selfattn needs token states")


def evaluate(
    encode: Callable[[list[str]], Any],
    name: str,
    tasks: Sequence[str] | str = "all",
    mode: str = "fast",
    out: str | Path | None = None,
    data: str | Path | None = None,
    batch_size: int = 128,
    wandb: str = "disabled",
) -> dict[str, dict[str, float]]:
    """Score `encode` on the transfer tasks under `mode` (standard, fast, senteval,
    senteval-prototyping); the results by task. `out`: the report's folder (default
    runs/external-<name>); `data`: SentEval's downstream folder (default: $MTL_DATA_DIR's)."""
    if not name or "/" in name:
        raise UserError(f"name={name!r}: give the model a name (no slashes): it names its report folder")
    if mode not in MODES:
        raise UserError(f"mode={mode!r}: choose one of {', '.join(MODES)}")
    config = suite.TransferConfig(
        tasks=tasks if isinstance(tasks, str) else ",".join(tasks),
        mode=mode,  # type: ignore[arg-type]
        data=str(data) if data is not None else None,
        batch_size=batch_size,
        wandb=wandb,  # type: ignore[arg-type]
        out=str(out) if out is not None else f"runs/external-{name}",
    )
    check_fields(config)  # each number in its range, as the command line's keys are (batch_size=0)
    report = suite.evaluate_with(config, CallableEncoder(encode, name), source=f"python: {name}")
    return report["results"]
