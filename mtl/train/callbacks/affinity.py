"""Online inter-task affinity (Fifty, Amid, Zhao, Yu, Anil and Finn 2021, "Efficiently
Identifying Task Groupings in Multi-Task Networks"), measured during training as TAG's code
(google-research/tag) measures it.

For every ordered pair of training tasks (i, j): how much task i's update would lower task j's
loss, per unit of learning rate,

    Z(i -> j) = (1 - L_j(theta_s') / L_j(theta_s)) / lr_i

with theta_s' the shared encoder's parameters after the step task i's optimizer would take now:
its own update rule with its state (Adam's moments and step count, SGD's momentum), its lr and
gradient clipping, applied to copies (the heads stay as they are, as in the paper). Dividing by
the lr (TAG's code does) makes measurements at different lrs comparable. L_i and L_j are
measured on held batches of each task's training data (a seeded draw of `<task>.batch` examples,
the same at every measurement, so values compare over time; TAG takes the step's own batch).
The lookahead's gradient is the training step's own, in the model's float32 (its backward is the
measurement's costliest part); the step it makes and the losses before and after it are float32
(`affinity_precision=`, float64 on request): each loss is a mean over the batch accumulated in
float64, and against float64 throughout the values differ by at most 2.7e-5 per unit lr at
cpu-small's lr 1e-3 (values 0.05-66; the floors 0.6 and up: RESULTS), the error growing as 1/lr:
a held batch whose steps change every loss by less than COARSEST_DROP of itself is measured again
in float64 (`_too_fine`). In float32 a stepped task's loss before its step is its gradient's own
forward.

The noise floor: the measurement is repeated on `affinity_batches=` (8) held batches, and each
line keeps every batch's matrix. The batches are drawn once and reused, so one batch's values
over time are one unit, not many (consecutive measurements correlate 0.45-0.87): `just report`
gives the run's mean a t interval over the B batches (mtl/analysis/held_batches.py) and shows an
entry whose interval holds 0 as ~0, never as help or harm. A measurement takes `affinity_each=`
(2) of the held batches, in turn (`held_in_turn`): a quarter of the cost of all 8, the floor
still over the B batches (a batch's values do not depend on which others are measured with it),
their offsets compared within measurements, and wider (docs/multitask.md).

Everything is computed functionally, without touching the model's weights or gradients, the
optimizer or the data streams, in training mode (cuDNN's LSTM has no backward in eval mode) with
dropout masks from a fixed seed inside a forked random state: a run trains to the same bits with
or without it.

Toward targets: a watching task (`<task>.train=false`: a transfer task's copy such as
experiments/tasks/stsb.toml, a probing task, another build's ClassifSQuAD) is a column of its own,
Z(i -> target), measured on held batches of the target's dev split (it never trains, and its
test split stays unseen). A target scored without a trained head (a cosine: `sts`) takes its own
loss; a classification target's untrained head means nothing, so at each measurement a linear
probe (multinomial logistic regression, L2 as scikit-learn's default C=1) is fitted on the frozen
features of the probe's draw of its training examples (`<task>.probe_train`, as evaluation's
probe) and held fixed through the lookahead, as the heads are.

Other estimators toward the targets (`affinity_estimators=`), each kept per held batch beside the
lookahead, with the CPU seconds it added to the measurement (`just affinity-check` scores them
all against leaving each task out):

- `scale_free`: what the lookahead step does to a score target's Pearson r on its held batch,
  (r_after - r_before) / lr. The target's loss (the cosine regression's squared error) rewards
  calibrating cosine magnitudes, which r, the outcome judged, ignores. A target with a fitted
  probe is already scale-free (the probe is refitted at each measurement): its loss is kept.
- `lookahead_k`: the lookahead taken `affinity_k=` steps (the first on batch b, then on the
  next held batches, the optimizer's state carried), (1 - L_after / L_before) / (k lr): a
  longer look at the same local effect, k times the backward passes.
- `alignment`: the cosine of the stepped task's gradient with the target's on the shared
  encoder (Inf-DDS's and Grad-TAE's first-order influence), no step taken.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.func import functional_call

from mtl.config import comma_list
from mtl.console import say
from mtl.files import atomic
from mtl.formats.run_files import log_line
from mtl.models.heads import AtWidths, MultitaskModel
from mtl.runs import read_affinity
from mtl.runtime.device import seed_step
from mtl.runtime.distributed import local_batches
from mtl.train.callbacks.base import Callback
from mtl.train.config.train_config import AFFINITY_ESTIMATORS, TrainConfig
from mtl.train.data.probe import SEED_OFFSET as PROBE_SEED_OFFSET
from mtl.train.data.probe import probe_features
from mtl.train.data.training_data import TrainingData
from mtl.train.run.setup import Setup, TaskNetwork
from mtl.train.run.training_run import TrainingRun

SEED_OFFSET = 7_919  # the held batches' draw: apart from every other generator seeded by the run's seed


@dataclass
class Measurement:
    """One measurement: (T, T) matrices over the tasks, row i the stepped task, column j the helped."""

    per_batch: np.ndarray  # (B, T, T): Z(i -> j) / lr on each held batch
    toward: np.ndarray | None = None  # (B, T, K): Z(i -> target k) / lr on each of the targets' held batches
    # what Z was made from: each scored loss before the lookaheads (B, T + K), each stepped task's lr (B, T)
    base: np.ndarray | None = None
    lrs: np.ndarray | None = None
    # affinity_estimators=: name -> (B, T, K) toward the targets, and the CPU seconds each added
    estimates: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    precisions: list[str] = field(default_factory=list)  # each held batch's: float32, or float64

    @property
    def lowered(self) -> np.ndarray:
        """(T, T + K): how much task i's lookahead step lowered each loss, in the loss's own units
        (L before - L after = Z * lr * L before: Aioli's evidence), the mean over the held batches."""
        assert self.base is not None and self.lrs is not None
        relative = self.per_batch if self.toward is None else np.concatenate([self.per_batch, self.toward], 2)
        return (relative * self.lrs[:, :, None] * self.base[:, None, :]).mean(axis=0)

    @property
    def mean(self) -> np.ndarray:
        return self.per_batch.mean(axis=0)

    @property
    def stderr(self) -> np.ndarray:
        """The standard error of the mean over the held batches (0 with one batch: unknown)."""
        count = len(self.per_batch)
        if count < 2:
            return np.zeros(self.per_batch.shape[1:])
        return self.per_batch.std(axis=0, ddof=1) / np.sqrt(count)


def held_draws(data: TrainingData, task: str, seed: int, batches: int, split: str = "train") -> list:
    """`batches` fixed draws of `<task>.batch` examples of the task's `split` (apart from each other
    when it has enough), the same at every measurement of a run."""
    examples = data.examples[task][split]
    count = min(len(examples), data.tasks[task].config.batch)
    rng = np.random.default_rng([seed, SEED_OFFSET, *task.encode()])
    order = rng.permutation(len(examples))
    held = []
    for number in range(batches):
        if data.tasks[task].in_batch:  # its candidates are its batch: a contiguous run
            start = int(rng.integers(0, len(examples) - count + 1))
            rows = np.arange(start, start + count)
        else:
            rows = np.sort(np.roll(order, -number * count)[:count])
        held.append(examples.subset(rows))
    return held


class Affinity:
    def __init__(
        self,
        data: TrainingData,
        setup: Setup,
        tasks: list[str],
        seed: int,
        device: torch.device,
        batches: int = 3,
        max_grad_norm: float | None = None,
        scored_on: str = "train",
        targets: list[str] | None = None,
        estimators: Sequence[str] = (),
        steps_ahead: int = 3,
        precision: str = "float64",
    ):
        """`scored_on="dev"`: the losses before and after a lookahead are measured on held batches
        of each task's dev split, not on the batch the lookahead stepped on (the online mixing's
        evidence: a step that only memorizes its batch, as on shuffled labels, earns nothing);
        `targets`: the watching tasks that are columns (None: every one of the run); `estimators`:
        of AFFINITY_ESTIMATORS, measured toward the targets too; `steps_ahead`: lookahead_k's k;
        `precision`: the lookahead's step and the losses around it, float64 or float32."""
        self.precision = precision
        self.dtype = torch.float64 if precision == "float64" else torch.float32
        self.data, self.tasks, self.device, self.max_grad_norm = data, list(tasks), device, max_grad_norm
        self.optimizers = setup.optimizers
        self.networks = {task: TaskNetwork(setup.model, task) for task in self.tasks}
        self.shared = {
            f"encoder.{name}": p for name, p in setup.model.encoder.named_parameters() if p.requires_grad
        }
        self.held = {task: held_draws(data, task, seed, batches) for task in self.tasks}
        self.scored = dict(self.held)
        if scored_on == "dev":
            self.scored = {task: held_draws(data, task, seed, batches, "dev") for task in self.tasks}
        # the watching tasks: columns of their own, on their dev split
        watching = [name for name, task in data.tasks.items() if not task.config.train]
        self.targets = watching if targets is None else [t for t in watching if t in targets]
        self.held |= {target: held_draws(data, target, seed, batches, "dev") for target in self.targets}
        self.scored |= {target: self.held[target] for target in self.targets}
        self.probed = [t for t in self.targets if data.tasks[t].untrained == "probe"]
        # a probed target's network is made at each measurement, around the probe fitted then
        self.networks |= {t: TaskNetwork(setup.model, t) for t in self.targets if t not in self.probed}
        self.model, self.seed, self.probe_batch = setup.model, seed, 256
        self.estimators = [name for name in AFFINITY_ESTIMATORS if name in estimators] if self.targets else []
        self.steps_ahead = steps_ahead
        # the targets whose outcome is a correlation of scores (sts): scale_free takes their r
        self.correlated = [t for t in self.targets if data.tasks[t].corpus_metric and t not in self.probed]

    def measure(self, numbers: Sequence[int] | None = None) -> Measurement:
        """On the held batches `numbers` (None: all of them), each batch's values the same
        whichever others are measured with it."""
        numbers = range(len(self.held[self.tasks[0]])) if numbers is None else numbers
        devices = [self.device] if self.device.type == "cuda" else []
        self.seconds = dict.fromkeys(self.estimators, 0.0)
        with torch.random.fork_rng(devices=devices), local_batches():
            # each classification target's probe, fitted on the encoder as it is now
            for target in self.probed:
                self.networks[target] = ProbedNetwork(self.model, target, *self._fit_probe(target))
            # the lookahead's gradient on the weights as they train (no copy)
            trained = {task: _as_trained(self.networks[task]) for task in [*self.tasks, *self.targets]}
            weights = self._copies(self.dtype)
            precise: dict[str, dict[str, torch.Tensor]] = {}
            measured, precisions = [], []
            for number in numbers:
                values, precision = self._on_batch(number, weights, trained), self.precision
                if self.dtype != torch.float64 and _too_fine(values[0], values[1], values[3]):
                    # a step too small for float32 to resolve its losses' change: this batch in float64
                    precise = precise or self._copies(torch.float64)
                    values, precision = self._on_batch(number, precise, trained), "float64"
                measured.append(values)
                precisions.append(precision)
        return Measurement(
            np.stack([among for among, *_ in measured]),
            np.stack([toward for _, toward, *_ in measured]) if self.targets else None,
            np.stack([base for _, _, base, _, _ in measured]),
            np.stack([lrs for _, _, _, lrs, _ in measured]),
            {name: np.stack([extra[name] for *_, extra in measured]) for name in self.estimators},
            dict(self.seconds),
            precisions,
        )

    def _copies(self, dtype: torch.dtype) -> dict[str, dict[str, torch.Tensor]]:
        """Copies in `dtype` of each task's network, made once per measurement for every held batch;
        the shared encoder's copied once for them all (47-62M parameters at paper size)."""
        encoder = {f"encoder.{name}": t for name, t in _copied(self.model.encoder, dtype).items()}
        return {task: _copied(self.networks[task], dtype, encoder) for task in [*self.tasks, *self.targets]}

    def _on_batch(
        self,
        number: int,
        weights: dict[str, dict[str, torch.Tensor]],
        trained: dict[str, dict[str, torch.Tensor]],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """On held batch `number`: (T, T) among the training tasks, (T, K) toward the targets, the
        losses before the lookaheads (T + K), each lookahead's lr (T), and each other estimator's
        (T, K) toward the targets."""
        helped = [*self.tasks, *self.targets]
        result, lrs = np.zeros((len(self.tasks), len(helped))), np.zeros(len(self.tasks))
        extra = {name: np.zeros((len(self.tasks), len(self.targets))) for name in self.estimators}
        dtype = next(iter(weights[self.tasks[0]].values())).dtype  # the measurement's precision
        toward_gradients = (
            self._target_gradients(number, trained, dtype) if "alignment" in self.estimators else {}
        )
        # each loss before the lookaheads; a stepped task's is its gradient's own forward where that
        # is the same computation (float32 on its held batch), one forward of the batch saved
        reused = [task for task in self.tasks if self._same_forward(task, trained[task], dtype)]
        before = {
            task: self._forward(task, number, weights[task], on=self.scored)
            for task in helped
            if task not in reused
        }
        after = np.zeros((len(self.tasks), len(helped)))
        for i, source in enumerate(self.tasks):
            stepped, lrs[i], gradients, loss = self._lookahead(
                source, number, weights[source], trained[source], dtype
            )
            if source in reused:
                before[source] = (None, loss)
            for j, target in enumerate(helped):
                outputs, lowered = self._forward(
                    target, number, {**weights[target], **stepped}, on=self.scored
                )
                after[i, j] = lowered.item()
                if "scale_free" in self.estimators and j >= len(self.tasks):
                    started = time.process_time()
                    extra["scale_free"][i, j - len(self.tasks)] = self._scale_free(
                        target,
                        number,
                        before[target][0],
                        outputs,
                        before[target][1].item(),
                        after[i, j],
                        lrs[i],
                    )
                    self.seconds["scale_free"] += time.process_time() - started
            if "lookahead_k" in self.estimators:
                started = time.process_time()
                base = {target: before[target][1].item() for target in self.targets}
                extra["lookahead_k"][i] = self._lookahead_k(source, number, weights, gradients, base)
                self.seconds["lookahead_k"] += time.process_time() - started
            if "alignment" in self.estimators:
                started = time.process_time()
                extra["alignment"][i] = [_cosine(gradients, toward_gradients[t]) for t in self.targets]
                self.seconds["alignment"] += time.process_time() - started
        losses = np.array([before[task][1].item() for task in helped])
        for i, j in np.ndindex(*result.shape):
            result[i, j] = _relative_drop(losses[j], after[i, j], lrs[i])
        return result[:, : len(self.tasks)], result[:, len(self.tasks) :], losses, lrs, extra

    def _same_forward(self, task: str, trained: dict[str, torch.Tensor], dtype: torch.dtype) -> bool:
        """Whether `task`'s gradient forward computes its loss before the lookahead: it scores the
        batch it steps on, and trains its weights in the measurement's precision."""
        return self.scored[task] is self.held[task] and all(t.dtype == dtype for t in trained.values())

    def _scale_free(
        self,
        target: str,
        number: int,
        outputs_before: Any,
        outputs_after: Any,
        base: float,
        after: float,
        lr: float,
    ) -> float:
        """scale_free's value: the change of a score target's r on its held batch per unit lr; a
        probed target's relative loss drop (its refitted probe already absorbs the scale)."""
        if target not in self.correlated or not lr:
            return _relative_drop(base, after, lr)
        labels = self.scored[target][number].labels
        return (_pearson(outputs_after, labels) - _pearson(outputs_before, labels)) / lr

    def _trained(self, task: str) -> dict[str, torch.Tensor]:
        """`task`'s network's weights as it trains them (no copy)."""
        return _as_trained(self.networks[task])

    def _target_gradients(
        self, number: int, trained: dict[str, dict[str, torch.Tensor]], dtype: torch.dtype
    ) -> dict[str, dict[str, torch.Tensor]]:
        """Each target's gradient of its loss on its held batch `number` on the shared encoder."""
        started = time.process_time()
        found = {
            target: self._gradient(target, number, trained[target], dtype, on=self.scored)[0]
            for target in self.targets
        }
        self.seconds["alignment"] += time.process_time() - started
        return found

    def _gradient(
        self,
        task: str,
        number: int,
        trained: dict[str, torch.Tensor],
        dtype: torch.dtype,
        on: dict[str, list] | None = None,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """`task`'s gradient (in `dtype`, the measurement's precision) on the shared parameters, its
        network as it trains, and the loss it is the gradient of."""
        names = [name for name in self.shared if name in trained]
        leaves = {name: trained[name].detach().requires_grad_() for name in names}
        _, loss = self._forward(task, number, {**trained, **leaves}, grad=True, on=on)
        found = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True)
        return {n: g.to(dtype) for n, g in zip(names, found, strict=True) if g is not None}, loss.detach()

    def _lookahead_k(
        self,
        source: str,
        number: int,
        weights: dict[str, dict[str, torch.Tensor]],
        first: dict[str, torch.Tensor],
        base: dict[str, float],
    ) -> list[float]:
        """lookahead_k's row: each target's relative loss drop per unit lr per step after `source`'s
        optimizer takes `steps_ahead` steps, the first with the lookahead's gradient `first`, the
        others on the next held batches at the stepped weights (float64), its state carried."""
        batches = len(self.held[source])
        shadow, copies, lr = shadow_optimizer(self.optimizers[source], self.shared, weights[source], first)
        if shadow is None:
            return [0.0] * len(self.targets)
        for step in range(self.steps_ahead):
            if step:
                leaves = {n: c.detach().requires_grad_() for n, c in copies.items()}
                _, loss = self._forward(
                    source, (number + step) % batches, {**weights[source], **leaves}, grad=True
                )
                found = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
                gradients = {n: g for n, g in zip(leaves, found, strict=True) if g is not None}
            else:
                gradients = first
            clipped = self._clipped(gradients)
            for name, copy in copies.items():
                copy.grad = clipped.get(name)  # None: skipped, as training skips a parameter without one
            shadow.step()
        stepped = {name: copy.detach() for name, copy in copies.items()}
        return [
            _relative_drop(
                base[t], self._forward(t, number, {**weights[t], **stepped}, on=self.scored)[1].item(),
                lr * self.steps_ahead,
            )
            for t in self.targets
        ]  # fmt: skip

    def _clipped(self, gradients: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if not self.max_grad_norm or not gradients:  # the training step clips before it steps
            return gradients
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g) for g in gradients.values()])
        )
        factor = min(1.0, self.max_grad_norm / (float(norm) + 1e-6))
        return {n: g * factor for n, g in gradients.items()}

    def _fit_probe(self, target: str) -> tuple[torch.Tensor, torch.Tensor]:
        """A multinomial logistic regression on the frozen features of `target`'s probe draw of
        training examples (the evaluation probe's draw), fitted in float64 by L-BFGS with
        scikit-learn's default penalty (C=1: mean loss + ||W||^2 / 2N)."""
        task, train = self.data.tasks[target], self.data.examples[target]["train"]
        count = min(len(train), task.config.probe_train)
        rows = np.sort(np.random.default_rng([self.seed, PROBE_SEED_OFFSET]).permutation(len(train))[:count])
        head = self.model.heads[target]
        features = torch.from_numpy(
            probe_features(
                self.model, head, train.subset(rows), self.data.table, self.probe_batch, self.device
            )
        ).to(self.device, torch.float64)
        labels = torch.from_numpy(train.labels[rows]).to(self.device).long()
        scale = features.std(dim=0).clamp_min(1e-12)  # L-BFGS converges on standardized inputs
        # Two classes: one logit against a fixed 0, as scikit-learn's binary fit (a weight row per
        # class would halve the penalty on their difference); more: one row per class, multinomial.
        classes = head.recipe.outputs
        free = 1 if classes == 2 else classes
        weight = torch.zeros(
            free, features.shape[1], dtype=torch.float64, device=self.device, requires_grad=True
        )
        bias = torch.zeros(free, dtype=torch.float64, device=self.device, requires_grad=True)
        solver = torch.optim.LBFGS(
            [weight, bias], lr=1, max_iter=500, tolerance_grad=1e-10, tolerance_change=1e-14,
            line_search_fn="strong_wolfe",
        )  # fmt: skip

        def logits_of(inputs: torch.Tensor) -> torch.Tensor:
            logits = inputs @ weight.T + bias
            return torch.cat([torch.zeros_like(logits), logits], dim=1) if free == 1 else logits

        def objective() -> torch.Tensor:
            solver.zero_grad()
            loss = torch.nn.functional.cross_entropy(logits_of(features / scale), labels)
            loss = loss + (weight / scale).square().sum() / (2 * len(labels))  # the intercept unpenalized
            loss.backward()
            return loss

        with torch.enable_grad():
            solver.step(objective)
        weight, bias = (weight / scale).detach(), bias.detach()
        if free == 1:
            weight, bias = (
                torch.cat([torch.zeros_like(weight), weight]),
                torch.cat([torch.zeros_like(bias), bias]),
            )
        return weight, bias

    def _lookahead(
        self,
        task: str,
        number: int,
        weights: dict[str, torch.Tensor],
        trained: dict[str, torch.Tensor],
        dtype: torch.dtype,
    ) -> tuple[dict[str, torch.Tensor], float, dict[str, torch.Tensor], torch.Tensor]:
        """The shared parameters (`weights`, the measurement's copies) after the step `task`'s
        optimizer would take on its held batch `number`, that step's lr on the shared encoder, the
        gradient (before clipping) and the loss it is the gradient of. The gradient is taken on the
        network as it trains (`trained`: its own weights), as the training step takes it, in `dtype`."""
        gradients, loss = self._gradient(task, number, trained, dtype)
        stepped, lr = optimizer_step(self.optimizers[task], self.shared, weights, self._clipped(gradients))
        return stepped, lr, gradients, loss

    def _forward(
        self,
        task: str,
        number: int,
        weights: dict[str, torch.Tensor],
        grad: bool = False,
        on: dict[str, list] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`task`'s outputs and mean loss (float64) on its held batch `number` (of `on`: the batches
        scored, or by default those stepped on), the network run with `weights`."""
        examples, definition = (on or self.held)[task][number], self.data.tasks[task]
        sentences = self.data.table.batch_columns(examples.sentences, self.device)
        labels = torch.from_numpy(examples.labels).to(self.device)
        # a task's same dropout masks before and after the lookahead
        seed_step(SEED_OFFSET + 1_000 * number + [*self.tasks, *self.targets].index(task), self.device)
        with torch.set_grad_enabled(grad):
            # `weights` names a tied tensor once (named_parameters drops its other names), and one
            # swap of the module that holds it reaches every name: torch's tie_weights would swap it
            # once per name and restore the last, leaving the run's model holding the float64 copy
            # (a qt head's output encoder shares the encoder's frozen vectors: the next step crashed)
            outputs = functional_call(self.networks[task], weights, (sentences,), tie_weights=False)
            return outputs, definition.losses(outputs, labels).double().mean()


COARSEST_DROP = 1e-3  # float32 keeps a batch whose largest loss change is at least this share


def _too_fine(among: np.ndarray, toward: np.ndarray, lrs: np.ndarray) -> bool:
    """Whether a held batch's lookaheads changed every loss by less than COARSEST_DROP of itself:
    float32 resolves a loss to about 1e-7 of it, so at a step that small its rounding is over 1e-4
    of the largest value (a tiny model at SGD's lr 1e-5 changes its losses by 1e-8: noise). Such a
    batch is measured again in float64."""
    changes = np.abs(np.concatenate([among, toward], axis=1)) * lrs[:, None]
    return bool(changes.max(initial=0.0) < COARSEST_DROP)


def _relative_drop(before: float, after: float, lr: float) -> float:
    """(1 - L_after / L_before) / lr: the share of the loss a step removed, per unit lr."""
    return (1.0 - after / before) / lr if before and lr else 0.0


def _pearson(outputs: Any, labels: np.ndarray) -> float:
    """Pearson's r (float64) of a score head's outputs on a batch with its gold scores."""
    scores = (outputs.full if isinstance(outputs, AtWidths) else outputs).detach().double().cpu().numpy()
    if np.ptp(scores) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float(np.corrcoef(scores, labels.astype(np.float64))[0, 1])


def _cosine(first: dict[str, torch.Tensor], second: dict[str, torch.Tensor]) -> float:
    """The cosine of two gradients over the parameters both have."""
    names = [name for name in first if name in second]
    if not names:
        return 0.0
    dot = sum(float((first[n] * second[n]).sum()) for n in names)
    norms = [
        float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g[n]) for n in names])))
        for g in (first, second)
    ]
    return dot / (norms[0] * norms[1]) if norms[0] and norms[1] else 0.0


class ProbedNetwork(torch.nn.Module):
    """A classification target's path for the lookahead: the shared encoder, its head's features
    ([u; v; |u - v|; u * v] for a pair) and a fitted linear probe in place of its untrained MLP."""

    def __init__(self, model: MultitaskModel, task: str, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.encoder, self.head = model.encoder, model.heads[task]
        self.register_buffer("probe_weight", weight)
        self.register_buffer("probe_bias", bias)

    def forward(self, sentences: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        features = self.head.recipe.features(*self.head.embeddings(self.encoder, sentences))
        return features.to(self.probe_weight.dtype) @ self.probe_weight.T + self.probe_bias


def _copied(
    network: torch.nn.Module, dtype: torch.dtype, copied: dict[str, torch.Tensor] | None = None
) -> dict[str, torch.Tensor]:
    """The network's floating-point parameters and buffers as copies in `dtype`; those in `copied`
    (by name) taken from it, not copied again."""
    copied = copied or {}
    return {
        name: copied[name] if name in copied else t.to(dtype, copy=True)
        for name, t in _as_trained(network).items()
    }


def _as_trained(network: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The network's floating-point parameters and buffers as it trains them, detached (no copy)."""
    named = itertools.chain(network.named_parameters(), network.named_buffers())
    return {name: t.detach() for name, t in named if t.is_floating_point()}


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    shared: dict[str, torch.nn.Parameter],
    weights: dict[str, torch.Tensor],
    gradients: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], float]:
    """What `optimizer`'s own update rule, with its state and hyperparameters, would make of the
    shared parameters (float64 `weights`) given `gradients`: run on float64 copies by an optimizer
    of its class, so any torch optimizer (or a plugin's) steps as in training. Also the lr of the
    group that holds the shared parameters."""
    shadow, copies, lr = shadow_optimizer(optimizer, shared, weights, gradients)
    if shadow is None:
        return {}, 0.0
    for name, copy in copies.items():
        copy.grad = gradients[name]
    shadow.step()
    return {name: copy.detach() for name, copy in copies.items()}, lr


