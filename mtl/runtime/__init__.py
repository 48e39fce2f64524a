"""Where a run executes: the device (`device`) and torchrun's processes (`distributed`).

May import the base layer (`mtl.errors`, `mtl.console`, `mtl.files`) and torch.
"""
