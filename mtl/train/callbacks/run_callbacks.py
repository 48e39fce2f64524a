"""The callbacks a run's keys ask for, built for the trainer: affinity_every= (the lookahead
affinities), monitor= (transfer scores with each evaluation), contamination= (the transfer test
sentences the run trained on), the online schedules' updates (schedule=aioli|doremi|transfer) and
callbacks=a,b (a plugin's)."""

from __future__ import annotations

from typing import Any

from mtl.eval import contamination
from mtl.train.callbacks.affinity import AffinityMeasurements
from mtl.train.callbacks.base import Callback, named_callbacks
from mtl.train.callbacks.online_mixing import OnlineMixing
from mtl.train.data.scheduler import adapts
from mtl.train.run.training_run import TrainingRun


class ContaminationLedger(Callback):
    """contamination=true: which transfer test sentences the run trained on (exact or near
    duplicates; mtl/eval/contamination.py), into the summary and the encoder's card. Rank 0 counts."""

    every_rank = True  # the other ranks' summaries carry an empty ledger

    def __init__(self, enabled: bool, progress: bool):
        self.enabled, self.progress = enabled, progress

    def on_train_end(self, run: TrainingRun) -> dict[str, Any]:
        if not self.enabled:
            return {"contamination": {"skipped": "contamination=false"}}
        if not run.dist.is_main:
            return {"contamination": {}}
        ledger = contamination.ledger(run.data.training_sentences(), progress=self.progress)
        if self.progress and (seen := contamination.seen_test_sets(ledger)):
            listed = ", ".join(f"{name} {count:,}" for name, count in seen.items())
            print(f"test sentences also in the training data (exact or near duplicates): {listed}")
        return {"contamination": ledger}


def run_callbacks(run: TrainingRun, progress: bool) -> list[Callback]:
    """This process's callbacks of `run`, in the order they are called (the run log and progress
    bar join them on rank 0 when the run's logs open)."""
    config, data, setup, dist, run_dir = run.config, run.data, run.setup, run.dist, run.run_dir
    callbacks: list[Callback] = []
    if adapts(config.schedule.schedule):
        callbacks.append(OnlineMixing(config, data, setup, run.device))
    if config.run.affinity_every:
        callbacks.append(AffinityMeasurements(config, data, setup, run.device, run.files.affinity))
    if config.run.monitor:  # imported here: scikit-learn and SciPy cost 1 s of a run without monitor=
        from mtl.train.callbacks.monitor import Monitor

        callbacks.append(Monitor(config, data, setup.model, run.device, dist))
    callbacks.append(ContaminationLedger(config.run.contamination, progress))
    if config.run.callbacks and dist.is_main:  # a plugin's is built with the folder it may write to
        run_dir.mkdir(parents=True, exist_ok=True)
    return callbacks + named_callbacks(config, run_dir, dist.is_main)
