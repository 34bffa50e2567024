"""Checking untrusted structured data (an MLF's JSON metadata and graph, a board's TOML) one field
at a time: one notion of which Python value is which kind, and one way to name a wrong value in a
one-line error. Each reader keeps its own error type and its own path syntax."""

from __future__ import annotations

from typing import Any

# How each format names its kinds of value.
_NAMES = {
    "json": {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"},
    "toml": {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
             float: "a float"},
}


def is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    """isinstance, except that a boolean is never an integer (JSON and TOML keep them apart)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def kind_name(kind: type | tuple[type, ...], dialect: str = "json") -> str:
    """'a string', 'an integer or a string', … for an expected kind."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_NAMES[dialect].get(k, k.__name__) for k in kinds)


def describe_value(value: Any, dialect: str = "json", limit: int = 40) -> str:
    """A value as a message shows it: its kind, and for a scalar the value itself (shortened)."""
    kind = _NAMES[dialect].get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)) or value is None:
        return kind
    shown = (str(value).lower() if isinstance(value, bool) and dialect == "toml" else repr(value))
    return f"{kind} {shown[:limit]}{'...' if len(shown) > limit else ''}"
