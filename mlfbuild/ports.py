"""`mlfbuild ports`: the serial ports with their USB ids, marking the bootloaders, boards and debug
probes mlfbuild knows (mlfbuild/usb_ids.toml is the table: data, not code).

    for port in list_ports():          # pyserial's list_ports, every port (built-in UARTs too)
        print(port.device, port.usb_id, port.known and port.known.name)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .errors import InvalidInputError

USB_IDS = Path(__file__).resolve().parent / "usb_ids.toml"
KINDS = ("bootloader", "sketch", "probe")
HINTS = {
    "bootloader": "in its bootloader: `mlfbuild flash BUILD --port {device} --reset none`",
    "sketch": "running its application: `mlfbuild flash BUILD --port {device}` resets it into its bootloader",
    "probe": "a debug probe's serial port: the board's console for `mlfbuild run --port {device}`",
}


@dataclass(frozen=True)
class KnownDevice:
    vid: int
    pid: int
    kind: str
    name: str
    boards: tuple[str, ...] = ()


@dataclass(frozen=True)
class Port:
    device: str
    description: str
    vid: int | None
    pid: int | None
    serial_number: str | None
    known: KnownDevice | None

    @property
    def usb_id(self) -> str:
        return f"{self.vid:04X}:{self.pid:04X}" if self.vid is not None and self.pid is not None else ""

    def to_json(self) -> dict:
        out: dict = {"device": self.device, "description": self.description, "usb_id": self.usb_id or None,
                     "serial_number": self.serial_number}
        if self.known:
            out.update(kind=self.known.kind, name=self.known.name, boards=list(self.known.boards),
                       hint=HINTS[self.known.kind].format(device=self.device))
        return out


def load_known(path: Path = USB_IDS) -> dict[tuple[int, int], KnownDevice]:
    """The table of known USB devices, by (vid, pid)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInputError(f"{path}: cannot read the USB id table ({exc})") from None
    known: dict[tuple[int, int], KnownDevice] = {}
    for i, entry in enumerate(data.get("device", [])):
        where = f"{path}: device[{i}]"
        try:
            device = KnownDevice(int(entry["vid"]), int(entry["pid"]), str(entry["kind"]), str(entry["name"]),
                                 tuple(str(b) for b in entry.get("boards", [])))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"{where}: malformed ({exc!r})") from None
        if device.kind not in KINDS:
            raise InvalidInputError(f"{where}: kind must be one of {', '.join(KINDS)}, got '{device.kind}'")
        if (device.vid, device.pid) in known:
            raise InvalidInputError(f"{where}: {device.vid:04X}:{device.pid:04X} is listed twice")
        known[(device.vid, device.pid)] = device
    return known


def list_ports(comports: Callable[[], Iterable] | None = None,
               known: dict[tuple[int, int], KnownDevice] | None = None) -> list[Port]:
    """Every serial port pyserial sees, sorted by device name, each with what mlfbuild knows of it."""
    if comports is None:
        import serial.tools.list_ports

        comports = serial.tools.list_ports.comports
    table = load_known() if known is None else known
    ports = []
    for p in comports():
        vid, pid = getattr(p, "vid", None), getattr(p, "pid", None)
        ports.append(Port(p.device, getattr(p, "description", "") or "", vid, pid, getattr(p, "serial_number", None),
                          table.get((vid, pid)) if vid is not None and pid is not None else None))
    return sorted(ports, key=lambda port: port.device)


def format_ports(ports: list[Port]) -> str:
    if not ports:
        return "no serial ports found (is the board plugged in, with a data cable?)"
    lines = []
    for port in ports:
        usb = port.usb_id or "-"
        what = f"{port.known.kind}: {port.known.name}" if port.known else (port.description or "")
        lines.append(f"{port.device:<22} {usb:<10} {what}")
        if port.known:
            boards = f"boards: {', '.join(port.known.boards)}; " if port.known.boards else ""
            lines.append(f"{'':<33} {boards}{HINTS[port.known.kind].format(device=port.device)}")
    return "\n".join(lines)
