"""Presets for `just train-multitask preset=NAME`: one TOML file of key = value overrides each."""
