"""SentEval-style transfer: the task registry and readers (`registry`, `tasks`), the protocols
(`suite`, `classifiers`, `senteval_classifier`, `selfattn`); the report file it writes is
`mtl.formats.transfer_report`.

Importing any part registers the built-in tasks first, so a registry read anywhere is complete.
"""

from mtl.eval.transfer import (
    probing_tasks,  # noqa: F401  (then its probing tasks)
    tasks,  # noqa: F401  (registers the SentEval tasks)
)
