"""Weights & Biases, offline by default: the run tracker (`tracker`) and the reader of W&B's
offline run files (`wandb_file`).

May import the base layer (`mtl.errors`, `mtl.console`, `mtl.files`) only.
"""
