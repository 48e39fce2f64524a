"""The comparison record `just compare` writes (compare-<time>.json) and the studies read back:
which method made its intervals and verdicts. A record without `method` predates it."""

METHOD = "studentized: seeds (Welch-Satterthwaite) + paired test items"
EARLIER_METHOD = "two-level bootstrap: seeds, then test items (before 2026-11-28)"


def method_of(comparison: dict) -> str:
    """The method a recorded comparison was made with."""
    return str(comparison.get("method") or EARLIER_METHOD)
