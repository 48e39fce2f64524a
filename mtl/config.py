"""`key=value` overrides onto (nested) config dataclasses, with typed, validated values."""

from __future__ import annotations

import ast
import dataclasses
import decimal
import difflib
import functools
import inspect
import io
import math
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from mtl.errors import UserError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null", ""}
BOOLEAN_WORDS = _TRUE | _FALSE  # what a bool key accepts
FLOAT32_MAX = 3.4028234663852886e38


@dataclasses.dataclass(frozen=True)
class Range:
    """Bounds of a numeric config field, checked for every config however it was made."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: the value must be above `low`, not equal to it
    high_open: bool = False

    def admits(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def describe(self) -> str:
        if self.high is None:
            if self.low_open:
                return "positive" if self.low == 0 else f"above {self.low}"
            return f"{self.low:g} or more"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low:g}, {self.high:g}{right}"


@dataclasses.dataclass(frozen=True)
class OneOf:
    """A text field whose values are the names in a registry (`Annotated[str, OneOf(ENCODERS)]`),
    read when a value is checked, so a name a plugin registered is as valid as a built-in one;
    `fixed` are the values the field takes besides (`auto`)."""

    registry: Iterable[str]  # a dict by name, as the registry module keeps it
    fixed: tuple[str, ...] = ()

    def choices(self) -> list[str]:
        return [*self.fixed, *self.registry]


@dataclasses.dataclass(frozen=True)
class IsName:
    """A text field that becomes a folder's name (a run's, a sweep's): a name, never a path."""


NAME_CHARACTERS = re.compile(r"[A-Za-z0-9_.+\-]+")


def check_name(key: str, value: str) -> str:
    """`value` when it is a name (letters, digits, `-_.+`; not `.` or `..`), else a one-line error."""
    if not NAME_CHARACTERS.fullmatch(value) or value in (".", ".."):
        raise UserError(
            f"{key}={value!r} is not a name: use letters, digits, '-', '_', '.' and '+' (no '/', not '..'); "
            "to choose the folder, use out="
        )
    return value


def as_name(text: str) -> str:
    """`text` made a name: each character a name cannot hold becomes `_` (`vectors=a/b.txt`: `a_b.txt`)."""
    name = re.sub(r"[^A-Za-z0-9_.+\-]", "_", text)
    return name if name not in ("", ".", "..") else name.replace(".", "_") or "_"


Name = Annotated[str, IsName()]
AtLeast0 = Annotated[int, Range(0)]
AtLeast1 = Annotated[int, Range(1)]
PositiveFloat = Annotated[float, Range(0, low_open=True)]
NonNegativeFloat = Annotated[float, Range(0)]


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*=")


def is_key_value(arg: str) -> bool:
    """Whether a command-line argument is `key=value` rather than a path: a path may hold `=`
    (`runs/lr=0.1`), a key never holds `/`; an existing file or folder is always a path."""
    return bool(_KEY.match(arg)) and not Path(arg).expanduser().exists()


