"""Bounds-checked reads of a FlatBuffer, for files nobody vouches for.

FlatBuffers' own Python runtime trusts its buffer: a negative offset reads from the end, a vector
length is followed as written. A .tflite is untrusted input, so every offset is checked against the
buffer before it is followed and every vector length against a stated limit.

Binary layout (FlatBuffers' internals documentation): a buffer starts with the root table's uoffset
(4 bytes) then the file identifier; a table starts with an soffset back to its vtable; a vtable is
uint16 [vtable bytes, table bytes, field offsets...]; vectors and strings are a uint32 length then
the elements; offsets to tables, vectors and strings are uoffsets relative to where they are stored.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


class Malformed(ValueError):
    """The bytes are not the FlatBuffer they claim to be; the message says where."""


class Buffer:
    def __init__(self, data: bytes):
        self.data = data

    def check(self, at: int, size: int) -> None:
        if at < 0 or size < 0 or at + size > len(self.data):
            raise Malformed(f"offset {at} is outside the file")

    def unpack(self, fmt: str, at: int):
        self.check(at, struct.calcsize(fmt))
        return struct.unpack_from(fmt, self.data, at)[0]

    def table(self, at: int) -> "Table":
        vtable = at - self.unpack("<i", at)
        vtable_bytes = self.unpack("<H", vtable)
        if vtable_bytes < 4 or vtable_bytes % 2:
            raise Malformed(f"vtable at {vtable} is {vtable_bytes} bytes")
        self.check(vtable, vtable_bytes)
        return Table(self, at, vtable, vtable_bytes)

    def indirect(self, at: int) -> int:
        return at + self.unpack("<I", at)

    def vector(self, at: int, limit: int) -> tuple[int, int]:
        """(first element's offset, length) of the vector referenced at `at`."""
        start = self.indirect(at)
        length = self.unpack("<I", start)
        if length > limit:
            raise Malformed(f"a vector of {length} entries (at most {limit} expected)")
        return start + 4, length

    def root(self) -> "Table":
        return self.table(self.indirect(0))


@dataclass
class Table:
    buf: Buffer
    at: int
    vtable: int
    vtable_bytes: int

    def field(self, index: int) -> int | None:
        """Absolute offset of field `index` (its id in the schema), None when absent."""
        slot = 4 + 2 * index
        if slot + 2 > self.vtable_bytes:
            return None
        offset = self.buf.unpack("<H", self.vtable + slot)
        return self.at + offset if offset else None

    def has(self, index: int) -> bool:
        return self.field(index) is not None

    def scalar(self, index: int, fmt: str, default):
        at = self.field(index)
        return default if at is None else self.buf.unpack(fmt, at)

    def table(self, index: int) -> "Table | None":
        at = self.field(index)
        return None if at is None else self.buf.table(self.buf.indirect(at))

    def vector(self, index: int, fmt: str, limit: int) -> list:
        at = self.field(index)
        if at is None:
            return []
        start, length = self.buf.vector(at, limit)
        size = struct.calcsize(fmt)
        self.buf.check(start, length * size)
        return list(struct.unpack_from(f"<{length}{fmt.lstrip('<')}", self.buf.data, start))

    def bytes(self, index: int, limit: int) -> bytes:
        at = self.field(index)
        if at is None:
            return b""
        start, length = self.buf.vector(at, limit)
        self.buf.check(start, length)
        return bytes(self.buf.data[start:start + length])

    def tables(self, index: int, limit: int) -> list["Table"]:
        at = self.field(index)
        if at is None:
            return []
        start, length = self.buf.vector(at, limit)
        self.buf.check(start, 4 * length)
        return [self.buf.table(self.buf.indirect(start + 4 * i)) for i in range(length)]

    def string(self, index: int, limit: int = 4096) -> str:
        return self.bytes(index, limit).decode("utf-8", errors="replace")
