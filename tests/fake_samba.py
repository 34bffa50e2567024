"""A fake SAMD21/SAMD51 in its Arduino/Adafruit SAM-BA bootloader, on a pseudo-terminal, for tests.

It runs the monitor's command parser byte by byte as the Arduino Zero bootloader does
(ArduinoCore-samd bootloaders/zero/sam_ba_monitor.c: `<letter><hex>[,<hex>]#`, 0xFF skipped, data
of S read raw as over USB CDC, the [Arduino:XYZ] extensions X/Y/Z) over an in-memory chip:

  * flash that erases to 0xFF by row (SAMD21: 4 pages) or block (SAMD51: 16 pages) and programs
    only through the NVM page buffer, clearing bits (new = old & data);
  * a bootloader region protected as by the BOOTPROT fuse: erasing or writing it sets the NVM
    controller's LOCKE error and changes nothing;
  * the registers a flasher touches: CPUID (0xE000ED00), DSU DID (0x41002018), the NVM controller
    at 0x41004000 (PARAM, the command register, INTFLAG, STATUS, ADDR, CTRLA/CTRLB write mode),
    AIRCR (0xE000ED0C: SYSRESETREQ ends the bootloader and starts the application);
  * SRAM (applets and buffers land there).

Faithful enough that Debian's `bossac -U` writes and verifies through it (tests/test_flash_samba.py).
It can also start as the running application (`app=True`): a 1200-baud open of its port "resets"
it into the bootloader, which comes back on a new pseudo-terminal, as a board re-enumerates.

    with FakeSamba("samd21", faults=[Fault.parse("drop-rx:S:2:40")]) as fake:
        flash_through(fake.path)
        assert fake.flash_bytes(0x2000, n) == image

Faults, `ACTION[:COMMAND[:NTH[:ARG]]]`; COMMAND is a monitor letter (S R W w Y Z N V o O H X ...)
or any; NTH counts that command from 1 ("N+": every one from the Nth on); offsets count the
command's bytes from its letter (host to fake, S data included) or its reply bytes (fake to host):
    drop-rx:C:N:OFFSET       lose the host's byte
    corrupt-rx:C:N:OFFSET    flip bit 4 of the host's byte
    drop-tx:C:N:OFFSET       lose a reply byte
    corrupt-tx:C:N:OFFSET    flip bit 4 of a reply byte
    stall:C:N:SECONDS        wait before carrying out the command
    disconnect:C:N:OFFSET    hang up when the host's byte at OFFSET is due
    flash-corrupt:Y:N:OFFSET program that Y copy, then flip bit 4 of its byte OFFSET in flash (once)
"""

from __future__ import annotations

import errno
import os
import select
import sys
import termios
import threading
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path

NVM = 0x41004000
DID_ADDR = 0x41002018
CPUID_ADDR = 0xE000ED00
AIRCR_ADDR = 0xE000ED0C
USER_ROW = 0x804000
RAM = 0x20000000


@dataclass(frozen=True)
class Chip:
    name: str
    family: str                 # "d21" | "d51"
    cpuid: int
    did: int
    flash_size: int
    page_size: int
    ram_size: int
    bootloader_size: int        # BOOTPROT region at the start of the flash
    version: str
    usb_ids: tuple[int, int, int, int]   # (app vid, app pid, bootloader vid, bootloader pid)

    @property
    def erase_size(self) -> int:
        return self.page_size * (4 if self.family == "d21" else 16)


CHIPS = {
    "samd21": Chip("ATSAMD21G18A", "d21", 0x410CC601, 0x10010305, 0x40000, 64, 0x8000, 0x2000,
                   "v2.0 [Arduino:XYZ] Mar 19 2018 09:45:14", (0x2341, 0x804D, 0x2341, 0x004D)),
    "samd51": Chip("ATSAMD51J19A", "d51", 0x410FC241, 0x60060305, 0x80000, 512, 0x30000, 0x4000,
                   "v1.1 [Arduino:XYZ] Jun 20 2019 21:47:10", (0x239A, 0x8020, 0x239A, 0x0020)),
}

