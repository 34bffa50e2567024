"""`mlfbuild monitor`: a serial console that shows the firmware's protocol frames as readable lines.

The firmware's console carries plain text (boot lines, MLPerf Tiny's ASCII dialect, fault reports)
and binary frames (frames.py). `describe_frame()` renders one frame, `MonitorDecoder` turns a
stream of bytes into console text with frames as lines of their own, and `run_monitor()` is the
console: pyserial's miniterm on a terminal (Ctrl-] quits, Ctrl-T menu), a plain read loop otherwise.
"""

from __future__ import annotations

import codecs
import struct
import sys
import time
from typing import Callable, TextIO

import serial

from .frames import ERRORS, HELLO_LAYOUT, REQUESTS, RUN_LAYOUT, Frame, Text, decode_stream

MAX_PAYLOAD = 4096   # longer "frames" are taken as text that happens to contain 0xA5 0x5A
FRAME_TIMEOUT = 1.0  # seconds an incomplete frame may wait for its rest (the firmware's is 1 s too)


def _hex(data: bytes, limit: int = 16) -> str:
    text = data[:limit].hex(" ")
    return text + (" ..." if len(data) > limit else "")


def describe_frame(frame: Frame) -> str:
    """One readable line for a frame, e.g. `[frame x] run: status 0, 1234 ticks, ...`."""
    k, p = frame.kind, frame.payload
    head = f"[frame {k} #{frame.seq}]" if frame.seq else f"[frame {k}]"  # #n: the request it answers
    try:
        if k == "h":
            version, models, hz, max_payload = struct.unpack_from(HELLO_LAYOUT, p)
            board = p[struct.calcsize(HELLO_LAYOUT):].decode(errors="replace")
            return (f"{head} hello: protocol {version}, {models} model(s), timer {hz} Hz, "
                    f"max payload {max_payload}, board {board}")
        if k == "x":
            status, ticks, workspace, stack = struct.unpack_from(RUN_LAYOUT, p)
            return f"{head} run: status {status}, {ticks} ticks, workspace peak {workspace} B, stack peak {stack} B"
        if k == "z":
            code = p[0] if p else 0
            message = p[1:].decode(errors="replace")
            return f"{head} error {code} ({ERRORS.get(code, 'unknown')}): {message}"
        if k == "k":
            return f"{head} input written"
        if k == "q":
            return f"{head} quitting"
        if k == "p":
            return f"{head} pong, {len(p)} bytes: {_hex(p)}"
        if k == "o":
            return f"{head} output, {len(p)} bytes: {_hex(p)}"
        if k in REQUESTS:
            return f"{head} request {REQUESTS[k]}, {len(p)} bytes" + (f": {_hex(p)}" if p else "")
    except (struct.error, IndexError):
        return f"{head} malformed {len(p)}-byte payload: {_hex(p)}"
    return f"{head} {len(p)} bytes" + (f": {_hex(p)}" if p else "")


def printable(text: str) -> str:
    """Keep newlines, tabs and printable text; show other control characters as \\xNN."""
    return "".join(c if c in "\n\r\t" or (c >= " " and c != "\x7f") else f"\\x{ord(c):02x}" for c in text)


class MonitorDecoder:
    """Feed received bytes, get console text back; frames become lines of their own."""

    def __init__(self, decode_frames: bool = True):
        self.decode_frames = decode_frames
        self.pending = b""
        self.pending_since = 0.0
        self._utf8 = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        self._at_line_start = True

    def _text(self, data: bytes, final: bool = False) -> str:
        text = printable(self._utf8.decode(data, final))
        if text:
            self._at_line_start = text.endswith("\n")
        return text

    def feed(self, data: bytes, now: float | None = None) -> str:
        if not self.decode_frames:
            return self._text(data)
        items, rest = decode_stream(self.pending + data, max_payload=MAX_PAYLOAD)
        if rest and rest != self.pending:
            self.pending_since = time.monotonic() if now is None else now
        self.pending = rest
        return self._render(items)

    def flush(self) -> str:
        """Give up on an incomplete frame: its bytes are text after all."""
        items, _ = decode_stream(self.pending, final=True, max_payload=MAX_PAYLOAD)
        self.pending = b""
        return self._render(items) + self._text(b"", final=True)

    def _render(self, items: list) -> str:
        out = []
        for item in items:
            if isinstance(item, Text):
                out.append(self._text(item.data))
            else:
                prefix = "" if self._at_line_start else "\n"
                out.append(f"{prefix}{describe_frame(item)}\n")
                self._at_line_start = True
        return "".join(out)


def monitor_loop(ser, out: TextIO, *, decode_frames: bool = True, stop: Callable[[], bool] = lambda: False) -> str:
    """Copy the port to `out` until `stop()` or the port goes away. Returns why it ended."""
    decoder = MonitorDecoder(decode_frames)
    while not stop():
        try:
            data = ser.read(max(1, getattr(ser, "in_waiting", 0) or 1))
        except (serial.SerialException, OSError) as exc:
            out.write(decoder.flush())
            out.flush()
            return f"port closed ({exc})"
        if data:
            out.write(decoder.feed(data))
            out.flush()
        elif decoder.pending and time.monotonic() - decoder.pending_since > FRAME_TIMEOUT:
            out.write(decoder.flush())
            out.flush()
    out.write(decoder.flush())
    out.flush()
    return "stopped"


def run_monitor(ser, *, decode_frames: bool = True, interactive: bool | None = None, out: TextIO | None = None) -> str:
    """The console. On a terminal: miniterm (keys go to the board, Ctrl-] quits); else read only."""
    out = out or sys.stdout
    if interactive is None:
        interactive = sys.stdin is not None and sys.stdin.isatty() and out.isatty()
    if not interactive:
        try:
            return monitor_loop(ser, out, decode_frames=decode_frames)
        except KeyboardInterrupt:
            return "interrupted"
    from serial.tools import miniterm

    class FrameFilter(miniterm.Transform):
        def __init__(self):
            self.decoder = MonitorDecoder(decode_frames)

        def rx(self, text):
            return self.decoder.feed(text.encode("latin-1"))

    class Term(miniterm.Miniterm):
        def update_transformations(self):
            super().update_transformations()
            self.rx_transformations.insert(0, FrameFilter())   # first: sees the raw bytes

    term = Term(ser, echo=False, eol="crlf")
    term.set_rx_encoding("latin-1")     # bytes 1:1 into FrameFilter, which decodes UTF-8 itself
    term.set_tx_encoding("utf-8")
    print(f"--- mlfbuild monitor on {ser.port}: quit with Ctrl-], menu with Ctrl-T ---", file=sys.stderr)
    term.start()
    try:
        term.join(True)
    except KeyboardInterrupt:
        pass
    term.stop()
    term.join()
    return "stopped"
