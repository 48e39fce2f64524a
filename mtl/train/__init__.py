"""Training, in rooms: `loop` (the run and its loop), `step` (one optimizer step), `callbacks`
(work around the loop), `optim` (optimizers, lr schedules, balancers), `config` (a run's keys,
without torch) and `data` (what a run reads and scores).

`mtl.train` is also the Python entry point to training (`mtl.train("preset=cpu-small",
max_steps=300)`, mtl/api.py): this package's module object is callable, since once any of its
submodules is imported the package, not a function, is what the name `mtl.train` holds.
"""

import sys
import types


class _CallableModule(types.ModuleType):
    def __call__(self, *keys, progress=True, **settings):  # noqa: ANN001, ANN204
        import importlib  # mtl.api sits above this package (an entry point): reached by name

        return importlib.import_module("mtl.api").train(*keys, progress=progress, **settings)


sys.modules[__name__].__class__ = _CallableModule