COMMAND_LETTERS = "SRWwYZNVoOHhXGT"
ACTIONS = ("drop-rx", "corrupt-rx", "drop-tx", "corrupt-tx", "stall", "disconnect", "flash-corrupt")


@dataclass
class Fault:
    action: str
    command: str = "any"
    nth: int = 1
    arg: str | None = None
    repeat: bool = False
    fired: bool = False

    @classmethod
    def parse(cls, text: str) -> "Fault":
        parts = text.split(":")
        if parts[0] not in ACTIONS:
            raise ValueError(f"unknown fault action '{parts[0]}' (one of {', '.join(ACTIONS)})")
        command = parts[1] if len(parts) > 1 and parts[1] else "any"
        if command != "any" and (len(command) != 1 or not command.isalpha()):
            raise ValueError(f"fault '{text}': the command is one monitor letter or 'any'")
        nth_text = parts[2] if len(parts) > 2 and parts[2] else "1"
        arg = parts[3] if len(parts) > 3 else None
        if arg is None and parts[0] != "flash-corrupt":
            raise ValueError(f"fault '{text}' needs an offset (or seconds for stall)")
        return cls(parts[0], command, int(nth_text.rstrip("+"), 0), arg or "0", nth_text.endswith("+"))

    @property
    def offset(self) -> int:
        return -1 if self.action == "stall" else int(self.arg or "0", 0)


class _Hangup(Exception):
    pass


class _Stop(Exception):
    pass


@dataclass
class PortEntry:
    """What pyserial's list_ports gives for a port (the fields mlfbuild reads)."""

    device: str
    vid: int | None
    pid: int | None
    description: str = "n/a"
    hwid: str = "n/a"
    serial_number: str | None = None
    manufacturer: str | None = None
    product: str | None = None
    location: str | None = None
    interface: str | None = None


@dataclass
class _Nvm:
    ctrla: int = 0
    ctrlb: int = 0
    intflag: int = 0
    status: int = 0
    addr: int = 0
    page_buffer: bytearray = field(default_factory=bytearray)


