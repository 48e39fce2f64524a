"""GradCache (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited
Setup"; sentence-transformers' Cached* losses): an in-batch loss over a batch larger than fits
in memory, with the same loss and gradients as the whole batch at once.

1. embed the batch `mini_batch` examples at a time without a graph (the RNG state of each chunk
   kept, so dropout draws the same masks again in step 3);
2. the loss over the whole batch from those embeddings, and its gradient with respect to them;
3. each chunk embedded again, with a graph, and backpropagated with its cached gradient.

Memory then holds one chunk's activations and the batch's embeddings, not the batch's
activations; the price is a second forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

from mtl.models.heads import InBatchScores

Columns = list[tuple[torch.Tensor, torch.Tensor]]  # (tokens, lengths) per sentence column


class RandomState:
    """The RNG state that dropout draws from, to replay one forward pass's masks."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = None
        if device.type == "cuda":
            self.cuda = torch.cuda.get_rng_state(device)
            # Setting the generator's state makes cuDNN re-seed its RNN dropout state (one per
            # device, kept between calls) from the generator at its next call: so the first pass
            # draws from the state that restore() brings back, and a stacked cuDNN LSTM's
            # dropout between layers is replayed too.
            torch.cuda.set_rng_state(self.cuda, device)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


def rows_of(sentences: Columns, part: slice) -> Columns:
    """The examples `part` of every column, padded to their own longest sentence."""
    chosen = []
    for tokens, lengths in sentences:
        width = int(lengths[part].max())  # lengths stay on the CPU: no wait for the GPU
        chosen.append((tokens[part, :width], lengths[part]))
    return chosen


def cached_backward(
    network: torch.nn.Module,
    sentences: Columns,
    mini_batch: int,
    computing: Callable[[], AbstractContextManager],
    loss_and_score: Callable[[InBatchScores], tuple[torch.Tensor, torch.Tensor]],
    seed: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backpropagate `loss_and_score`'s loss sum over the whole batch `sentences`, embedding it
    `mini_batch` examples at a time; `computing()`: the autocast context of the forward passes;
    `seed(loss)`: the gradient backward starts from. Returns the (loss sum, metric sum), detached."""
    head, encoder = network.head, network.encoder
    parts = [slice(start, start + mini_batch) for start in range(0, len(sentences[0][1]), mini_batch)]
    states, chunks = [], []
    with torch.no_grad():
        for part in parts:
            states.append(RandomState(device))
            with computing():
                chunks.append(head.embed(encoder, rows_of(sentences, part)))
    embeddings = [torch.cat(column).requires_grad_() for column in zip(*chunks, strict=True)]  # (B, D) each
    with computing():  # scored at the whole batch's precision, as its forward scores them
        scores = head.score(embeddings)
    loss_sum, score_sum = loss_and_score(scores)
    loss_sum.backward(seed(loss_sum))  # the gradient with respect to the embeddings (and any scoring weights)
    for part, state in zip(parts, states, strict=True):
        state.restore()
        with computing():
            again = head.embed(encoder, rows_of(sentences, part))
        torch.autograd.backward(again, [embedded.grad[part] for embedded in embeddings])
    return loss_sum.detach(), score_sum.detach()
