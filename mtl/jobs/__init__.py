"""Where many runs train (a sweep; the studies of `mtl.studies` build on it): each run is
a `Member` (a `train-multitask` command and its folder), handed to a launcher: this machine's
processes (`launcher=local`, the default) or a SLURM cluster through submitit (`launcher=slurm`).
`just status` and `just cancel` follow and stop what was launched."""
