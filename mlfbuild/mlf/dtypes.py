"""The tensor element types mlfbuild understands, and their sizes in bytes.

Names are numpy-style (which is also what TVM writes in graph JSON and metadata). `bool` is
stored as one byte per element, as TVM does ((bits + 7) // 8 with bits = 1).
"""

from __future__ import annotations

DTYPE_BYTES: dict[str, int] = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "bool": 1,
}


def dtype_nbytes(dtype: str) -> int:
    """Bytes per element of `dtype`; ValueError for a type mlfbuild does not support."""
    try:
        return DTYPE_BYTES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported dtype {dtype!r}") from None
