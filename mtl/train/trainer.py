"""The multitask training loop: scheduler -> task step -> log, evaluate, checkpoint, resume.

Under `torchrun` every rank runs this same loop over the same schedule; each step's global
batch is split over the ranks and DistributedDataParallel averages their gradients, so a
run's results do not depend on how many processes it has.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from mtl import atomic, jsonfile, metrics
from mtl.config import to_dict
from mtl.console import progress_stream
from mtl.data.batches import TaskStream
from mtl.device import to_device
from mtl.distributed import Distributed
from mtl.errors import UserError
from mtl.models.encoders import build_encoder
from mtl.models.encoders.base import frozen_embedding
from mtl.models.encoders.hf import HFEncoder, save_sentence_transformer
from mtl.models.heads import MultitaskModel
from mtl.models.memory import check_fits
from mtl.precision import autocast, grad_scaler, resolve_precision
from mtl.runs import RunFolder
from mtl.tracking import Tracker
from mtl.train.checkpointer import Checkpointer
from mtl.train.config import TrainConfig
from mtl.train.data import TrainingData, prepare
from mtl.train.defaults import resolve_defaults
from mtl.train.evaluate import correct_predictions
from mtl.train.interrupts import StopRequests
from mtl.train.lr_policy import LrPolicy
from mtl.train.phases import COLUMNS
from mtl.train.runlog import NullLog, RunLog
from mtl.train.scheduler import Scheduler
from mtl.train.state import StopReason, TrainState

TASK_INDEX = {"nli": 0, "squad": 1}
BUCKET_WINDOW = 50  # batches sorted together: long enough to group lengths, short enough to stay random


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        data: TrainingData | None = None,
        progress: bool = True,
        build_missing: bool = True,
        dist: Distributed | None = None,
        command: str = "",
    ):
        self.run_dir = Path(run_dir)
        self.files = RunFolder(self.run_dir)
        self.dist = dist or Distributed()
        self.progress = progress and self.dist.is_main
        self.device = self.dist.device(config.run.device)
        torch.manual_seed(config.run.seed)
        self.data = data or self.dist.main_first(
            lambda: prepare(config, progress=self.progress, build_missing=build_missing)
        )
        sizes = {task: len(self.data.examples[task]["train"]) for task in config.tasks}
        self.config = config = resolve_defaults(config, sizes)
        self.model = self._build_model().to(self.device)
        self.networks = {task: self._task_network(task) for task in config.tasks}  # what steps call
        self.task_parameters = {
            task: [
                p
                for m in (self.model.encoder, self.model.heads[task])
                for p in m.parameters()
                if p.requires_grad
            ]
            for task in config.tasks
        }
        self.optimizers = self._build_optimizers()
        self.lr_policy = LrPolicy(config.optim, self.optimizers, config.main_task)
        self.precision = resolve_precision(config.run.precision, self.device, config.model.encoder)
        self.scaler = grad_scaler(self.precision, self.device)
        schedule, seed = config.schedule, config.run.seed
        self.streams = {
            task: TaskStream(
                self.data.examples[task]["train"],
                self.data.bucket_keys(task, "train"),
                schedule.batch_sizes[task],
                seed=[seed, TASK_INDEX[task]],
                window=BUCKET_WINDOW
                if schedule.bucket
                else 1,  # one batch a window: no sorting across batches
            )
            for task in config.tasks
        }
        self.scheduler = Scheduler(schedule.steps, schedule.schedule, sizes, schedule.temperature, seed)
        self.state = TrainState.for_tasks(config.tasks)
        self.state.wandb_id = self.dist.broadcast(self.state.wandb_id)
        self.checkpointer = Checkpointer(
            self.run_dir, self._encoder_metadata(), self.dist, config.run.wandb_checkpoints
        )
        self.tracker = Tracker(None)
        self.log: RunLog | NullLog = NullLog()
        self.command = command  # the command line, as the W&B run's notes
        self.stop_requests = StopRequests()  # Ctrl-C or SIGTERM in this process

    # ---- construction --------------------------------------------------------------------

    def _build_model(self) -> MultitaskModel:
        vectors, model, head = self.data.embeddings, self.config.model, self.config.head

        def build(embedding: nn.Embedding | None) -> MultitaskModel:
            return MultitaskModel(
                build_encoder(embedding, model),
                self.config.tasks,
                head.head_hidden,
                head.head_layers,
                head.dropout,
            )

        if vectors is not None:  # (encoder=hf: the pretrained model's size is what it is)
            check_fits(
                lambda: build(frozen_embedding(torch.empty(vectors.shape, device="meta"))),
                self.device,
                f"hidden={model.hidden} (encoder={model.encoder}, head_hidden={head.head_hidden})",
            )
        return build(None if vectors is None else frozen_embedding(torch.from_numpy(vectors)))

    def _task_network(self, task: str) -> nn.Module:
        """The encoder and `task`'s head; over several ranks, wrapped in DDP.

        One DDP per task, sharing the encoder: a step then all-reduces the gradients of the
        parameters it trains only, not zeros for the other task's head (a DDP of the whole
        model would, with `find_unused_parameters`). A DDP ignores backward passes of the
        other's forward.
        """
        network = TaskNetwork(self.model, task)
        if not self.dist.active:
            return network
        return DistributedDataParallel(
            network,
            device_ids=None,  # inputs stay where they are: the lengths on the CPU, not copied to the GPU
            find_unused_parameters=self.model.encoder.pair_model,  # a pair model may skip its pooling
        )

    def _build_optimizers(self) -> dict[str, torch.optim.Optimizer]:
        optim = self.config.optim
        if optim.optimizer_per_task:
            return {task: self._optimizer(params) for task, params in self.task_parameters.items()}
        shared = self._optimizer([p for p in self.model.parameters() if p.requires_grad])
        return dict.fromkeys(self.config.tasks, shared)

    def _optimizer(self, parameters: list[nn.Parameter]) -> torch.optim.Optimizer:
        optim = self.config.optim
        if optim.optim == "sgd":
            return torch.optim.SGD(parameters, lr=optim.lr)
        if optim.optim == "adam":
            return torch.optim.Adam(parameters, lr=optim.lr)
        # SBERT: AdamW, no weight decay on biases and LayerNorm (the 1-d parameters); a pretrained
        # backbone has its own lr (hf_lr), the new heads theirs (lr). Groups keep their base lr for
        # the warmup-and-decay schedule (LrPolicy).
        pretrained = (
            {id(p) for p in self.model.encoder.parameters()} if self.config.model.encoder == "hf" else set()
        )
        groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
        for p in parameters:
            groups.setdefault((id(p) in pretrained, p.ndim > 1), []).append(p)
        return torch.optim.AdamW(
            [
                {
                    "params": params,
                    "lr": (base := optim.hf_lr if in_backbone else optim.lr),
                    "base_lr": base,
                    "weight_decay": optim.weight_decay if decays else 0.0,
                }
                for (in_backbone, decays), params in sorted(groups.items(), reverse=True)  # backbone first
            ]
        )

    # ---- logging (rank 0 only) -------------------------------------------------------------

    def _open_logs(self, resume: bool) -> None:
        if not self.dist.is_main:
            return
        run, config = self.config.run, self.config
        self.tracker = Tracker.start(
            job_type="train",
            config={
                **to_dict(config),
                **self.model.parameter_counts(),
                "data": {**to_dict(config.data), **self.data.statistics()},
                "inputs": self.data.fingerprints,
                "world_size": self.dist.world_size,
                "git_commit": git_commit(),
            },
            project=run.wandb_project,
            directory=self.run_dir,
            mode=run.wandb,
            name=self.run_dir.name,
            run_id=self.state.wandb_id,
            resume=resume,
            group=run.group or run.name,
            tags=[config.model.encoder, config.schedule.schedule, *config.tasks],
            notes=self.command,
        )
        self.tracker.define_metric(metrics.GLOBAL_STEP)
        self.tracker.define_metric(metrics.TASK_ID, step_metric=metrics.GLOBAL_STEP)
        for task in config.tasks:
            self.tracker.define_metric(metrics.of_task(task, "step"))
            self.tracker.define_metric(metrics.of_task(task, "*"), step_metric=metrics.of_task(task, "step"))
            self.tracker.define_metric(
                metrics.accuracy(task, "dev"), step_metric=metrics.of_task(task, "step"), summary="max"
            )
        if "squad" in config.tasks:  # the exact build that was loaded, by its content digest
            self.tracker.use_input("classifsquad", "dataset", Path(config.data.classifsquad), reference=True)
        self.checkpointer.tracker = self.tracker
        self.log = RunLog(
            self.files.metrics,
            self.tracker,
            resume_at_byte=self.state.metrics_bytes if resume else None,
        )

    def _close_logs(self, exit_code: int = 0) -> None:
        self.log.close()
        self.tracker.finish(exit_code=exit_code)

    # ---- the loop --------------------------------------------------------------------------

    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train until a `StopReason`; return the summary. An interrupt checkpoints, then raises KeyboardInterrupt."""
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        self._open_logs(resume)
        counts = self.model.parameter_counts()
        if not resume and self.dist.is_main:
            print(
                f"trainable parameters: {counts['params/trainable']:,} "
                f"(encoder {counts['params/encoder']:,}; frozen, excluded: {counts['params/frozen']:,})"
            )
            self.log.log({metrics.GLOBAL_STEP: 0, **counts}, history=False)  # in the W&B config
        try:
            with (
                self.stop_requests,
                tqdm(
                    initial=self.state.global_step,
                    total=self.config.optim.max_steps,
                    desc="train",
                    unit="step",
                    disable=not self.progress,
                    dynamic_ncols=True,
                    file=progress_stream(),
                ) as bar,
            ):
                reason = self._loop(bar)
        except BaseException as error:
            if isinstance(error, Diverged):
                self.tracker.alert("mtl run diverged", str(error))
                # The run folder says so too (`just report`); a resume cuts this line off again.
                self.log.log(
                    {
                        metrics.GLOBAL_STEP: self.state.global_step,
                        metrics.EVENT: "diverged",
                        metrics.phase("why"): str(error),
                    },
                    history=False,
                )
            self._close_logs(exit_code=1)
            if isinstance(error, Diverged):
                raise UserError(str(error)) from None
            raise
        if reason is StopReason.INTERRUPTED:
            self.tracker.mark_preempting()  # resumable: W&B shows it preempted, not failed
            self._close_logs(exit_code=130)
            # torchrun stops every rank once one exits: the others wait until rank 0's files are complete.
            self.dist.barrier()
            raise KeyboardInterrupt(
                f"stopped at step {self.state.global_step}: resume with "
                f"`just train-multitask resume={self.run_dir}`"
            )
        return self._finish(reason)

    def _loop(self, bar: tqdm) -> StopReason:
        state = self.state
        block_clock = time.perf_counter()
        while True:
            if self.dist.any(self.stop_requests.requested):  # every rank stops after the same step
                self._save_latest()
                return StopReason.INTERRUPTED
            if reason := self.lr_policy.stop_reason(state):
                return reason
            step = state.global_step
            task = self.scheduler.task_at(step)
            if step == state.block.start_step:
                block_clock = time.perf_counter()
                self.log.log(
                    {
                        metrics.GLOBAL_STEP: step,
                        metrics.EVENT: "block_start",
                        metrics.phase("task"): task,
                        metrics.phase("block"): state.block.index,
                    },
                    history=False,
                )
            rows, epoch_done = self.streams[task].next()
            record = self.train_batch(task, rows)
            state.phases.step(record[metrics.train(task, "loss")])
            self.log.log(record)
            bar.update()
            bar.set_postfix_str(f"{task} loss {record[metrics.train(task, 'loss')]:.3f}", refresh=False)
            if epoch_done:
                self._end_epoch(task)
            state.block.examples += len(rows)
            if self.scheduler.block_ends_after(step):
                self._end_block(task, time.perf_counter() - block_clock)
            if self._evaluation_due(step):
                self._evaluate_and_checkpoint()
            elif (step + 1) % self.config.run.checkpoint_every == 0:
                self._save_latest()

    def train_batch(self, task: str, rows: np.ndarray) -> dict[str, Any]:
        """One optimizer step of `task` on the training examples `rows` (the global batch); returns its metrics."""
        started = time.perf_counter()
        totals = self.queue_step(task, rows)
        # The step's one wait for the GPU (InferSent's loop reads its loss every step too). A
        # non-finite loss is caught after the update: the run stops without saving it.
        loss_sum, correct_sum, grad_norm = totals.tolist()
        loss_sum, correct_sum = self.dist.sum([loss_sum, correct_sum])
        mean_loss = loss_sum / len(rows)
        if not math.isfinite(mean_loss):
            raise self._diverged(task, mean_loss)
        state = self.state
        state.global_step += 1
        state.task_steps[task] += 1
        seconds = time.perf_counter() - started
        return {
            metrics.GLOBAL_STEP: state.global_step,
            metrics.of_task(task, "step"): state.task_steps[task],
            metrics.train(task, "loss"): mean_loss,
            metrics.train(task, "acc"): correct_sum / len(rows),
            metrics.of_task(task, "lr"): self.lr_policy.lr(task),
            metrics.of_task(task, "grad_norm"): grad_norm,
            metrics.of_task(task, "examples_per_s"): len(rows) / seconds,
            metrics.TASK_ID: TASK_INDEX[task],  # which block a step is in, on any chart
        }

    def queue_step(self, task: str, rows: np.ndarray) -> torch.Tensor:
        """Forward, backward and update of one step, queued without waiting for the GPU (except
        fp16's gradient scaler, which reads whether the gradients overflowed); returns this rank's
        (loss sum, correct, gradient norm) on the device."""
        state = self.state
        # Dropout masks from (seed, step, rank), as fairseq does: resuming needs no RNG state and
        # works with any number of ranks.
        torch.manual_seed(step_seed(self.config.run.seed, state.global_step, self.dist.rank))
        mine, weights = self._share_of(rows)
        examples = self.data.examples[task]["train"]
        network = self.networks[task]
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        # accumulate=k: k micro-batches, gradients summed, one update; DDP all-reduces after the last.
        parts = np.array_split(np.arange(len(mine)), min(self.config.optim.accumulate, len(mine)))
        totals = torch.zeros(2, device=self.device)  # loss sum, correct
        for i, part in enumerate(parts):
            syncs = i == len(parts) - 1 or not self.dist.active
            with contextlib.nullcontext() if syncs else network.no_sync():
                chosen = mine[part]
                sentences = self.data.table.batch_columns(examples.sentences[chosen], self.device)
                labels = to_device(torch.from_numpy(examples.labels[chosen]), self.device)
                weight = to_device(torch.from_numpy(weights[part]), self.device)
                with autocast(self.precision, self.device):
                    logits = network(sentences)
                losses = nn.functional.cross_entropy(logits.float(), labels, reduction="none") * weight
                correct = ((logits.argmax(dim=-1) == labels).float() * weight).sum()
                # DDP averages gradients over ranks; scaled so, this is the mean over the global batch
                # (InferSent's train_nli.py: mean loss, then clip at 5).
                self.scaler.scale(losses.sum() * (self.dist.world_size / len(rows))).backward()
                totals += torch.stack([losses.sum().detach(), correct])
        optimizer = self.optimizers[task]
        self.lr_policy.before_step(state.global_step)
        self.scaler.unscale_(optimizer)
        max_norm = self.config.optim.max_grad_norm or math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.task_parameters[task], max_norm)
        self.scaler.step(optimizer)
        self.scaler.update()
        return torch.cat([totals, grad_norm.float().reshape(1).to(totals.device)])

    def _share_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of a global batch, with loss weights: a rank left without rows (the last,
        short batch of an epoch) still runs one row at weight 0, as DDP needs every rank in a step."""
        mine = rows[self.dist.part(len(rows))]
        if len(mine) == 0:
            return rows[:1], np.zeros(1, dtype=np.float32)
        return mine, np.ones(len(mine), dtype=np.float32)

    def _diverged(self, task: str, loss: float) -> Diverged:
        step = self.checkpointer.latest_step
        kept = (
            f"the last good checkpoint (step {step}) is kept in {self.files.latest}"
            if step is not None
            else "no checkpoint was written yet"
        )
        return Diverged(
            f"the {task} loss became {loss} at step {self.state.global_step + 1} ({task} step "
            f"{self.state.task_steps[task] + 1}); {kept}: lower lr= or max_grad_norm= and start again"
        )

    def _end_epoch(self, task: str) -> None:
        self.lr_policy.after_epoch(task)
        self.log.log(
            {
                metrics.GLOBAL_STEP: self.state.global_step,
                metrics.EVENT: "epoch_end",
                metrics.phase("task"): task,
                metrics.phase("epoch"): self.streams[task].epoch,
            },
            history=False,
        )

    def _end_block(self, task: str, seconds: float) -> None:
        state, block = self.state, self.state.block
        row = state.phases.end_block(
            task, block.index, block.start_step, state.global_step, block.examples, seconds
        )
        self.log.log(
            {
                metrics.GLOBAL_STEP: state.global_step,
                metrics.EVENT: "block_end",
                **{metrics.phase(key): value for key, value in row.items()},
            },
            history=False,  # the phases table holds them
        )
        block.index, block.start_step, block.examples = block.index + 1, state.global_step, 0

    def _evaluation_due(self, step: int) -> bool:
        every = self.config.run.eval_every
        return (step + 1) % every == 0 if every else self.scheduler.is_cycle_end(step)

    # ---- evaluation, checkpoints -----------------------------------------------------------

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Accuracy of each task on `split`; each rank classifies its share of the examples."""
        results = {}
        for task in self.config.tasks:
            if split not in self.data.examples[task]:
                continue
            examples = self.data.examples[task][split]
            with autocast(self.precision, self.device):
                correct = correct_predictions(
                    self.model,
                    task,
                    examples.subset(self.dist.part(len(examples))),
                    self.data.table,
                    self.config.run.eval_batch,
                    self.device,
                )
            results[metrics.accuracy(task, split)] = self.dist.sum([correct])[0] / len(examples)
        return results

    def _evaluate_and_checkpoint(self) -> None:
        started = time.perf_counter()
        results = self.evaluate("dev")
        state, main = self.state, self.config.main_task
        self.log.log(
            {
                metrics.GLOBAL_STEP: state.global_step,
                **{metrics.of_task(task, "step"): n for task, n in state.task_steps.items()},
                **results,
                metrics.EVENT: "evaluation",
                metrics.phase("eval_seconds"): time.perf_counter() - started,
            }
        )
        self.lr_policy.after_evaluation(state, results)
        if (
            state.best is None
            or results[metrics.accuracy(main, "dev")] > state.best[metrics.accuracy(main, "dev")]
        ):
            state.best = {"step": state.global_step, **results}
            self.log.log(
                {
                    metrics.GLOBAL_STEP: state.global_step,
                    metrics.EVENT: "checkpoint",
                    metrics.phase("best"): True,
                },
                history=False,
            )
            self.checkpointer.save_best(self.model.state_dict(), state.best)
        self._save_latest()

    def _save_latest(self) -> None:
        self.log.log(
            {
                metrics.GLOBAL_STEP: self.state.global_step,
                metrics.EVENT: "checkpoint",
                metrics.phase("best"): False,
            },
            history=False,
        )
        self.state.metrics_bytes = self.log.position
        self.checkpointer.save_latest(
            {
                "model": self.model.state_dict(),
                "optimizers": {task: opt.state_dict() for task, opt in self.optimizers.items()},
                "streams": {task: stream.state_dict() for task, stream in self.streams.items()},
                "state": self.state.to_dict(),
                "scaler": self.scaler.state_dict(),
                "world_size": self.dist.world_size,
            },
            self.state.global_step,
        )

    def restore(self) -> None:
        """Continue from checkpoints/latest.pt (or the one before it, when it is damaged)."""
        saved = self.checkpointer.load_latest()
        self.model.load_state_dict(saved["model"])
        for task, optimizer in self.optimizers.items():
            optimizer.load_state_dict(saved["optimizers"][task])
        for task, stream in self.streams.items():
            stream.load_state_dict(saved["streams"][task])
        self.state = TrainState.from_dict(saved["state"])
        if saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])

    # ---- the end ---------------------------------------------------------------------------

    def _finish(self, reason: StopReason) -> dict[str, Any]:
        state = self.state
        if state.global_step == 0 or not self._evaluation_due(state.global_step - 1):
            self._evaluate_and_checkpoint()
        best = self.checkpointer.load_best()
        self.model.load_state_dict(best["model"])
        results = {metrics.best(key): value for key, value in best["best"].items()}
        results.update({metrics.best(k): v for k, v in self.evaluate("test").items()})
        self.checkpointer.export_encoder(
            self.model.encoder.state_dict(),
            self.files.encoder,
            results,
            self._pretrained_writer(),
        )
        summary = {
            "stop_reason": reason.value,
            metrics.GLOBAL_STEP: state.global_step,
            **state.task_steps,
            **results,
            **state.phases.summary(),
            **self.model.parameter_counts(),
        }
        summary = {(metrics.steps(k) if k in TASK_INDEX else k): v for k, v in summary.items()}
        self.log.log(
            {metrics.GLOBAL_STEP: state.global_step, metrics.EVENT: "finished", **results}, history=False
        )
        self.tracker.table(
            "phases",
            COLUMNS,
            [[row[c] for c in COLUMNS] for row in state.phases.rows],
            step=state.global_step,
        )
        self.tracker.summary({k: v for k, v in summary.items() if not k.startswith("params/")})  # in config
        if self.dist.is_main:
            atomic.write_text(self.files.summary, jsonfile.dumps(summary, indent=2) + "\n")
        self._close_logs()
        return summary

    def _encoder_metadata(self) -> dict[str, Any]:
        data = self.data
        return {
            "config": to_dict(self.config),
            "vocabulary": data.vocabulary.words if data.vocabulary is not None else None,
            "vectors": str(data.vectors_path) if data.vectors_path is not None else None,
        }

    def _pretrained_writer(self) -> Callable[[Path], None] | None:
        """encoder=hf: what writes the fine-tuned model and its tokenizer in Hugging Face format."""
        encoder, subwords = self.model.encoder, self.data.subwords
        if not isinstance(encoder, HFEncoder) or subwords is None:
            return None
        return lambda folder: save_sentence_transformer(
            encoder, subwords.tokenizer, folder, self.config.model.max_seq_length
        )


class TaskNetwork(nn.Module):
    """One task's path through the multitask model: its encoder and its head."""

    def __init__(self, model: MultitaskModel, task: str):
        super().__init__()
        self.encoder, self.head = model.encoder, model.heads[task]

    def forward(self, sentences: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        return self.head(self.encoder, sentences)


def git_commit() -> str | None:
    """The commit of the mtl checkout that runs, when it is one."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def step_seed(seed: int, step: int, rank: int) -> int:
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])


class Diverged(Exception):
    pass
