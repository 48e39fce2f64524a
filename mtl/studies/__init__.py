"""Studies that answer a multitask question with a seed-aware verdict, each a command over many
runs: `versus` (the mixture against each task alone), `mixture` (RegMix's search), `groups`
(task groupings), `affinity_check` (does affinity predict leave-one-out), `compare_balancers`
and `compare_mixing`; `study` is the base a study fills in (and a plugin's, in one file). They train through `mtl.jobs` (members, launchers) and judge with
`mtl.analysis`'s statistics."""
