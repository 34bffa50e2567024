"""Text from the MLF inside generated C: as the body of a string literal or inside a comment.

The reader already refuses names that are not printable one-line text; these escapes make the
templates safe on their own, whatever reaches them.
"""

from __future__ import annotations

_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "?": "\\?", "\n": "\\n", "\t": "\\t"}  # "\?": no trigraphs


def c_string_body(text: str) -> str:
    """`text` as the inside of a C string literal: the compiled bytes are its UTF-8 bytes."""
    out = []
    for ch in str(text):
        if ch in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        else:  # three octal digits always, so a digit that follows is never taken into the escape
            out.append("".join(f"\\{byte:03o}" for byte in ch.encode("utf-8")))
    return "".join(out)


def c_comment_text(text: str) -> str:
    """`text` for inside a /* */ comment: printable ASCII on one line that neither closes the comment
    nor opens one inside it (gcc's -Wcomment)."""
    printable = "".join(ch if " " <= ch <= "~" else "?" for ch in str(text))
    return printable.replace("*/", "*\\/").replace("/*", "/\\*")
