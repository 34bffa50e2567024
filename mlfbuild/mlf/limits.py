"""The bounds every MLF is held to before anything it says reaches generated C.

An MLF is untrusted input: names become C identifiers, strings and comments; numbers become array
sizes. Names that become identifiers must be C identifiers (a full match: no trailing newline);
names that become strings or comments must be printable one-line text (the templates escape them
too). Every size must be a possible one: TVM records sizes as int64, so anything larger is refused
here, whatever the board (project/ then bounds sizes by the board's own address space).
"""

from __future__ import annotations

import re

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_BYTES = 2**63 - 1  # TVM's int64 sizes: nothing larger is a size at all
MAX_NAME_CHARS = 1024  # TVM shortens long fused-function names to ~80 characters plus a hash
DEFAULT_MAX_GRAPH_NODES = 20_000  # the largest TVM graphs for microcontrollers have a few hundred
GRAPH_BYTES_PER_NODE = 2048  # the graph JSON may be this many bytes per allowed node (TVM's: ~300)


def is_c_identifier(name: object) -> bool:
    return isinstance(name, str) and C_IDENTIFIER.fullmatch(name) is not None


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a tensor or node name in generated C, or None when it can."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long (at most {MAX_NAME_CHARS})"
    bad = next((ch for ch in name if not ch.isprintable()), None)
    if bad is not None:
        return f"contains the control or unprintable character {bad!r}"
    return None


def size_problem(nbytes: int) -> str | None:
    """Why `nbytes` cannot be the size of anything, or None when it can."""
    if nbytes < 0:
        return f"{nbytes} bytes is negative"
    if nbytes > MAX_BYTES:
        return f"{_short(nbytes)} bytes is beyond any address space (TVM sizes are int64)"
    return None


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"about 10^{len(text) - 1}"
