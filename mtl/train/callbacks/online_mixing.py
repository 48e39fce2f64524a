"""Online mixing: the shares of `schedule=aioli|doremi|transfer` move during training, from evidence
measured on the model as it trains, every `mix_every=` steps.

- **aioli** (Chen et al. 2025, "Aioli: A Unified Optimization Framework for Language Model Data
  Mixing"; HazyResearch/aioli, trainer/aioli_trainer.py): a linear mixing law, A[i, j] = how much
  training on task j lowers task i's loss, fitted online and turned into shares by exponentiated
  gradient: A shifted to a minimum of 0 when it has a negative entry and divided by its sum (the
  authors' `aioli_normalize_A`, "always set"), then log w_j += eta * sum_i A[i, j]. Aioli fits A by
  training a few steps on each task in turn (LearnParams); mtl has that evidence without spending
  training steps: the lookahead affinity (mtl/train/callbacks/affinity.py) steps a copy
  with each task's own optimizer and measures every task's loss before and after, here on held
  batches of each task's dev split, so a step that only memorizes its own batch earns nothing. A is the
  losses' drop in their own units, as the authors' `previous_loss - new_loss` (not the affinity's
  relative change per lr, which would weigh a task by how low its loss already is). eta=0.2, the
  authors' example (their README: try 0.1, 0.2, 0.5). A's rows are every training task's dev
  loss, Aioli's objective (the average loss over all groups); `mix_target=` keeps the rows of the
  tasks named, for a user who judges a doubtful task by what it does to the others: a task's own
  dev loss credits it when nothing else lowers it (a planted noise task's head, pulled back to its
  label marginal by its own steps after every other task's step moved the encoder: RESULTS.md,
  2026-11-30).
- **doremi** (Xie et al. 2023, "DoReMi: Optimizing Data Mixtures Speeds Up Language Model
  Pretraining"; sangmichaelxie/doremi, doremi/trainer.py `update_domain_weights`): each task's
  excess loss over a reference run (`mix_reference=`, its best checkpoint; `{seed}` in it is the
  run's seed, so each seed of a study has its own reference and the seeds share one config), per
  example clipped at 0 and averaged, on held dev batches; log w += eta * excess, normalized, then
  mixed with equal shares by `mix_smoothing=` (c = 1e-3, the paper's), eta=1 as the authors'. DoReMi reweights a
  proxy's loss and trains the final model on the averaged weights; here, as Aioli's online
  DoReMi does, the shares in force sample each step's task.
- **transfer**: Aioli's rule with the watched tasks' losses as the rows of A: A[k, j] = how much
  task j's lookahead step lowers watching task k's dev loss (`<task>.train=false`: a transfer
  task's copy such as experiments/tasks/stsb.toml; `mix_target=` names which), so the mixture
  moves toward what helps the transfer the user watches.

Every update (step, shares, evidence) goes to the run's log (metrics.jsonl, W&B) as a `mixing`
record; the shares in force are the scheduler's checkpointed state, so a resumed run draws the same
tasks as one never stopped. The measurements run inside a forked random state and touch no
weight, gradient, optimizer or stream: the run trains as it would between updates.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from mtl.config import comma_list
from mtl.errors import UserError
from mtl.formats import checkpoint
from mtl.runs import RunFolder
from mtl.runtime.distributed import local_batches
from mtl.train.callbacks.affinity import Affinity, held_draws
from mtl.train.callbacks.base import Callback
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.run.setup import Setup, TaskNetwork, build_model
from mtl.train.run.training_run import TrainingRun

# The authors' step sizes: Aioli's README example (0.1-0.5 recommended), DoReMi's reweight_eta.
DEFAULT_ETA = {"aioli": 0.2, "doremi": 1.0, "transfer": 0.2}
EVENT = "mixing"  # the run log's name for an update's record


def normalized(matrix: np.ndarray, how: str = "shift") -> np.ndarray:
    """`shift`: Aioli's `aioli_normalize_A`, shifted so its smallest entry is 0 when one is
    negative, then divided by its sum; `abs`: divided by the sum of its absolute values, signs
    kept. Left as it is when that sum is 0 (no evidence either way)."""
    matrix = np.array(matrix, dtype=np.float64)
    if how == "shift" and matrix.min() < 0:
        matrix -= matrix.min()
    total = matrix.sum() if how == "shift" else np.abs(matrix).sum()
    return matrix / total if total > 0 else matrix


def aioli_update(
    log_weights: np.ndarray, mixing_law: np.ndarray, eta: float, how: str = "shift"
) -> tuple[np.ndarray, np.ndarray]:
    """Aioli's exponentiated-gradient step: `mixing_law` A (rows: the losses, columns: the task
    trained) normalized, log w_j += eta * sum_i A[i, j]. Returns (shares, log-weights)."""
    step = eta * normalized(mixing_law, how).sum(axis=0)
    log_weights = np.asarray(log_weights, dtype=np.float64) + step
    return _softmax(log_weights), log_weights


def doremi_update(
    shares: np.ndarray, excess: np.ndarray, eta: float, smoothing: float
) -> tuple[np.ndarray, np.ndarray]:
    """DoReMi's step (`update_domain_weights`): log w += eta * excess (already clipped at 0),
    softmax, then (1 - c) w + c / k. Returns (shares, their logs: the next update starts from them)."""
    logits = np.log(np.asarray(shares, dtype=np.float64)) + eta * np.asarray(excess, dtype=np.float64)
    mixed = (1 - smoothing) * _softmax(logits) + smoothing / len(logits)
    return mixed, np.log(mixed)


def _softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


class OnlineMixing(Callback):
    """schedule=aioli|doremi|transfer: the shares' update after every `mix_every`-th step. Every
    rank measures (the lookahead's copies are each process's own); rank 0's shares are sent to all,
    so every rank draws the same tasks."""

    every_rank = True

    def __init__(self, config: TrainConfig, data: TrainingData, setup: Setup, device: torch.device):
        own = config.schedule.schedule_options  # OnlineOptions, and each schedule's own
        self.kind, self.every, self.scheduler = config.schedule.schedule, own.mix_every, setup.scheduler
        self.eta = own.mix_eta if own.mix_eta is not None else DEFAULT_ETA[self.kind]
        self.options = own
        self.tasks = list(setup.scheduler.tasks)
        seed, batches = config.run.seed, own.mix_batches
        self.affinity: Affinity | None = None
        if self.kind in ("aioli", "transfer"):
            self.affinity = Affinity(
                data, setup, self.tasks, seed, device, batches, config.optim.max_grad_norm,
                scored_on="dev", targets=watched(config, data) if self.kind == "transfer" else [],
                precision=config.run.affinity_precision,
            )  # fmt: skip
            # the law's rows: the losses the mixture lowers
            self.rows = self.affinity.targets if self.kind == "transfer" else judged(config, self.tasks)
        if self.kind == "doremi":
            self.data, self.device, self.model = data, device, setup.model
            self.held = {task: held_draws(data, task, seed, batches, "dev") for task in self.tasks}
            folder = own.mix_reference.replace("{seed}", str(config.run.seed))
            self.reference = reference_model(config, data, device, folder)

    def on_train_begin(self, run: TrainingRun) -> None:
        if not run.resumed and run.state.global_step == 0:
            run.log(EVENT, self._record(np.full(len(self.tasks), np.nan)))

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        if run.state.global_step % self.every:
            return
        clock = time.perf_counter()
        evidence, shares, log_weights, law = self.update()
        self.scheduler.evidence_seconds += time.perf_counter() - clock
        shares, log_weights = run.dist.broadcast((shares, log_weights))
        self.scheduler.move_to(shares, log_weights)
        run.log(EVENT, self._record(evidence, law))

    def update(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(each task's evidence, the new shares, their log-weights, the mixing law behind them:
        None for doremi) from the model as it is now."""
        assert self.scheduler.live is not None and self.scheduler.log_weights is not None
        if self.affinity is not None:
            # mtl's rows are the stepped task; Aioli's A has a row per loss, a column per task trained
            lowered = self.affinity.measure().lowered.T
            helped = [*self.tasks, *self.affinity.targets]
            law = lowered[[helped.index(task) for task in self.rows]]
            shares, log_weights = aioli_update(
                self.scheduler.log_weights, law, self.eta, self.options.mix_normalize
            )
            return normalized(law, self.options.mix_normalize).sum(axis=0), shares, log_weights, law
        excess = self.excess_losses()
        return (
            excess,
            *doremi_update(self.scheduler.live, excess, self.eta, self.options.mix_smoothing),
            None,
        )

    def excess_losses(self) -> np.ndarray:
        """Each task's mean over its held dev examples of max(loss - the reference's loss, 0), both
        models in evaluation mode (no dropout)."""
        excess = []
        training = self.model.training
        devices = [self.device] if self.device.type == "cuda" else []
        try:
            self.model.eval()
            with torch.random.fork_rng(devices=devices), torch.no_grad(), local_batches():
                for task in self.tasks:
                    differences = [
                        self._losses(self.model, task, examples)
                        - self._losses(self.reference, task, examples)
                        for examples in self.held[task]
                    ]
                    excess.append(float(torch.cat(differences).clamp_min(0).mean()))
        finally:
            self.model.train(training)
        return np.array(excess)

    def _losses(self, model: torch.nn.Module, task: str, examples: Any) -> torch.Tensor:
        sentences = self.data.table.batch_columns(examples.sentences, self.device)
        labels = torch.from_numpy(examples.labels).to(self.device)
        outputs = TaskNetwork(model, task)(sentences)
        return self.data.tasks[task].losses(outputs, labels).double()

    def _record(self, evidence: np.ndarray, law: np.ndarray | None = None) -> dict[str, float | None]:
        assert self.scheduler.live is not None
        values: dict[str, float | None] = {
            f"mixing/share/{t}": float(p) for t, p in zip(self.tasks, self.scheduler.live, strict=True)
        }
        values |= {
            f"mixing/evidence/{t}": float(e) if np.isfinite(e) else None
            for t, e in zip(self.tasks, evidence, strict=True)
        }
        if law is not None:  # how much training on j lowered i's loss
            values |= {
                f"mixing/law/{j}>{i}": float(law[a, b])
                for a, i in enumerate(self.rows)
                for b, j in enumerate(self.tasks)
            }
        return values

    def on_train_end(self, run: TrainingRun) -> dict[str, Any]:
        assert self.scheduler.live is not None
        return {
            "mixing_shares": {t: float(p) for t, p in zip(self.tasks, self.scheduler.live, strict=True)},
            "mixing_seconds": self.scheduler.evidence_seconds,  # the updates' measurements, besides train_seconds
        }


