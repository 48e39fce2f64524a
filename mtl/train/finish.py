"""How a run ends. After its last step: the best checkpoint's weights back in the model (whole
in every process where training sharded them), their test scores, what the callbacks add to the
summary (the contamination ledger), the exported encoder (encoder.json, and encoder/ for
sentence-transformers), and the summary itself: logged, written to summary.json by rank 0 and
returned. Interrupted (checkpointed already) or failed: its logs closed with the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mtl import metrics
from mtl.files import atomic, jsonfile
from mtl.train.checkpointer import export_final_encoder
from mtl.train.setup import build_model
from mtl.train.state import StopReason
from mtl.train.step import Diverged

if TYPE_CHECKING:  # (the trainer imports this module)
    from mtl.train.trainer import Trainer


def finish(trainer: Trainer, reason: StopReason) -> dict[str, Any]:
    """The summary of `trainer`'s run, which stopped for `reason` with its last checkpoint written.
    `trainer.model` is the best checkpoint's model afterwards (a new one where training sharded it)."""
    state, checkpointer, callbacks = trainer.state, trainer.checkpointer, trainer.callbacks
    best = checkpointer.load_best()
    if trainer.setup.sharded:
        trainer.model = build_model(trainer.config, trainer.data, trainer.device).to(trainer.device)
    trainer.model.load_state_dict(best["model"])
    results = {metrics.best(key): value for key, value in best["best"].items()}
    results.update({metrics.best(k): v for k, v in trainer.evaluate("test").items()})
    added = callbacks.on_train_end(trainer.run)  # the contamination ledger among them
    portable = export_final_encoder(
        checkpointer, trainer.config, trainer.data, trainer.model, trainer.setup.streams, results,
        added.get("contamination"),
    )  # fmt: skip
    summary = state.summary(reason, results, trainer.model.parameter_counts(), trainer.selection)
    if reason is StopReason.CALLBACK:
        summary["stop_why"] = trainer.run.control.stop_why
    summary.update(added)
    summary[metrics.SCORED_ON] = trainer.data.scored_on
    # encoder/ loads in sentence-transformers, or why it does not exist
    summary["sentence_transformers"] = portable if isinstance(portable, str) else "encoder"
    summary["wandb_artifacts"] = checkpointer.artifact_names
    callbacks.on_event({metrics.GLOBAL_STEP: state.global_step, metrics.EVENT: "finished", **results})
    callbacks.on_finish(summary, state.phases.rows)
    if trainer.dist.is_main:
        atomic.write_text(trainer.files.summary, jsonfile.dumps(summary, indent=2) + "\n")
    callbacks.close(exit_code=0)
    return summary


def close_interrupted(trainer: Trainer) -> KeyboardInterrupt:
    """The logs of a run stopped by Ctrl-C or SIGTERM (its checkpoint written) closed; what to raise."""
    trainer.callbacks.close(exit_code=130)
    # torchrun stops every rank once one exits: the others wait until rank 0's files are complete.
    trainer.dist.barrier()
    return KeyboardInterrupt(
        f"stopped at step {trainer.state.global_step}: resume with `just train-multitask resume={trainer.run_dir}`"
    )


def close_failed(trainer: Trainer, error: BaseException) -> None:
    """The run's loop raised `error`: batches being prepared dropped, a divergence alerted and
    logged (`just report` says so; a resume cuts it off), the logs closed as failed."""
    trainer.prefetcher.close()
    if isinstance(error, Diverged):
        trainer.checkpointer.tracker.alert("mtl run diverged", str(error))
        trainer.event("diverged", why=str(error))
    trainer.callbacks.close(exit_code=1)
