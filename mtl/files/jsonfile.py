"""JSON as strict parsers read it: NaN and infinities become null, numpy and torch scalars numbers."""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(value: Any, indent: int | None = None, sort_keys: bool = False) -> str:
    return json.dumps(finite_or_null(value), indent=indent, sort_keys=sort_keys, allow_nan=False)


def finite_or_null(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, dict | list | tuple):
        value = value.item()  # numpy and torch scalars
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(item) for item in value]
    return value
