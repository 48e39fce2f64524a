"""How parameters move: the optimizers (`optimizers`, `optimizer_registry`), the lr schedules
(`lr_schedules`) and how schedule=mixed combines its tasks' gradients (`balancers`)."""
