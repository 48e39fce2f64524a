"""How many threads scoring a transfer task uses: one, for every fit, score and linear-algebra
call, in this process and in the k-fold worker processes it starts.

On a machine shared with other work a second thread waits for a core at every barrier of an
OpenMP or BLAS call: SICK-E took 32-58 s on the default threads against 1.8-3.3 s on one on a
loaded 2-core machine, the same accuracies (issue 85); the small matrices of a transfer task gain
little from more threads on an idle one. One thread also makes a solver's path, and so an
unconverged fit's result, the same on every machine. Embedding the task's sentences, outside the
guard, keeps the caller's threads (a BiLSTM at paper width gains from them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from joblib import parallel_config
from threadpoolctl import threadpool_limits


@contextlib.contextmanager
def one_thread_scoring() -> Iterator[None]:
    """Within it: BLAS and OpenMP (NumPy's, SciPy's and scikit-learn's libraries, torch's OpenMP
    pool) at one thread, torch's intra-op count 1, and every joblib worker started so (loky's
    inner_max_num_threads); the caller's torch count back after."""
    threads = torch.get_num_threads()
    with threadpool_limits(limits=1), parallel_config("loky", inner_max_num_threads=1):
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)
