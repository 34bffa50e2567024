"""Host side of the firmware console protocol (docs/protocol.md): length- and CRC-framed binary
commands, over any byte port with read(n)/write(b) (pyserial objects, sockets, pipes).

The firmware also speaks MLPerf Tiny's ASCII dialect on the same console (see mlperf.py); text it
prints outside a frame (boot lines, fault reports) is collected in `Client.text`.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Protocol

from ..errors import RunError

SYNC = b"\xa5\x5a"
VERSION = 1
_ERRORS = {1: "bad checksum", 2: "payload too long", 3: "unknown command", 4: "bad arguments",
           5: "frame timeout"}
# Requests that are safe to send again when the firmware reports a damaged or partial frame.
_IDEMPOTENT = set("HPDWR")
_RETRYABLE_ERRORS = {1, 5}
_ATTEMPTS = 3


class Port(Protocol):
    def read(self, size: int = 1) -> bytes: ...  # returns b"" on timeout
    def write(self, data: bytes) -> int | None: ...


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF), as the firmware computes it."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def encode_frame(kind: str, payload: bytes = b"") -> bytes:
    header = struct.pack("<BH", ord(kind), len(payload))
    return SYNC + header + payload + struct.pack("<H", crc16(header + payload))


@dataclass
class Hello:
    version: int
    models: int
    timer_hz: int
    max_payload: int
    board: str


@dataclass
class RunReply:
    status: int
    ticks: int
    workspace_peak: int
    stack_peak: int
    message: str = ""  # the runtime's error text when status != 0


class Client:
    def __init__(self, port: Port, *, timeout: float = 10.0, is_alive=lambda: True):
        self.port = port
        self.timeout = timeout
        self.is_alive = is_alive  # lets a transport report that the firmware process died
        self.text = bytearray()  # console text outside frames (boot lines, fault reports)
        self.max_payload = 256

    # -- framing ------------------------------------------------------------------------------
    def _read_exact(self, size: int, deadline: float, what: str) -> bytes:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = self.port.read(size - len(data))
            except OSError as exc:  # pyserial's SerialException is an OSError too
                raise RunError(f"the console connection dropped while waiting for {what} ({exc})"
                               f"{self._console_tail()}") from None
            if chunk:
                data += chunk
                continue
            if time.monotonic() > deadline:
                raise RunError(f"no reply from the firmware within {self.timeout:g} s while waiting for {what}"
                               f"{self._console_tail()}")
            if not self.is_alive():
                raise RunError(f"the firmware stopped while mlfbuild waited for {what}{self._console_tail()}")
        return bytes(data)

    def _console_tail(self) -> str:
        text = self.text.decode(errors="replace").strip().splitlines()
        return f"; console said: {text[-1][:200]}" if text else ""

    def receive(self, what: str) -> tuple[str, bytes]:
        """Next valid frame; bytes outside frames are console text, damaged frames are skipped."""
        deadline = time.monotonic() + self.timeout
        while True:
            byte = self._read_exact(1, deadline, what)
            if byte != SYNC[:1]:
                self.text += byte
                if b"*** FAULT" in self.text[-200:] and self.text.endswith(b"\n"):
                    raise RunError(f"the firmware crashed: {self._console_tail()[len('; console said: '):]}")
                continue
            if self._read_exact(1, deadline, what) != SYNC[1:]:
                continue
            header = self._read_exact(3, deadline, what)
            kind, length = header[0], struct.unpack("<H", header[1:])[0]
            if length > 65535:
                continue
            body = self._read_exact(length + 2, deadline, what)
            payload, crc = body[:-2], struct.unpack("<H", body[-2:])[0]
            if crc16(header + payload) != crc:
                raise RunError(f"corrupted reply from the firmware while waiting for {what} (checksum mismatch)")
            return chr(kind), payload

    def request(self, kind: str, payload: bytes, expect: str) -> bytes:
        for attempt in range(_ATTEMPTS):
            try:
                self.port.write(encode_frame(kind, payload))
            except OSError as exc:
                raise RunError(f"the console connection dropped while sending '{kind}' ({exc})") from None
            reply_kind, reply = self.receive(f"the reply to '{kind}'")
            if reply_kind == expect:
                return reply
            if reply_kind != "z":
                raise RunError(f"unexpected reply '{reply_kind}' to '{kind}' from the firmware")
            code = reply[0] if reply else 0
            if not (code in _RETRYABLE_ERRORS and kind in _IDEMPOTENT and attempt + 1 < _ATTEMPTS):
                raise RunError(f"the firmware refused '{kind}': {_ERRORS.get(code, f'error {code}')}")
        raise AssertionError("unreachable")

    def wait_for_banner(self, marker: bytes = b"m-ready\r\n") -> None:
        """After a fresh boot: wait until the firmware says it is ready. Some UART models (QEMU's
        STM32 USART) drop what arrives before the firmware has enabled its receiver."""
        deadline = time.monotonic() + self.timeout
        while marker not in self.text:
            byte = self._read_exact(1, deadline, "the firmware's start-up banner")
            if byte == SYNC[:1]:
                raise RunError("the firmware sent a protocol frame before its start-up banner")
            self.text += byte

    # -- commands -----------------------------------------------------------------------------
    def hello(self) -> Hello:
        reply = self.request("H", b"", "h")
        if len(reply) < 10:
            raise RunError("short hello reply from the firmware")
        version, models, hz, max_payload = struct.unpack("<BBII", reply[:10])
        if version != VERSION:
            raise RunError(f"firmware speaks protocol version {version}, mlfbuild speaks {VERSION}: rebuild it")
        self.max_payload = max_payload
        return Hello(version, models, hz, max_payload, reply[10:].decode(errors="replace"))

    def ping(self, payload: bytes) -> bytes:
        return self.request("P", payload, "p")

    def describe(self, model: int) -> tuple[list[int], list[int]]:
        reply = self.request("D", bytes([model]), "d")
        n_in, n_out = reply[0], reply[1]
        sizes = list(struct.unpack(f"<{n_in + n_out}I", reply[2:2 + 4 * (n_in + n_out)]))
        return sizes[:n_in], sizes[n_in:]

    def write_input(self, model: int, index: int, data: bytes) -> None:
        chunk = self.max_payload - 6
        for offset in range(0, max(len(data), 1), chunk):
            self.request("W", struct.pack("<BBI", model, index, offset) + data[offset:offset + chunk], "k")

    def run(self, model: int) -> RunReply:
        reply = self.request("X", bytes([model]), "x")
        status, ticks, workspace, stack = struct.unpack("<iIII", reply[:16])
        return RunReply(status, ticks, workspace, stack, reply[16:].decode("ascii", "replace"))

    def read_output(self, model: int, index: int, nbytes: int) -> bytes:
        data = bytearray()
        chunk = self.max_payload
        while len(data) < nbytes:
            count = min(chunk, nbytes - len(data))
            data += self.request("R", struct.pack("<BBIH", model, index, len(data), count), "o")
        return bytes(data)

    def quit(self, code: int = 0) -> None:
        self.request("Q", bytes([code & 0xFF]), "q")