def paths_and_keys(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The arguments that are paths, and those that are `key=value`, each in order."""
    return [a for a in args if not is_key_value(a)], [a for a in args if is_key_value(a)]


def not_key_value(arg: str) -> str:
    """Why `arg` is refused where only key=value arguments go (a key given without its value)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", arg):
        return f"argument {arg!r} has no value: give {arg}=<value> (or leave it out for its default)"
    return f"argument {arg!r} is not of the form key=value"


def apply_overrides(config: Any, args: Sequence[str], aliases: Sequence[str] = ()) -> Any:
    """Return a copy of `config` with each `key=value` in `args` applied.

    A key is either a dotted path (`optim.lr`) or a leaf name that is unique across the
    nested dataclasses (`lr`), or across them leaving out table entries (a task's `nli.lr`
    is only ever its dotted path, so `lr=` stays the run's); a key given twice is refused rather than the last one kept.
    Each changed dataclass is rebuilt so its `__post_init__` checks run again. `aliases`: other
    keys the caller accepts, suggested for a misspelt one too.
    """
    config = _deep_copy(config)
    _choose_options(config, args)
    by_path = {path: (owner, field) for path, owner, field in _paths(config)}
    by_name: dict[str, list[str]] = {}
    for path in by_path:
        by_name.setdefault(path.rsplit(".", 1)[-1], []).append(path)

    run_wide_paths = {path for path, _, _ in _paths(config, tables=False)}
    given: dict[str, str] = {}  # path -> the argument that set it
    for arg in args:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            raise UserError(not_key_value(arg))
        run_wide = [p for p in by_name.get(key, []) if p in run_wide_paths]
        if key in by_path:
            path = key
        elif len(by_name.get(key, [])) == 1:
            path = by_name[key][0]
        elif len(run_wide) == 1:  # `lr=` is the run's; a table entry's own is `<name>.lr=`
            path = run_wide[0]
        elif key in by_name:
            raise UserError(f"key {key!r} is ambiguous: use one of {', '.join(by_name[key])}")
        else:
            raise UserError(_unknown_key_message(key, [*by_path, *by_name, *aliases]))
        if path in given:
            raise UserError(f"{given[path]} and {arg} set the same key: give it once")
        given[path] = arg
        owner, field = by_path[path]
        setattr(owner, field.name, parse_value(key, raw, _field_type(type(owner), field.name)))

    # an out-of-range value is named as the user typed its key (slurm.time=, not time=)
    return _revalidate(config, typed={path: arg.partition("=")[0] for path, arg in given.items()})


def check_fields(config: Any, prefix: str = "", path: str = "", typed: dict[str, str] | None = None) -> None:
    """Every float finite, every `Range` respected, in `config` and its nested configs; `prefix`
    names a table entry's keys (`nli.`). A key is named in an error as `typed` says the user
    typed it (its dotted `path` -> the key given), else by its short name (dotted in a config
    whose keys are always dotted: `slurm.`)."""
    hints = type_hints(type(config), extras=True)
    typed = typed or {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        full = f"{path}{field.name}"
        if dataclasses.is_dataclass(value):
            check_fields(value, "", f"{full}.", typed)
            continue
        if _is_table(field):
            for name, entry in value.items():
                check_fields(entry, f"{prefix}{name}.", f"{path}{name}.", typed)
            continue
        shown = typed.get(full) or (
            full if getattr(type(config), "DOTTED_KEYS", False) else f"{prefix}{field.name}"
        )
        if isinstance(value, str) and (one_of := _one_of(hints[field.name])) is not None:
            if value not in (choices := one_of.choices()):
                near = difflib.get_close_matches(value, choices, n=1)
                hint = f"did you mean {near[0]}? " if near else ""
                raise UserError(
                    f"{shown}={value!r} is not valid: {hint}choose one of {', '.join(choices)} "
                    "(a plugin's own: load it with plugins=)"
                )
            continue
        if isinstance(value, str) and _is_name(hints[field.name]):
            check_name(shown, value)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        check_number(shown, value, _range_of(hints[field.name]), _is_optional(hints[field.name]))


def check_number(
    key: str, value: float, bounds: Range | None = None, optional: bool = False, given: str = ""
) -> float:
    """`value` of `key` when it is finite, fits what consumes it and lies in `bounds`; else a one-line
    error naming `key` (or `given`: what the user typed, when the value is part of it). Every number
    of every command passes here (`read_number` for text)."""
    given = given or f"{key}={value}"
    if not math.isfinite(value):
        raise UserError(f"{given} must be a finite number")
    # What consumes the value: torch and numpy hold integers in 64 bits and train in float32.
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise UserError(f"{given} is too large: it must fit in 64 bits (below 2**63)")
    if isinstance(value, float) and abs(value) > FLOAT32_MAX:
        raise UserError(f"{given} is too large: it must fit in float32 (at most {FLOAT32_MAX:.3g})")
    if bounds is not None and not bounds.admits(value):
        raise UserError(f"{given} must be {bounds.describe()}{' (or none)' if optional else ''}")
    return value


def read_number(key: str, text: str, kind: type = float, bounds: Range | None = None, given: str = "") -> Any:
    """The number `text` as `kind`, checked by `check_number`; `given` names it in an error when it is
    part of what the user typed for `key` (`select=a:2,b:x: b's weight x`). An integer is a whole
    number (`600`, `6e2`), never a fraction cut short."""
    given = given or f"{key}={text}"
    if kind is int:
        return check_number(key, parse_int(text, given), bounds, given=given)
    try:
        value = float(text.strip()) if text.strip().isascii() else math.nan
    except ValueError:
        raise UserError(f"{given} is not a number") from None
    if math.isnan(value) and text.strip().lower() != "nan":
        raise UserError(f"{given} is not a number")
    return check_number(key, value, bounds, given=given)


def parse_int(text: str, given: str, noun: str = "a whole number") -> int:
    """The whole number `text` is, exactly (`9007199254740993`, `6e2`), never through a float that
    would round it; ASCII digits only (Python's int() takes `²` and Arabic-Indic digits)."""
    stripped = text.strip()
    if not stripped.isascii():
        raise UserError(f"{given} is not {noun}")
    try:
        exact = decimal.Decimal(stripped)
    except decimal.InvalidOperation:
        raise UserError(f"{given} is not {noun}") from None
    if not exact.is_finite():
        raise UserError(f"{given} must be a finite number")
    if exact.is_zero():
        return 0  # 0e-50 too
    if exact.adjusted() > 40:  # 1e999999999: an integer of a billion digits, never a count
        raise UserError(f"{given} is too large: it must fit in 64 bits (below 2**63)")
    if exact.adjusted() < 0:  # 1e-50 and 0.3: below one (once called "too large"), never a count
        raise UserError(f"{given} is not {noun}")
    if exact != exact.to_integral_value():
        raise UserError(f"{given} is not {noun}")
    return int(exact)


def key_owners_of(options: dict[str, type]) -> dict[str, list[str]]:
    """Each key of the components' own keys (name -> their options dataclass) -> the components
    that take it."""
    return owners_of_keys({name: [f.name for f in dataclasses.fields(cls)] for name, cls in options.items()})


def owners_of_keys(keys: dict[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each key the components declare (name -> the keys it reads) -> the components that read it."""
    owners: dict[str, list[str]] = {}
    for name, declared in keys.items():
        for key in declared:
            owners.setdefault(key, []).append(name)
    return owners


def comma_list(text: str | None) -> list[str]:
    """The names of a comma-separated key (`monitor=STS14, TREC`): each stripped, empty ones left out."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def read_numbers(key: str, text: str, kind: type = float, bounds: Range | None = None) -> list[Any]:
    """`text` as comma-separated numbers (`768,512,256`), each read by `read_number`."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or "" in parts:
        raise UserError(f"{key}={text!r}: give numbers separated by commas (e.g. 1,0.5)")
    return [read_number(key, part, kind, bounds, f"{key}={text}: {part}") for part in parts]


def _range_of(annotation: Any) -> Range | None:
    for option in _options(annotation):
        if typing.get_origin(option) is Annotated:
            return next((m for m in option.__metadata__ if isinstance(m, Range)), None)
    return None


def _is_name(annotation: Any) -> bool:
    return any(
        typing.get_origin(option) is Annotated and any(isinstance(m, IsName) for m in option.__metadata__)
        for option in _options(annotation)
    )


def _one_of(annotation: Any) -> OneOf | None:
    for option in _options(annotation):
        if typing.get_origin(option) is Annotated:
            return next((m for m in option.__metadata__ if isinstance(m, OneOf)), None)
    return None


def _options(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_optional(annotation: Any) -> bool:
    return type(None) in _options(annotation)


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def flattened(values: dict[str, Any], separator: str = ".", prefix: str = "") -> dict[str, Any]:
    """`{"model": {"hidden": 8}}` as `{"model.hidden": 8}` (nested dicts joined by `separator`)."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flattened(value, separator, f"{prefix}{key}{separator}"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def table(entry_class: Any, **kwargs: Any) -> Any:
    """A field holding named configs (`{name: dataclass}`), their keys flattened to `<name>.<key>`.

    `entry_class(name, values)` says which dataclass an entry read back from a dict is.
    """
    return dataclasses.field(metadata={"entry_class": entry_class}, **kwargs)


def _is_table(field: dataclasses.Field) -> bool:
    return "entry_class" in field.metadata


@dataclasses.dataclass
class NoOptions:
    """The options of a component that has no keys of its own."""


def options_field(chooser: str, registered: Any) -> Any:
    """A field holding the own keys of the component that the sibling field `chooser` names (an
    encoder's, a balancer's): an instance of the dataclass that component registered with
    (`registered()`: name -> class), NoOptions for one without. On the command line its keys are
    flat like any other (`cnn_kernel=5`); a recorded config keeps them under the field's name
    (`model.options.cnn_kernel`). The dataclass holding the field calls `settle_options` in its
    `__post_init__`, so the options always belong to the component chosen.
    """
    return dataclasses.field(
        default_factory=NoOptions, metadata={"options_of": chooser, "registered": registered}
    )


def _options_class(field: dataclasses.Field, name: Any) -> type:
    return field.metadata["registered"]().get(name) or NoOptions


def settle_options(config: Any) -> None:
    """Options that belong to another component than the one chosen (the encoder changed, in a
    preset or by `dataclasses.replace`) are replaced by the chosen one's defaults."""
    _choose_options(config, ())


def given_value(args: Sequence[str], key: str, section: str) -> str | None:
    """The value `args` give `key` (short, or dotted under `section`), the last one; None if none."""
    given = [
        raw.strip()
        for name, _, raw in (arg.partition("=") for arg in args)
        if name in (key, f"{section}{key}")
    ]
    return given[-1] if given else None


def _choose_options(config: Any, args: Sequence[str]) -> None:
    """Each options field made the one of the component `args` choose, else of the one chosen
    already: before the keys of `args` are looked up (`encoder=cnn cnn_kernel=5`: cnn's keys
    exist once cnn is chosen); options of the component chosen are kept."""
    for holder, field, section in _options_holders(config):
        chooser = field.metadata["options_of"]
        named = given_value(args, chooser, section)
        wanted = _options_class(field, named if named is not None else getattr(holder, chooser))
        if type(getattr(holder, field.name)) is not wanted:
            setattr(holder, field.name, wanted())


def _options_holders(config: Any, section: str = "") -> Iterator[tuple[Any, dataclasses.Field, str]]:
    """(the dataclass holding it, the field, its section's dotted prefix) of each options field."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if "options_of" in field.metadata:
            yield config, field, section
        elif dataclasses.is_dataclass(value):
            yield from _options_holders(value, f"{section}{field.name}.")


def _paths(
    config: Any, prefix: str = "", tables: bool = True
) -> Iterator[tuple[str, Any, dataclasses.Field]]:
    """(key path, the dataclass holding it, its field) for every leaf key of `config`; without
    `tables`, the run-wide keys only (not a table entry's `nli.lr`)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            yield from _paths(value, f"{prefix}{field.name}.", tables)
        elif _is_table(field):
            for name, entry in value.items() if tables else ():
                yield from _paths(entry, f"{prefix}{name}.")
        else:
            yield f"{prefix}{field.name}", config, field


def _deep_copy(config: Any) -> Any:
    changes = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            changes[field.name] = _deep_copy(value)
        elif _is_table(field):
            changes[field.name] = {name: _deep_copy(entry) for name, entry in value.items()}
    return dataclasses.replace(config, **changes)


def _revalidate(config: Any, prefix: str = "", path: str = "", typed: dict[str, str] | None = None) -> Any:
    """Rebuild bottom-up so every `__post_init__` sees the final values."""
    values = {}
    for field in dataclasses.fields(config):
        if not field.init:
            continue
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            value = _revalidate(value, "", f"{path}{field.name}.", typed)
        elif _is_table(field):
            value = {
                name: _revalidate(entry, f"{prefix}{name}.", f"{name}.", typed)
                for name, entry in value.items()
            }
        values[field.name] = value
    rebuilt = type(config)(**values)
    check_fields(rebuilt, prefix, path, typed)
    return rebuilt


def _unknown_key_message(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    # not the whole list (a training takes about 300 names): a wall, where --help groups them
    hint = (
        f"did you mean {close[0]!r}?" if close else f"no key is near it; --help lists all {len(set(valid))}"
    )
    return f"unknown key {key!r}: {hint}"


def _field_type(cls: type, name: str) -> Any:
    return type_hints(cls)[name]  # Annotated stripped: bounds are checked after parsing


@functools.cache
def type_hints(cls: type, extras: bool = False) -> dict[str, Any]:
    """`typing.get_type_hints` of a config class (`extras`: Annotated kept), once per class: it
    evaluates every annotation's text again on each call (`from __future__ import annotations`),
    and a parse checks and rebuilds every nested config. Read only."""
    return typing.get_type_hints(cls, include_extras=extras)


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
    if annotation is int:
        return parse_int(raw, f"{key}={raw!r}", "an integer")
    if annotation is float:
        try:
            value = float(raw) if raw.isascii() else math.nan
        except ValueError:
            raise UserError(f"{key}={raw!r} is not a number") from None
        if not math.isfinite(value):
            raise UserError(
                f"{key}={raw} must be a finite number" if raw.isascii() else f"{key}={raw!r} is not a number"
            )
        return value
    if annotation is str:
        return raw
    raise TypeError(f"config field {key!r} has unsupported type {annotation!r}")


def from_dict(cls: type, values: Any, source: str = "config") -> Any:
    """Rebuild a (nested) config dataclass from `to_dict` output, e.g. a saved run's config.

    Unknown keys, wrong types and out-of-range values are one-line errors naming `source`.
    """
    try:
        config = _from_dict(cls, values, "")
        check_fields(config)
        return config
    except UserError as error:
        raise UserError(f"{source}: {error}") from None


def _from_dict(cls: type, values: Any, prefix: str) -> Any:
    if not isinstance(values, dict):
        raise UserError(f"{prefix.rstrip('.') or 'the config'} must be a table of keys, found {values!r:.40}")
    hints = type_hints(cls)
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    if unknown := [key for key in values if key not in fields]:
        raise UserError(_unknown_key_message(f"{prefix}{unknown[0]}", [f"{prefix}{name}" for name in fields]))
    kwargs = {}
    for name, value in values.items():
        kind = hints[name]
        if _is_table(fields[name]):
            if not isinstance(value, dict):
                raise UserError(f"{prefix}{name} must be a table of named entries, found {value!r:.40}")
            entry_class = fields[name].metadata["entry_class"]
            kwargs[name] = {
                key: _from_dict(entry_class(key, entry), entry, f"{prefix}{key}.")
                for key, entry in value.items()
            }
        elif "options_of" in fields[name].metadata:
            chooser = fields[name].metadata["options_of"]
            chosen = values.get(chooser, fields[chooser].default)
            kwargs[name] = _from_dict(_options_class(fields[name], chosen), value, f"{prefix}{name}.")
        elif dataclasses.is_dataclass(kind):
            kwargs[name] = _from_dict(kind, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _checked_value(f"{prefix}{name}", value, kind)
    return cls(**kwargs)


def _checked_value(key: str, value: Any, annotation: Any) -> Any:
    """`value` as read from JSON, checked against `annotation`."""
    options = _options(annotation)
    if value is None:
        if type(None) in options:
            return None
        raise UserError(f"{key} is null but must be set")
    (kind,) = [option for option in options if option is not type(None)]
    if typing.get_origin(kind) is Literal:
        if value not in typing.get_args(kind):
            raise UserError(
                f"{key}={value!r} is not valid: choose one of {', '.join(map(str, typing.get_args(kind)))}"
            )
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise UserError(f"{key}={value!r} must be of type {kind.__name__}")


@functools.cache  # a class's source is read once per process: --help asks for every field of each
def field_help(cls: type) -> dict[str, str]:
    """The `# comment` written on each field's line(s) in the source of `cls` or the dataclass it extends."""
    found: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        found.update(
            {name: text for name, text in _own_field_help(klass).items() if text or name not in found}
        )
    return found


@functools.cache
def _own_field_help(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    (body,) = ast.parse(source).body
    found = {}
    for statement in body.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            lines = range(statement.lineno, statement.end_lineno + 1)
            found[statement.target.id] = " ".join(comments[n] for n in lines if n in comments)
    return found


def describe_keys(config: Any) -> list[tuple[str, str, str]]:
    """(key, default, help) for every leaf key of `config`, and of every registered component's
    options (a plugin encoder's `cnn_kernel`); the short name where it is unique."""
    rows = []
    entries = {
        name
        for field in dataclasses.fields(config)
        if _is_table(field)
        for name in getattr(config, field.name)
    }
    leaves = list(_paths(config))
    owners: list[Any] = []  # the dataclass each row's key belongs to
    counts: dict[str, int] = {}
    for path, _, _ in leaves:
        counts[path.rsplit(".", 1)[-1]] = counts.get(path.rsplit(".", 1)[-1], 0) + 1
    for path, owner, field in leaves:
        name = path.rsplit(".", 1)[-1]
        short = (
            counts[name] == 1
            and path.split(".", 1)[0] not in entries  # a table's keys: always in full
            and not getattr(type(owner), "DOTTED_KEYS", False)  # nor a config that asks for it (slurm.)
        )
        rows.append((name if short else path, *_described(type(owner), field, getattr(owner, field.name))))
        owners.append(owner)
    listed = {row[0] for row in rows}
    for holder, field, _ in reversed(list(_options_holders(config))):  # the other components' own keys,
        own = []  # at the end of their section
        for component, options_class in sorted(field.metadata["registered"]().items()):
            for option in dataclasses.fields(options_class):
                if option.name not in listed:  # a key several components share, listed once
                    listed.add(option.name)
                    shown, text = _described(options_class, option, _default(option))
                    own.append((option.name, shown, text or f"{field.metadata['options_of']}={component}"))
        section = (holder, getattr(holder, field.name))  # by identity: two configs may be equal
        at = 1 + max(i for i, owner in enumerate(owners) if any(owner is x for x in section))
        rows[at:at] = own
    return rows


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


def _described(owner: type, field: dataclasses.Field, value: Any) -> tuple[str, str]:
    """A key's value as typed on the command line, and its help with its choices."""
    shown = "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    text = field_help(owner).get(field.name, "")
    annotation = type_hints(owner, extras=True)[field.name]
    if choices := _choices(annotation):
        text = f"{text} [{' | '.join(choices)}]".strip()
    return shown, text


def _choices(annotation: Any) -> list[str]:
    """The values a Literal (or optional Literal, or registry) key takes, as typed on the command line."""
    if (one_of := _one_of(annotation)) is not None:
        return one_of.choices()
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [c for option in typing.get_args(annotation) for c in _choices(option)]
    if typing.get_origin(annotation) is Annotated:
        return _choices(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) is Literal:
        return [
            str(choice).lower() if isinstance(choice, bool) else str(choice)
            for choice in typing.get_args(annotation)
        ]
    return []
