"""SentEval-style transfer: the task registry and readers (`registry`, `tasks`), the protocols
(`suite`, `classifiers`, `senteval_classifier`, `selfattn`) and the report file (`report_file`).

Importing any part registers the built-in tasks first, so a registry read anywhere is complete.
"""

from mtl.eval.transfer import (
    probing_tasks,  # noqa: F401  (then its probing tasks)
    tasks,  # noqa: F401  (registers the SentEval tasks)
)
