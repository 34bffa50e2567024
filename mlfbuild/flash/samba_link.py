"""The SAM-BA monitor protocol of the Arduino and Adafruit SAMD bootloaders, over a USB CDC serial port.

Commands are ASCII, `<letter><hex>[,<hex>]#`; over USB CDC data moves raw (no XMODEM: USB already
checks and retransmits). What each command answers (binary mode, after `N#`):

    N#              "\\n\\r"                       leave terminal mode
    V#              "v2.0 [Arduino:XYZ] <date>\\n\\r" version; [Arduino:...] lists the extensions
    w<addr>,4#      4 bytes, little endian         read a word
    o<addr>,1#      1 byte                         read a byte
    W<addr>,<val>#  nothing                        write a word (O: byte, H: half word)
    R<addr>,<n>#    n raw bytes                    read memory
    S<addr>,<n>#    nothing; n raw bytes follow    write memory (SRAM here)
    Y<addr>,0#      "Y\\n\\r"                       extension: set the SRAM source buffer
    Y<addr>,<n>#    "Y\\n\\r"                       extension: copy n buffer bytes to flash, page by page
    Z<addr>,<n>#    "Z%08X#\\n\\r"                  extension: CRC16 (XMODEM) of n bytes at addr
    G<addr>#        nothing                        call code (not used here)

Hex digits are sent in lower case: the monitor accepts both, and a bit error in a lower-case digit
gives a letter that is no command, where an upper-case one could turn into R, S, T or V.

Recovery (`resync`): the monitor has no timeouts, so after a lost or garbled byte it may still be
waiting for the rest of an S data block or sit in a half-parsed command. 0xFF bytes complete any
pending data block and are skipped by the command parser; `N#` answered with exactly "\\n\\r" then
proves the command boundary.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

import serial

from .serial_link import LinkError, PortGone, SerialLink

EXTENSIONS_RE = re.compile(r"\[Arduino:([A-Z]*)\]")
CRC_REPLY_RE = re.compile(rb"Z([0-9A-Fa-f]{8})#\n\r")


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, initial 0), as the monitor's Z command computes it."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        crc &= 0xFFFF
    return crc


@dataclass
class SambaTimeouts:
    """Seconds. A USB CDC monitor answers within milliseconds; copies and erases take longer."""

    answer: float = 0.5           # replies to N, V, w, o, R, Z
    copy: float = 3.0             # Y: a 4 KiB buffer into flash (64 SAMD21 pages at ~3 ms each)
    nvm: float = 1.0              # an NVM controller command (row erase ~6 ms, block erase ~50 ms)
    resync: float = 5.0           # total budget to get back to a command boundary
    quiet: float = 0.05           # silence that ends a drain
    settle: float = 0.001         # between a command and its data (see SambaLink.write_memory)


class SambaLink(SerialLink):
    """One SAM-BA monitor exchange per method, over an open pyserial port with a small timeout."""

    def __init__(self, ser, *, timeouts: SambaTimeouts | None = None, pending_max: int = 4096,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.timeouts = timeouts or SambaTimeouts()
        super().__init__(ser, clock=clock)
        self.pending_max = pending_max      # the largest S data block this link sends
        self.sleep = sleep

    def command(self, text: str) -> None:
        self.write(text.encode("ascii"))

    def expect(self, reply: bytes, timeout: float, what: str) -> None:
        got = self.read(len(reply), timeout)
        if got != reply:
            raise LinkError(f"{what} answered {got!r} instead of {reply!r}" if got
                            else f"no answer to {what} within {timeout:g} s")

    # -- recovery --------------------------------------------------------------------------------
    def resync(self) -> None:
        """Back to a command boundary (see the module's doc), or LinkError."""
        deadline = self.clock() + self.timeouts.resync
        filler = b"\xff" * self.pending_max
        while self.clock() < deadline:
            self.drain()
            self.write(filler)
            self.drain()
            try:
                self.hello()
                self.hello()          # twice: the first "\n\r" may have been a stray one
            except LinkError:
                continue
            if not self.drain():
                return
        raise LinkError(f"no clean answer to N# within {self.timeouts.resync:g} s")

    # -- commands --------------------------------------------------------------------------------
    def hello(self) -> None:
        """N#: binary mode; the monitor answers "\\n\\r"."""
        self.command("N#")
        self.expect(b"\n\r", self.timeouts.answer, "N#")

    def version(self) -> str:
        """V#: the version line, e.g. "v2.0 [Arduino:XYZ] Mar 19 2018 09:45:14"."""
        self.command("V#")
        line = bytearray()
        deadline = self.clock() + self.timeouts.answer
        while not line.endswith(b"\n\r"):
            chunk = self.read(1, max(0.0, deadline - self.clock()))
            if not chunk:
                raise LinkError(f"incomplete answer to V# within {self.timeouts.answer:g} s: {bytes(line)!r}")
            line += chunk
            if len(line) > 256:
                raise LinkError(f"answer to V# runs past 256 bytes: {bytes(line[:40])!r}...")
        text = line[:-2].decode("ascii", "replace")
        if not text.startswith("v") or not text.isprintable():
            raise LinkError(f"V# answered {text!r}, not a SAM-BA version line")
        return text

    def read_word(self, address: int) -> int:
        self.command(f"w{address:08x},4#")
        return int.from_bytes(self.read_exact(4, self.timeouts.answer, f"w (read word at 0x{address:08X})"),
                              "little")

    def write_word(self, address: int, value: int) -> None:
        self.command(f"W{address:08x},{value:08x}#")

    def write_half(self, address: int, value: int) -> None:
        self.command(f"H{address:08x},{value:04x}#")

    def read_memory(self, address: int, size: int) -> bytes:
        """R: `size` raw bytes. Callers keep `size` below 64: the SAMD bootloaders garble longer
        reads over USB (BOSSA reads them 63 bytes at a time)."""
        self.command(f"R{address:08x},{size:08x}#")
        return self.read_exact(size, self.timeouts.answer, f"R (read {size} bytes at 0x{address:08X})")

    def write_memory(self, address: int, data: bytes) -> None:
        """S + raw data. The monitor mis-parses a USB packet that holds both the command and its
        data, so the data goes out a moment later, as BOSSA does it."""
        assert 0 < len(data) <= self.pending_max
        self.command(f"S{address:08x},{len(data):08x}#")
        self._flush()
        self.sleep(self.timeouts.settle)
        self.write(data)
        self._flush()

    def set_buffer(self, address: int) -> None:
        self.command(f"Y{address:08x},0#")
        self.expect(b"Y\n\r", self.timeouts.answer, "Y (set buffer)")

    def copy_buffer(self, address: int, size: int) -> None:
        self.command(f"Y{address:08x},{size:08x}#")
        self.expect(b"Y\n\r", self.timeouts.copy, f"Y (write {size} bytes to 0x{address:08X})")

    def checksum(self, address: int, size: int) -> int:
        self.command(f"Z{address:08x},{size:08x}#")
        what = f"Z (CRC of {size} bytes at 0x{address:08X})"
        reply = self.read_exact(12, self.timeouts.answer + size * 1e-6, what)
        match = CRC_REPLY_RE.fullmatch(reply)
        if not match:
            raise LinkError(f"{what} answered {reply!r}")
        value = int(match.group(1), 16)
        if value > 0xFFFF:
            raise LinkError(f"{what} answered {reply!r}: not a 16-bit CRC")
        return value

    def _flush(self) -> None:
        try:
            self.ser.flush()
        except (serial.SerialException, OSError) as exc:
            raise PortGone(f"serial port failed while sending: {exc}") from None
        except Exception:  # noqa: BLE001 - URL handlers without flush()
            pass


def extensions(version: str) -> str:
    """The extension letters of a version line: "XYZ" for "v2.0 [Arduino:XYZ] ...", "" without."""
    match = EXTENSIONS_RE.search(version)
    return match.group(1) if match else ""
