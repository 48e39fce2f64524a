"""Commands that train many runs (a sweep, versus-single) and where their runs train: each run is
a `Member` (a `train-multitask` command and its folder), handed to a launcher: this machine's
processes (`launcher=local`, the default) or a SLURM cluster through submitit (`launcher=slurm`).
`just status` and `just cancel` follow and stop what was launched."""
