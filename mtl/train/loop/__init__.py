"""The loop, the top floor of `mtl.train`: the loop over a run's steps (`trainer`), when it
evaluates, checkpoints and stops (`cadence`), its evaluations (`evaluation`), which checkpoint is
best (`selection`, a registry the config reads), how it ends (`ending`), and starting or resuming
one (`run`, `launch` for torchrun). The run it drives is the floor below (`mtl.train.run`)."""
