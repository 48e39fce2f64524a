"""The files whose code one training step runs: what a reader opens to follow a step.

    MTL_DATA_DIR=../shared/data python -m tools.step_files tasks=nli
    MTL_DATA_DIR=../shared/data python -m tools.step_files tasks=nli,squad schedule=mixed

Trains a small run (cpu-small's data, hidden 16, 3 steps, in a temporary folder) and records, with
`sys.setprofile`, every file of mtl a function of which is called between its second step's
`on_step_begin` and `on_step_end` (the first builds what later steps reuse), then prints them by
folder with their count. Extra arguments are train-multitask keys.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import mtl
from mtl.registry import Callback
from mtl.train.loop import run

PACKAGE = Path(mtl.__file__).resolve().parent


class StepFiles(Callback):
    """Every mtl file whose code runs during step `step`."""

    def __init__(self, step: int = 2):
        self.step, self.files = step, set()

    def _seen(self, frame, event, arg) -> None:
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(PACKAGE):
                self.files.add(path.relative_to(PACKAGE))

    def on_step_begin(self, run, tasks) -> None:
        if run.state.global_step + 1 == self.step:
            sys.setprofile(self._seen)

    def on_step_end(self, run, task) -> None:
        sys.setprofile(None)


def main(args: list[str]) -> None:
    seen = StepFiles()
    with tempfile.TemporaryDirectory() as out:
        keys = ["preset=cpu-small", "hidden=16", "max_steps=3", "wandb=disabled", "contamination=false"]
        config = run.config_from_args([*keys, f"out={out}/run", *args])
        run.start(config, progress=False, callbacks=[seen])
    folders = defaultdict(list)
    for file in sorted(seen.files):
        folders[str(file.parent)].append(file.name)
    for folder, names in sorted(folders.items()):
        print(f"{Path('mtl', folder)}/: {', '.join(names)}")
    print(f"{len(seen.files)} files in {len(folders)} folders run during one step ({' '.join(args)})")


if __name__ == "__main__":
    main(sys.argv[1:])
