"""User code that registers tasks, encoders, transfer tasks, callbacks and schedules, loaded only
when the user names it: `plugins=NAME,...` on the command line (a module name or a `.py` path), or
a package installed with an entry point in the group `mtl.plugins`.

Files stay data: a preset, task file, run folder or encoder that names a plugin never imports it.
A run records the plugins it was trained with (config.json, encoder.json); resuming it, transferring
it or loading its encoder needs them loaded again and otherwise stops with one line naming them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mtl.config import comma_list
from mtl.console import say
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
        owner, origin = taken_by(registry, name), _origin(entry)
        # a built-in's own module registering it, or the same definition again (a plugin loaded
        # twice), may; anything else may not replace what the name holds
        if owner is not None and owner not in (origin, origin[0]) and not _importing(owner):
            held = ".".join(owner) if isinstance(owner, tuple) else owner
            raise UserError(
                f"{name!r} is taken (by {held}): {'.'.join(origin)} cannot replace it; "
                "register it under a name of its own"
            )
        registry[name] = entry
        return entry

    return add


def _importing(module: object) -> bool:
    """Whether `module` (a built-in entry's registering module) is being imported now."""
    spec = getattr(sys.modules.get(module), "__spec__", None) if isinstance(module, str) else None
    return bool(getattr(spec, "_initializing", False))


def _origin(entry: object) -> tuple[str, str]:
    """Where an entry was defined: its module and qualified name (a plugin loaded again, the same)."""
    return (str(getattr(entry, "__module__", "")), str(getattr(entry, "__qualname__", repr(entry))))


def taken_by(registry: MutableMapping, name: str) -> str | tuple[str, str] | None:
    """Who holds `name` in `registry`: a built-in's registering module, an entry's origin, or None."""
    if isinstance(registry, Registry) and name in registry._modules:
        return registry._modules[name]
    entries = registry._entries if isinstance(registry, Registry) else registry
    return _origin(entries[name]) if name in entries else None


@dataclass(frozen=True)
class Plugin:
    """A loaded plugin as a run records it: a name is not enough (two files may be `example.py`),
    so the module's file, or the `.py` file itself, is named and its content hashed."""

    name: str  # a module's dotted name, a .py file's stem
    source: str  # the module's dotted name, or the .py file's resolved path
    sha256: str  # of the module's file, a package's every .py file ("" for a namespace package)
    init_sha256: str = ""  # a package's __init__.py alone: what runs before 2026-12-02 recorded of it

    def record(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "sha256": self.sha256}


_loaded: dict[str, Plugin] = {}  # source -> the plugin loaded from it
_installed_loaded = False


def name_of(spec: str) -> str:
    """The name a run records for `plugins=spec`: a module's dotted name, a `.py` file's stem."""
    spec = spec.strip()
    return Path(spec).stem if spec.endswith(".py") else spec


def _sha256(path: str | None) -> str:
    if not path or not Path(path).is_file():
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load(specs: str | Sequence[str]) -> list[str]:
    """Import each plugin of `specs` (a comma list or names); its registrations take effect."""
    names = []
    for spec in comma_list(specs) if isinstance(specs, str) else [s.strip() for s in specs if s.strip()]:
        source = str(Path(spec).expanduser().resolve()) if spec.endswith(".py") else spec
        if source not in _loaded:
            _loaded[source] = _import(spec, name_of(spec), source)
        names.append(_loaded[source].name)
    return names


def _import(spec: str, name: str, source: str) -> Plugin:
    if spec.endswith(".py"):
        path = Path(source)
        if not path.is_file():
            raise UserError(f"plugins={spec}: no such file: give a .py file or an importable module name")
        digest = _sha256(source)
        # Named by content too: two files called example.py are two modules, neither replaces the other.
        module_spec = importlib.util.spec_from_file_location(f"mtl_plugin_{name}_{digest[:12]}", path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_spec.name, None)
            raise
        return Plugin(name, source, digest)
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as error:
        if error.name is None or not (spec == error.name or spec.startswith(error.name + ".")):
            raise  # the plugin was found, and a module it imports was not: its own traceback says which
        raise UserError(
            f"plugins={spec}: no module {error.name!r} is importable: install its package, or give the "
            "path of a .py file"
        ) from None
    file = getattr(module, "__file__", None)
    package = file is not None and Path(file).name == "__init__.py"
    if package:
        return Plugin(name, source, _package_sha256(Path(file).parent), _sha256(file))
    return Plugin(name, source, _sha256(file))


MOST_PACKAGE_FILES = 5_000  # a plugin package's .py files hashed: beyond, a package is no plugin


def _package_sha256(folder: Path) -> str:
    """A package's identity: every .py file below it, its path and its bytes (its `__init__.py`
    alone named a package whose modules could change under the same hash)."""
    files = sorted(p for p in folder.rglob("*.py") if p.is_file())
    if len(files) > MOST_PACKAGE_FILES:
        raise UserError(
            f"plugin package {folder} holds over {MOST_PACKAGE_FILES:,} .py files: give its module"
        )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def load_installed() -> list[str]:
    """Import every plugin of the installed packages' `mtl.plugins` entry points (once). One that
    fails to import is one warning naming its distribution: every other command still works."""
    global _installed_loaded
    if not _installed_loaded:
        _installed_loaded = True
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if entry.module in _loaded:
                continue
            try:
                module = entry.load()
            except Exception as error:  # noqa: BLE001  (someone else's package: any error is theirs)
                distribution = entry.dist.name if entry.dist is not None else "an installed package"
                say(
                    f"warning: the mtl plugin {entry.name!r} of {distribution} cannot be loaded "
                    f"({type(error).__name__}: {error}); going on without it (reinstall or uninstall {distribution})"
                )
                continue
            file = getattr(module, "__file__", None) or getattr(
                sys.modules.get(entry.module), "__file__", None
            )
            _loaded[entry.module] = Plugin(entry.module, entry.module, _sha256(file))
    return loaded()


def loaded() -> list[str]:
    """The names of the plugins loaded in this process, in the order they came."""
    return [plugin.name for plugin in _loaded.values()]


def records() -> list[dict[str, str]]:
    """What a run or an encoder records of the plugins loaded: name, source and content hash."""
    return [plugin.record() for plugin in _loaded.values()]


def require(recorded: Iterable[object] | None, what: str) -> None:
    """Stop with one line when a plugin `what` was made with is not loaded (installed ones are
    loaded first): by name for what older runs recorded, by content for a record with a hash, so
    another file of the same name is not taken for it."""
    wanted = [_as_plugin(entry) for entry in (recorded or [])]
    if not all(isinstance(plugin, Plugin) for plugin in wanted):
        raise UserError(f"{what} records its plugins damaged ({recorded!r:.80}): restore its file")
    if wanted and any(not _has(plugin) for plugin in wanted):
        load_installed()
    if missing := [plugin for plugin in wanted if not _has(plugin)]:
        other = next((p for m in missing for p in _loaded.values() if p.name == m.name), None)
        if other is not None:
            made = next(m for m in missing if m.name == other.name)
            raise UserError(
                f"{what} was made with the plugin {made.name} of content {made.sha256[:12]} ({made.source}); "
                f"the {other.name} loaded now ({other.source}) is {other.sha256[:12]}: give the file it was made with"
            )
        names = [plugin.name for plugin in missing]
        raise UserError(
            f"{what} was made with the plugin{'s' * (len(names) > 1)} {', '.join(names)}: give "
            f"plugins={','.join(names)} (its module or .py file) or install it; a run folder never "
            "imports code by itself"
        )


def _as_plugin(entry: object) -> Plugin | None:
    if isinstance(entry, str):  # runs before plugins were recorded with their content: the name alone
        return Plugin(entry, "", "")
    if isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("name", "source", "sha256")):
        return Plugin(entry["name"], entry["source"], entry["sha256"])
    return None


def _has(wanted: Plugin) -> bool:
    if not wanted.sha256:
        return any(plugin.name == wanted.name for plugin in _loaded.values())
    return any(
        plugin.name == wanted.name and wanted.sha256 in (plugin.sha256, plugin.init_sha256)
        for plugin in _loaded.values()
    )


def load_for_command(args: Sequence[str]) -> list[str]:
    """Load the plugins a command line names (`plugins=`), those its parent process named (torchrun's
    ranks, a sweep's runs inherit `MTL_PLUGINS`) and the installed ones; return the other arguments.
    What was named is passed on to the processes this one starts."""
    given = [a.partition("=")[2] for a in args if a.startswith(f"{KEY}=")]
    specs = [spec for value in [os.environ.get(ENVIRONMENT, ""), *given] for spec in comma_list(value)]
    load(specs)
    load_installed()
    if specs:
        os.environ[ENVIRONMENT] = ",".join(dict.fromkeys(specs))
    return [a for a in args if not a.startswith(f"{KEY}=")]
