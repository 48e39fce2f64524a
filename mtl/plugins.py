"""User code that registers tasks, encoders, transfer tasks, callbacks and schedules, loaded only
when the user names it: `plugins=NAME,...` on the command line (a module name or a `.py` path), or
a package installed with an entry point in the group `mtl.plugins`.

Files stay data: a preset, task file, run folder or encoder that names a plugin never imports it.
A run records the plugins it was trained with (config.json, encoder.json); resuming it, transferring
it or loading its encoder needs them loaded again and otherwise stops with one line naming them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import TypeVar

from mtl.errors import UserError

ENTRY_POINT_GROUP = "mtl.plugins"
KEY = "plugins"  # plugins=a,b on any command line
ENVIRONMENT = "MTL_PLUGINS"  # what a command named, for the processes it starts

Registered = TypeVar("Registered")


class Registry(MutableMapping[str, Registered]):
    """The names -> entries of one extension point (task kinds, encoders, schedules, ...).

    mtl's own entries are listed by the module whose import registers them, and that module is
    imported when its entry is first looked up: listing the names (`--help`, checking a key's
    value) imports none of them, so neither torch nor spaCy loads until a command uses one.
    A plugin's entries are added directly (`registry[name] = entry`, through `adds_to`).
    """

    def __init__(self, builtin: dict[str, str] | None = None):
        self._modules = dict(builtin or {})  # built-in name -> the module that registers it
        self._entries: dict[str, Registered] = {}

    def __getitem__(self, name: str) -> Registered:
        if name not in self._entries and name in self._modules:
            importlib.import_module(self._modules[name])
        return self._entries[name]

    def __setitem__(self, name: str, entry: Registered) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        if name not in self._entries and name not in self._modules:
            raise KeyError(name)
        self._entries.pop(name, None)
        self._modules.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._entries

    def __iter__(self) -> Iterator[str]:
        yield from self._modules
        yield from (name for name in self._entries if name not in self._modules)

    def __len__(self) -> int:
        return len(self._modules.keys() | self._entries.keys())

    def loaded(self) -> dict[str, Registered]:
        """The entries imported or added so far, without importing the others."""
        return {name: self._entries[name] for name in self if name in self._entries}


def adds_to(registry: MutableMapping[str, Registered], name: str) -> Callable[[Registered], Registered]:
    """A decorator that enters what it decorates in `registry` under `name`: how each
    `register_*` of mtl.registry is made."""

    def add(entry: Registered) -> Registered:
        registry[name] = entry
        return entry

    return add


_loaded: dict[str, str] = {}  # plugin name -> how it came (the path or module given, or installed)
_installed_loaded = False


def name_of(spec: str) -> str:
    """The name a run records for `plugins=spec`: a module's dotted name, a `.py` file's stem."""
    spec = spec.strip()
    return Path(spec).stem if spec.endswith(".py") else spec


def load(specs: str | Sequence[str]) -> list[str]:
    """Import each plugin of `specs` (a comma list or names); its registrations take effect."""
    names = []
    for spec in [s.strip() for s in (specs.split(",") if isinstance(specs, str) else specs) if s.strip()]:
        name = name_of(spec)
        if name not in _loaded:
            _import(spec, name)
            _loaded[name] = spec
        names.append(name)
    return names


def _import(spec: str, name: str) -> None:
    if spec.endswith(".py"):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise UserError(f"plugins={spec}: no such file: give a .py file or an importable module name")
        module_spec = importlib.util.spec_from_file_location(f"mtl_plugin_{name}", path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_spec.name, None)
            raise
        return
    try:
        importlib.import_module(spec)
    except ModuleNotFoundError as error:
        if error.name is None or not (spec == error.name or spec.startswith(error.name + ".")):
            raise  # the plugin was found, and a module it imports was not: its own traceback says which
        raise UserError(
            f"plugins={spec}: no module {error.name!r} is importable: install its package, or give the "
            "path of a .py file"
        ) from None


def load_installed() -> list[str]:
    """Import every plugin of the installed packages' `mtl.plugins` entry points (once)."""
    global _installed_loaded
    if not _installed_loaded:
        _installed_loaded = True
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if entry.module not in _loaded:
                entry.load()
                _loaded[entry.module] = f"installed ({entry.name})"
    return list(_loaded)


def loaded() -> list[str]:
    """The names of the plugins loaded in this process, in the order they came."""
    return list(_loaded)


def require(names: Iterable[str] | None, what: str) -> None:
    """Stop with one line when a plugin `what` was made with is not loaded (installed ones are
    loaded first)."""
    names = [n for n in (names or []) if isinstance(n, str)]
    if names and any(n not in _loaded for n in names):
        load_installed()
    if missing := [n for n in names if n not in _loaded]:
        raise UserError(
            f"{what} was made with the plugin{'s' * (len(missing) > 1)} {', '.join(missing)}: give "
            f"plugins={','.join(missing)} (its module or .py file) or install it; a run folder never "
            "imports code by itself"
        )


def load_for_command(args: Sequence[str]) -> list[str]:
    """Load the plugins a command line names (`plugins=`), those its parent process named (torchrun's
    ranks, a sweep's runs inherit `MTL_PLUGINS`) and the installed ones; return the other arguments.
    What was named is passed on to the processes this one starts."""
    given = [a.partition("=")[2] for a in args if a.startswith(f"{KEY}=")]
    specs = [s.strip() for v in [os.environ.get(ENVIRONMENT, ""), *given] for s in v.split(",") if s.strip()]
    load(specs)
    load_installed()
    if specs:
        os.environ[ENVIRONMENT] = ",".join(dict.fromkeys(specs))
    return [a for a in args if not a.startswith(f"{KEY}=")]
