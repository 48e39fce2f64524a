"""The transfer tasks: the registry (`registry`: a task's reader, protocol, metric and SentEval's
quirks), SentEval's tasks and their readers (`tasks`) and the probing tasks (`probing_tasks`).
Below evaluation: a run's config checks the task names of monitor= and the report files name
them without scoring anything.

Importing any part registers the built-in tasks first, so a registry read anywhere is complete.
"""

from mtl.transfer_tasks import (
    probing_tasks,  # noqa: F401  (then its probing tasks)
    tasks,  # noqa: F401  (registers the SentEval tasks)
)
