"""TVM's `.params` file (an NDArray list, `runtime.SaveParams`): read it safely, and write it.

The file is untrusted input. Every count and length is checked against the bytes that remain
before anything is allocated or sliced, so a hostile file costs no more memory than its own size
and every defect is a one-line `ParamsError`. Format: TVM's
`src/runtime/file_utils.cc` (SaveParams) and `NDArray::Save` in `include/tvm/runtime/ndarray.h`.

    u64 magic 0xF7E58D4F05049CB7, u64 reserved, u64 n_names, n_names x {u64 len, bytes},
    u64 n_arrays (== n_names), n_arrays x NDArray
    NDArray: u64 magic 0xDD5E40F096B4A13F, u64 reserved, i32 device_type, i32 device_id, i32 ndim,
             u8 code, u8 bits, u16 lanes, i64 shape[ndim], i64 data_byte_size, data
All integers little-endian, packed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..errors import ParamsError
from .dtypes import DTYPE_BYTES, dtype_nbytes

LIST_MAGIC = 0xF7E58D4F05049CB7
ARRAY_MAGIC = 0xDD5E40F096B4A13F
MAX_NDIM = 32
KDL_CPU = 1

# (DLPack type code, bits) <-> numpy-style name. 0 int, 1 uint, 2 float; uint1 is bool.
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex"}
_DTYPE_OF: dict[tuple[int, int], str] = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (1, 1): "bool",
}
_CODE_OF: dict[str, tuple[int, int]] = {name: key for key, name in _DTYPE_OF.items()}
assert set(_CODE_OF) == set(DTYPE_BYTES)

_HEADER = struct.Struct("<QQiiiBBH")  # magic, reserved, device_type, device_id, ndim, code, bits, lanes
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_MIN_ARRAY_BYTES = _HEADER.size + _I64.size  # an NDArray with ndim 0 and no data


@dataclass(frozen=True)
class Param:
    """One named array of a `.params` file; `data` is the raw little-endian C-order payload."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @property
    def nbytes(self) -> int:
        return len(self.data)

    def array(self) -> np.ndarray:
        """The data as a (read-only) numpy array of `shape`, decoded little-endian."""
        dtype = np.dtype(self.dtype).newbyteorder("<")
        return np.frombuffer(self.data, dtype=dtype).reshape(self.shape)


class _Cursor:
    """Reads packed little-endian fields, refusing to run past the end of the data."""

    def __init__(self, data: bytes, source: str):
        self.data = data
        self.offset = 0
        self.source = source

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def fail(self, message: str) -> ParamsError:
        return ParamsError(f"{self.source}: {message}")

    def need(self, size: int, what: str) -> None:
        if size > self.remaining:
            raise self.fail(f"truncated: {what} needs {size} bytes at offset {self.offset} "
                            f"but only {self.remaining} remain")

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        self.need(fmt.size, what)
        values = fmt.unpack_from(self.data, self.offset)
        self.offset += fmt.size
        return values

    def u64(self, what: str) -> int:
        return self.unpack(_U64, what)[0]

    def i64(self, what: str) -> int:
        return self.unpack(_I64, what)[0]

    def take(self, size: int, what: str) -> bytes:
        self.need(size, what)
        chunk = bytes(self.data[self.offset:self.offset + size])
        self.offset += size
        return chunk


