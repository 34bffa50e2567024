"""Byte counts as people write them (64K, 0x10000, 1M), for flags and the project file alike."""

from __future__ import annotations

_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_byte_count(text: str) -> int:
    """65536, 0x10000, 64K, 64KiB, 1M (K/M/G are powers of 1024); ValueError for anything else."""
    clean = text.strip().lower().removesuffix("ib").removesuffix("b")
    factor = _UNITS.get(clean[-1:], 1)
    try:
        value = int(clean[:-1] if factor > 1 else clean, 0) * factor
    except ValueError:
        raise ValueError(f"not a size: {text!r} (examples: 65536, 0x10000, 64K, 1M)") from None
    if value < 0:
        raise ValueError(f"not a size: {text!r} (negative)")
    return value
