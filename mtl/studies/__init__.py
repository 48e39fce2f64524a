"""Studies that answer a multitask question with a seed-aware verdict, each a command over many
runs: `versus` (the mixture against each task alone), `mixture` (RegMix's search), `groups`
(task groupings), `affinity_check` (does affinity predict leave-one-out), `balancer_bench` and
`mixing_bench`. They train through `mtl.jobs` (members, launchers) and judge with
`mtl.analysis`'s statistics."""
