"""`just ledger run=runs/<run>`: a finished run's contamination ledger computed again.

A run keeps its ledger in summary.json at the end of training (mtl.train.callbacks.run_callbacks). A run
trained with contamination=false, or before the ledger listed the seen test sentences by key
(2026-11-29: what scoring without the seen items needs), is computed again here from its
recorded config: its data read as training read it (the same files, refused when their
fingerprints changed, as resume refuses them), every sentence of its trained tasks compared
with the transfer test sets. summary.json is rewritten with the new `contamination` entry only,
under the run folder's lock. Then `just transfer run=...` scores each task without the seen items.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval import contamination

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import LedgerConfig as LedgerConfig
from mtl.files import schemas
from mtl.formats import run_files
from mtl.runs import RunFolder
from mtl.train.config.record import read_run_record
from mtl.train.config.train_config import recorded_config
from mtl.train.data.training_data import changed_inputs, prepare


def relist(config: LedgerConfig) -> dict:
    """The run's ledger, computed again and written to its summary.json; returns it."""
    if not config.run:
        raise UserError("just ledger needs run=runs/<run> (a finished run folder)")
    folder = RunFolder(Path(config.run).expanduser())
    record = read_run_record(folder.path, "run")  # just ledger's key, not resume=
    with folder.lock("run"):  # a run still training holds it: its own ledger comes at its end
        summary = schemas.read_json(folder.summary, run_files.Summary, schemas.RESTORE)
        if summary is None:
            raise UserError(f"{folder.path} has no summary.json: the run has not finished (resume it first)")
        train = recorded_config(record["config"], str(folder.record))
        data = prepare(train, progress=True)
        if changed := changed_inputs(record.get("inputs", {}), data.fingerprints, data.input_titles()):
            raise UserError(
                f"{folder.path}: {' and '.join(changed)} changed since the run trained: the ledger would "
                "not be of its training data; restore the original files"
            )
        root = Path(config.data).expanduser() if config.data else None
        if root is not None and not root.is_dir():
            raise UserError(f"data={config.data} is not a folder: give SentEval's downstream folder")
        ledger = contamination.ledger(data.training_sentences(), root, progress=True)
        run_files.write_summary(folder.summary, {**summary, "contamination": ledger})
    return ledger


def command(args: Sequence[str]) -> None:
    """`just ledger run=...`: the counts per test set, and where they went."""
    config = apply_overrides(LedgerConfig(), args)
    ledger = relist(config)
    if "skipped" in ledger:
        raise UserError(f"no ledger: {ledger['skipped']} (set MTL_DATA_DIR or give data=)")
    seen = contamination.seen_test_sets(ledger)
    listed = ", ".join(f"{name} {count:,}" for name, count in seen.items()) or "none"
    print(
        f"{ledger['training_sentences']:,} training sentences against {len(ledger['test_sets'])} test sets; "
        f"test sentences seen (exact or near): {listed}"
    )
    print(f"written to {RunFolder(Path(config.run).expanduser()).summary}")
