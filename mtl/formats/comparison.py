"""The comparison record `just compare` writes (compare-<time>.json) and the studies read back:
which method made its intervals and verdicts. A record without `method` predates it."""

METHOD = "studentized: seeds (Welch, guarded degrees of freedom) + paired test items"
# Welch-Satterthwaite's degrees of freedom as estimated (2026-11-28 to 2026-12-01): too many
# false verdicts when one arm has fewer seeds than the other (issue 100).
WELCH_METHOD = "studentized: seeds (Welch-Satterthwaite) + paired test items"
EARLIER_METHOD = "two-level bootstrap: seeds, then test items (before 2026-11-28)"
STUDENTIZED = (METHOD, WELCH_METHOD)  # records that keep their standard error and df


def method_of(comparison: dict) -> str:
    """The method a recorded comparison was made with."""
    return str(comparison.get("method") or EARLIER_METHOD)
