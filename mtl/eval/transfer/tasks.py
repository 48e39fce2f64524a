"""The transfer tasks and their readers where plugins written for the API of 2026-11-25 import
them (tests/fixtures/plugins/api_2026_11.py: `from mtl.eval.transfer.tasks import read_task`).
They live in `mtl.transfer_tasks.tasks` since the registry got its own floor; new plugins take
them from `mtl.registry`."""

from mtl.transfer_tasks.tasks import Split, TransferDataError, TransferTask, read_task

__all__ = ["Split", "TransferDataError", "TransferTask", "read_task"]
