"""One training step of SentEval's logistic regression without autograd or torch.optim's machinery.

SentEval's classifier (nhid=0) is a linear layer under cross-entropy, trained for thousands of
batches of 64-128 small vectors per fit and fitted ~100 times per task: the work per step is a
few tiny kernels, and autograd's graph plus `Optimizer.step()`'s bookkeeping cost five times more
than the kernels themselves. This module calls the kernels that `cross_entropy(...).backward()`
and RMSprop/Adam/SGD's single-tensor updates call, with the same arguments in the same order, so
the weights come out bit-identical to the torch.nn path (tests/test_transfer_linear_step.py
checks it against the installed torch); any other optimizer gets these gradients and its own
`step()`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

# The options each hand-written update reproduces; any other setting goes through torch.optim.
DEFAULTS = {
    "rmsprop": {"lr": 0.01, "alpha": 0.99, "eps": 1e-8},
    "adam": {"lr": 1e-3, "eps": 1e-8},
    "sgd": {"lr": 0.1},  # SentEval's default learning rate for sgd
}


def gradients(linear: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) gradients of the batch-mean cross-entropy of `linear(x)`, as autograd makes
    them: `F.linear` is `addmm`; nll_loss's backward puts -1/n (a float32 division) at each target;
    log_softmax's backward kernel; addmm's weight gradient taken as grad^T x because the weight is
    used transposed (column-major), and its bias gradient summed over the batch. The layer's
    parameters must not require gradients (`detach`), so that no graph is recorded."""
    log_probs = torch.log_softmax(torch.addmm(linear.bias, x, linear.weight.t()), 1)
    seed = torch.zeros_like(log_probs).scatter_(1, y[:, None], _target_share(len(y)))
    grad = torch._log_softmax_backward_data(seed, log_probs, 1, torch.float32)
    return grad.t().mm(x), grad.sum(0)


@functools.cache
def _target_share(batch_size: int) -> float:
    return float(-(np.float32(1) / np.float32(batch_size)))


def detach(linear: torch.nn.Linear) -> None:
    """Stop autograd recording the layer: the updates below change its tensors in place."""
    for parameter in linear.parameters():
        parameter.requires_grad_(False)


class RMSprop:
    """torch.optim.RMSprop's single-tensor update (no momentum, not centred)."""

    def __init__(self, params: list[torch.Tensor], weight_decay: float, lr: float, alpha: float, eps: float):
        self.params, self.weight_decay, self.lr, self.alpha, self.eps = params, weight_decay, lr, alpha, eps
        self.square_avgs = [torch.zeros_like(p) for p in params]

    def __call__(self, grads) -> None:
        for param, grad, square_avg in zip(self.params, grads, self.square_avgs, strict=True):
            if self.weight_decay != 0:
                grad = grad.add(param, alpha=self.weight_decay)
            square_avg.mul_(self.alpha).addcmul_(grad, grad, value=1 - self.alpha)
            param.addcdiv_(grad, square_avg.sqrt().add_(self.eps), value=-self.lr)


class Adam:
    """torch.optim.Adam's single-tensor update (betas 0.9/0.999, no amsgrad); torch reads its step
    count back as a Python float, so the bias corrections below are the same numbers."""

    def __init__(self, params: list[torch.Tensor], weight_decay: float, lr: float, eps: float):
        self.params, self.weight_decay, self.lr, self.eps = params, weight_decay, lr, eps
        self.beta1, self.beta2 = 0.9, 0.999
        self.exp_avgs = [torch.zeros_like(p) for p in params]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in params]
        self.step = 0.0

    def __call__(self, grads) -> None:
        self.step += 1
        step = self.step
        step_size = self.lr / (1 - self.beta1**step)
        bias_correction2_sqrt = (1 - self.beta2**step) ** 0.5
        for param, grad, exp_avg, exp_avg_sq in zip(
            self.params, grads, self.exp_avgs, self.exp_avg_sqs, strict=True
        ):
            if self.weight_decay != 0:
                grad = grad.add(param, alpha=self.weight_decay)
            exp_avg.lerp_(grad, 1 - self.beta1)
            exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


class SGD:
    """torch.optim.SGD's single-tensor update (no momentum)."""

    def __init__(self, params: list[torch.Tensor], weight_decay: float, lr: float):
        self.params, self.weight_decay, self.lr = params, weight_decay, lr

    def __call__(self, grads) -> None:
        for param, grad in zip(self.params, grads, strict=True):
            if self.weight_decay != 0:
                grad = grad.add(param, alpha=self.weight_decay)
            param.add_(grad, alpha=-self.lr)


UPDATES = {"rmsprop": RMSprop, "adam": Adam, "sgd": SGD}


def update(spec: str, linear: torch.nn.Linear, weight_decay: float) -> Callable | None:
    """The hand-written update for SentEval's optimizer string `spec` ("rmsprop", "adam,lr=0.01"),
    or None where it sets something only torch.optim's own update handles."""
    name, *settings = spec.split(",")
    options = {key: float(value) for key, value in (s.split("=", 1) for s in settings)}
    if name not in UPDATES or not set(options) <= set(DEFAULTS[name]):
        return None
    return UPDATES[name]([linear.weight, linear.bias], weight_decay, **{**DEFAULTS[name], **options})
