"""Host side of the firmware console protocol (docs/protocol.md): requests and their replies over
any byte port with read(n)/write(b) (pyserial objects, sockets, pipes), resent when a lossy line
drops them, with one absolute deadline per request.

The firmware also speaks MLPerf Tiny's ASCII dialect on the same console for EEMBC's runner (docs/protocol.md);
text it prints outside a frame (boot lines, fault reports) is kept, as a bounded tail, in
`Client.text`.
"""

from __future__ import annotations

import random
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ..errors import RunError
from .frames import (HELLO_LAYOUT, MIN_PAYLOAD, READ_LAYOUT, REPLIES, REQUESTS, RESEND_ERRORS,
                     RUN_LAYOUT, SYNC, VERSION, WRITE_LAYOUT, ERRORS, Damaged, Frame, decode_stream, encode_frame)

# How long one copy of a request waits for its reply before it is sent again. A console may lose
# bytes (QEMU's UART models do under a loaded host, real lines do too); every request can be
# repeated, and sequence numbers let the client drop replies to earlier copies.
ATTEMPT_SECONDS = 2.0
# Console text kept for messages: the tail only, so a firmware that prints without end cannot
# grow mlfbuild's memory.
TEXT_TAIL_BYTES = 64 * 1024
# A length this far above the announced max_payload is damage, not a frame to wait for.
_LENGTH_SLACK = 64
_READ_CHUNK = 4096
_LOST = object()  # what _await returns when the request has to be sent again


class Port(Protocol):
    def read(self, size: int = 1) -> bytes: ...  # returns b"" on timeout
    def write(self, data: bytes) -> int | None: ...


def _named(kind: str) -> str:
    return REQUESTS.get(kind, f"'{kind}'")


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
        self._pending = b""  # the start of a frame whose rest has not arrived
        self._items: deque = deque()  # decoded and not yet consumed

    # -- framing ------------------------------------------------------------------------------
    def _read_some(self, deadline: float, what: str) -> bytes | None:
        """What the port has (at least one byte), or None when `deadline` passes first. The
        deadline is checked on every pass, so a console that never goes quiet cannot hold a
        request past it."""
        while time.monotonic() <= deadline:
            try:
                chunk = self.port.read(self._chunk_size())
            except OSError as exc:  # pyserial's SerialException is an OSError too
                raise RunError(f"the console connection dropped while waiting for {what} ({exc})"
                               f"{self._console_tail()}") from None
            if chunk:
                return chunk
            if not self.is_alive():
                raise RunError(f"the firmware stopped while mlfbuild waited for {what}{self._console_tail()}")
        return None

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

    def receive_frame(self, deadline: float, what: str) -> Frame | None:
        """The next intact frame, or None at `deadline`. Bytes outside frames are console text;
        frame-shaped bytes that fail their checksum are counted and read as text."""
        while True:
            while self._items:
                item = self._items.popleft()
                if isinstance(item, Frame):
                    return item
                if isinstance(item, Damaged):
                    self.damaged += 1
                self._text(item.data)
            chunk = self._read_some(deadline, what)
            if chunk is None:
                return None
            self._decode(chunk)

    def _decode(self, data: bytes) -> None:
        items, self._pending = decode_stream(self._pending + data, max_payload=self.max_payload + _LENGTH_SLACK)
        self._items.extend(items)

    def receive(self, what: str) -> tuple[str, bytes]:
        """The next intact frame as (kind, payload), waiting up to the client's timeout."""
        frame = self.receive_frame(time.monotonic() + self.timeout, what)
        if frame is None:
            raise self._no_reply(what)
        return frame.kind, frame.payload

    def _no_reply(self, what: str) -> RunError:
        lossy = (f" ({self.resends} resend(s); {self.damaged} frame(s) failed their checksum)"
                 if self.resends or self.damaged else "")
        if self.unexpected:
            kinds = sorted(REPLIES.get(kind, repr(kind)) for kind in self.unexpected)
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
            reply_kind, reply_seq, payload = frame.kind, frame.seq, frame.payload
            if reply_kind == "z" and reply_seq in (seq, 0):
                code = payload[0] if payload else 0
                if code in RESEND_ERRORS:
                    return _LOST  # ours, or a frame cut short that may have been ours
                if reply_seq == seq:
                    why = ERRORS.get(code, f"error {code}")
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
            chunk = self._read_some(quiet, "the firmware's start-up banner")
            if chunk is None:
                if time.monotonic() > deadline:
                    raise self._no_reply("the firmware's start-up banner")
                return
            seen = bytes(self.text[-(len(marker) - 1):]) + chunk
            found = seen.find(marker)
            cut = len(chunk) if found < 0 else found + len(marker) - (len(seen) - len(chunk))
            if SYNC[:1] in chunk[:cut]:
                raise RunError("the firmware sent a protocol frame before its start-up banner")
            self._text(chunk[:cut])
            self._decode(chunk[cut:])  # what follows the banner is protocol traffic

    # -- commands -----------------------------------------------------------------------------
    def hello(self) -> Hello:
        reply = self.request("H", b"", "h")
        version, models, hz, max_payload = _unpack(HELLO_LAYOUT, reply, "hello")
        if version != VERSION:
            raise RunError(f"firmware speaks protocol version {version}, mlfbuild speaks {VERSION}: rebuild it")
        if max_payload < MIN_PAYLOAD:
            raise RunError(f"the firmware announced a largest payload of {max_payload} bytes; "
                           f"the protocol needs at least {MIN_PAYLOAD}")
        self.max_payload = max_payload
        return Hello(version, models, hz, max_payload, reply[struct.calcsize(HELLO_LAYOUT):].decode(errors="replace"))

    def ping(self, payload: bytes) -> bytes:
        return self.request("P", payload, "p")

    def write_input(self, model: int, index: int, data: bytes) -> None:
        chunk = self.max_payload - struct.calcsize(WRITE_LAYOUT)
        for offset in range(0, max(len(data), 1), chunk):
            self.request("W", struct.pack(WRITE_LAYOUT, model, index, offset) + data[offset:offset + chunk], "k")

    def run(self, model: int) -> RunReply:
        reply = self.request("X", bytes([model]), "x", long_running=True)
        status, ticks, workspace, stack = _unpack(RUN_LAYOUT, reply, "inference")
        return RunReply(status, ticks, workspace, stack, reply[struct.calcsize(RUN_LAYOUT):].decode("ascii", "replace"))

    def read_output(self, model: int, index: int, nbytes: int) -> bytes:
        data = bytearray()
        chunk = self.max_payload
        while len(data) < nbytes:
            count = min(chunk, nbytes - len(data))
            data += self.request("R", struct.pack(READ_LAYOUT, model, index, len(data), count), "o")
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