def judged(config: TrainConfig, tasks: list[str]) -> list[str]:
    """The training tasks whose dev losses are schedule=aioli's rows: mix_target='s (in the run's
    order), or every one."""
    target = config.schedule.schedule_options.mix_target
    named = comma_list(target)
    if unknown := [t for t in named if t not in tasks]:
        raise UserError(
            f"mix_target={target}: {unknown[0]} is not a training task of this run "
            f"({', '.join(tasks)}): name the tasks whose dev losses the mixture should lower"
        )
    return [t for t in tasks if t in named] or list(tasks)


def watched(config: TrainConfig, data: TrainingData) -> list[str]:
    """The watching tasks schedule=transfer steers toward: mix_target='s, or every one of the run."""
    watching = [name for name, task in data.tasks.items() if not task.config.train]
    target = config.schedule.schedule_options.mix_target
    named = comma_list(target)
    if unknown := [t for t in named if t not in watching]:
        raise UserError(
            f"mix_target={target}: {unknown[0]} is not a watching task of this run "
            f"({', '.join(watching) or 'it has none'}): name one given with <task>.train=false"
        )
    if not (named or watching):
        raise UserError(
            "schedule=transfer steers toward watched transfer: add a watching task, e.g. "
            "tasks=nli,squad,experiments/tasks/stsb.toml stsb.train=false"
        )
    return named or watching


