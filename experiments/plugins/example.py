"""An mtl plugin: one of each extension, registered from outside the package.

    MTL_DATA_DIR=../shared/data just train-multitask plugins=experiments/plugins/example.py \
        tasks=nli,hypothesis_only nli.train_split=train_small hypothesis_only.train_split=train_small \
        nli.steps=100 hypothesis_only.steps=50 encoder=bow_projection callbacks=loss_watch max_steps=600
    just transfer plugins=experiments/plugins/example.py run=runs/<run> tasks=MR,SUBJ-1K

- a task kind, `hypothesis_only`: SNLI's label from the hypothesis alone, the probe of the
  annotation artifacts NLI models exploit (Gururangan et al. 2018; Poliak et al. 2018);
- an encoder, `bow_projection`: the mean of the word vectors through a learned linear map and
  tanh, a trained bag of words (the baseline of Conneau et al. 2017, Table 4, with a projection),
  with a key of its own: `bow_activation=relu` (or identity) in place of tanh;
- a balancer, `dwa`: Dynamic Weight Average (Liu, Johns and Davison 2019), each task weighted by
  how slowly its loss falls, with its own key `dwa_temperature=` (the paper's T, 2);
- an optimizer, `nesterov`: SGD with Nesterov momentum 0.9, with InferSent's SGD defaults (lr 0.1,
  clipping at 5, the infersent lr schedule, stop at min_lr);
- a schedule, `main_first`: the first task alone for its own key's `main_first_steps=` steps
  (a warm start on the main task), then every task in turn;
- a transfer task, `SUBJ-1K`: SUBJ's first 500 subjective and 500 objective sentences, a quick
  check of an encoder under 10-fold cross-validation;
- a callback, `loss_watch`: each task's mean training loss per block, written to
  `<run>/loss_watch.jsonl` (what a user's own monitoring would do).

Nothing here is imported by a file that names it: a run trained with it records `plugins:
["example"]`, and resuming it, transferring it or loading its encoder needs `plugins=` again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import torch
from torch import nn

from mtl.registry import (
    NLI,
    AtLeast1,
    Balancer,
    Callback,
    Combined,
    Encoder,
    EncoderConfig,
    EncoderTraits,
    LabelledTexts,
    NLIConfig,
    OptimizerDefaults,
    PositiveFloat,
    Scheduler,
    Split,
    TransferTask,
    length_mask,
    read_task,
    register_balancer,
    register_callback,
    register_encoder,
    register_optimizer,
    register_schedule,
    register_task,
    register_transfer_task,
    single_recipe,
)


@dataclass
class HypothesisOnlyConfig(NLIConfig):
    legacy_keys: ClassVar[dict[str, str]] = {}  # NLI's old keys (steps_nli=) stay NLI's

    kind: str = "hypothesis_only"
    steps: AtLeast1 = 500  # steps per block
    display: str = "SNLI hypothesis only"


@register_task
class HypothesisOnly(NLI):
    kind = "hypothesis_only"
    config_class = HypothesisOnlyConfig
    display = "SNLI hypothesis only"
    fixed_index = None
    recipe = single_recipe(classes=3)

    def load(self, split: str) -> LabelledTexts | None:
        pairs = super().load(split)
        return None if pairs is None else LabelledTexts([pairs.columns[1]], pairs.labels)


@dataclass
class BowProjectionOptions:
    bow_activation: Literal["tanh", "relu", "identity"] = (
        "tanh"  # encoder=bow_projection: after the projection
    )


ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu, "identity": lambda x: x}


class BowProjection(Encoder):
    fixed_pooling = True  # the mean is the architecture: encode(pooling=) cannot change it

    def __init__(self, embedding: nn.Embedding, hidden: int, activation: str = "tanh"):
        super().__init__(embedding)
        self.projection = nn.Linear(embedding.embedding_dim, hidden)
        self.activation = ACTIVATIONS[activation]
        self.output_dim = hidden

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = length_mask(lengths, tokens.shape[1], tokens.device)  # (B, T)
        vectors = self.embedding(tokens) * mask[:, :, None]
        mean = vectors.sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1)
        return self.activation(self.projection(mean))


@register_encoder(
    "bow_projection",
    EncoderTraits(own_pooling="the mean of the word vectors", options=BowProjectionOptions),
)
def build(embedding: nn.Embedding, config: EncoderConfig) -> BowProjection:
    return BowProjection(embedding, config.hidden, config.options.bow_activation)


@dataclass
class DWAOptions:
    dwa_temperature: PositiveFloat = 2.0  # balancer=dwa: softmax temperature T (Liu et al. 2019: 2)


@dataclass
class MainFirstOptions:
    main_first_steps: AtLeast1 = (
        100  # schedule=main_first: steps of the first task alone before the others join
    )


@register_schedule("main_first", options=MainFirstOptions)
def main_first(scheduler: Scheduler, step: int) -> str:
    """The first task alone for main_first_steps= steps, then every task in turn, one step each: a
    pure function of the step, so a resumed run draws the same tasks."""
    alone = scheduler.options.main_first_steps
    return scheduler.tasks[0] if step < alone else scheduler.tasks[(step - alone) % len(scheduler.tasks)]


@register_balancer("dwa", options=DWAOptions)
class DynamicWeightAverage(Balancer):
    """lambda_k = K softmax_k(r_k / T), r_k = L_k(t-1) / L_k(t-2): a task whose loss fell less
    over the last two steps weighs more (the paper's rule over steps rather than epochs; 1 at
    the first two). The last two steps' losses are buffers: a resumed run continues exactly."""

    def __init__(
        self, tasks: list[str], weights: list[float], seed: int = 0, options: DWAOptions | None = None
    ):
        super().__init__(tasks, weights, seed)
        self.temperature = (options or DWAOptions()).dwa_temperature
        self.register_buffer("last_losses", torch.full((2, len(tasks)), float("nan")))

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        history = self.last_losses.to(gradients.device)
        if torch.isnan(history).any():
            lambdas = torch.ones(len(self.tasks), device=gradients.device)
        else:
            rates = history[1] / history[0].clamp_min(1e-12)
            lambdas = len(self.tasks) * torch.softmax(rates / self.temperature, dim=0)
        self.last_losses.copy_(torch.stack([self.last_losses[1], losses.detach().to(self.last_losses)]))
        shared = (lambdas[:, None] * gradients).sum(dim=0)
        return Combined(shared, lambdas, lambdas * self.loss_weights.to(gradients.device))


