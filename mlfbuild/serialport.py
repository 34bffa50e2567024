"""The one place that opens serial connections (flash, monitor, `run --port`) and finds ports.

`open_port()` takes a device path (/dev/ttyUSB0, COM3) or a pyserial URL (socket://, rfc2217://,
loop://, spy://...), sets the line up *before* opening (baud, parity, timeouts, DTR/RTS, so a board
wired to DTR/RTS does not see a reset glitch from a late change), locks it where the OS supports
it, and turns every failure into one clear `MlfError` line. Which error class is the caller's
choice (`error=`): a port that is missing is bad input to `run`, but a failed flash to `flash`.

`find_port()` picks the single likely USB serial port, or stops with the list of candidates.

Facts this relies on (pyserial 3.5, see docs/flashing.md): `exclusive=True` is an advisory
flock on POSIX only; URL handlers such as socket:// ignore baud, parity and the control lines.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import serial
import serial.tools.list_ports

from .errors import InvalidInputError, MlfError, UsageError

PARITIES = {"none": serial.PARITY_NONE, "even": serial.PARITY_EVEN, "odd": serial.PARITY_ODD,
            "N": serial.PARITY_NONE, "E": serial.PARITY_EVEN, "O": serial.PARITY_ODD}

# Device names of USB serial bridges and USB CDC-ACM devices on Linux, macOS and the BSDs.
_USB_NAME = re.compile(r"(ttyUSB|ttyACM|cu\.usb|tty\.usb|cu\.SLAB|cu\.wchusbserial|ttyU\d|cuaU\d)", re.I)


def is_url(port: str) -> bool:
    return "://" in port


def open_port(port: str, *, baudrate: int = 115200, parity: str = "none", timeout: float | None = 0.1,
              write_timeout: float | None = 5.0, dtr: bool | None = None, rts: bool | None = None,
              exclusive: bool = True, error: type[MlfError] = InvalidInputError,
              purpose: str = "") -> serial.SerialBase:
    """Open `port` (path or URL) 8-bit, 1 stop bit, no flow control.

    `parity` is none/even/odd (or N/E/O). `dtr`/`rts`: True = asserted, False = deasserted, None =
    leave the driver's default; set before the port opens. Raises `error` naming the port with
    the reason (missing, busy, permission, bad settings).
    """
    what = f" for {purpose}" if purpose else ""
    try:
        parity_code = PARITIES[parity]
    except KeyError:
        raise UsageError(f"unknown parity '{parity}' (use none, even or odd)") from None
    try:
        if is_url(port):
            ser = serial.serial_for_url(port, do_not_open=True)
        else:
            ser = serial.Serial()
            ser.port = port
        ser.baudrate = baudrate
        ser.bytesize = serial.EIGHTBITS
        ser.parity = parity_code
        ser.stopbits = serial.STOPBITS_ONE
        ser.xonxoff = ser.rtscts = ser.dsrdtr = False
        ser.timeout = timeout
        ser.write_timeout = write_timeout
        if exclusive and os.name == "posix" and not is_url(port):
            ser.exclusive = True
        if dtr is not None:
            ser.dtr = dtr
        if rts is not None:
            ser.rts = rts
    except (ValueError, serial.SerialException) as exc:
        raise error(f"cannot use serial port {port}{what}: {exc}") from None
    try:
        ser.open()
    except serial.SerialException as exc:
        raise error(f"cannot open serial port {port}{what}: {_reason(port, exc)}") from None
    except (OSError, ValueError) as exc:
        raise error(f"cannot open serial port {port}{what}: {exc}") from None
    return ser


def _reason(port: str, exc: serial.SerialException) -> str:
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code == errno.ENOENT or "No such file" in text or "FileNotFoundError" in text:
        return "no such port (is the board plugged in? `python -m serial.tools.list_ports -v` lists ports)"
    if code in (errno.EBUSY, errno.EAGAIN, errno.EWOULDBLOCK) or "exclusively lock" in text:
        return "the port is busy (another program, e.g. a serial monitor, has it open)"
    if code == errno.EACCES or "Permission denied" in text or "PermissionError" in text:
        return "permission denied (on Linux, add yourself to the 'dialout' group and log in again)"
    return text.split(": ", 1)[-1] if text.startswith("could not open port") else text


def parity_applied(ser: serial.SerialBase) -> bool | None:
    """Whether the OS kept the parity asked for (None: cannot tell). Linux pseudo-terminals drop
    PARENB without an error; pyserial does not notice, stm32flash does ("Failed to set terminal
    flags")."""
    fd = getattr(ser, "fd", None)
    if fd is None or os.name != "posix":
        return None
    try:
        import termios

        cflag = termios.tcgetattr(fd)[2]
    except Exception:  # noqa: BLE001 - not a tty, or no termios
        return None
    wanted = ser.parity != serial.PARITY_NONE
    return bool(cflag & termios.PARENB) == wanted


def set_lines(ser: serial.SerialBase, *, dtr: bool | None = None, rts: bool | None = None,
              error: type[MlfError] = InvalidInputError) -> None:
    """Drive DTR/RTS on an open port; a port that cannot (pseudo-terminal, some bridges) is an error."""
    try:
        if dtr is not None:
            ser.dtr = dtr
        if rts is not None:
            ser.rts = rts
    except (OSError, serial.SerialException, ValueError) as exc:
        raise error(f"{ser.port}: cannot drive DTR/RTS ({exc}); "
                    "this port has no modem control lines (use --reset none or manual)") from None


# ---------------------------------------------------------------------------------------------
# Port discovery


@dataclass(frozen=True)
class PortInfo:
    device: str
    description: str
    hwid: str
    vid: int | None = None
    pid: int | None = None

    def label(self) -> str:
        extra = self.description if self.description and self.description != "n/a" else self.hwid
        return f"{self.device} ({extra})" if extra and extra != "n/a" else self.device


def _is_usb(info) -> bool:
    if getattr(info, "vid", None) is not None:
        return True
    if "USB" in (getattr(info, "hwid", "") or ""):
        return True
    return bool(_USB_NAME.search(getattr(info, "device", "") or ""))


def list_candidates(comports: Callable[[], Iterable] | None = None) -> list[PortInfo]:
    """USB serial ports (bridges, CDC-ACM), sorted by device name. Built-in UARTs such as
    /dev/ttyS0 are left out: they are almost never a dev board."""
    ports = (comports or serial.tools.list_ports.comports)()
    found = [PortInfo(p.device, p.description or "", p.hwid or "", getattr(p, "vid", None), getattr(p, "pid", None))
             for p in ports if _is_usb(p)]
    return sorted(found, key=lambda p: p.device)


def find_port(comports: Callable[[], Iterable] | None = None) -> str:
    """The one likely USB serial port, or a UsageError that lists the candidates (or says none)."""
    candidates = list_candidates(comports)
    if len(candidates) == 1:
        return candidates[0].device
    if not candidates:
        raise UsageError("no USB serial port found: connect the board (or its USB-serial adapter) "
                         "or name the port with --port")
    listing = ", ".join(c.label() for c in candidates)
    raise UsageError(f"{len(candidates)} USB serial ports found, pick one with --port: {listing}")
