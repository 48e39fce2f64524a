"""The multitask training loop: scheduler -> task step -> log, evaluate, checkpoint, resume."""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from mtl import atomic
from mtl.config import from_dict, to_dict
from mtl.console import progress_stream, say
from mtl.data.batches import TaskStream, to_device
from mtl.device import resolve_device
from mtl.errors import UserError
from mtl.models.encoders import build_encoder
from mtl.models.encoders.base import frozen_embedding
from mtl.models.heads import MultitaskModel
from mtl.precision import autocast, grad_scaler, resolve_precision
from mtl.tracking import Tracker
from mtl.train import checkpoint
from mtl.train.config import TrainConfig
from mtl.train.data import TrainingData, prepare
from mtl.train.evaluate import accuracy
from mtl.train.runlog import RunLog
from mtl.train.scheduler import Scheduler

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
    ):
        self.config, self.run_dir, self.progress = config, Path(run_dir), progress
        self.device = resolve_device(config.run.device)
        torch.manual_seed(config.run.seed)
        self.data = data or prepare(config, progress=progress, build_missing=build_missing)
        self.model = self._build_model().to(self.device)
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
        self.precision = resolve_precision(config.run.precision, self.device)
        self.scaler = grad_scaler(self.precision, self.device)
        schedule, seed = config.schedule, config.run.seed
        self.streams = {
            task: TaskStream(
                self.data.examples[task]["train"],
                self.data.example_lengths(task, "train"),
                schedule.batch_sizes[task],
                seed=[seed, TASK_INDEX[task]],
                window=BUCKET_WINDOW
                if schedule.bucket
                else 1,  # one batch a window: no sorting across batches
            )
            for task in config.tasks
        }
        sizes = {task: len(self.data.examples[task]["train"]) for task in config.tasks}
        self.scheduler = Scheduler(schedule.steps, schedule.schedule, sizes, schedule.temperature, seed)
        self.state: dict[str, Any] = {
            "global_step": 0,
            "task_steps": dict.fromkeys(config.tasks, 0),
            "block": {"index": 0, "start_step": 0, "examples": 0},
            "best_dev": {},  # task -> its best dev accuracy so far
            "stalls": 0,  # evaluations whose main-task dev accuracy was not above the best (Adam's stop)
            "best": None,  # {"step", "<task>/dev/acc"...}
            "wandb_id": secrets.token_hex(4),
            "metrics_bytes": 0,
        }
        self._interrupted = False
        self.checkpointed_step: int | None = None  # global step of checkpoints/latest.pt

    # ---- construction --------------------------------------------------------------------

    def _build_model(self) -> MultitaskModel:
        embedding = frozen_embedding(torch.from_numpy(self.data.embeddings))
        head = self.config.head
        return MultitaskModel(
            build_encoder(embedding, self.config.model),
            self.config.tasks,
            head.head_hidden,
            head.head_layers,
            head.dropout,
        )

    def _build_optimizers(self) -> dict[str, torch.optim.Optimizer]:
        optim = self.config.optim

        def make(parameters: list[nn.Parameter]) -> torch.optim.Optimizer:
            if optim.optim == "adam":
                return torch.optim.Adam(parameters, lr=optim.lr)
            return torch.optim.SGD(parameters, lr=optim.lr)

        if optim.optimizer_per_task:
            return {task: make(params) for task, params in self.task_parameters.items()}
        shared = make([p for p in self.model.parameters() if p.requires_grad])
        return dict.fromkeys(self.config.tasks, shared)

    def parameter_counts(self) -> dict[str, int]:
        counts = {
            "params/trainable": self.model.trainable_parameters(),
            "params/encoder": sum(p.numel() for p in self.model.encoder.parameters() if p.requires_grad),
            "params/frozen_embeddings": self.model.encoder.embedding.weight.numel(),
        }
        counts.update(
            {
                f"params/{task}_head": sum(p.numel() for p in head.parameters())
                for task, head in self.model.heads.items()
            }
        )
        return counts

    # ---- run folder, logging -------------------------------------------------------------

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    def _open_logs(self, resume: bool) -> None:
        run = self.config.run
        self.tracker = Tracker.start(
            job_type="train",
            config={**to_dict(self.config), **self.parameter_counts(), "inputs": self.data.fingerprints},
            project=run.wandb_project,
            directory=self.run_dir,
            mode=run.wandb,
            name=self.run_dir.name,
            run_id=self.state["wandb_id"],
        )
        self.tracker.define_metric("global_step")
        for task in self.config.tasks:
            self.tracker.define_metric(f"{task}/step")
            self.tracker.define_metric(f"{task}/*", step_metric=f"{task}/step")
        self.tracker.define_metric("phase/*", step_metric="global_step")
        if "squad" in self.config.tasks:
            self.tracker.use_artifact("classifsquad:latest")
        self.log = RunLog(
            self.run_dir / "metrics.jsonl",
            self.tracker,
            resume_at_byte=self.state["metrics_bytes"] if resume else None,
        )

    # ---- the loop --------------------------------------------------------------------------

    def fit(self, resume: bool = False, stop_after_step: int | None = None) -> dict[str, Any]:
        """Train until `max_steps`, SGD's main-task lr under `min_lr`, or Adam's patience; return the summary.

        `stop_after_step` stops like a kill right after that step, saving nothing more, so
        tests can check that resuming from the last checkpoint is exact.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._open_logs(resume)
        counts = self.parameter_counts()
        if not resume:
            print(
                f"trainable parameters: {counts['params/trainable']:,} "
                f"(encoder {counts['params/encoder']:,}; frozen embeddings excluded: "
                f"{counts['params/frozen_embeddings']:,})"
            )
            self.log.log({"global_step": 0, **counts})
        self.tracker.summary(counts)
        previous_handlers = self._catch_interrupts()
        try:
            stopped = self._loop(stop_after_step)
        except BaseException as error:
            self.log.close()
            self.tracker.finish(exit_code=1)
            if isinstance(error, Diverged):
                raise UserError(str(error)) from None
            raise
        finally:
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        if stopped == "interrupted":
            self.log.close()
            self.tracker.finish(exit_code=130)
            raise KeyboardInterrupt(
                f"stopped at step {self.state['global_step']}: resume with "
                f"`just train-multitask resume={self.run_dir}`"
            )
        if stopped == "killed":
            self.log.close()
            self.tracker.finish()
            return {}
        return self._finish(stopped)

    def _loop(self, stop_after_step: int | None) -> str:
        optim, state = self.config.optim, self.state
        with tqdm(
            initial=state["global_step"],
            total=optim.max_steps,
            desc="train",
            unit="step",
            disable=not self.progress,
            dynamic_ncols=True,
            file=progress_stream(),
        ) as bar:
            return self._steps(bar, stop_after_step)

    def _steps(self, bar: tqdm, stop_after_step: int | None) -> str:
        optim, state = self.config.optim, self.state
        block_clock = time.perf_counter()
        while True:
            if self._interrupted:
                self._save_latest()
                return "interrupted"
            step = state["global_step"]
            if optim.max_steps is not None and step >= optim.max_steps:
                return "max_steps"
            if self.optimizers[self.config.main_task].param_groups[0]["lr"] < optim.min_lr:
                return "min_lr"
            if optim.optim == "adam" and state["stalls"] >= optim.adam_patience:
                return "adam_patience"
            task = self.scheduler.task_at(step)
            if step == state["block"]["start_step"]:
                block_clock = time.perf_counter()
                self.log.log(
                    {
                        "global_step": step,
                        "phase/event": "block_start",
                        "phase/task": task,
                        "phase/block": state["block"]["index"],
                    }
                )
            record = self._train_step(task)
            bar.update()
            bar.set_postfix_str(f"{task} loss {record[f'{task}/train/loss']:.3f}", refresh=False)
            state["block"]["examples"] += self.config.schedule.batch_sizes[task]
            if self.scheduler.block_ends_after(step):
                self._end_block(task, time.perf_counter() - block_clock)
            if self._evaluation_due(step):
                self._evaluate_and_checkpoint()
            elif (step + 1) % self.config.run.checkpoint_every == 0:
                self._save_latest()
            if stop_after_step is not None and step + 1 >= stop_after_step:
                return "killed"

    def _train_step(self, task: str) -> dict[str, Any]:
        rows, epoch_done = self.streams[task].next()
        record = self.train_batch(task, rows)
        self.log.log(record)
        if epoch_done:
            self._end_epoch(task)
        return record

    def train_batch(self, task: str, rows: np.ndarray) -> dict[str, Any]:
        """One optimizer step of `task` on the training examples `rows`; returns its metrics."""
        started = time.perf_counter()
        examples = self.data.examples[task]["train"]
        sentences = self.data.table.batch_columns(examples.sentences[rows], self.device)
        labels = to_device(torch.from_numpy(examples.labels[rows]), self.device)

        self.model.train()
        self.model.zero_grad(set_to_none=True)
        with autocast(self.precision, self.device):
            logits = self.model(task, sentences)
        # Mean over the batch, then clip at 5: what InferSent's train_nli.py does by hand.
        loss = nn.functional.cross_entropy(logits.float(), labels)
        state = self.state
        if not torch.isfinite(loss):
            kept = (
                f"the last good checkpoint (step {self.checkpointed_step}) is kept in "
                f"{self.checkpoint_dir / 'latest.pt'}"
                if self.checkpointed_step is not None
                else "no checkpoint was written yet"
            )
            raise Diverged(
                f"the {task} loss became {loss.item()} at step {state['global_step'] + 1} ({task} step "
                f"{state['task_steps'][task] + 1}); {kept}: lower lr= or max_grad_norm= and start again"
            )
        optimizer = self.optimizers[task]
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(optimizer)
        max_norm = self.config.optim.max_grad_norm or math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.task_parameters[task], max_norm)
        self.scaler.step(optimizer)
        self.scaler.update()

        state["global_step"] += 1
        state["task_steps"][task] += 1
        seconds = time.perf_counter() - started
        record = {
            "global_step": state["global_step"],
            f"{task}/step": state["task_steps"][task],
            f"{task}/epoch": self.streams[task].epoch,
            f"{task}/train/loss": loss.item(),
            f"{task}/train/acc": (logits.argmax(dim=-1) == labels).float().mean().item(),
            f"{task}/lr": optimizer.param_groups[0]["lr"],
            f"{task}/grad_norm": grad_norm.item(),
            f"{task}/examples_per_s": len(rows) / seconds,
        }
        return record

    def _end_epoch(self, task: str) -> None:
        """InferSent's decay after each pass over the data, per task's own optimizer."""
        if self.config.optim.optimizer_per_task or task == self.config.main_task:
            self._scale_lr(task, self.config.optim.lr_decay)
        self.log.log(
            {
                "global_step": self.state["global_step"],
                "phase/event": "epoch_end",
                "phase/task": task,
                "phase/epoch": self.streams[task].epoch,
            }
        )

    def _scale_lr(self, task: str, factor: float) -> None:
        if self.config.optim.optim == "sgd":
            for group in self.optimizers[task].param_groups:
                group["lr"] *= factor

    def _end_block(self, task: str, seconds: float) -> None:
        block = self.state["block"]
        self.log.log(
            {
                "global_step": self.state["global_step"],
                "phase/event": "block_end",
                "phase/task": task,
                "phase/block": block["index"],
                "phase/steps": self.state["global_step"] - block["start_step"],
                "phase/examples": block["examples"],
                "phase/seconds": seconds,
            }
        )
        self.state["block"] = {
            "index": block["index"] + 1,
            "start_step": self.state["global_step"],
            "examples": 0,
        }

    def _evaluation_due(self, step: int) -> bool:
        every = self.config.run.eval_every
        return (step + 1) % every == 0 if every else self.scheduler.is_cycle_end(step)

    # ---- evaluation, checkpoints -----------------------------------------------------------

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        results = {}
        for task in self.config.tasks:
            if split not in self.data.examples[task]:
                continue
            with autocast(self.precision, self.device):
                results[f"{task}/{split}/acc"] = accuracy(
                    self.model,
                    task,
                    self.data.examples[task][split],
                    self.data.table,
                    self.config.run.eval_batch,
                    self.device,
                )
        return results

    def _evaluate_and_checkpoint(self) -> None:
        started = time.perf_counter()
        results = self.evaluate("dev")
        state, main = self.state, self.config.main_task
        self.log.log(
            {
                "global_step": state["global_step"],
                **{f"{task}/step": n for task, n in state["task_steps"].items()},
                **results,
                "phase/event": "evaluation",
                "phase/eval_seconds": time.perf_counter() - started,
            }
        )
        # InferSent's train_nli.py: when dev accuracy is not above the best so far, SGD divides
        # the lr by lr_shrink and Adam counts towards its stop (the 2nd such evaluation ends it).
        for task in self.config.tasks:
            best = state["best_dev"].get(task)
            improved = best is None or results[f"{task}/dev/acc"] > best
            if improved:
                state["best_dev"][task] = results[f"{task}/dev/acc"]
            elif self.config.optim.optimizer_per_task or task == main:
                self._scale_lr(task, 1.0 / self.config.optim.lr_shrink)
            if not improved and task == main:
                state["stalls"] += 1
        if state["best"] is None or results[f"{main}/dev/acc"] > state["best"][f"{main}/dev/acc"]:
            state["best"] = {"step": state["global_step"], **results}
            self.log.log(
                {"global_step": state["global_step"], "phase/event": "checkpoint", "phase/best": True}
            )
            checkpoint.save(
                {
                    "model": self.model.state_dict(),
                    "best": state["best"],
                    **self._encoder_metadata(),
                },
                self.checkpoint_dir / "best.pt",
            )
            self.tracker.log_artifact(
                f"{self.run_dir.name}-best",
                "checkpoint",
                self.checkpoint_dir / "best.pt",
                metadata=state["best"],
                reference=True,
            )
        self._save_latest()

    def _save_latest(self) -> None:
        self.log.log(
            {"global_step": self.state["global_step"], "phase/event": "checkpoint", "phase/best": False}
        )
        self.state["metrics_bytes"] = self.log.position
        checkpoint.save(
            {
                "model": self.model.state_dict(),
                "optimizers": {task: opt.state_dict() for task, opt in self.optimizers.items()},
                "streams": {task: stream.state_dict() for task, stream in self.streams.items()},
                "state": self.state,
                "scaler": self.scaler.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                **self._encoder_metadata(),
            },
            self.checkpoint_dir / "latest.pt",
            keep_previous=True,
        )
        self.checkpointed_step = self.state["global_step"]
        self.tracker.log_artifact(
            f"{self.run_dir.name}-latest",
            "checkpoint",
            self.checkpoint_dir / "latest.pt",
            metadata={"global_step": self.state["global_step"]},
            reference=True,
        )

    def restore(self) -> None:
        """Continue from checkpoints/latest.pt (or the one before it, when it is damaged)."""
        saved, _ = checkpoint.load_with_fallback(self.checkpoint_dir / "latest.pt")
        if saved["vocabulary"] != self.data.vocabulary.words:
            raise UserError(
                f"the vocabulary built from the inputs of {self.run_dir} differs from the one it was "
                "trained with: resume needs the same SNLI, ClassifSQuAD and vectors; start a new run instead"
            )
        self.model.load_state_dict(saved["model"])
        for task, optimizer in self.optimizers.items():
            optimizer.load_state_dict(saved["optimizers"][task])
        for task, stream in self.streams.items():
            stream.load_state_dict(saved["streams"][task])
        self.state = {**self.state, **saved["state"]}
        self.checkpointed_step = self.state["global_step"]
        if saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])
        torch.set_rng_state(saved["torch_rng"])
        if saved["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda_rng"])

    # ---- the end ---------------------------------------------------------------------------

    def _finish(self, reason: str) -> dict[str, Any]:
        state = self.state
        if state["global_step"] == 0 or not self._evaluation_due(state["global_step"] - 1):
            self._evaluate_and_checkpoint()
        best = checkpoint.load(self.checkpoint_dir / "best.pt", self.device)
        self.model.load_state_dict(best["model"])
        results = {f"best/{key}": value for key, value in best["best"].items()}
        results.update({f"best/{k}": v for k, v in self.evaluate("test").items()})
        self.export_encoder(self.run_dir / "encoder.pt")
        summary = {
            "stop_reason": reason,
            "global_step": state["global_step"],
            **state["task_steps"],
            **results,
            **self.parameter_counts(),
        }
        summary = {("steps/" + k if k in TASK_INDEX else k): v for k, v in summary.items()}
        self.log.log({"global_step": state["global_step"], "phase/event": "finished", **results})
        self.tracker.summary(summary)
        self.tracker.log_artifact(
            f"{self.run_dir.name}-encoder", "encoder", self.run_dir / "encoder.pt", metadata=results
        )
        atomic.write_text(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        self.log.close()
        self.tracker.finish()
        return summary

    def export_encoder(self, path: Path) -> None:
        """What `load_encoder` needs: config, vocabulary and encoder weights (embeddings included)."""
        checkpoint.save(
            {"format": 1, **self._encoder_metadata(), "encoder": self.model.encoder.state_dict()}, path
        )

    def _encoder_metadata(self) -> dict[str, Any]:
        return {
            "config": to_dict(self.config),
            "vocabulary": self.data.vocabulary.words,
            "vectors": str(self.data.vectors_path),
        }

    def _catch_interrupts(self) -> dict[int, Any]:
        """First Ctrl-C or SIGTERM: finish the step, checkpoint, stop. Second: stop at once."""

        def handler(signum, frame):
            if self._interrupted:
                raise KeyboardInterrupt
            self._interrupted = True
            say("\ninterrupt: saving a checkpoint after this step (Ctrl-C again to stop at once)")

        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                previous[signum] = signal.signal(signum, handler)
        return previous


class Diverged(Exception):
    pass


def read_run_record(run_dir: Path) -> dict[str, Any]:
    """The run's config.json: its config, the command that started it, its inputs' fingerprints."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run folder (no config.json): pass resume=runs/<run>")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise UserError(f"{path} cannot be read ({reason}): restore it, or start a new run") from None
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
        raise UserError(f"{path} has no 'config' table: restore it, or start a new run")
    return record


def load_config(run_dir: Path) -> TrainConfig:
    return from_dict(
        TrainConfig, read_run_record(run_dir)["config"], source=str(Path(run_dir) / "config.json")
    )
