"""Host side of the firmware console protocol (docs/protocol.md): length- and CRC-framed binary
commands, over any byte port with read(n)/write(b) (pyserial objects, sockets, pipes).

The firmware also speaks MLPerf Tiny's ASCII dialect on the same console (see mlperf.py); text it
prints outside a frame (boot lines, fault reports) is collected in `Client.text`.
"""

from __future__ import annotations

import random
import struct
import time
from dataclasses import dataclass
from typing import Protocol

from ..errors import RunError

SYNC = b"\xa5\x5a"
VERSION = 2
# What each request is, for messages (the letters are the wire format, not words for a user).
_REQUESTS = {"H": "hello", "P": "ping", "D": "describe", "W": "input write", "X": "inference", "R": "output read",
             "Q": "quit"}
_REPLIES = {"h": "hello", "p": "ping", "d": "describe", "k": "input write", "x": "inference", "o": "output read",
            "q": "quit", "z": "error"}
_ERRORS = {1: "bad checksum", 2: "payload too long", 3: "unknown command", 4: "bad arguments",
           5: "frame timeout"}
# The firmware dropped our frame (damaged or cut short): sending it again is the remedy.
_RESEND_ERRORS = {1, 5}
# How long one copy of a request waits for its reply before it is sent again. A console may lose
# bytes (QEMU's UART models do under a loaded host, real lines do too); every request can be
# repeated, and sequence numbers let the client drop replies to earlier copies.
ATTEMPT_SECONDS = 2.0
# Console text kept for messages: the tail only, so a firmware that prints without end cannot
# grow mlfbuild's memory.
TEXT_TAIL_BYTES = 64 * 1024
# The smallest max_payload a firmware may announce: a run reply (16 bytes) must fit, and an
# input write needs room for its 6-byte header and data.
MIN_PAYLOAD = 16
_READ_CHUNK = 4096
_LOST = object()  # what _await returns when the request has to be sent again


class Port(Protocol):
    def read(self, size: int = 1) -> bytes: ...  # returns b"" on timeout
    def write(self, data: bytes) -> int | None: ...


