"""How a run ends. After its last step: the best checkpoint's weights back in the model (whole
in every process where training sharded them), their test scores, what the callbacks add to the
summary (the contamination ledger), the exported encoder (encoder.json, and encoder/ for
sentence-transformers), and the summary itself: logged, written to summary.json by rank 0 and
returned. Interrupted (checkpointed already) or failed: its logs closed with the exit code."""

from __future__ import annotations

from typing import Any

from mtl import metrics
from mtl.formats.run_files import write_summary
from mtl.train.run.checkpointer import export_final_encoder
from mtl.train.run.setup import build_model
from mtl.train.run.state import StopReason
from mtl.train.run.training_run import TrainingRun
from mtl.train.step.strategy import Diverged


class Ending:
    """The end of `run`: finished, interrupted or failed."""

    def __init__(self, run: TrainingRun):
        self.run = run

    def finished(self, reason: StopReason) -> dict[str, Any]:
        """The summary of the run, which stopped for `reason` with its last checkpoint written.
        `run.model` is the best checkpoint's model afterwards (a new one where training sharded it)."""
        run = self.run
        state, checkpointer, callbacks = run.state, run.checkpointer, run.callbacks
        best = checkpointer.load_best()
        if run.setup.sharded:
            run.model = build_model(run.config, run.data, run.device).to(run.device)
        run.model.load_state_dict(best["model"])
        results = {metrics.best(key): value for key, value in best["best"].items()}
        results.update({metrics.best(k): v for k, v in run.evaluate("test").items()})
        added = callbacks.on_train_end(run)  # the contamination ledger among them
        portable = export_final_encoder(
            checkpointer,
            run.config,
            run.data,
            run.model,
            run.setup.streams,
            results,
            added.get("contamination"),
        )
        summary = state.summary(reason, results, run.model.parameter_counts(), run.selection)
        if reason is StopReason.CALLBACK:
            summary["stop_why"] = run.control.stop_why
        summary.update(added)
        summary[metrics.SCORED_ON] = run.data.scored_on
        # encoder/ loads in sentence-transformers, or why it does not exist
        summary["sentence_transformers"] = portable if isinstance(portable, str) else "encoder"
        summary["wandb_artifacts"] = checkpointer.artifact_names
        callbacks.on_event({metrics.GLOBAL_STEP: state.global_step, metrics.EVENT: "finished", **results})
        callbacks.on_finish(summary, state.phases.rows)
        if run.dist.is_main:
            write_summary(run.files.summary, summary)
        callbacks.close(exit_code=0)
        return summary

    def interrupted(self) -> KeyboardInterrupt:
        """The logs of a run stopped by Ctrl-C or SIGTERM (its checkpoint written) closed; what to raise."""
        run = self.run
        run.callbacks.close(exit_code=130)
        # torchrun stops every rank once one exits: the others wait until rank 0's files are complete.
        run.dist.barrier()
        return KeyboardInterrupt(
            f"stopped at step {run.state.global_step}: resume with `just train-multitask resume={run.run_dir}`"
        )

    def failed(self, error: BaseException) -> None:
        """The run's loop raised `error`: a divergence alerted and logged (`just report` says so; a
        resume cuts it off), the logs closed as failed."""
        run = self.run
        if isinstance(error, Diverged):
            run.checkpointer.tracker.alert("mtl run diverged", str(error))
            run.event("diverged", why=str(error))
        run.callbacks.close(exit_code=1)
