"""`key=value` overrides onto (nested) config dataclasses, with typed, validated values."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from mtl.errors import UserError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null", ""}


def apply_overrides(config: Any, args: Sequence[str]) -> Any:
    """Return a copy of `config` with each `key=value` in `args` applied.

    A key is either a dotted path (`optim.lr`) or a leaf name that is unique across the
    nested dataclasses (`lr`). Each changed dataclass is rebuilt so its `__post_init__`
    checks run again.
    """
    config = _deep_copy(config)
    by_path = {path: (owner_path, field) for path, owner_path, field in _paths(config)}
    by_name: dict[str, list[str]] = {}
    for path in by_path:
        by_name.setdefault(path.rsplit(".", 1)[-1], []).append(path)

    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            raise UserError(f"argument {arg!r} is not of the form key=value")
        if key in by_path:
            path = key
        elif len(by_name.get(key, [])) == 1:
            path = by_name[key][0]
        elif key in by_name:
            raise UserError(f"key {key!r} is ambiguous: use one of {', '.join(by_name[key])}")
        else:
            raise UserError(_unknown_key_message(key, [*by_path, *by_name]))
        owner_path, field = by_path[path]
        owner = _resolve(config, owner_path)
        setattr(owner, field.name, parse_value(key, raw, _field_type(type(owner), field.name)))

    return _revalidate(config)


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _paths(config: Any, prefix: str = "") -> Iterator[tuple[str, str, dataclasses.Field]]:
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            yield from _paths(value, f"{prefix}{field.name}.")
        else:
            yield f"{prefix}{field.name}", prefix.rstrip("."), field


def _resolve(config: Any, owner_path: str) -> Any:
    for name in filter(None, owner_path.split(".")):
        config = getattr(config, name)
    return config


def _deep_copy(config: Any) -> Any:
    changes = {
        f.name: _deep_copy(getattr(config, f.name))
        for f in dataclasses.fields(config)
        if dataclasses.is_dataclass(getattr(config, f.name))
    }
    return dataclasses.replace(config, **changes)


def _revalidate(config: Any) -> Any:
    """Rebuild bottom-up so every `__post_init__` sees the final values."""
    values = {}
    for field in dataclasses.fields(config):
        if not field.init:
            continue
        value = getattr(config, field.name)
        values[field.name] = _revalidate(value) if dataclasses.is_dataclass(value) else value
    return type(config)(**values)


def _unknown_key_message(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(sorted(set(valid)))}"
    return f"unknown key {key!r}: {hint}"


def _field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def parse_value(key: str, raw: str, annotation: Any) -> Any:
    """Convert the text `raw` to `annotation` (int, float, str, bool, Literal, optional)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if type(None) in options and raw.strip().lower() in _NONE:
            return None
        (inner,) = [option for option in options if option is not type(None)]
        return parse_value(key, raw, inner)
    if origin is Literal:
        choices = typing.get_args(annotation)
        for choice in choices:
            if raw == str(choice):
                return choice
        raise UserError(f"{key}={raw!r} is not valid: choose one of {', '.join(map(str, choices))}")
    if annotation is bool:
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise UserError(f"{key}={raw!r} is not a boolean: use true or false")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            kind = "an integer" if annotation is int else "a number"
            raise UserError(f"{key}={raw!r} is not {kind}") from None
    if annotation is str:
        return raw
    raise TypeError(f"config field {key!r} has unsupported type {annotation!r}")


def from_dict(cls: type, values: dict[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from `to_dict` output, e.g. a saved run's config."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        value = values[field.name]
        kind = hints[field.name]
        kwargs[field.name] = from_dict(kind, value) if dataclasses.is_dataclass(kind) else value
    return cls(**kwargs)
