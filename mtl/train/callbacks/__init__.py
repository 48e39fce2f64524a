"""Work around the loop as callbacks: the hooks and how a plugin registers one (`base`), those a
run's keys ask for (`run_callbacks`: affinity, monitor=, online mixing, the contamination
ledger), and rank 0's record of a run (`run_logs`, `runlog`)."""
