"""Text pieces a size difference is written with, shared by the text, Markdown and HTML forms."""

from __future__ import annotations


def d(delta: int) -> str:
    return f"{delta:+,}" if delta else "0"


def pct(delta: int, base: int) -> str:
    if not delta:
        return ""
    return f"{100.0 * delta / base:+.1f} %" if base else "new"


def short(name: str, width: int = 70) -> str:
    """`name` within `width`, cut in the middle: generated names share their beginnings
    (tvmgen_kws_fused_nn_conv2d_...) and differ at the end, so the end is kept."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def flag_differences(base: dict, current: dict) -> tuple[list[str], list[str]]:
    """The compiler flags (and runtime) only one side was built with, in each side's order."""
    def flags(build: dict) -> list[str]:
        return [str(f) for f in build.get("cflags") or []] + \
            ([f"runtime {build['runtime']}"] if build.get("runtime") else [])
    base_flags, current_flags = flags(base), flags(current)
    return ([f for f in base_flags if f not in current_flags], [f for f in current_flags if f not in base_flags])


def identity(build: dict, flags: list[str] = ()) -> str:
    mlf = build.get("mlf") or {}
    sha = (mlf.get("sha256") or "")[:12]
    return (f"{mlf.get('name') or '?'}{' @' + sha if sha else ''} on {build.get('board') or '?'}"
            + (f" ({' '.join(flags)})" if flags else ""))
