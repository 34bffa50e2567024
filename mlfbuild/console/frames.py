"""The firmware console's wire format (docs/protocol.md), in one place: sync bytes, version,
request and reply kinds, error codes, reply layouts, the CRC, and one streaming frame decoder
that both the run client and the monitor use.

A frame is 0xA5 0x5A, kind (an ASCII letter), sequence number, u16 length, payload, CRC-16 of
kind..payload, all little-endian. Everything between frames is console text. The firmware's side
is templates/project/src/main.c; tests/test_protocol.py keeps the two in step.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SYNC = b"\xa5\x5a"
VERSION = 2
HEADER_BYTES = 6  # sync, kind, sequence, length
FRAME_OVERHEAD = HEADER_BYTES + 2  # and the CRC

# What each request and reply is called in messages (the letters are the wire format).
REQUESTS = {"H": "hello", "P": "ping", "W": "input write", "X": "inference", "R": "output read", "Q": "quit"}
REPLIES = {"h": "hello", "p": "ping", "k": "input write", "x": "inference", "o": "output read", "q": "quit",
           "z": "error"}
# The firmware's error codes (the `z` reply's first byte).
ERRORS = {1: "bad checksum", 2: "payload too long", 3: "unknown command", 4: "bad arguments", 5: "frame timeout"}
# The firmware dropped the frame (damaged or cut short): sending it again is the remedy.
RESEND_ERRORS = frozenset({1, 5})

# Fixed parts of replies (struct layouts); variable text follows.
HELLO_LAYOUT = "<BBII"   # version, models, timer Hz, max payload; then the board name
RUN_LAYOUT = "<iIII"     # status, ticks, workspace peak, stack peak; then the runtime's error text
WRITE_LAYOUT = "<BBI"    # model, input index, offset; then the bytes
READ_LAYOUT = "<BBIH"    # model, output index, offset, count
# The smallest max_payload a firmware may announce: a run reply must fit, and an input write
# needs room for its header and some data.
MIN_PAYLOAD = struct.calcsize(RUN_LAYOUT)


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF), as the firmware computes it."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def encode_frame(kind: str, payload: bytes = b"", seq: int = 0) -> bytes:
    header = struct.pack("<BBH", ord(kind), seq, len(payload))
    return SYNC + header + payload + struct.pack("<H", crc16(header + payload))


@dataclass(frozen=True)
class Text:
    data: bytes


@dataclass(frozen=True)
class Damaged(Text):
    """A sync byte that began something frame-shaped which failed its checksum or announced an
    impossible length; its one byte is text, and the search goes on from the next."""


@dataclass(frozen=True)
class Frame:
    kind: str
    payload: bytes
    seq: int = 0  # the request's sequence number, echoed in its reply


def decode_stream(data: bytes, final: bool = False, max_payload: int = 4096) -> tuple[list, bytes]:
    """Split `data` into Text, Damaged and Frame items. Returns (items, rest): `rest` is an
    incomplete frame at the end, to be prepended to the next bytes (with `final=True` it is
    returned as text instead)."""
    items: list = []
    text = bytearray()

    def emit(item) -> None:
        nonlocal text
        if text:
            items.append(Text(bytes(text)))
            text = bytearray()
        items.append(item)

    i, n = 0, len(data)
    while i < n:
        j = data.find(SYNC[:1], i)
        if j < 0:
            text += data[i:]
            break
        text += data[i:j]
        avail = n - j
        if avail >= 2 and data[j + 1] != SYNC[1]:
            text += data[j:j + 1]
            i = j + 1
            continue
        if avail >= HEADER_BYTES:
            length = struct.unpack_from("<H", data, j + 4)[0]
            if length > max_payload:
                emit(Damaged(data[j:j + 1]))
                i = j + 1
                continue
            if avail >= FRAME_OVERHEAD + length:
                header = bytes(data[j + 2:j + HEADER_BYTES])
                payload = bytes(data[j + HEADER_BYTES:j + HEADER_BYTES + length])
                if crc16(header + payload) != struct.unpack_from("<H", data, j + HEADER_BYTES + length)[0]:
                    emit(Damaged(data[j:j + 1]))
                    i = j + 1
                    continue
                emit(Frame(chr(header[0]), payload, header[1]))
                i = j + FRAME_OVERHEAD + length
                continue
        if final:  # an incomplete frame at the very end: it was text after all
            text += data[j:j + 1]
            i = j + 1
            continue
        if text:
            items.append(Text(bytes(text)))
        return items, bytes(data[j:])
    if text:
        items.append(Text(bytes(text)))
    return items, b""
