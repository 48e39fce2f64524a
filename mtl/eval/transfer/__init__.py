"""SentEval-style transfer: the protocols (`suite`, `classifiers`, `senteval_classifier`,
`selfattn`) over the tasks of `mtl.transfer_tasks` (the registry and readers); the report file it
writes is `mtl.formats.transfer_report`.

Importing any part registers the built-in tasks first, so a registry read anywhere is complete.
"""

import mtl.transfer_tasks  # noqa: F401  (registers the SentEval and probing tasks)