def _named(kind: str) -> str:
    return _REQUESTS.get(kind, f"'{kind}'")


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
    def __init__(self, port: Port, *, timeout: float = 10.0, is_alive=lambda: True,
                 attempt_seconds: float = ATTEMPT_SECONDS):
        self.port = port
        self.timeout = timeout  # the longest any one request may take, resends included
        self.attempt_seconds = min(attempt_seconds, timeout)
        self.is_alive = is_alive  # lets a transport report that the firmware process died
        self.text = bytearray()  # console text outside frames (boot lines, fault reports)
        self.max_payload = 256
        self.resends = 0  # requests sent again because no reply came (a lossy console)
        self.damaged = 0  # frames from the firmware that failed their checksum
        self.unexpected: set[str] = set()  # kinds of replies that answered the wrong request
        # Start somewhere random: a board may still send replies from an earlier, interrupted session.
        self._seq = random.randrange(255)
        self._pending = bytearray()  # bytes read from the port and not yet consumed

    # -- framing ------------------------------------------------------------------------------
    def _read(self, size: int, deadline: float, what: str) -> bytes | None:
        """`size` bytes, or None when `deadline` passes first. The deadline is checked on every
        pass, so a console that never goes quiet cannot hold a request past it."""
        while len(self._pending) < size:
            if time.monotonic() > deadline:
                return None
            try:
                chunk = self.port.read(self._chunk_size())
            except OSError as exc:  # pyserial's SerialException is an OSError too
                raise RunError(f"the console connection dropped while waiting for {what} ({exc})"
                               f"{self._console_tail()}") from None
            if chunk:
                self._pending += chunk
            elif not self.is_alive():
                raise RunError(f"the firmware stopped while mlfbuild waited for {what}{self._console_tail()}")
        data = bytes(self._pending[:size])
        del self._pending[:size]
        return data

    def _chunk_size(self) -> int:
        """Read what has arrived in one call (pyserial reports it as in_waiting; a pipe port
        returns what is there), at least one byte."""
        waiting = getattr(self.port, "in_waiting", None)
        if isinstance(waiting, int):
            return max(1, min(waiting, 1 << 16))
        return _READ_CHUNK

    def _console_tail(self) -> str:
        text = self.text.decode(errors="replace").strip().splitlines()
        return f"; console said: {text[-1][:200]}" if text else ""

    def _text(self, data: bytes) -> None:
        start = max(0, len(self.text) - 200)
        self.text += data
        fault = self.text.rfind(b"*** FAULT", start)
        if fault >= 0 and b"\n" in self.text[fault:]:  # the whole fault line has arrived
            line = bytes(self.text[fault:]).split(b"\n")[0].decode(errors="replace").strip()
            raise RunError(f"the firmware crashed: {line[:200]}")
        if len(self.text) > 2 * TEXT_TAIL_BYTES:
            del self.text[:-TEXT_TAIL_BYTES]

    def receive_frame(self, deadline: float, what: str) -> tuple[str, int, bytes] | None:
        """The next intact frame as (kind, seq, payload), or None at `deadline`. Bytes outside
        frames are console text; a frame that fails its checksum is counted and skipped."""
        while True:
            text = self._pending.find(SYNC[:1])
            if text != 0 and self._pending:  # console text up to the next possible frame, in one piece
                end = len(self._pending) if text < 0 else text
                chunk = bytes(self._pending[:end])
                del self._pending[:end]
                self._text(chunk)
                continue
            byte = self._read(1, deadline, what)
            if byte is None:
                return None
            if byte != SYNC[:1]:
                self._text(byte)
                continue
            second = self._read(1, deadline, what)
            while second == SYNC[:1]:
                second = self._read(1, deadline, what)
            if second != SYNC[1:]:
                if second is not None:
                    self._text(second)
                continue
            header = self._read(4, deadline, what)
            if header is None:
                return None
            length = struct.unpack("<H", header[2:])[0]
            if length > self.max_payload + 64:  # a damaged length: hunt for the next frame instead
                self.damaged += 1
                continue
            body = self._read(length + 2, deadline, what)
            if body is None:
                return None
            payload, crc = body[:-2], struct.unpack("<H", body[-2:])[0]
            if crc16(header + payload) != crc:
                self.damaged += 1
                continue
            return chr(header[0]), header[1], payload

    def receive(self, what: str) -> tuple[str, bytes]:
        """The next intact frame as (kind, payload), waiting up to the client's timeout."""
        frame = self.receive_frame(time.monotonic() + self.timeout, what)
        if frame is None:
            raise self._no_reply(what)
        return frame[0], frame[2]

    def _no_reply(self, what: str) -> RunError:
        lossy = (f" ({self.resends} resend(s); {self.damaged} frame(s) failed their checksum)"
                 if self.resends or self.damaged else "")
        if self.unexpected:
            kinds = sorted(_REPLIES.get(kind, repr(kind)) for kind in self.unexpected)
            lossy += f" (replies to other requests came: {', '.join(kinds)})"
        return RunError(f"no reply from the firmware within {self.timeout:g} s while waiting for {what}"
                        f"{lossy}{self._console_tail()}")

    def _send(self, kind: str, payload: bytes, seq: int) -> None:
        try:
            self.port.write(encode_frame(kind, payload, seq))
        except OSError as exc:
            raise RunError(f"the console connection dropped while sending the {_named(kind)} request ({exc})") from None

    def _next_seq(self) -> int:
        self._seq = self._seq % 255 + 1  # 1..255; 0 marks an error about a frame cut short
        return self._seq

    def _await(self, kind: str, seq: int, expect: str, deadline: float, ping: int | None) -> bytes | object | None:
        """The reply to request `kind` number `seq`; None at `deadline`; _LOST when the request must
        be sent again (the firmware dropped it as damaged, or the pong to `ping` came first)."""
        while True:
            frame = self.receive_frame(deadline, f"the reply to the {_named(kind)} request")
            if frame is None:
                return None
            reply_kind, reply_seq, payload = frame
            if reply_kind == "z" and reply_seq in (seq, 0):
                code = payload[0] if payload else 0
                if code in _RESEND_ERRORS:
                    return _LOST  # ours, or a frame cut short that may have been ours
                if reply_seq == seq:
                    why = _ERRORS.get(code, f"error {code}")
                    raise RunError(f"the firmware refused the {_named(kind)} request: {why}")
                continue
            if reply_kind == "p" and ping is not None and reply_seq == ping:
                return _LOST
            if reply_seq != seq:
                continue  # a reply to an earlier copy of some request
            if reply_kind != expect:  # stale traffic whose number happens to match; noted for the error
                self.unexpected.add(reply_kind)
                continue
            return payload

    def request(self, kind: str, payload: bytes, expect: str, *, long_running: bool = False) -> bytes:
        """Send a request and return its reply's payload, sending it again when it was lost. A
        request that may take long (a run) is not sent again on silence alone: a ping asks, and
        as the firmware answers in order, a pong ahead of the reply shows the request was lost."""
        seq = self._next_seq()
        deadline = time.monotonic() + self.timeout
        self._send(kind, payload, seq)
        ping = None
        while True:
            reply = self._await(kind, seq, expect, min(deadline, time.monotonic() + self.attempt_seconds), ping)
            if reply is not None and reply is not _LOST:
                return reply
            if time.monotonic() > deadline:
                raise self._no_reply(f"the reply to the {_named(kind)} request")
            if reply is None and long_running:
                ping = self._next_seq()
                self._send("P", b"", ping)
                continue
            self.resends += 1
            ping = None
            self._send(kind, payload, seq)

    def wait_for_banner(self, marker: bytes = b"m-ready\r\n") -> None:
        """After a fresh boot: wait until the firmware says it is ready (some UART models, QEMU's
        STM32 USART among them, drop what arrives before the firmware enables its receiver). A
        banner damaged on the way still counts once the console has gone quiet after it."""
        deadline = time.monotonic() + self.timeout
        while marker not in self.text:
            quiet = min(deadline, time.monotonic() + self.attempt_seconds) if self.text.endswith(b"\n") else deadline
            byte = self._read(1, quiet, "the firmware's start-up banner")
            if byte is None:
                if time.monotonic() > deadline:
                    raise self._no_reply("the firmware's start-up banner")
                return
            if byte == SYNC[:1]:
                raise RunError("the firmware sent a protocol frame before its start-up banner")
            self._text(byte)

    # -- commands -----------------------------------------------------------------------------
    def hello(self) -> Hello:
        reply = self.request("H", b"", "h")
        version, models, hz, max_payload = _unpack("<BBII", reply, "hello")
        if version != VERSION:
            raise RunError(f"firmware speaks protocol version {version}, mlfbuild speaks {VERSION}: rebuild it")
        if max_payload < MIN_PAYLOAD:
            raise RunError(f"the firmware announced a largest payload of {max_payload} bytes; "
                           f"the protocol needs at least {MIN_PAYLOAD}")
        self.max_payload = max_payload
        return Hello(version, models, hz, max_payload, reply[10:].decode(errors="replace"))

    def ping(self, payload: bytes) -> bytes:
        return self.request("P", payload, "p")

    def describe(self, model: int) -> tuple[list[int], list[int]]:
        reply = self.request("D", bytes([model]), "d")
        n_in, n_out = _unpack("<BB", reply, "describe")
        sizes = list(_unpack(f"<{n_in + n_out}I", reply[2:], "describe"))
        return sizes[:n_in], sizes[n_in:]

    def write_input(self, model: int, index: int, data: bytes) -> None:
        chunk = self.max_payload - 6
        for offset in range(0, max(len(data), 1), chunk):
            self.request("W", struct.pack("<BBI", model, index, offset) + data[offset:offset + chunk], "k")

    def run(self, model: int) -> RunReply:
        reply = self.request("X", bytes([model]), "x", long_running=True)
        status, ticks, workspace, stack = _unpack("<iIII", reply, "inference")
        return RunReply(status, ticks, workspace, stack, reply[16:].decode("ascii", "replace"))

    def read_output(self, model: int, index: int, nbytes: int) -> bytes:
        data = bytearray()
        chunk = self.max_payload
        while len(data) < nbytes:
            count = min(chunk, nbytes - len(data))
            data += self.request("R", struct.pack("<BBIH", model, index, len(data), count), "o")
        return bytes(data)

    def quit(self, code: int = 0) -> None:
        """Ask the firmware to exit. The reply may be lost as the emulator stops: a firmware that
        is gone has quit."""
        try:
            self.request("Q", bytes([code & 0xFF]), "q")
        except RunError:
            settled = time.monotonic() + self.attempt_seconds  # an emulator takes a moment to exit
            while self.is_alive() and time.monotonic() < settled:
                time.sleep(0.05)
            if self.is_alive():
                raise


def _unpack(layout: str, payload: bytes, reply: str) -> tuple:
    """The fixed part of a reply, after checking it is all there (a short reply is the firmware's
    fault or a damaged line, never a reason to crash)."""
    need = struct.calcsize(layout)
    if len(payload) < need:
        raise RunError(f"the firmware's {reply} reply is {len(payload)} bytes, shorter than the {need} "
                       f"the protocol defines")
    return struct.unpack(layout, payload[:need])
