"""The byte layer the ROM-bootloader protocols share (AN3155 for STM32, SAM-BA for SAMD): write,
read with a deadline, read an exact count, drain, over an open pyserial port whose own timeout is
small. A lost connection is `PortGone` (never retried); anything the exchange can recover from by
a resync and a retry is `LinkError`."""

from __future__ import annotations

import time
from typing import Any, Callable

import serial


class LinkError(Exception):
    """A NACK, a timeout, a short or garbled answer: the exchange can be retried after a resync.
    `data_sent`: the failure came after a data block went out (it may have been programmed);
    `nacked`: the device refused rather than stayed silent."""

    def __init__(self, what: str, data_sent: bool = False, nacked: bool = False):
        super().__init__(what)
        self.data_sent = data_sent
        self.nacked = nacked


class PortGone(Exception):
    """The serial connection failed (unplugged, closed, a board reset, an I/O error). Never retried."""


class SerialLink:
    """A protocol's link: subclasses set `timeouts` (with `quiet`, the silence that ends a drain)."""

    timeouts: Any

    def __init__(self, ser, *, byte_time: float = 0.0, clock: Callable[[], float] = time.monotonic):
        self.ser = ser
        self.byte_time = byte_time  # seconds one byte takes on the line; reads allow twice that per byte
        self.clock = clock
        self.bytes_sent = 0

    def write(self, data: bytes) -> None:
        try:
            self.ser.write(bytes(data))
            self.bytes_sent += len(data)
        except serial.SerialTimeoutException:
            raise LinkError("the port did not accept data (write timeout)") from None
        except (serial.SerialException, OSError) as exc:
            raise PortGone(f"serial port failed while sending: {exc}") from None

    def read(self, size: int, timeout: float) -> bytes:
        """Up to `size` bytes within `timeout` (+ their transfer time); fewer on timeout."""
        deadline = self.clock() + timeout + size * self.byte_time * 2
        data = bytearray()
        while len(data) < size:
            try:
                chunk = self.ser.read(size - len(data))
            except (serial.SerialException, OSError) as exc:
                raise PortGone(f"serial port failed while receiving: {exc}") from None
            if chunk:
                data += chunk
            elif self.clock() >= deadline:
                break
        return bytes(data)

    def read_exact(self, size: int, timeout: float, what: str) -> bytes:
        data = self.read(size, timeout)
        if len(data) < size:
            got = f"only {len(data)} of {size} bytes" if data else "no answer"
            raise LinkError(f"{got} for {what} within {timeout:g} s")
        return data

    def drain(self, quiet: float | None = None, limit: float = 2.0) -> bytes:
        """Read and discard until the line has been silent for `quiet` seconds (at most `limit`)."""
        quiet = self.timeouts.quiet if quiet is None else quiet
        end = self.clock() + limit
        junk = bytearray()
        while self.clock() < end:
            chunk = self.read(256, quiet)  # small: a read allows transfer time per byte asked for
            if not chunk:
                break
            junk += chunk
        return bytes(junk)