@register_optimizer(
    "nesterov", OptimizerDefaults(lr=0.1, max_grad_norm=5.0, lr_schedule="infersent", stop="min_lr")
)
def nesterov(groups: list[dict], config) -> torch.optim.Optimizer:
    """`groups`: one per learning rate, each with its "lr" (and "base_lr", which schedules scale)."""
    return torch.optim.SGD(groups, lr=config.lr, momentum=0.9, nesterov=True)


@register_transfer_task("SUBJ-1K", protocol="cv", metrics=("acc",), attention=True, in_all=False)
def read_subj_1k(root: Path) -> TransferTask:
    split = read_task("SUBJ", root).splits["all"]
    chosen = [
        i
        for label in sorted(set(split.labels))
        for i in [i for i, value in enumerate(split.labels) if value == label][:500]
    ]
    return TransferTask(
        "SUBJ-1K",
        "cv",
        {"all": Split([[split.sentences[0][i] for i in chosen]], [split.labels[i] for i in chosen])},
    )


@dataclass
class LossWatchOptions:
    loss_watch_file: str = "loss_watch.jsonl"  # loss_watch's file, in the run folder


@register_callback("loss_watch", options=LossWatchOptions)
class LossWatch(Callback):
    def __init__(self, config, run_dir: Path):
        self.path = Path(run_dir) / Path(config.run.callback_options.loss_watch_file).name
        self.losses: dict[str, list[float]] = {}

    def on_step(self, task: str, record: dict) -> None:
        self.losses.setdefault(task, []).append(record[f"{task}/train/loss"])

    def on_event(self, record: dict) -> None:
        if record.get("phase/event") == "block_end" and self.losses:
            task, losses = next(iter(self.losses.items()))
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(
                    json.dumps(
                        {"step": record["global_step"], "task": task, "loss": sum(losses) / len(losses)}
                    )
                    + "\n"
                )
            self.losses.clear()