def shadow_optimizer(
    optimizer: torch.optim.Optimizer,
    shared: dict[str, torch.nn.Parameter],
    weights: dict[str, torch.Tensor],
    names: Sequence[str],
) -> tuple[torch.optim.Optimizer | None, dict[str, torch.Tensor], float]:
    """An optimizer of `optimizer`'s class, hyperparameters and state over float64 copies of the
    shared parameters `names` (from `weights`), those copies, and the lr of their group; it steps
    them as `optimizer` would step the parameters, without touching them."""
    copies = {name: weights[name].clone() for name in names}
    of_parameter = {id(shared[name]): name for name in names}
    groups, lr = [], 0.0
    for group in optimizer.param_groups:
        mine = [of_parameter[id(p)] for p in group["params"] if id(p) in of_parameter]
        if not mine:
            continue
        lr = lr or float(group["lr"])
        settings = {k: v for k, v in group.items() if k != "params"}
        settings.update({k: False for k in ("fused", "foreach", "capturable") if k in settings})
        groups.append({**settings, "params": [copies[name] for name in mine]})
    if not groups:
        return None, {}, 0.0
    shadow = type(optimizer)(groups)
    for name, copy in copies.items():
        state = optimizer.state.get(shared[name], {})
        shadow.state[copy] = {
            k: (
                v.detach().to(copy.dtype if v.is_floating_point() and v.dim() else v.dtype, copy=True)
                if torch.is_tensor(v)
                else v
            )
            for k, v in state.items()
        }
    return shadow, copies, lr


