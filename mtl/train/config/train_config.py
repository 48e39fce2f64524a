"""Configuration of a multitask training run: one dataclass per component, one entry per task.

The run's tasks are the table `tasks` (`tasks=nli,squad,./my-task.toml` on the command
line), each with its own keys under its name (`nli.steps=`, `squad.batch=`). The keys of
the two-task config that came before (`steps_nli=`, `batch_squad=`, `max_nli_train=`, ...)
stay valid: each task declares its old keys, and runs recorded with them are read through
`upgrade`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from mtl import metrics
from mtl import tasks as task_kinds
from mtl.config import (
    AtLeast0,
    AtLeast1,
    Name,
    NonNegativeFloat,
    OneOf,
    PositiveFloat,
    Range,
    apply_overrides,
    check_number,
    comma_list,
    from_dict,
    given_value,
    not_key_value,
    options_field,
    read_number,
    settle_options,
    table,
)
from mtl.data.config import DataConfig
from mtl.errors import UserError
from mtl.models.encoders.config import (
    ENCODERS,
    EncoderConfig,
    HFOptions,
    key_owners,
    shardable_encoders,
    traits,
)
from mtl.runs import upgraded
from mtl.tasks import TaskConfig
from mtl.train.callbacks.base import CALLBACKS, ChosenCallbackOptions, callback_key_owners
from mtl.train.data.scheduler import (
    SCHEDULE_OPTIONS,
    SCHEDULES,
    adapts,
    check_schedule,
    draws_from_shares,
    schedule_key_owners,
    trains_every_task,
)
from mtl.train.loop.selection import parse_terms
from mtl.train.optim.balancers import BALANCER_OPTIONS, BALANCERS, balancer_key_owners, combines_a_steps_tasks
from mtl.train.optim.lr_schedules import LR_SCHEDULES, lr_schedule_key_owners
from mtl.train.optim.optimizer_registry import DEFAULTS, OPTIMIZERS, auto_optimizer, optimizer_key_owners
from mtl.transfer_tasks.registry import spec as transfer_spec

# The estimators of affinity toward a watching task besides the one-step lookahead
# (mtl/train/callbacks/affinity.py says what each measures)
AFFINITY_ESTIMATORS = ("scale_free", "lookahead_k", "alignment")


def parse_lr(text: str, lr: float, key: str) -> float | None:
    """A learning rate given as a value (`0.05`) or as a multiple of `lr` (`x0.5`, `0.5x`); None
    when `text` is empty (the default applies)."""
    text = text.strip()
    if not text:
        return None
    multiple = text[1:] if text[:1] in "xX*" else text[:-1] if text[-1:] in "xX" else None
    try:
        value = read_number(key, multiple if multiple is not None else text, float, Range(0, low_open=True))
    except UserError:
        raise UserError(
            f"{key}={text}: give a learning rate (0.05) or a multiple of lr= (x0.5), above 0 and finite"
        ) from None
    return check_number(key, value * lr) if multiple is not None else value


@dataclass
class HeadConfig:
    head_hidden: AtLeast1 = 512  # width of each hidden layer of the task MLPs
    head_layers: AtLeast0 = 2  # hidden layers of each task's MLP
    dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0  # in the task MLPs


@dataclass
class ScheduleConfig:
    schedule: Annotated[str, OneOf(SCHEDULES)] = (
        "blocks"  # which task each step trains; blocks: <task>.steps of each task in turn
    )
    balancer: Annotated[str, OneOf(BALANCERS)] = (
        "sum"  # schedule=mixed: how the tasks' gradients combine (sum, uncertainty, gradnorm, pcgrad, famo, upgrad, aligned, nash)
    )
    bucket: bool = (
        True  # batches of similar lengths (sorted windows of 50 batches, shuffled); false: plain shuffle
    )
    # A task scored against its batch (mnrl, qt, distill loss=kl): no sentence twice in a batch, since
    # a repeated anchor or positive is a false negative (sentence-transformers' NoDuplicatesBatchSampler)
    no_duplicates: bool = True  # in-batch tasks (mnrl, qt, distill kl): no sentence twice in a batch
    # The chosen balancer's own keys (gradnorm: gradnorm_alpha=; a plugin's, register_balancer(options=))
    balancer_options: Any = options_field("balancer", lambda: BALANCER_OPTIONS)
    # The chosen schedule's own keys (temperature: temperature=, cap=; aioli: mix_every=, ...; a
    # plugin's, register_schedule(options=)), flat on the command line
    schedule_options: Any = options_field("schedule", lambda: SCHEDULE_OPTIONS)

    def __post_init__(self) -> None:
        settle_options(self)


@dataclass
class OptimConfig:
    optim: Annotated[str, OneOf(OPTIMIZERS, fixed=("auto",))] = (
        "auto"  # auto: adamw for a pretrained encoder (SBERT), else sgd (InferSent)
    )
    lr: PositiveFloat | None = (
        None  # None: the optimizer's: 0.1 for sgd (InferSent, Section 3.3), 1e-3 for adam and adamw
    )
    hf_lr: PositiveFloat = 2e-5  # adamw: lr of the pretrained backbone (encoder=hf); lr= is the heads'
    encoder_lr: str = ""  # the shared encoder's lr, in every task's steps: a value or a multiple of lr= (x0.1); empty: the task's
    embedding_lr: str = ""  # embeddings=trainable|both: the word vectors' lr, a value or a multiple of lr=; empty: the encoder's
    lr_schedule: Annotated[str, OneOf(LR_SCHEDULES, fixed=("auto",))] = (
        "auto"  # auto: the optimizer's: infersent for sgd, constant for adam, linear (warmup, decay to 0) for adamw
    )
    warmup_steps: AtLeast0 | None = (
        None  # constant, linear, cosine: linear warmup first; None: 10% of max_steps (linear, cosine), else 0
    )
    weight_decay: NonNegativeFloat = 0.01  # adamw: not on biases and LayerNorm, as SBERT
    lr_decay: Annotated[float, Range(0, 1, low_open=True)] = (
        0.99  # lr_schedule=infersent: after each pass over a task's data
    )
    lr_shrink: Annotated[float, Range(1)] = (
        5.0  # lr_schedule=infersent: divide when dev accuracy is not above the best
    )
    # (runs recorded before the key keep "evaluation": then eval_every= changes the lr)
    lr_shrink_at: Literal["epoch", "evaluation"] = (
        "epoch"  # lr_schedule=infersent: shrink on the dev accuracy at each epoch end (InferSent), or at each evaluation
    )
    stop: Literal["auto", "min_lr", "patience", "max_steps"] = (
        "auto"  # auto: the optimizer's: min_lr for sgd, patience for adam, max_steps for adamw (max_steps= always stops)
    )
    min_lr: NonNegativeFloat = 1e-5  # stop=min_lr: stop when the main task's lr falls below
    patience: AtLeast1 = 2  # stop=patience: stop at this many evaluations not above the best (InferSent: 2)
    max_grad_norm: NonNegativeFloat | None = (
        None  # clip the gradient norm; 0: off; None: the optimizer's (1 for adamw, else 5)
    )
    optimizer_per_task: bool = True  # as the original code; false: one shared optimizer
    max_steps: AtLeast1 | None = (
        None  # optimizer steps over all tasks; None with a linear or cosine schedule: one epoch of the main task
    )
    max_minutes: NonNegativeFloat | None = (
        None  # stop once training steps (evaluation not counted) took this long: equal time budgets
    )
    accumulate: AtLeast1 = 1  # micro-batches per step: a step's batch in parts that fit memory, one update


@dataclass
class RunConfig:
    name: Name = "multitask"  # run name (a preset's name by default): letters, digits, -_.+
    out: str | None = None  # run folder; None: runs/<name>-<time>
    seed: AtLeast0 = 1234  # model initialization, data order, dropout
    # Continued training (BOOM's incremental update): the shared encoder's network begins as
    # another run's trained one; word vectors and task heads are this run's own
    start_from: str | None = (
        None  # a run folder, encoder.json or checkpoint whose encoder network this run starts from
    )
    device: str = "auto"  # auto: cuda when available
    # At the end: count the transfer test sentences the run trained on, exactly and as near
    # duplicates (summary.json, model card, MTEB's training_datasets); needs $MTL_DATA_DIR's SentEval data.
    contamination: bool = True  # count the transfer test sentences the run trained on (summary, card)
    eval_every: AtLeast1 | None = None  # steps; None: at the end of every cycle of the schedule
    checkpoint_every: AtLeast1 | None = (
        None  # steps between checkpoints (a kill loses at most this many); None: 500 on the CPU, 5000 on CUDA
    )
    eval_batch: AtLeast1 = 256  # sentences per batch when evaluating
    # A checkpoint soup's ingredients (Wortsman et al. 2022; KaLM-Embedding's averaged checkpoints):
    # the model at each of the last N evaluations, merged afterwards (`just merge-encoders greedy=`)
    keep_evaluated: AtLeast0 = (
        0  # keep the model of the last N dev evaluations: checkpoints/evaluated-step-<N>.pt
    )
    affinity_every: AtLeast1 | None = (
        None  # steps between measurements of every pair's lookahead task affinity (Fifty et al. 2021): affinity.jsonl
    )
    affinity_batches: AtLeast1 = (
        8  # held batches per task, the noise floor's units (t with B - 1 df: 8 gives 2.36, 3 gave 4.30)
    )
    affinity_each: AtLeast1 | None = (
        2  # held batches taken at each measurement, in turn (k/B of the cost, a wider floor); none: all of them
    )
    affinity_precision: Literal["float32", "float64"] = (
        "float32"  # the lookahead's step and the losses around it (float32 within 3e-5 of float64 at lr 1e-3)
    )
    affinity_estimators: str = (
        ""  # affinity_every= toward watching tasks, beside the lookahead: scale_free, lookahead_k, alignment
    )
    affinity_k: AtLeast1 = 3  # affinity_estimators=lookahead_k: the lookahead's steps
    monitor: str = (
        ""  # transfer tasks scored at every evaluation (STS14,SICK-R,TREC): monitor/<task>/<metric>
    )
    monitor_examples: AtLeast1 = 1000  # monitor=: examples per split, a fixed seeded draw (fast mode)
    monitor_data: str | None = (
        None  # monitor=: SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    )
    callbacks: str = ""  # registered callbacks added to the run, comma-separated (a plugin registers its own)
    # The chosen callbacks' own keys (a plugin's, register_callback(options=)), flat on the command line
    callback_options: Any = options_field("callbacks", ChosenCallbackOptions)
    select: str = ""  # the best checkpoint by a weighted mean of dev metrics (nli/dev/acc,stsb/dev/spearman:0.5); empty: the first task's
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: online with an API key, else offline
    )
    wandb_project: str = "mtl"  # W&B project
    wandb_checkpoints: Literal["none", "best", "all"] = (
        "best"  # checkpoints uploaded as versions of the run's model artifact (250 MB each at paper size)
    )
    group: str | None = None  # W&B group (a sweep's name); None: the run name (a preset's name)
    wandb_entity: str | None = None  # W&B team or user the run belongs to; None: the API key's default
    wandb_tags: str = ""  # comma-separated W&B tags, added to the encoder, schedule and task tags
    wandb_notes: str | None = None  # W&B notes; None: the command that started the run
    wandb_console: bool = True  # W&B keeps what the run prints (its Logs tab)
    wandb_every: AtLeast1 | None = (
        None  # training steps per W&B history row (their means; metrics.jsonl keeps each); None: 10 on CUDA, else 1
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = (
        "auto"  # autocast; auto: bf16 where supported (LSTMs on CUDA: fp32, on TF32)
    )
    prefetch: Literal["auto", "on", "off"] = (
        "auto"  # the next step's batch prepared on a thread during this one; auto: on with CUDA
    )
    strategy: Literal["ddp", "fsdp"] = (
        "ddp"  # under torchrun: ddp copies the model to every process; fsdp (encoder=hf) shards it over them
    )

    def __post_init__(self) -> None:
        settle_options(self)


@dataclass
class TrainConfig:
    tasks: dict[str, TaskConfig] = table(
        task_kinds.config_class_for, default_factory=task_kinds.default_tasks
    )
    data: DataConfig = field(default_factory=DataConfig)
    model: EncoderConfig = field(default_factory=EncoderConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise UserError("tasks= is empty: name at least one task")
        if not self.training_tasks:
            raise UserError(
                f"every task has train=false ({', '.join(self.tasks)}): at least one task must train"
            )
        monitored = comma_list(self.run.monitor)
        for name in monitored:
            transfer_spec(name)  # an unknown name: a one-line error with the choices
        named_callbacks = comma_list(self.run.callbacks)
        for key, _ in parse_terms(self.run.select):
            if (name := metrics.monitored_task(key)) is not None:
                if name not in monitored:
                    raise UserError(
                        f"select={self.run.select}: {key} needs monitor={name} (monitor={self.run.monitor})"
                    )
                continue
            if key.split("/")[0] in named_callbacks:
                continue  # checked against the keys the callback says it adds when the run starts
            if (task := key.split("/")[0]) not in self.tasks:
                raise UserError(
                    f"select={self.run.select}: {task} is not a task of this run ({', '.join(self.tasks)})"
                )
            if key.count("/") != 2:
                raise UserError(
                    f"select={self.run.select}: {key} is not a dev metric: name one as {task}/dev/<metric>"
                )
        for name in comma_list(self.run.affinity_estimators):
            if name not in AFFINITY_ESTIMATORS:
                raise UserError(
                    f"affinity_estimators={self.run.affinity_estimators}: {name!r} is not one; choose "
                    f"among {', '.join(AFFINITY_ESTIMATORS)}"
                )
        self._check_schedule()
        self._check_learning_rates()
        self._check_strategy()
        if self.run.start_from and traits(self.model.encoder).pretrained:
            raise UserError(
                f"start_from= copies a word-vector encoder's network: encoder={self.model.encoder} starts from "
                "hf_model= already (give it the fine-tuned model's folder)"
            )
        limit = traits(self.model.encoder).max_positions
        if limit is not None and self.data.max_tokens > limit:
            raise UserError(
                f"max_tokens={self.data.max_tokens} is more than encoder={self.model.encoder}'s {limit} "
                f"positions: give max_tokens={limit} or less"
            )

    def _check_strategy(self) -> None:
        """What strategy=fsdp cannot shard is refused before any work (mtl/train/run/sharding.py)."""
        if self.run.strategy != "fsdp":
            return
        if not traits(self.model.encoder).shardable:
            raise UserError(
                f"strategy=fsdp shards a pretrained transformer's layers over the processes: it is for "
                f"encoder={'/'.join(shardable_encoders())}, not encoder={self.model.encoder} (which fits "
                "each process: leave strategy= out)"
            )
        refused = [  # (key, whether given, why it does not combine with sharded parameters)
            (
                "schedule=mixed",
                trains_every_task(self.schedule.schedule),
                "its balancers compare whole per-task gradients, which sharding splits",
            ),
            (
                f"schedule={self.schedule.schedule}",
                adapts(self.schedule.schedule),
                "its evidence runs a whole copy of the model in each process",
            ),
            (
                "affinity_every=",
                self.run.affinity_every is not None,
                "the affinity steps a copy of the whole model in each process",
            ),
            (
                "compile=true",
                isinstance(self.model.options, HFOptions) and self.model.options.compile,
                "compiling a sharded transformer is not supported by mtl yet",
            ),
            (
                "precision=fp16",
                self.run.precision == "fp16",
                "its gradient scaler is untested on sharded gradients: take bf16",
            ),
        ]
        for key, given, why in refused:
            if given:
                raise UserError(f"strategy=fsdp does not combine with {key} ({why}): leave one of them out")

    def _check_learning_rates(self) -> None:
        """`<task>.lr=` and `encoder_lr=` are values or multiples of lr= (which may be unset yet)."""
        for name, task in self.tasks.items():
            parse_lr(task.lr, 1.0, f"{name}.lr")
        parse_lr(self.optim.encoder_lr, 1.0, "encoder_lr")
        parse_lr(self.optim.embedding_lr, 1.0, "embedding_lr")
        if self.optim.embedding_lr and self.model.embeddings == "frozen":
            raise UserError(
                f"embedding_lr={self.optim.embedding_lr} sets the lr of trained word vectors: give "
                "embeddings=trainable or embeddings=both (the vectors are frozen)"
            )

    def _check_schedule(self) -> None:
        """Keys of one schedule given with another say so, rather than doing nothing."""
        schedule = self.schedule
        sampling = draws_from_shares(schedule.schedule) or adapts(schedule.schedule)
        shares = {
            name: task.prob for name, task in self.tasks.items() if task.prob is not None and task.train
        }
        if shares and not sampling:
            raise UserError(
                f"{next(iter(shares))}.prob= is a share of the steps drawn at random: give "
                f"schedule=proportional (or temperature, or an online schedule's starting shares), "
                f"not schedule={schedule.schedule}"
            )
        if shares and len(shares) == len(self.training_tasks) and abs(sum(shares.values()) - 1) > 1e-6:
            given = " ".join(f"{name}.prob={share:g}" for name, share in shares.items())
            raise UserError(
                f"{given} add up to {sum(shares.values()):g}: every task has a share, so they must add up "
                "to 1 (or leave one task's prob= out: it takes what is left)"
            )
        if shares and len(shares) < len(self.training_tasks) and sum(shares.values()) >= 1:
            raise UserError(
                f"<task>.prob= adds up to {sum(shares.values()):g}, leaving nothing for "
                f"{', '.join(t for t in self.training_tasks if t not in shares)}: give shares that add up to under 1"
            )
        # (a schedule's own keys given with another: _check_component_keys; what a schedule needs
        # of the rest of the config, its own check, declared where it is registered)
        check_schedule(schedule.schedule, self)
        if combines_a_steps_tasks(schedule.balancer) and not trains_every_task(schedule.schedule):
            raise UserError(
                f"balancer={schedule.balancer} combines the tasks of one step: give schedule=mixed"
            )

    @property
    def training_tasks(self) -> list[str]:
        """The tasks that train, in order (the others, `<task>.train=false`, are only evaluated)."""
        return [name for name, task in self.tasks.items() if task.train]

    @property
    def main_task(self) -> str:
        """The first training task: its dev metric picks the best checkpoint (unless select= says
        otherwise) and its lr ends the run."""
        return self.training_tasks[0]


RENAMED = {"adam_patience": "patience"}  # keys renamed since; the old name stays an alias


def with_overrides(config: TrainConfig, args: Sequence[str]) -> TrainConfig:
    """`config` with `key=value` arguments applied: `tasks=` first, then every other key.

    A task's old key (`steps_squad=`) sets its new one; `steps_<task>=0` meant "without that
    task" and still does, and a positive one brings a task back unless `tasks=` is given.
    """
    if bare := [arg for arg in args if "=" not in arg]:
        raise UserError(not_key_value(bare[0]))
    config = copy.deepcopy(config)
    listed = [arg for arg in args if arg.partition("=")[0] == "tasks"]
    if len(listed) > 1:
        raise UserError(f"{listed[0]} and {listed[1]} set the same key: give it once")
    if listed:
        config.tasks = _task_list(listed[0].partition("=")[2], config.tasks)
    legacy = legacy_keys()
    pairs = [arg.partition("=")[::2] for arg in args if arg.partition("=")[0] != "tasks"]
    for key, value in pairs:  # first what adds or leaves out a task, wherever it stands
        if key in legacy and legacy[key][1] == "steps":
            name = legacy[key][0]
            if value.strip() == "0":
                config.tasks.pop(name, None)
            elif name not in config.tasks and not listed:  # tasks= given: that list is the run's
                config.tasks[name] = task_kinds.named_config(name)[1]
    rest = []
    for key, value in pairs:
        if key in legacy:
            name, task_key = legacy[key]
            if name in config.tasks and not (task_key == "steps" and value.strip() == "0"):
                rest.append(f"{name}.{task_key}={value}")
            # else: a key of a task the run leaves out, which (as before) has no effect
        else:
            leaf = key.rsplit(".", 1)[-1]
            head = key.split(".", 1)[0]
            if head in config.tasks and key == f"{head}.{leaf}":
                leaf = task_kinds.task_key(type(config.tasks[head]), leaf, value)
            rest.append(f"{key.removesuffix(key.rsplit('.', 1)[-1])}{RENAMED.get(leaf, leaf)}={value}")
    if not config.tasks:
        raise UserError("every task was left out (steps_<task>=0): at least one task must train")
    _check_task_keys(rest, config)
    _check_component_keys(rest, config)
    return apply_overrides(config, rest, aliases=[*legacy, *RENAMED])


def _check_component_keys(given: Sequence[str], config: TrainConfig) -> None:
    """A key that configures one encoder, schedule, balancer, optimizer or lr schedule, given with
    another, is refused rather than silently unused or unknown (`encoder=bilstm transformer_heads=2`,
    `optim=sgd weight_decay=0.1`, `cap=100` with schedule=blocks). Which component takes a key is
    declared with it (EncoderTraits.options, register_schedule's keys, register_balancer's options,
    an optimizer's SBERT parameter groups, LrSchedule.keys): a plugin's says so too. An `auto` optimizer or schedule is judged as it
    will resolve. Only keys given here are checked: a recorded run's config holds every key, and
    resumes as it is."""
    encoder = given_value(given, "encoder", "model.") or config.model.encoder
    optimizer = given_value(given, "optim", "optim.") or config.optim.optim
    auto = set()  # the components chosen by `auto`, named so in the error
    if optimizer == "auto" and encoder in ENCODERS:
        optimizer = auto_optimizer(traits(encoder).pretrained)
        auto.add("optim")
    schedule = given_value(given, "lr_schedule", "optim.") or config.optim.lr_schedule
    if schedule == "auto" and optimizer in DEFAULTS:
        schedule = DEFAULTS[optimizer].lr_schedule
        auto.add("lr_schedule")
    components = [
        (component, name, owners)
        for component, name, owners, known in (
            ("encoder", encoder, key_owners(), ENCODERS),
            (
                "schedule",
                given_value(given, "schedule", "schedule.") or config.schedule.schedule,
                schedule_key_owners(),
                SCHEDULES,
            ),
            (
                "balancer",
                given_value(given, "balancer", "schedule.") or config.schedule.balancer,
                balancer_key_owners(),
                BALANCERS,
            ),
            ("optim", optimizer, optimizer_key_owners(), DEFAULTS),
            ("lr_schedule", schedule, lr_schedule_key_owners(), LR_SCHEDULES),
        )
        if name in known  # a misspelt name: its own error, with the choices, comes next
    ]
    for arg in given:
        key = arg.partition("=")[0]
        if "." in key and key.split(".", 1)[0] not in ("model", "schedule", "optim"):
            continue  # a task's own key (`model.options.cnn_kernel`, a recorded path, is checked)
        leaf = key.rsplit(".", 1)[-1]
        for component, chosen, owners in components:
            if leaf in owners and chosen not in owners[leaf]:
                takers = " or ".join(f"{component}={name}" for name in owners[leaf])
                shown = f"{component}=auto, {chosen} here" if component in auto else f"{component}={chosen}"
                raise UserError(f"{arg}: unknown key for {shown} ({leaf} configures {takers}): leave it out")
        callbacks = given_value(given, "callbacks", "run.") or config.run.callbacks
        chosen_callbacks = [name for name in comma_list(callbacks) if name in CALLBACKS]
        if (takers := callback_key_owners().get(leaf)) and not set(takers) & set(chosen_callbacks):
            raise UserError(
                f"{arg}: a key of callbacks={' or '.join(takers)}, which this run does not add"
                f" (callbacks={callbacks}): add it to callbacks= or leave the key out"
            )


def _task_list(text: str, known: dict[str, TaskConfig]) -> dict[str, TaskConfig]:
    """`tasks=a,b` (or `a+b`, which a sweep axis of task sets needs: `tasks=qt,nli+qt`)."""
    tasks: dict[str, TaskConfig] = {}
    for entry in filter(None, (part.strip() for part in text.replace("+", ",").split(","))):
        name, default = task_kinds.named_config(entry)
        if name in tasks:
            raise UserError(f"tasks={text}: {name} is listed twice")
        tasks[name] = known.get(name, default) if not entry.endswith(".toml") else default
    if not tasks:
        raise UserError("tasks= is empty: name at least one task (e.g. tasks=nli)")
    return tasks


def _check_task_keys(args: Sequence[str], config: TrainConfig) -> None:
    """A key under a task the run does not have says so (rather than "unknown key")."""
    for arg in args:
        key = arg.partition("=")[0]
        head = key.split(".", 1)[0]
        if "." in key and head in task_kinds.KINDS and head not in config.tasks:
            raise UserError(
                f"{arg}: {head} is not one of this run's tasks ({', '.join(config.tasks)}): add it to tasks="
            )


def legacy_keys() -> dict[str, tuple[str, str]]:
    """Every old key of a registered task, dotted and short: `schedule.steps_nli` and `steps_nli`."""
    keys = {}
    for name, config_class in task_kinds.config_classes().items():
        for old, new in config_class.legacy_keys.items():
            keys[old] = keys[old.rsplit(".", 1)[-1]] = (name, new)
    return keys


def recorded_config(values: Any, source: str) -> TrainConfig:
    """The TrainConfig a run recorded (in any earlier layout); a one-line error naming `source`."""
    return from_dict(TrainConfig, upgraded(values, source), source)
