"""Quantities as people write them — byte counts (64K, 0x10000, 1M), tolerances and seconds — with
one rule each, for flags, the project file and matrix jobs and result files alike."""

from __future__ import annotations

import math

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


def _number(value: object) -> float:
    """A number given as text or as a JSON/TOML number (never a boolean); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"not a number: {value!r}")
    try:
        return float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"not a number: {value!r}") from None


def tolerance(value: object) -> float:
    """An output tolerance (atol, rtol): a finite number ≥ 0. Infinity or NaN would let any output
    pass, a negative one would fail every output."""
    number = _number(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"a tolerance must be a finite number ≥ 0, got {value!r}")
    return number


MIN_BUILD_MEMORY, MAX_BUILD_MEMORY = 64 << 20, 1 << 40


def build_memory(value: object) -> int:
    """The address space make and each compiler may map: a byte count (4294967296, "4G") from 64 MiB
    (below it cc1 crashes instead of saying it ran out) to 1 TiB (well inside setrlimit's range)."""
    if isinstance(value, str):
        nbytes = parse_byte_count(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        nbytes = value
    else:
        raise ValueError(f"not a size: {value!r} (examples: 4294967296, 4G, 512M)")
    if not MIN_BUILD_MEMORY <= nbytes <= MAX_BUILD_MEMORY:
        raise ValueError(f"must be from 64M to 1024G, got {value!r}")
    return nbytes


def seconds(value: object) -> float:
    """A time limit: a finite number of seconds > 0 (no limit at all is never what a limit means)."""
    number = _number(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"a time limit must be a finite number of seconds > 0, got {value!r}")
    return number
