"""The run, a floor below the step, the callbacks and the loop: the run object and its control
(`training_run`), what it is set up with (`setup`: models, optimizers, scheduler, sharding), its
state, phases, checkpoints and run log. What runs it is above; nothing here imports it."""
