"""SAMD21/SAMD51 boards with the Arduino or Adafruit bootloader: SAM-BA monitor over USB CDC.

    touch    open the port at 1200 baud and close it: the running sketch resets into the
             bootloader; wait for the port to come back (often under another name or USB id)
    connect  N# (binary mode), V# (version, [Arduino:XYZ] extensions), CPUID and DSU DID (the part,
             checked against the board's chip_id), NVMCTRL PARAM (page size and count, checked
             against the board's erase units)
    erase    every row (SAMD21, 4 pages) or block (SAMD51, 16 pages) the image covers, one NVM
             command each, with the address register read back before the command runs
    write    4 KiB at a time: S into an SRAM buffer, Z of the buffer, Y buffer -> flash, Z of the
             flash; without Y, page by page: PBC, words into the page buffer, WP
    verify   read every image byte back (R, 63 bytes at a time: longer USB reads are garbled by
             these bootloaders)
    reset    write SYSRESETREQ to AIRCR: the bootloader starts the application

The bootloader's own flash (below the board's flashing address, protected by the BOOTPROT fuse) is
never erased or written: the image must start on an erase unit at or after the flashing address.

Recovery: any timeout or garbled answer -> resync (samba_link) and retry the step; a span whose
flash CRC differs after writing, or which reads back wrong after three reads, is erased and written
again (at most `options.repairs` times per flash). What is left is a FlashError naming the step and
the address; success is reported only after every image byte was read back equal.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from ..errors import FlashError, UsageError
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress
from .samba_link import SambaLink, SambaTimeouts, crc16, extensions
from .serial_link import LinkError, PortGone
from .samba_nvm import (AIRCR, AIRCR_SYSRESETREQ, CPUID, DID_PART_MASK, DSU_DID, Family, Nvm, NvmError,
                        family_of, part_name)

BUFFER = 4096           # bytes per S/Y round (BOSSA's writeBufferSize)
READ_CHUNK = 63         # R size limit over USB (see the module's doc)
TOUCH_BAUD = 1200
RESETS = ("touch-1200", "manual", "none")


@dataclass
class SambaResult:
    address: int
    size: int
    port: str
    version: str
    chip_id: int
    verified: bool
    started: bool
    retries: int
    repairs: int
    seconds: float


# -------------------------------------------------------------------------------------------------
# Entering the bootloader


def _devices(comports: Callable[[], Iterable]) -> set[str]:
    return {p.device for p in comports()}


def _present(port: str, comports: Callable[[], Iterable]) -> bool:
    return port in _devices(comports) or ("://" not in port and os.path.exists(port))


def wait_for_port(port: str, before: set[str], comports: Callable[[], Iterable], *, timeout: float,
                  sleep: Callable[[float], None], clock: Callable[[], float]) -> str:
    """The bootloader's port after a reset: a device that was not there before, or `port` after it
    went away and came back. `port` itself when nothing changed within `timeout` (a board already
    in its bootloader ignores the touch)."""
    deadline = clock() + timeout
    gone = False
    while clock() < deadline:
        sleep(0.05)
        now = _devices(comports)
        new = sorted(now - before)
        if new:
            return new[0]
        if not _present(port, comports):
            gone = True
        elif gone:
            return port
    if _present(port, comports):
        return port
    raise FlashError(f"touch: {port} went away and no serial port came back within {timeout:g} s "
                     "(double-tap RESET to start the bootloader, then flash with --reset none --port PORT)")


def touch_1200(port: str, open_port, comports: Callable[[], Iterable], *, timeout: float = 8.0,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """Open `port` at 1200 baud and close it (the Arduino cores reset into the bootloader on that);
    returns the port the bootloader answers on."""
    before = _devices(comports)
    ser = open_port(port, baudrate=TOUCH_BAUD, parity="none", timeout=0.1, write_timeout=1.0,
                    error=FlashError, purpose="the 1200-baud touch")
    try:
        try:
            ser.dtr = False        # what the Arduino IDE does; a pseudo-terminal has no DTR
        except Exception:  # noqa: BLE001 - closing at 1200 baud is what resets the board
            pass
    finally:
        try:
            ser.close()
        except Exception:  # noqa: BLE001 - the board may already be gone
            pass
    return wait_for_port(port, before, comports, timeout=timeout, sleep=sleep, clock=clock)


def _ask(message: str) -> None:
    if sys.stdin is not None and sys.stdin.isatty():
        print(f"mlfbuild: {message}, then press Enter", file=sys.stderr, flush=True)
        try:
            input()
        except EOFError:
            pass
    else:
        print(f"mlfbuild: {message} (not a terminal: continuing)", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------------------------------


class SambaFlasher:
    method = "samba"

    def __init__(self, *, open_port=None, comports=None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, ask=None, touch_timeout: float = 8.0):
        import serial.tools.list_ports

        from ..serialport import open_port as default_open

        self._open = open_port or default_open
        self._comports = comports or serial.tools.list_ports.comports
        self._sleep, self._clock = sleep, clock
        self._ask = ask or _ask
        self._touch_timeout = touch_timeout

    # -- entry -----------------------------------------------------------------------------------
    def flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None = None) -> SambaResult:
        job.check()
        if options.reset not in RESETS:
            raise UsageError(f"--reset {options.reset} does not apply to SAM-BA boards (use one of {', '.join(RESETS)})")
        if options.erase not in ("sectors", "all"):
            raise UsageError(f"--erase must be sectors or all, not '{options.erase}'")
        self.job, self.options = job, options
        self.units = self._units()              # refuses an address inside an erase unit
        self.timeouts = options.timeouts if isinstance(options.timeouts, SambaTimeouts) else SambaTimeouts()
        self.progress = progress or Progress(silent=True)
        self.retries = self.repairs = 0
        self._step = "connect"
        started_at = time.monotonic()
        port = self._enter_bootloader(options.port)
        ser = self._open(port, baudrate=options.baud, parity="none", timeout=0.02, write_timeout=5.0,
                         error=FlashError, purpose="flashing")
        started = False
        try:
            self.link = SambaLink(ser, timeouts=self.timeouts, pending_max=BUFFER, clock=self._clock,
                                  sleep=self._sleep)
            try:
                self._connect(port)
                self._erase()
                self._write_all()
                if options.verify:
                    self._verify()
                if options.start:
                    started = self._start()
            except PortGone as exc:
                raise FlashError(f"{self._step}: {exc} (cable unplugged or board reset?); the flash is not "
                                 "known to hold the image: flash again") from None
        finally:
            try:
                ser.close()
            except Exception:  # noqa: BLE001 - closing a dead port must not hide the real error
                pass
        return SambaResult(job.address, len(job.image), port, self.version, self.chip_id, options.verify, started,
                           self.retries, self.repairs, time.monotonic() - started_at)

    def _enter_bootloader(self, port: str) -> str:
        how = self.options.reset
        if how == "touch-1200":
            self._step = "touch"
            found = touch_1200(port, self._open, self._comports, timeout=self._touch_timeout,
                               sleep=self._sleep, clock=self._clock)
            self._note(f"touch: 1200 baud on {port}; bootloader on {found}")
            return found
        if how == "manual":
            before = _devices(self._comports)
            self._ask("start the bootloader: double-tap the board's RESET button (its LED pulses)")
            return wait_for_port(port, before, self._comports, timeout=self._touch_timeout,
                                 sleep=self._sleep, clock=self._clock)
        return port

    # -- helpers ---------------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.progress.note(text)

    def _retry(self, step: str, action: Callable[[], object], *, address: int | None = None) -> object:
        """Run `action`, resyncing and retrying after LinkError/NvmError; FlashError at the end."""
        self._step = step if address is None else f"{step} at 0x{address:08X}"
        last: Exception | None = None
        for attempt in range(1, self.options.attempts + 1):
            try:
                return action()
            except (LinkError, NvmError) as exc:
                last = exc
                if attempt == self.options.attempts:
                    break
                self.retries += 1
                self._note(f"{self._step}: {exc}; resyncing and retrying ({attempt}/{self.options.attempts - 1})")
                self._resync()
        raise FlashError(f"{self._step} failed after {self.options.attempts} attempts: {last}")

    def _resync(self) -> None:
        try:
            self.link.resync()
        except LinkError as exc:
            raise FlashError(f"{self._step}: lost contact with the bootloader ({exc}); "
                             "reset the board into its bootloader and flash again") from None

    def _read_twice(self, address: int) -> int:
        """A register read whose value matters: two equal reads (a word read has no checksum)."""
        first, second = self.link.read_word(address), self.link.read_word(address)
        if first != second:
            raise LinkError(f"two reads of 0x{address:08X} differ (0x{first:08X}, 0x{second:08X})")
        return first

    # -- stages ----------------------------------------------------------------------------------
    def _connect(self, port: str) -> None:
        job = self.job
        stage = self.progress.stage("connect", 3, unit="steps")
        self._step = "connect"
        try:
            self.link.drain()
            self.link.resync()
        except LinkError as exc:
            raise FlashError(f"connect: no answer from a SAM-BA monitor on {port} ({exc}); is the board in "
                             "its bootloader (double-tap RESET, or --reset touch-1200)?") from None
        self.version = self._retry("connect (V#)", self._version)  # type: ignore[assignment]
        self.extensions = extensions(self.version)
        stage.advance(1)
        cpuid, self.chip_id = self._retry("connect (chip id)", lambda: (self._read_twice(CPUID),
                                                                       self._read_twice(DSU_DID)))  # type: ignore[misc]
        family = family_of(cpuid, self.chip_id)
        if family is None:
            raise FlashError(f"connect: not a SAMD21 or SAMD51 (CPUID 0x{cpuid:08X}, DSU DID 0x{self.chip_id:08X})")
        self.family: Family = family
        expected = job.flashing.chip_id
        if expected is not None and (self.chip_id & DID_PART_MASK) != (expected & DID_PART_MASK):
            text = (f"the chip answers {part_name(self.chip_id)} but {job.board or 'the board'} is "
                    f"{part_name(expected)}: wrong board connected, or built for the wrong board")
            if not self.options.ignore_chip_id:
                raise FlashError(f"connect: {text} (--ignore-chip-id flashes anyway)")
            self._note(f"warning: {text}")
        stage.advance(1)
        self.nvm = Nvm(self.link, family, clock=self._clock)
        self.page, pages = self._retry("connect (NVM PARAM)", self._geometry)  # type: ignore[misc]
        self._check_geometry(pages)
        stage.advance(1)
        writer = "Y (buffer copy)" if "Y" in self.extensions else "page buffer writes"
        stage.finish(f"{self.version!r}, {family.name} {part_name(self.chip_id)}, {pages} pages of "
                     f"{self.page} bytes, {writer}")

    def _version(self) -> str:
        """Read twice: the extensions it lists decide which commands are used."""
        first, second = self.link.version(), self.link.version()
        if first != second:
            raise LinkError(f"two reads of the version differ ({first!r}, {second!r})")
        return first

    def _geometry(self) -> tuple[int, int]:
        first, second = self.nvm.geometry(), self.nvm.geometry()
        if first != second:
            raise LinkError(f"two reads of NVMCTRL PARAM differ ({first}, {second})")
        return first

    def _check_geometry(self, pages: int) -> None:
        job, unit = self.job, self.page * self.family.erase_pages
        sizes = {s.size for s in job.flashing.sectors}
        if sizes != {unit}:
            raise FlashError(f"connect: the chip erases {unit}-byte units ({self.family.erase_pages} pages of "
                             f"{self.page} bytes) but the board file says {sorted(sizes)}: wrong board file?")
        if job.flash.end > pages * self.page:
            raise FlashError(f"connect: the chip has {pages * self.page // 1024} KiB of flash but the board's "
                             f"flash ends at 0x{job.flash.end:08X}: wrong board file?")

    def _units(self) -> list[tuple[int, int]]:
        """(address, size) of the erase units to erase: those the image covers, or all from the
        image address to the end of the flash with --erase all."""
        job = self.job
        table = job.flashing.sector_table()
        if not any(start == job.address for start, _ in table):
            raise UsageError(f"flash address 0x{job.address:08X} is not the start of an erase unit of "
                             f"{job.board or 'the board'} (rows/blocks from 0x{job.flashing.address:08X}); "
                             "erasing it would erase the bytes before it")
        length = (job.flash.end - job.address) if self.options.erase == "all" else len(job.image)
        return [table[i] for i in job.flashing.sectors_for(job.address, length)]

    def _erase_unit(self, address: int) -> None:
        self.nvm.erase(address)

    def _erase(self) -> None:
        units = self.units
        total = sum(size for _, size in units)
        stage = self.progress.stage("erase", total)
        for address, size in units:
            self._retry("erase", lambda: self._erase_unit(address), address=address)
            stage.advance(size)
        kind = "rows" if self.family.erase_pages == 4 else "blocks"
        stage.finish(f"{len(units)} {kind} ({total // 1024} KiB) from 0x{units[0][0]:08X}")

    # -- write -----------------------------------------------------------------------------------
    def _spans(self) -> list[tuple[int, bytes]]:
        """(address, data) of erase-unit-aligned spans of at least BUFFER bytes, covering the image
        padded with 0xFF to whole pages."""
        job = self.job
        image = job.image + b"\xff" * (-len(job.image) % self.page)
        unit = self.page * self.family.erase_pages
        span = max(unit, BUFFER // unit * unit)
        return [(job.address + off, image[off:off + span]) for off in range(0, len(image), span)]

    def _write_all(self) -> None:
        stage = self.progress.stage("write", len(self.job.image))
        if "Y" not in self.extensions:
            self._retry("write (manual page writes)", self.nvm.manual_write)
        for address, data in self._spans():
            self._write_span(address, data)
            stage.advance(len(data))
        how = "Y" if "Y" in self.extensions else "page buffer writes"
        stage.finish(f"{len(self.job.image)} bytes at 0x{self.job.address:08X} ({how})")

    def _write_span(self, address: int, data: bytes) -> None:
        """Write one span; erase and write it again when its flash content is wrong."""
        while True:
            for off in range(0, len(data), BUFFER):
                piece = data[off:off + BUFFER]
                self._retry("write", lambda: self._write_piece(address + off, piece), address=address + off)
            if "Z" not in self.extensions:
                return                            # checked by the read-back verify
            crc = self._retry("write (CRC check)", lambda: self.link.checksum(address, len(data)), address=address)
            if crc == crc16(data):
                return
            self._repair(address, len(data), f"write at 0x{address:08X}: the flash CRC is 0x{crc:04X}, the "
                                             f"image's 0x{crc16(data):04X}")

    def _write_piece(self, address: int, data: bytes) -> None:
        if "Y" in self.extensions:
            buffer = self.family.buffer
            self.link.write_memory(buffer, data)
            if "Z" in self.extensions:
                crc = self.link.checksum(buffer, len(data))
                if crc != crc16(data):
                    raise LinkError(f"the SRAM buffer's CRC is 0x{crc:04X}, the data's 0x{crc16(data):04X} "
                                    "(bytes lost or changed on the way)")
            self.link.set_buffer(buffer)
            self.link.copy_buffer(address, len(data))
            self.nvm.check_errors(f"Y at 0x{address:08X}")
            return
        for off in range(0, len(data), self.page):
            page = data[off:off + self.page]
            self.nvm.clear_page_buffer()
            for word in range(0, len(page), 4):
                self.link.write_word(address + off + word, int.from_bytes(page[word:word + 4], "little"))
            self.nvm.write_page(address + off)

    def _repair(self, address: int, size: int, why: str) -> None:
        """Erase the units of [address, address+size) before they are written again."""
        if self.repairs >= self.options.repairs:
            raise FlashError(f"{why}; still wrong after {self.repairs} re-erase(s): the flash does not take the "
                             "image (worn, or locked?)")
        self.repairs += 1
        self._note(f"{why}; erasing and writing it again")
        unit = self.page * self.family.erase_pages
        for unit_address in range(address, address + size, unit):
            self._retry("erase (repair)", lambda: self._erase_unit(unit_address), address=unit_address)

    # -- verify ----------------------------------------------------------------------------------
    def _read_back(self, address: int, size: int) -> bytes:
        out = bytearray()
        for off in range(0, size, READ_CHUNK):
            n = min(READ_CHUNK, size - off)
            out += self._retry("verify", lambda: self.link.read_memory(address + off, n),
                               address=address + off)  # type: ignore[operator]
        return bytes(out)

    def _span_differs(self, address: int, expected: bytes) -> int | None:
        """Offset of the first byte that reads back wrong three times in a row, or None."""
        for attempt in range(3):
            got = self._read_back(address, len(expected))
            if got == expected:
                return None
            if attempt < 2:
                self.retries += 1
                first = next(i for i in range(len(got)) if got[i] != expected[i])
                self._note(f"verify at 0x{address + first:08X}: read back 0x{got[first]:02X}, the image has "
                           f"0x{expected[first]:02X}; reading again")
        return next(i for i in range(len(got)) if got[i] != expected[i])

    def _verify(self) -> None:
        job = self.job
        stage = self.progress.stage("verify", len(job.image))
        for address, data in self._spans():
            expected = data[:max(0, min(len(data), job.end - address))]
            while (bad := self._span_differs(address, expected)) is not None:
                self._repair(address, len(data), f"verify at 0x{address + bad:08X}: the flash does not hold "
                                                 "the image")
                self._write_span(address, data)
            stage.advance(len(expected))
        stage.finish(f"{len(job.image)} bytes read back and equal")

    # -- start -----------------------------------------------------------------------------------
    def _start(self) -> bool:
        self._step = "reset"
        try:
            self.link.write_word(AIRCR, AIRCR_SYSRESETREQ)
            self.link.drain(limit=0.2)
        except (LinkError, PortGone):
            pass                                  # the port goes away with the reset
        self._note("reset: SYSRESETREQ (AIRCR); the bootloader starts the application")
        return True