def read_params(data: bytes, *, source: str = "params") -> dict[str, Param]:
    """Parse a `.params` file into {name: Param}, in file order. Raises ParamsError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ParamsError(f"{source}: expected bytes, got {type(data).__name__}")
    cur = _Cursor(bytes(data), source)
    if cur.remaining < 8:
        raise cur.fail(f"{cur.remaining} bytes is too short for a TVM params file (needs at least 32)")
    magic = cur.u64("the file magic")
    if magic != LIST_MAGIC:
        raise cur.fail(f"not a TVM params file (magic 0x{magic:016X}, expected 0x{LIST_MAGIC:016X})")
    cur.u64("the reserved header field")

    n_names = cur.u64("the name count")
    if n_names > cur.remaining // _U64.size:
        raise cur.fail(f"declares {n_names} names but only {cur.remaining} bytes remain")
    names: list[str] = []
    seen: set[str] = set()
    for index in range(n_names):
        length = cur.u64(f"the length of name {index}")
        if length > cur.remaining:
            raise cur.fail(f"name {index} declares {length} bytes but only {cur.remaining} remain")
        raw = cur.take(length, f"name {index}")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise cur.fail(f"name {index} is not valid UTF-8 ({_short(raw)})") from None
        if name in seen:
            raise cur.fail(f"name {index} ({_quote(name)}) appears twice")
        seen.add(name)
        names.append(name)

    n_arrays = cur.u64("the array count")
    if n_arrays != n_names:
        raise cur.fail(f"declares {n_arrays} arrays for {n_names} names; the counts must match")
    if n_arrays > cur.remaining // _MIN_ARRAY_BYTES:
        raise cur.fail(f"declares {n_arrays} arrays but only {cur.remaining} bytes remain")

    params: dict[str, Param] = {}
    for index, name in enumerate(names):
        params[name] = _read_array(cur, index, name)
    if cur.remaining:
        raise cur.fail(f"{cur.remaining} unexpected bytes after the last array (offset {cur.offset})")
    return params


def _read_array(cur: _Cursor, index: int, name: str) -> Param:
    label = f"array {index} ({_quote(name)})"
    magic, _reserved, device_type, _device_id, ndim, code, bits, lanes = cur.unpack(_HEADER, f"the header of {label}")
    if magic != ARRAY_MAGIC:
        raise cur.fail(f"{label}: bad array magic 0x{magic:016X} (expected 0x{ARRAY_MAGIC:016X})")
    if device_type != KDL_CPU:
        raise cur.fail(f"{label}: device type {device_type}, expected 1 (CPU)")
    if ndim < 0 or ndim > MAX_NDIM:
        raise cur.fail(f"{label}: ndim {ndim} is out of range (0..{MAX_NDIM})")
    if lanes != 1:
        raise cur.fail(f"{label}: vector type with {lanes} lanes is not supported")
    dtype = _DTYPE_OF.get((code, bits))
    if dtype is None:
        kind = _CODE_NAMES.get(code, f"type code {code}")
        raise cur.fail(f"{label}: unsupported element type {kind} with {bits} bits")

    cur.need(ndim * _I64.size, f"the shape of {label}")
    shape = tuple(cur.i64(f"the shape of {label}") for _ in range(ndim))
    if any(dim < 0 for dim in shape):
        raise cur.fail(f"{label}: negative dimension in shape {shape}")
    count = 1
    for dim in shape:  # Python ints: no overflow
        count *= dim
    expected = count * dtype_nbytes(dtype)

    size = cur.i64(f"the data size of {label}")
    if size < 0:
        raise cur.fail(f"{label}: negative data size {size}")
    if size > cur.remaining:
        raise cur.fail(f"{label} declares {size} data bytes but only {cur.remaining} remain")
    if size != expected:
        raise cur.fail(f"{label}: declares {size} data bytes but {dtype}{list(shape)} needs {expected}")
    return Param(name=name, dtype=dtype, shape=shape, data=cur.take(size, f"the data of {label}"))


def params_summary(data: bytes, *, source: str = "params") -> tuple[int, int]:
    """(number of arrays, total data bytes) of a `.params` file. Raises ParamsError."""
    params = read_params(data, source=source)
    return len(params), sum(len(p.data) for p in params.values())


def write_params(params: Mapping[str, "np.ndarray | Param"]) -> bytes:
    """Serialise {name: array} exactly as TVM's `save_param_dict` does (the inverse of read_params).

    Raises ValueError for an element type the format (as mlfbuild supports it) cannot hold.
    """
    names = list(params)
    out = [_U64.pack(LIST_MAGIC), _U64.pack(0), _U64.pack(len(names))]
    for name in names:
        raw = name.encode("utf-8")
        out += [_U64.pack(len(raw)), raw]
    out.append(_U64.pack(len(names)))
    for name in names:
        value = params[name]
        array = value.array() if isinstance(value, Param) else np.asarray(value)
        dtype = array.dtype.name
        if dtype not in _CODE_OF:
            raise ValueError(f"parameter {name!r}: dtype {dtype} cannot be written to a params file")
        code, bits = _CODE_OF[dtype]
        payload = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        out.append(_HEADER.pack(ARRAY_MAGIC, 0, KDL_CPU, 0, array.ndim, code, bits, 1))
        out += [_I64.pack(dim) for dim in array.shape]
        out += [_I64.pack(len(payload)), payload]
    return b"".join(out)


def _short(raw: bytes, limit: int = 24) -> str:
    text = raw[:limit].hex()
    return text + ("..." if len(raw) > limit else "")


def _quote(name: str, limit: int = 60) -> str:
    """repr() of a name for a one-line message, cut short when long."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + "..."