def reference_model(
    config: TrainConfig, data: TrainingData, device: torch.device, folder: str
) -> torch.nn.Module:
    """schedule=doremi's reference: the best checkpoint of run folder `folder`, in this run's
    architecture, checked to share its vocabulary and tasks. Built inside a forked random state:
    the run's own weights and dropout masks stay what they would be without it."""
    best = RunFolder(folder).best
    if not best.is_file():
        raise UserError(
            f"mix_reference={folder}: no {best} (the reference's best checkpoint): give a run folder "
            "that finished an evaluation, e.g. one trained with schedule=proportional"
        )
    saved = checkpoint.load(best, device)
    words = data.vocabulary.words if data.vocabulary is not None else None
    if saved.get("vocabulary") != words:
        raise UserError(
            f"mix_reference={folder}: its vocabulary differs from this run's: train the reference "
            "on the same tasks, data and vectors"
        )
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        reference = build_model(config, data, device).to(device)
    try:
        reference.load_state_dict(saved["model"])
    except RuntimeError as error:
        first = str(error).splitlines()[1].strip() if len(str(error).splitlines()) > 1 else str(error)
        raise UserError(
            f"mix_reference={folder}: its model does not fit this run's ({first}): train the "
            "reference with the same tasks= and model keys"
        ) from None
    return reference.eval().requires_grad_(False)
