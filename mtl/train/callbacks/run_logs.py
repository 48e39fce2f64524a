"""Rank 0's record of a run, as callbacks: the run log (metrics.jsonl and W&B), the progress bar,
and the W&B run they write to. They see records, never change what is trained."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mtl import metrics
from mtl.config import comma_list, to_dict
from mtl.console import progress_stream, say
from mtl.tracking.tracker import Tracker
from mtl.train.callbacks.base import Callback
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.run.log import NullLog, RunLog
from mtl.train.run.phases import COLUMNS
from mtl.train.run.training_run import TrainingRun


class MetricsLog(Callback):
    """Every record into `metrics.jsonl`; numbers of steps and evaluations to W&B's history
    (the run log decides which: the phases table, not the history, holds the blocks)."""

    def __init__(
        self,
        log: RunLog | NullLog,
        tracker: Tracker,
        phases: Callable[[], list[dict[str, Any]]],
        counts: dict[str, int],
    ):
        """`phases`: the rows of the run's blocks so far (a resumed run's earlier ones included);
        `counts`: the model's parameter counts."""
        self.log, self.tracker, self.phases, self.counts = log, tracker, phases, counts

    def on_train_begin(self, run: TrainingRun) -> None:
        """A new run's parameter counts, said and logged at step 0 (W&B has them in its config)."""
        if run.resumed:
            return
        counts = self.counts
        print(
            f"trainable parameters: {counts['params/trainable']:,} (encoder {counts['params/encoder']:,}; "
            f"frozen, excluded: {counts['params/frozen']:,})"
        )
        # no_duplicates: the share of the first epoch's batches that held a sentence twice
        changed = {
            f"batches_changed/{task}": stream.repeats_share()
            for task, stream in run.setup.streams.items()
            if stream.distinct is not None
        }
        for key, share in changed.items():
            print(
                f"{key.split('/', 1)[1]}: {100 * share:.0f}% of the first epoch's batches held a sentence "
                "twice (a false negative for an in-batch loss); batched without repeats (no_duplicates=true)"
            )
        # anchor-positive tasks (mnrl): the in-batch negatives the data itself labels positives
        false = {
            f"false_negatives/{task}": stream.false_negative_share()
            for task, stream in run.setup.streams.items()
            if run.data.tasks[task].anchors_positives
        }
        for key, share in false.items():
            print(
                f"{key.split('/', 1)[1]}: {100 * share:.2f}% of the first epoch's in-batch negatives are a "
                "positive of their anchor elsewhere in the data (false negatives)"
            )
        self.log.log({metrics.GLOBAL_STEP: 0, **counts, **changed, **false})

    def on_step(self, task: str, record: dict[str, Any]) -> None:
        self.log.log(record)

    def on_event(self, record: dict[str, Any]) -> None:
        self.log.log(record)
        if record.get(metrics.EVENT) == "block_end":
            self._log_phases(self.phases(), record[metrics.GLOBAL_STEP])
        if record.get(metrics.EVENT) == "affinity":  # the matrix as a table and a heatmap
            pairs = [
                key.removeprefix("affinity/").split(">") + [v]
                for key, v in record.items()
                if key.startswith("affinity/")
            ]
            step = record[metrics.GLOBAL_STEP]
            self.log.flush(step)
            self.tracker.heatmap(
                "affinity",
                ("source", "target", "affinity"),
                pairs,
                "task affinity Z(row -> column), latest measurement (Fifty et al. 2021)",
                step=step,
            )

    def on_finish(self, summary: dict[str, Any], phases: list[dict[str, Any]]) -> None:
        self._log_phases(phases, summary[metrics.GLOBAL_STEP])
        self.tracker.summary({k: v for k, v in summary.items() if not k.startswith("params/")})  # in config

    def _log_phases(self, rows: list[dict[str, Any]], step: int) -> None:
        """The phases table, whole, each time a block ends: it can be read while the run goes. (W&B's
        incremental tables start over in a resumed process; the whole table, from the checkpointed
        rows, stays complete.) One row per block keeps each version a few kB."""
        self.log.flush(step)
        self.tracker.table("phases", COLUMNS, [[row[c] for c in COLUMNS] for row in rows], step=step)

    def close(self, exit_code: int) -> None:
        if exit_code == 130:
            self.tracker.mark_preempting()  # resumable: W&B shows it preempted, not failed
        self.log.close(finished=exit_code == 0)
        self.tracker.finish(exit_code=exit_code)


