"""Text from the ELF and the MLF (symbol, module and board names) made safe for a Markdown table.

Names come from untrusted inputs: a `|` or a newline would end a table cell or row, a backtick
would close a code span early, and `<…>` or `*` would become markup.
"""

from __future__ import annotations

import re

_MARKUP = re.compile(r"([\\`*_\[\]<>#|~])")


def md_text(text: object) -> str:
    """Plain text for a table cell: markup characters backslash-escaped, line breaks as spaces."""
    return _MARKUP.sub(r"\\\1", _one_line(text))


def md_code(text: object) -> str:
    """A code span holding `text` exactly: a fence longer than any backtick run inside, a space
    inside the fence where the text starts or ends with a backtick, `|` escaped as tables need."""
    body = _one_line(text).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _one_line(text: object) -> str:
    return " ".join(str(text).splitlines())
