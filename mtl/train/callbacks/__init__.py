"""Work around the loop as callbacks: the hooks and how a plugin registers one (`base`), those a
run's keys ask for (`run_callbacks`: affinity, monitor=, online mixing, the contamination
ledger), and the callbacks that write rank 0's record of a run and its bar (`run_logs`; the
record's writer itself is the run's: `mtl.train.run.log`)."""
