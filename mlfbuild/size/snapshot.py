"""A size snapshot (`mlfbuild size --json`) read back as the base of `--diff`: untrusted input.

The file is read with a bound (a regular file of at most MAX_TEXT_BYTES) and every field the diff
reads is checked for its kind, so a snapshot of the right schema with a field missing or of the
wrong kind is one line naming the field, never a KeyError or TypeError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..checked import describe_value, is_kind, kind_name
from ..errors import InvalidInputError
from ..schemas import SIZE as SCHEMA
from ..untrusted import MAX_TEXT_BYTES, read_regular

_TEXT = (str, type(None))
_COUNT = (int, type(None))
# What the diff reads, field by field: a kind, or a nested shape ({} an object, [shape] a list of them).
# Keys marked "?" may be absent.
_SUBCATEGORY = {"name": str, "flash": int, "ram": int}
_SHAPE = {
    "build?": {"board?": _TEXT, "toolchain?": _TEXT, "mlf?": {"name?": _TEXT, "sha256?": _TEXT}},
    "flash": {"used": int, "budget?": _COUNT},
    "ram": {"used": int, "budget?": _COUNT},
    "categories?": [{"name": str, "flash?": int, "ram?": int, "subcategories?": [_SUBCATEGORY]}],
    "symbols?": [{"name": str, "category": str, "subcategory": str, "module?": _TEXT, "file?": _TEXT,
                  "flash?": int, "ram?": int}],
    "modules?": [{"name": str, "predicted_vs_linked?": [{"kind": str, "device": (int, str, type(None)),
                                                          "linked?": _COUNT, "predicted?": _COUNT,
                                                          "explanation?": _TEXT}]}],
}


def load_snapshot(path: Path) -> dict:
    """The snapshot at `path`, checked (InvalidInputError, one line, for anything else)."""
    data = read_regular(Path(path), "size snapshot", MAX_TEXT_BYTES)
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0]
        raise InvalidInputError(f"{path}: not a JSON size snapshot ({why})") from None
    return check_snapshot(document, str(path))


def check_snapshot(document: Any, where: str = "size snapshot") -> dict:
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise InvalidInputError(f"{where}: not an mlfbuild size snapshot (schema {SCHEMA!r} expected)")
    _check(document, _SHAPE, where, "")
    return document


def _check(value: Any, shape: Any, where: str, field: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            _fail(where, field, dict, value)
        for key, inner in shape.items():
            name = key.rstrip("?")
            if name not in value:
                if key.endswith("?"):
                    continue
                raise InvalidInputError(f"{where}: {_join(field, name)} is missing")
            _check(value[name], inner, where, _join(field, name))
    elif isinstance(shape, list):
        if not isinstance(value, list):
            _fail(where, field, list, value)
        for index, item in enumerate(value):
            _check(item, shape[0], where, f"{field}[{index}]")
    elif not is_kind(value, shape):
        _fail(where, field, shape, value)


def _join(field: str, name: str) -> str:
    return f"{field}.{name}" if field else name


def _fail(where: str, field: str, kind, value: Any) -> None:
    raise InvalidInputError(f"{where}: {field or 'the snapshot'} must be {kind_name(kind)}, "
                            f"not {describe_value(value)}")