class FakeSamba:
    def __init__(self, chip: str | Chip = "samd21", faults=(), *, app: bool = False, verbose: bool = False,
                 link: str | os.PathLike | None = None, reenumerate_delay: float = 0.3):
        self.chip = CHIPS[chip] if isinstance(chip, str) else chip
        self.faults = list(faults)
        self.verbose = verbose
        self.link = Path(link) if link else None
        self.reenumerate_delay = reenumerate_delay
        self.mode = "app" if app else "bootloader"
        c = self.chip
        self.flash = bytearray(b"\xff" * c.flash_size)
        self.flash[:c.bootloader_size] = _bootloader_image(c)
        self.ram = bytearray(c.ram_size)
        self.nvm = _Nvm(page_buffer=bytearray(b"\xff" * c.page_size))
        if c.family == "d21":
            self.nvm.intflag = 0x1                     # READY
        else:
            self.nvm.status = 0x1                      # STATUS.READY; CTRLA.WMODE = MAN
        self.log: list[str] = []
        self.counts: dict[str, int] = {}
        self.resets = 0
        self.hung_up = False
        self.error: BaseException | None = None
        self.terminal = False
        self._command = "z"
        self._number = 0
        self._ptr = 0
        self._ybuffer = 0
        self._active: list[Fault] = []
        self._rx_off = self._tx_off = 0
        self._buf = bytearray()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.master = self.slave = -1
        self.path = ""
        self.ports_changed = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "FakeSamba":
        self._open_pty()
        self._thread = threading.Thread(target=self._run, name="fake-samba", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self._close()
        if self.link and self.link.is_symlink():
            self.link.unlink()

    def __enter__(self) -> "FakeSamba":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _open_pty(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        if self.link:
            if self.link.is_symlink() or self.link.exists():
                self.link.unlink()
            self.link.symlink_to(self.path)
        self._note(f"{self.mode} on {self.path}")

    def _close(self) -> None:
        for name in ("master", "slave"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)

    def comports(self) -> list[PortEntry]:
        """The port as list_ports would show it now (none while the device is re-enumerating)."""
        if self.master < 0 or not self.path:
            return []
        vid, pid = self.chip.usb_ids[:2] if self.mode == "app" else self.chip.usb_ids[2:]
        return [PortEntry(self.path, vid, pid, f"fake {self.chip.name} ({self.mode})",
                          f"USB VID:PID={vid:04X}:{pid:04X}")]

    # -- memory ----------------------------------------------------------------------------------
    def flash_bytes(self, address: int, size: int) -> bytes:
        return bytes(self.flash[address:address + size])

    def load(self, address: int, data: bytes) -> None:
        self.flash[address:address + len(data)] = data

    def _read(self, address: int, size: int) -> bytes:
        return bytes(self._read_byte(address + i) for i in range(size)) if size <= 16 else self._read_block(address, size)

    def _read_block(self, address: int, size: int) -> bytes:
        c = self.chip
        if 0 <= address and address + size <= c.flash_size:
            return bytes(self.flash[address:address + size])
        if RAM <= address and address + size <= RAM + c.ram_size:
            return bytes(self.ram[address - RAM:address - RAM + size])
        return bytes(self._read_byte(address + i) for i in range(size))

    def _read_byte(self, address: int) -> int:
        c = self.chip
        if 0 <= address < c.flash_size:
            return self.flash[address]
        if RAM <= address < RAM + c.ram_size:
            return self.ram[address - RAM]
        if USER_ROW <= address < USER_ROW + c.page_size * 4:
            return 0xFF
        word = address & ~3
        value = {CPUID_ADDR: c.cpuid, DID_ADDR: c.did}.get(word)
        if value is None and NVM <= word < NVM + 0x40:
            value = self._nvm_read(word - NVM)
        return ((value or 0) >> (8 * (address & 3))) & 0xFF

    def _write(self, address: int, data: bytes) -> None:
        c = self.chip
        if 0 <= address and address + len(data) <= c.flash_size:
            for i, b in enumerate(data):
                self._page_buffer_write(address + i, b)
            return
        if RAM <= address and address + len(data) <= RAM + c.ram_size:
            self.ram[address - RAM:address - RAM + len(data)] = data
            return
        word = address & ~3
        if NVM <= word < NVM + 0x40 and address + len(data) <= word + 4:
            old = self._nvm_read(word - NVM)
            shift = 8 * (address & 3)
            mask = ((1 << (8 * len(data))) - 1) << shift
            value = int.from_bytes(data, "little") << shift
            self._nvm_write(word - NVM, (old & ~mask) | value, mask)
        elif word == AIRCR_ADDR and int.from_bytes(data, "little") == 0x05FA0004:
            self._note("AIRCR SYSRESETREQ: reset into the application")
            self.resets += 1
            raise _Hangup
        else:
            self._note(f"write to unmapped 0x{address:08X} ignored")

    # -- NVM controller --------------------------------------------------------------------------
    def _nvm_read(self, offset: int) -> int:
        n, d21 = self.nvm, self.chip.family == "d21"
        pages = self.chip.flash_size // self.chip.page_size
        psz = (self.chip.page_size // 8).bit_length() - 1
        param = pages | (psz << 16)
        if d21:
            regs = {0x00: n.ctrla, 0x04: n.ctrlb, 0x08: param, 0x14: n.intflag, 0x18: n.status, 0x1C: n.addr}
        else:
            regs = {0x00: n.ctrla, 0x04: 0, 0x08: param, 0x10: n.intflag | (n.status << 16), 0x14: n.addr}
        return regs.get(offset, 0)

    def _nvm_write(self, offset: int, value: int, mask: int) -> None:
        n = self.nvm
        if self.chip.family == "d21":
            if offset == 0x00 and mask & 0xFF00:
                self._nvm_command(value & 0xFFFF)
            elif offset == 0x04:
                n.ctrlb = value
            elif offset == 0x14:
                n.intflag &= ~(value & mask & 0x2)
            elif offset == 0x18:
                n.status &= ~(value & mask & 0x1C)
            elif offset == 0x1C:
                n.addr = value & 0x3FFFFF
        else:
            if offset == 0x00:
                n.ctrla = value & 0xFFFF
            elif offset == 0x04 and mask & 0xFF00:
                self._nvm_command(value & 0xFFFF)
            elif offset == 0x10:
                n.intflag &= ~(value & mask & 0xFFFF)
            elif offset == 0x14:
                n.addr = value & 0xFFFFFF

    def _byte_address(self) -> int:
        return self.nvm.addr * 2 if self.chip.family == "d21" else self.nvm.addr

    def _nvm_error(self, d21_status: int, d51_flag: int, why: str) -> None:
        self._note(f"NVM error: {why}")
        if self.chip.family == "d21":
            self.nvm.intflag |= 0x2
            self.nvm.status |= d21_status
        else:
            self.nvm.intflag |= d51_flag

    def _nvm_command(self, value: int) -> None:
        c, n = self.chip, self.nvm
        if value >> 8 != 0xA5:
            self._nvm_error(0x4, 0x4, f"command without the key: 0x{value:04X}")
            return
        cmd = value & 0x7F
        erase, write, clear = (0x02, 0x04, 0x44) if c.family == "d21" else (0x01, 0x03, 0x15)
        address = self._byte_address()
        if c.family == "d51":
            n.intflag |= 0x1                                   # DONE
        if cmd == clear:
            n.page_buffer[:] = b"\xff" * c.page_size
        elif cmd == erase:
            start = address - address % c.erase_size
            if not self._writable(start, "erase"):
                return
            self.flash[start:start + c.erase_size] = b"\xff" * c.erase_size
            self._note(f"erase 0x{start:08X}+0x{c.erase_size:X}")
        elif cmd == write:
            self._write_page(address - address % c.page_size)
        else:
            self._nvm_error(0x4, 0x4, f"unsupported NVM command 0x{cmd:02X}")

    def _writable(self, address: int, what: str) -> bool:
        c = self.chip
        if address >= c.flash_size:
            self._nvm_error(0x4, 0x2, f"{what} at 0x{address:08X}: outside the flash")
            return False
        if address < c.bootloader_size:
            self._nvm_error(0x8, 0x8, f"{what} at 0x{address:08X}: bootloader region (BOOTPROT)")
            return False
        return True

    def _write_page(self, page: int) -> None:
        c, n = self.chip, self.nvm
        if self._writable(page, "write page"):
            for i, b in enumerate(n.page_buffer):
                self.flash[page + i] &= b
        n.page_buffer[:] = b"\xff" * c.page_size

    def _automatic_write(self) -> bool:
        if self.chip.family == "d21":
            return not self.nvm.ctrlb & 0x80                  # CTRLB.MANW clear
        return (self.nvm.ctrla >> 4) & 3 == 3                  # CTRLA.WMODE = AP

    def _page_buffer_write(self, address: int, value: int) -> None:
        c, n = self.chip, self.nvm
        n.page_buffer[address % c.page_size] = value
        n.addr = address // 2 if c.family == "d21" else address
        if address % c.page_size == c.page_size - 1 and self._automatic_write():
            self._write_page(address - address % c.page_size)

    # -- bytes -----------------------------------------------------------------------------------
    def _raw_rx(self) -> int:
        while not self._buf:
            if self._stop.is_set():
                raise _Stop
            if self.master < 0:
                raise _Hangup
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                if self.mode == "app":
                    self._watch_touch()
                continue
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:  # no one has the port open: a touch may have just closed it
                    if self.mode == "app":
                        self._watch_touch()
                    time.sleep(0.01)
                    continue
                raise
            if self.mode == "app":
                continue                                        # a sketch that ignores its input
            self._buf += chunk
        byte = self._buf[0]
        del self._buf[0]
        return byte

    def _watch_touch(self) -> None:
        """The Arduino cores reset into the bootloader when the port is set to 1200 baud."""
        try:
            speed = termios.tcgetattr(self.master)[4]
        except termios.error:
            return
        if speed != termios.B1200:
            return
        self._note("1200-baud touch: resetting into the bootloader")
        self._close()
        if self._stop.wait(self.reenumerate_delay):  # stopped before the port came back
            return
        self.mode = "bootloader"
        self._open_pty()
        self.ports_changed.set()

    def _rx(self) -> int:
        while True:
            byte = self._raw_rx()
            if self._pending_data == 0 and chr(byte) in COMMAND_LETTERS:
                self._begin(chr(byte))
            dropped = False
            for fault in self._active:
                if fault.fired or fault.offset != self._rx_off:
                    continue
                if fault.action == "disconnect":
                    fault.fired = True
                    self._note(f"FAULT hang up at host byte {self._rx_off}")
                    raise _Hangup
                if fault.action == "drop-rx":
                    fault.fired = dropped = True
                    self._note(f"FAULT drop host byte {self._rx_off} (0x{byte:02X})")
                elif fault.action == "corrupt-rx":
                    fault.fired = True
                    self._note(f"FAULT corrupt host byte {self._rx_off} (0x{byte:02X} -> 0x{byte ^ 0x10:02X})")
                    byte ^= 0x10
            self._rx_off += 1
            if not dropped:
                return byte

    _pending_data = 0      # bytes of S data still to come

    def _begin(self, letter: str) -> None:
        self.counts["any"] = self.counts.get("any", 0) + 1
        self.counts[letter] = self.counts.get(letter, 0) + 1
        self._active = []
        for f in self.faults:
            if f.command not in ("any", letter):
                continue
            count = self.counts[f.command if f.command == "any" else letter]
            if f.repeat and count >= f.nth:
                f.fired = False
                self._active.append(f)
            elif not f.fired and count == f.nth:
                self._active.append(f)
        self._rx_off = self._tx_off = 0

    def _tx(self, data: bytes) -> None:
        out = bytearray()
        for byte in data:
            keep = True
            for fault in self._active:
                if fault.fired or fault.offset != self._tx_off or fault.action not in ("drop-tx", "corrupt-tx"):
                    continue
                fault.fired = True
                if fault.action == "drop-tx":
                    keep = False
                    self._note(f"FAULT drop reply byte {self._tx_off}")
                else:
                    byte ^= 0x10
                    self._note(f"FAULT corrupt reply byte {self._tx_off}")
            self._tx_off += 1
            if keep:
                out.append(byte)
        while out:
            if self._stop.is_set():
                raise _Stop
            if self.master < 0:
                raise _Hangup
            _, ready, _ = select.select([], [self.master], [], 0.05)
            if ready:
                try:
                    out = out[os.write(self.master, out):]
                except BlockingIOError:
                    pass

    def _note(self, text: str) -> None:
        self.log.append(text)
        if self.verbose:
            print(f"fake-samba: {text}", file=sys.stderr, flush=True)

    # -- the monitor -----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                self._step(self._rx())
        except _Stop:
            pass
        except _Hangup:
            self.hung_up = True
            self._close()
        except BaseException as exc:  # noqa: BLE001 - kept for the test to see
            self.error = exc
            self._note(f"crashed: {exc!r}")

    def _step(self, byte: int) -> None:
        if byte == 0xFF:
            return
        ch = chr(byte)
        if ch == "#":
            self._execute()
            self._command, self._number = "z", 0
            if self.terminal:
                self._tx(b">")
        elif ch in "0123456789abcdefABCDEF":
            self._number = ((self._number << 4) | int(ch, 16)) & 0xFFFFFFFF
        elif ch == ",":
            self._ptr, self._number = self._number, 0
        else:
            self._command, self._number = ch, 0

    def _execute(self) -> None:
        cmd, number, ptr = self._command, self._number, self._ptr
        for fault in self._active:
            if fault.action == "stall" and not fault.fired:
                fault.fired = True
                self._note(f"FAULT stall {fault.arg} s")
                end = time.monotonic() + float(fault.arg or 0)
                while time.monotonic() < end and not self._stop.is_set():
                    time.sleep(0.01)
        if self.terminal:
            self._tx(b"\n\r")
        if cmd == "S":
            self._pending_data = number
            data = bytearray()
            while self._pending_data:
                data.append(self._rx())
                self._pending_data -= 1
            self._write(ptr, bytes(data))
        elif cmd == "R":
            self._tx(self._read(ptr, number))
        elif cmd in "OHW":
            size = {"O": 1, "H": 2, "W": 4}[cmd]
            self._write(ptr, (number & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))
        elif cmd in "ohw":
            size = {"o": 1, "h": 2, "w": 4}[cmd]
            data = self._read(ptr, size)
            self._tx(f"0x{int.from_bytes(data, 'little'):0{2 * size}X}\n\r".encode() if self.terminal else data)
        elif cmd == "G":
            self._note(f"G 0x{number:08X}: jumps into code the fake cannot run; the device stops answering")
            raise _Hangup
        elif cmd == "T":
            self.terminal = True
            self._tx(b"\n\r")
        elif cmd == "N":
            if not self.terminal:
                self._tx(b"\n\r")
            self.terminal = False
        elif cmd == "V":
            self._tx(self.chip.version.encode() + b"\n\r")
        elif cmd == "X":
            for row in range(number - number % self.chip.erase_size, self.chip.flash_size, self.chip.erase_size):
                self._nvm_write(0x1C if self.chip.family == "d21" else 0x14,
                                row // 2 if self.chip.family == "d21" else row, 0xFFFFFFFF)
                self._nvm_command(0xA500 | (0x02 if self.chip.family == "d21" else 0x01))
            self._tx(b"X\n\r")
        elif cmd == "Y":
            if number == 0:
                self._ybuffer = ptr
            else:
                self._copy_to_flash(ptr, number)
            self._tx(b"Y\n\r")
        elif cmd == "Z":
            crc = 0
            for b in self._read(ptr, number):
                crc ^= b << 8
                for _ in range(8):
                    crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
            self._tx(f"Z{crc:08X}#\n\r".encode())
        else:
            self._note(f"ignored command {cmd!r}")

    def _copy_to_flash(self, dst: int, size: int) -> None:
        """Y: the bootloader copies the SRAM buffer into flash page by page (PBC, words into the page
        buffer, WP), through the NVM controller (so protection applies)."""
        c = self.chip
        data = self._read(self._ybuffer, size)
        clear, write = (0x44, 0x04) if c.family == "d21" else (0x15, 0x03)
        for off in range(0, size, c.page_size):
            self._nvm_command(0xA500 | clear)
            saved, self.nvm.ctrlb = self.nvm.ctrlb, self.nvm.ctrlb | 0x80     # no automatic write mid-copy
            saved_a, self.nvm.ctrla = self.nvm.ctrla, self.nvm.ctrla & ~0x30
            for i, b in enumerate(data[off:off + c.page_size]):
                self._page_buffer_write(dst + off + i, b)
            self.nvm.ctrlb, self.nvm.ctrla = saved, saved_a
            self._nvm_command(0xA500 | write)
        for fault in self._active:
            if fault.action == "flash-corrupt" and not fault.fired:
                fault.fired = True
                self.flash[dst + fault.offset] ^= 0x10
                self._note(f"FAULT flash byte 0x{dst + fault.offset:08X} flipped after Y")


def _bootloader_image(chip: Chip) -> bytes:
    """Something that looks like a bootloader: SP, reset vector (a Thumb address, not SAM-BA ROM),
    then a recognisable pattern, so a test can tell that it was left alone."""
    head = (RAM + chip.ram_size - 4).to_bytes(4, "little") + (0x000005A1).to_bytes(4, "little")
    body = bytes((i * 7 + 3) & 0xFF for i in range(chip.bootloader_size - len(head)))
    return head + body


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chip", choices=sorted(CHIPS), default="samd21")
    parser.add_argument("--pty-link", type=Path, help="make this symlink point at the PTY")
    parser.add_argument("--fault", action="append", default=[], help="ACTION[:COMMAND[:NTH[:ARG]]], repeatable")
    parser.add_argument("--dump", type=Path, help="write the whole flash here on exit")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    fake = FakeSamba(args.chip, [Fault.parse(f) for f in args.fault], link=args.pty_link, verbose=args.verbose)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    fake.start()
    print(f"PTY {fake.path}", flush=True)
    try:
        while not done.wait(0.1) and fake._thread is not None and fake._thread.is_alive():
            pass
    finally:
        fake.stop()
        if args.dump:
            args.dump.write_bytes(bytes(fake.flash))
    return 1 if fake.error else 0


if __name__ == "__main__":
    sys.exit(main())
