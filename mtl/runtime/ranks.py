"""What torchrun's ranks say when they stop: their exit codes, their last words (each rank's goes
to the launcher, which says each once) and which rank's failure stopped the job."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from mtl.console import end_progress_bars, say

PRINTED_ITS_ERROR = 2  # a rank's own one-line error (UserError)
LOST_A_PEER = 3  # a rank whose collective failed because another process died (mtl.cli)
INTERRUPTED = 130  # Ctrl-C or SIGTERM: every rank checkpointed, rank 0 printed the resume command


RANK_MESSAGES = "MTL_RANK_MESSAGES"  # a folder where each rank of the launcher's job leaves its message
LOST_CONTACT = "lost contact with another process of the job"  # a collateral rank's words (mtl.cli)


def rank_says(message: str) -> None:
    """A command's last words (an error, an interruption), on a line of their own. Under `just
    train-distributed` a rank's go to the launcher, which says each once (N ranks failing on the
    same bad input would say it N times, between torchrun's lines); anywhere else, to stderr."""
    end_progress_bars()
    folder, rank = os.environ.get(RANK_MESSAGES), os.environ.get("RANK")
    if folder and rank is not None:
        try:
            (Path(folder) / f"rank{int(rank)}").write_text(message, encoding="utf-8")
            return
        except (OSError, ValueError):
            pass
    say(message)


def own_errors(folder: Path, failures: dict) -> str:
    """The errors the failed ranks wrote (`rank_says`): one line, each said once, by rank when they
    differ. Every failed rank's words are read, whatever its exit code: a rank that said its error
    and was then stopped by torchrun (SIGTERM, once another rank left first: a rank that only
    follows rank 0's refusal exits 2 without a word) said why all the same. A rank that lost its
    peer, or was interrupted, is collateral: its words are not the cause."""
    said: dict[str, list[int]] = {}
    for rank in sorted(failures):
        try:
            text = (folder / f"rank{rank}").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if not text.startswith("error:") or LOST_CONTACT in text:
            continue
        said.setdefault(text.removeprefix("error: "), []).append(rank)
    if not said:
        return "a rank failed without saying why: run it with one process (just train-multitask) to see"
    if len(said) == 1:
        return next(iter(said))
    return "; ".join(f"rank {', '.join(map(str, ranks))}: {text}" for text, ranks in said.items())


def root_cause(failures: dict[int, tuple[int, float]]) -> int | None:
    """The rank whose failure stopped the job, from rank -> (exit code, time); None when a rank
    already said why (its own one-line error).

    The others are collateral: a rank that lost its peer, or that torchrun stopped with
    SIGTERM once the first one failed (gloo may also abort a rank whose peer is gone).
    """
    causes = {rank: failure for rank, failure in failures.items() if failure[0] not in COLLATERAL}
    if any(code == PRINTED_ITS_ERROR for code, _ in causes.values()):
        return None
    candidates = causes or failures
    return min(candidates, key=lambda rank: candidates[rank][1])


COLLATERAL = {LOST_A_PEER, INTERRUPTED, -signal.SIGTERM}
