"""The loop: one run as an object (`training_run`), the loop over its steps (`trainer`), when it
evaluates, checkpoints and stops (`cadence`), its evaluations and checkpoints (`evaluation`,
`checkpointer`, `selection`), how it ends (`ending`), where it stands (`state`, `phases`), what
it trains with (`setup`), and starting or resuming one (`run`, `launch` for torchrun)."""
