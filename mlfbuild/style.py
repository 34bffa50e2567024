"""Text for a person at a terminal: colour only on a TTY, never when NO_COLOR is set (no-color.org)
or TERM is dumb, so logs, pipes and CI output stay plain text; and names from untrusted input (a
file name with an escape sequence in it) shown with their control characters made visible."""

from __future__ import annotations

import os
from typing import TextIO

RED, GREEN, YELLOW, BOLD = "31", "32", "33", "1"


def colour_enabled(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, colour: str, stream: TextIO) -> str:
    """`text` in `colour` (an SGR code above) when `stream` shows colour, else unchanged."""
    return f"\033[{colour}m{text}\033[0m" if colour_enabled(stream) else text


def printable(text: str, keep: str = "") -> str:
    """`text` with every control or unprintable character (but those in `keep`, e.g. a newline) as
    a Python escape (\\x1b, \\n): nothing reaches a terminal as a command, and what is left is
    valid XML 1.0 text too."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)