class ProgressBar(Callback):
    def __init__(self, start: int, total: int | None, enabled: bool):
        self.bar = tqdm(
            initial=start,
            total=total,
            desc="train",
            unit="step",
            # The rate is the run's mean so far, evaluations included: the ETA counts them, where
            # tqdm's moving average swung from minutes to hours after each evaluation.
            smoothing=0,
            disable=not enabled,
            dynamic_ncols=True,
            file=progress_stream(),
        )

    def on_step(self, task: str, record: dict[str, Any]) -> None:
        self.bar.update()
        self.bar.set_postfix_str(self.losses(task, record), refresh=False)

    @staticmethod
    def losses(task: str, record: dict[str, Any]) -> str:
        """The step's loss as the bar shows it: a mixed step's each task's, its balanced objective
        labelled apart (a weighted sum of 94.7 read as a loss beside tasks at 1.1 and 0.69)."""
        if task != metrics.MIXED:
            return f"{task} loss {record[metrics.train(task, 'loss')]:.3f}"
        suffix = "/train/loss"
        each = [
            f"{key.removesuffix(suffix)} {value:.3f}"
            for key, value in record.items()
            if key.endswith(suffix) and key != metrics.train(metrics.MIXED, "loss")
        ]
        balanced = record.get(metrics.train(metrics.MIXED, "loss"))
        shown = "loss " + ", ".join(each)
        return shown + (f" (balanced objective {balanced:.3f})" if isinstance(balanced, int | float) else "")

    def on_event(self, record: dict[str, Any]) -> None:
        """One line per evaluation, above the bar: every task's dev metrics."""
        if record.get(metrics.EVENT) != "evaluation" or self.bar.disable:
            return
        values = ", ".join(
            f"{key} {metrics.shown(key, value)}"
            for key, value in record.items()
            if metrics.is_evaluation(key)
        )
        say(f"step {record[metrics.GLOBAL_STEP]}: {values}")  # above the bar, which is cleared first

    def close(self, exit_code: int) -> None:
        self.bar.close()


def start_tracking(
    config: TrainConfig,
    data: TrainingData,
    run_dir: Path,
    wandb_id: str,
    resume: bool,
    details: dict[str, Any],
    command: str,
) -> Tracker:
    """The W&B run of a training run, with mtl's metric schema (each task's values against its own
    step) and the task data it read as inputs."""
    run = config.run
    tracker = Tracker.start(
        job_type="train",
        config={
            **to_dict(config),
            **details,
            "data": {**to_dict(config.data), **data.statistics()},
            "inputs": data.fingerprints,
            "git_commit": git_commit(),
        },
        project=run.wandb_project,
        directory=run_dir,
        mode=run.wandb,
        name=run_dir.name,
        run_id=wandb_id,
        resume=resume,
        group=run.group or run.name,
        tags=[config.model.encoder, config.schedule.schedule, *config.tasks, *split_tags(run.wandb_tags)],
        notes=run.wandb_notes or command,
        entity=run.wandb_entity,
        console=run.wandb_console,
    )
    tracker.define_metric(metrics.GLOBAL_STEP)
    tracker.define_metric(metrics.TASK_ID, step_metric=metrics.GLOBAL_STEP)
    if (run_dir / "config.json").is_file():  # (a Trainer made in Python, not by a command, has none)
        tracker.save_file(run_dir / "config.json")  # the file `resume=` reads, beside W&B's flattened config
    for name, task in data.tasks.items():
        # a task that only watches (train=false) has no steps of its own: its values by the run's
        task_step = metrics.of_task(name, "step") if task.config.train else metrics.GLOBAL_STEP
        tracker.define_metric(task_step)
        tracker.define_metric(metrics.of_task(name, "*"), step_metric=task_step)
        tracker.define_metric(
            metrics.evaluation(name, "dev", task.metric),
            step_metric=task_step,
            summary=metrics.wandb_summary(task.metric),
        )
        if (folder := task.input_artifact()) is not None:
            tracker.use_input(task.input_name, "dataset", folder, reference=True)
    return tracker


def split_tags(tags: str) -> list[str]:
    return comma_list(tags)


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


def open_run_logs(
    run: TrainingRun,
    checkpointer: Any,  # mtl.train.run.checkpointer.Checkpointer
    command: str,
    progress: bool,
) -> tuple[RunLog, MetricsLog, ProgressBar]:
    """Rank 0's run log (cut to the checkpoint on resume, `run.resumed`) and W&B run, and the two
    callbacks that write to them: the metrics log and the progress bar. `command`: the command
    line, as the W&B run's notes."""
    config, state, resume = run.config, run.state, run.resumed  # (the state restored already on resume)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    counts = run.model.parameter_counts()
    details = {"world_size": run.dist.world_size, **counts}
    tracker = start_tracking(config, run.data, run.run_dir, state.wandb_id, resume, details, command)
    checkpointer.attach(tracker, state.wandb_id, counts)
    if resume and state.best is not None:
        checkpointer.log_best(state.best)
    log = RunLog(
        run.files.metrics,
        tracker,
        resume_at_byte=state.metrics_bytes if resume else None,
        every=config.run.wandb_every,
    )
    bar = ProgressBar(state.global_step, config.optim.max_steps, progress)
    return log, MetricsLog(log, tracker, lambda: state.phases.rows, counts), bar