class AffinityLog:
    """affinity.jsonl: a line per measurement, appended; a resumed run first drops the lines
    after its checkpoint (they are measured again)."""

    def __init__(self, path: Path):
        self.path = path

    def cut_to(self, step: int) -> None:
        if not self.path.is_file():
            return
        kept = [row for row in read_affinity(self.path) if row["step"] <= step]
        atomic.write_text(self.path, "".join(log_line(row) for row in kept))

    def append(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(log_line(row))
            out.flush()


def held_each(config: TrainConfig) -> int:
    """The held batches a run's measurement takes (`affinity_each=`, 2 unless told; none: all)."""
    keys = config.run
    return min(keys.affinity_each or keys.affinity_batches, keys.affinity_batches)


def held_in_turn(measurement: int, each: int, batches: int) -> list[int]:
    """The held batches measurement number `measurement` (1, 2, ...) takes: `each` of the `batches`,
    next in turn, so that over a run each is measured about as often as the others, and a resumed
    run measures at a step what the straight run measured there. Where `each` (2 or more) divides `batches`,
    every cycle through them starts one further on, so that batches are measured with different
    others (a connected design: the floor tells their offsets from the run's times by comparing
    batches within a measurement, mtl/analysis/held_batches.py)."""
    if each >= batches:
        return list(range(batches))
    taken = (measurement - 1) * each  # held batches the measurements before this one took
    first = taken + (taken // batches if each > 1 and batches % each == 0 else 0)
    return [(first + offset) % batches for offset in range(each)]


class AffinityMeasurements(Callback):
    """affinity_every=N: every pair's lookahead affinity after every N-th step, into
    affinity.jsonl and the run log. Every rank measures (each holds its share of a sharded model)."""

    every_rank = True

    def __init__(
        self, config: TrainConfig, data: TrainingData, setup: Setup, device: torch.device, path: Path
    ):
        self.every, self.tasks, keys = config.run.affinity_every, setup.scheduler.tasks, config.run
        self.affinity = Affinity(
            data, setup, self.tasks, keys.seed, device, keys.affinity_batches, config.optim.max_grad_norm,
            estimators=comma_list(keys.affinity_estimators), steps_ahead=keys.affinity_k,
            precision=keys.affinity_precision,
        )  # fmt: skip
        self.batches, self.each = keys.affinity_batches, held_each(config)
        self.log = AffinityLog(path)

    def on_train_begin(self, run: TrainingRun) -> None:
        if run.resumed and run.dist.is_main:
            self.log.cut_to(run.state.global_step)

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        step = run.state.global_step
        if step % self.every:
            return
        started = time.process_time()
        numbers = held_in_turn(step // self.every, self.each, self.batches)
        measured = self.affinity.measure(numbers)
        seconds = time.process_time() - started
        if not run.dist.is_main:
            return
        matrix, tasks, targets = measured.mean, self.tasks, self.affinity.targets
        row = {
            "step": step,
            "block": run.state.block.index,
            "task": task,
            "tasks": tasks,
            "matrix": matrix.tolist(),
            "stderr": measured.stderr.tolist(),  # over the held batches: this measurement's spread
            "batches": len(measured.per_batch),
            "held": numbers,  # which of the affinity_batches= held batches per_batch holds, in order
            "unit": "per_lr",  # (1 - L_after / L_before) / lr
            # float32, float64, or mixed: the batches float32 could not resolve measured in float64
            "precision": measured.precisions[0] if len(set(measured.precisions)) == 1 else "mixed",
            "per_batch": measured.per_batch.tolist(),  # the floor's units (multitask.summarize)
            "seconds": seconds,  # the measurement's CPU seconds (this process, every thread)
        }
        if measured.toward is not None:  # the watching tasks, rows the training tasks again
            toward = measured.toward.mean(axis=0)
            row |= {
                "targets": targets,
                "toward": toward.tolist(),
                "toward_per_batch": measured.toward.tolist(),
            }
            if measured.estimates:  # affinity_estimators=: each per held batch, and its cost
                row["estimators"] = {name: values.tolist() for name, values in measured.estimates.items()}
                row["estimator_seconds"] = measured.seconds
        if not all(np.isfinite(measured.per_batch).ravel()) or any(
            not np.isfinite(values).all()
            for values in [measured.toward, *measured.estimates.values()]
            if values is not None
        ):
            # a diverging loss: no measurement to keep (affinity.jsonl holds finite values only)
            say(f"step {step}: the affinity measurement is not finite (a loss diverged?): not written")
            return
        self.log.append(row)
        values = {f"affinity/{a}>{b}": matrix[i, j] for i, a in enumerate(tasks) for j, b in enumerate(tasks)}
        if measured.toward is not None:
            values |= {
                f"affinity/{a}>{b}": toward[i, k] for i, a in enumerate(tasks) for k, b in enumerate(targets)
            }
        run.log("affinity", values)
