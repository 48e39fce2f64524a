"""A run's configuration, without torch: its dataclasses and keys (`train_config`), presets
(`presets`), the command line (`command_line`), the inputs found (`inputs`), every `auto` made
concrete (`resolve`) and the record a run folder keeps of it (`record`)."""
