"""STM32 system-memory bootloader over a UART (ST AN3155), in pure Python on pyserial.

`Stm32UartFlasher`, on the AN3155 link layer (an3155.py): connect, check the chip, erase what the
image covers, write in blocks of at most 256 bytes with per-block retries, read everything back,
start the application. Every failure that survives the retries is a FlashError naming the step and
the address.

Recovery rules (docs/flashing.md has the reasoning):
  * any NACK or timeout → resync (send 0xFF 0x00 until a lone NACK answers, then silence), retry;
  * a WRITE whose data block went out but was not acknowledged may or may not have been programmed:
    read the block back first; equal → done, still erased → write again, anything else → the
    sector is re-erased and rewritten (once per flash), since flash bits cannot be set back to 1;
  * verify re-reads a differing block twice (READ MEMORY has no checksum, so a line error looks
    like a flash error), then repairs the sectors that still differ once, then gives up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ..errors import FlashError, UsageError
from .an3155 import (BLOCK, COMMAND_NAMES, ERASE, EXTENDED_ERASE, GO, LEGACY_MAX_PAGES, READ_MEMORY, WRITE_MEMORY,
                     Stm32Link, Timeouts, chip_name)
from .serial_link import LinkError, PortGone
from ..serialport import parity_applied
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress
from .reset import enter_bootloader, leave_bootloader

# -------------------------------------------------------------------------------------------------


@dataclass
class FlashResult:
    address: int
    size: int
    chip_id: int
    bootloader_version: int
    erase_command: str
    erased: str
    verified: bool
    started: bool
    retries: int
    repairs: int
    seconds: float


def probe_alternative(job: FlashJob) -> str:
    """The way around the ROM bootloader's wiring on a board with an on-board debug probe."""
    if job.flashing.openocd_config:
        method = "openocd"
    elif job.flashing.pyocd_target:
        method = "pyocd"
    else:
        return ""
    folder = job.source.parent if job.source is not None else "BUILD_DIR"
    return (f"{job.board or 'the board'} also flashes through its on-board debug probe, with no adapter "
            f"or BOOT0 wiring: `mlfbuild flash {folder} --method {method}`")


class _NeedsErase(Exception):
    def __init__(self, address: int):
        super().__init__(address)
        self.address = address


class Stm32UartFlasher:
    method = "stm32-uart"

    def __init__(self, *, open_port=None, sleep: Callable[[float], None] = time.sleep, ask=None):
        from ..serialport import open_port as default_open

        self._open = open_port or default_open
        self._sleep = sleep
        self._ask = ask

    # -- entry ---------------------------------------------------------------------------------
    def flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None = None) -> FlashResult:
        job.check()                       # size, alignment: before the port is even opened
        try:
            return self._flash(job, options, progress)
        except FlashError as exc:
            hint = probe_alternative(job)
            if not hint:
                raise
            raise FlashError(f"{exc}; {hint}") from None

    def _flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None) -> FlashResult:
        if options.parity not in ("even", "none"):
            raise UsageError(f"parity must be even or none, not '{options.parity}'")
        if options.erase not in ("sectors", "all"):
            raise UsageError(f"--erase must be sectors or all, not '{options.erase}'")
        self.job, self.options = job, options
        self.timeouts = options.timeouts or Timeouts()
        self.progress = progress or Progress(silent=True)
        self.retries = 0
        self.repairs = 0
        started_at = time.monotonic()
        ser = self._open(options.port, baudrate=options.baud, parity=options.parity, timeout=0.02,
                         write_timeout=5.0, dtr=False, rts=False, error=FlashError, purpose="flashing")
        try:
            if options.parity == "even" and parity_applied(ser) is False:
                self._note(f"warning: {options.port} did not keep even parity (a pseudo-terminal?); the STM32 "
                           "bootloader needs 8E1 on a real UART")
            enter_bootloader(ser, options.reset, sleep=self._sleep, ask=self._ask)
            self.link = Stm32Link(ser, baudrate=options.baud, timeouts=self.timeouts)
            try:
                self._connect()
                erased = self._erase()
                self._write_all()
                if options.verify:
                    self._verify()
                started = self._start() if options.start else False
            except PortGone as exc:
                raise FlashError(f"{self._step}: {exc} (cable unplugged or board reset?); the flash is not "
                                 "known to hold the image: flash again") from None
        finally:
            try:
                ser.close()
            except Exception:  # noqa: BLE001 - closing a dead port must not hide the real error
                pass
        return FlashResult(job.address, len(job.image), self.chip_id, self.version, self.erase_name, erased,
                           options.verify, started, self.retries, self.repairs, time.monotonic() - started_at)

    # -- helpers -------------------------------------------------------------------------------
    _step = "connect"

    def _note(self, text: str) -> None:
        self.progress.note(text)

    def _retry(self, step: str, action: Callable[[], object], *, address: int | None = None,
               hint: str = "") -> object:
        """Run one exchange with resync-and-retry; FlashError naming step and address at the end."""
        self._step = step if address is None else f"{step} at 0x{address:08X}"
        last: LinkError | None = None
        for attempt in range(1, self.options.attempts + 1):
            try:
                return action()
            except LinkError as exc:
                last = exc
                if attempt == self.options.attempts:
                    break
                self.retries += 1
                self._note(f"{self._step}: {exc}; resyncing and retrying ({attempt}/{self.options.attempts - 1})")
                self._resync()
        raise FlashError(f"{self._step} failed after {self.options.attempts} attempts: {last}{hint}")

    def _resync(self) -> None:
        try:
            self.link.resync()
        except LinkError as exc:
            raise FlashError(f"{self._step}: lost contact with the bootloader ({exc}); "
                             "reset the board into its bootloader and flash again") from None

    def _read_block(self, address: int, size: int, step: str) -> bytes:
        return self._retry(step, lambda: self.link.read_memory(address, size), address=address,
                           hint=" (is read-out protection active?)")  # type: ignore[return-value]

    # -- stages --------------------------------------------------------------------------------
    def _connect(self) -> None:
        job, opts = self.job, self.options
        stage = self.progress.stage("connect", 3, unit="steps")
        self._step = "connect"
        try:
            how = self.link.init()
        except LinkError as exc:
            parity = "8E1" if opts.parity == "even" else "8N1"
            raise FlashError(f"connect: no answer from the STM32 bootloader on {opts.port} at {opts.baud} baud "
                             f"{parity} ({exc}); is the chip in its bootloader (BOOT0 high during reset, "
                             f"--reset {opts.reset}) and are TX/RX crossed?") from None
        if not how.startswith("synced"):
            self._note(f"connect: {how}")
        self.version, self.commands = self._retry("connect (GET)", self.link.get)  # type: ignore[misc]
        stage.advance(1)
        self._retry("connect (GET VERSION)", self.link.get_version)   # what stm32flash asks too; unused
        stage.advance(1)
        self.chip_id = self._retry("connect (GET ID)", self.link.get_id)  # type: ignore[assignment]
        stage.advance(1)
        expected = job.flashing.chip_id
        if expected is not None and self.chip_id != expected:
            text = (f"the chip answers {chip_name(self.chip_id)} but {job.board or 'the board'} "
                    f"is {chip_name(expected)}: wrong board connected, or built for the wrong board")
            if not opts.ignore_chip_id:
                raise FlashError(f"connect: {text} (--ignore-chip-id flashes anyway)")
            self._note(f"warning: {text}")
        for needed in (WRITE_MEMORY, READ_MEMORY):
            if needed not in self.commands:
                raise FlashError(f"connect: the bootloader does not offer {COMMAND_NAMES[needed]} "
                                 f"(GET listed {' '.join(f'0x{c:02X}' for c in self.commands)})")
        if EXTENDED_ERASE in self.commands:
            self.erase_name = "EXTENDED ERASE (0x44)"
        elif ERASE in self.commands:
            self.erase_name = "ERASE (0x43)"
        else:
            raise FlashError("connect: the bootloader offers neither ERASE (0x43) nor EXTENDED ERASE (0x44)")
        stage.finish(f"bootloader v{self.version >> 4}.{self.version & 15}, chip {chip_name(self.chip_id)}, "
                     f"{self.erase_name}")

    def _sector_timeout(self, indices: list[int]) -> float:
        t = self.timeouts
        table = self.job.flashing.sector_table()
        return sum(max(t.erase_min, t.erase_per_mib * table[i][1] / (1 << 20)) for i in indices) + t.answer

    def _erase_sectors(self, indices: list[int], stage=None) -> None:
        extended = EXTENDED_ERASE in self.commands
        table = self.job.flashing.sector_table()
        if not extended and (max(indices) > 255):
            raise FlashError(f"erase: sector {max(indices)} cannot be named by the legacy ERASE command; "
                             "use --erase all")
        batch: list[int] = []

        def flush() -> None:
            pages = list(batch)
            first, last = table[pages[0]][0], table[pages[-1]][0] + table[pages[-1]][1]
            label = f"sector {pages[0]}" if len(pages) == 1 else f"sectors {pages[0]}-{pages[-1]}"
            self._retry(f"erase {label}", lambda: self.link.erase(extended, pages, self._sector_timeout(pages)),
                        address=first, hint=" (write-protected, or read-out protection active?)")
            if stage:
                stage.advance(last - first)
            batch.clear()

        for index in indices:
            if batch and (len(batch) >= 16 or len(batch) >= LEGACY_MAX_PAGES
                          or sum(table[i][1] for i in batch) >= 256 * 1024 or index != batch[-1] + 1):
                flush()
            batch.append(index)
        if batch:
            flush()

    def _erase(self) -> str:
        job = self.job
        if self.options.erase == "all":
            stage = self.progress.stage("erase", 1, unit="chip")
            extended = EXTENDED_ERASE in self.commands
            self._retry("erase (mass erase)", lambda: self.link.erase(extended, None, self.timeouts.mass_erase),
                        hint=" (write-protected, or read-out protection active?)")
            stage.advance(1)
            stage.finish("whole flash (mass erase)")
            return "all"
        indices = job.flashing.sectors_for(job.address, self._padded_length())
        table = job.flashing.sector_table()
        total = sum(table[i][1] for i in indices)
        stage = self.progress.stage("erase", total)
        self._erase_sectors(indices, stage)
        label = f"sector {indices[0]}" if len(indices) == 1 else f"sectors {indices[0]}-{indices[-1]}"
        stage.finish(f"{label} ({total // 1024} KiB) with {self.erase_name}")
        return label

    # -- write ---------------------------------------------------------------------------------
    def _padded_length(self) -> int:
        n = len(self.job.image)
        padded = -(-n // 8) * 8  # double words: what L4/G4 parts need, and a multiple of 4 for all
        if self.job.address + padded > self.job.flash.end:
            padded = -(-n // 4) * 4
        return padded

    def _blocks(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """(address, data) for image offsets [start, end) in BLOCK-sized pieces from `start`; the
        piece holding the image's last byte is padded with 0xFF (see _padded_length)."""
        image = self.job.image
        padded = image + b"\xff" * (self._padded_length() - len(image))
        stop_at = len(padded) if end >= len(image) else end
        out = []
        for offset in range(start, stop_at, BLOCK):
            chunk = padded[offset:min(offset + BLOCK, stop_at)]
            assert len(chunk) % 4 == 0, (offset, len(chunk))
            out.append((self.job.address + offset, bytes(chunk)))
        return out

    def _write_block(self, address: int, data: bytes) -> None:
        """Write one block with retries; raises _NeedsErase when a failed attempt left it half-programmed."""
        self._step = f"write at 0x{address:08X}"
        for attempt in range(1, self.options.attempts + 1):
            try:
                self.link.write_memory(address, data)
                return
            except LinkError as exc:
                if attempt == self.options.attempts:
                    hint = (" (the bootloader refuses the data: sector write-protected, or read-out protection "
                            "active?)" if exc.data_sent else "")
                    raise FlashError(f"write at 0x{address:08X} failed after {attempt} attempts: {exc}{hint}") from None
                self.retries += 1
                self._note(f"write at 0x{address:08X}: {exc}; resyncing and retrying "
                           f"({attempt}/{self.options.attempts - 1})")
                self._resync()
                if exc.data_sent:
                    current = self._read_block(address, len(data), "write (read-back after an error)")
                    self._step = f"write at 0x{address:08X}"
                    if current == data:
                        return
                    if current != b"\xff" * len(data):
                        raise _NeedsErase(address)

    def _write_range(self, start: int, end: int, stage=None, may_repair: bool = True) -> None:
        blocks = self._blocks(start, end)
        i = 0
        while i < len(blocks):
            address, data = blocks[i]
            try:
                self._write_block(address, data)
            except _NeedsErase:
                if not may_repair or self.repairs >= self.options.repairs:
                    raise FlashError(f"write at 0x{address:08X}: a failed attempt left the block partly "
                                     "programmed and it could not be re-erased; flash again") from None
                self._note(f"write at 0x{address:08X}: block partly programmed by a failed attempt; "
                           "re-erasing its sector")
                done_to = self._repair([address - self.job.address], len(data))
                while i < len(blocks) and blocks[i][0] - self.job.address < done_to:
                    if stage:
                        stage.advance(len(blocks[i][1]))
                    i += 1
                continue
            if stage:
                stage.advance(len(data))
            i += 1

    def _write_all(self) -> None:
        stage = self.progress.stage("write", len(self.job.image))
        self._write_range(0, len(self.job.image), stage)
        stage.finish(f"{len(self.job.image)} bytes at 0x{self.job.address:08X}")

    def _repair(self, offsets: list[int], size: int) -> int:
        """Re-erase the sectors holding image offsets (each `size` long) and rewrite every image byte
        in them. Returns the image offset up to which the image is now written."""
        self.repairs += 1
        job = self.job
        indices = sorted({i for off in offsets for i in job.flashing.sectors_for(job.address + off, size)})
        table = job.flashing.sector_table()
        self._erase_sectors(indices)
        hi = min(len(job.image), table[indices[-1]][0] + table[indices[-1]][1] - job.address)
        # Rewrite sector by sector (the sectors may not be contiguous).
        for index in indices:
            s_lo = max(0, table[index][0] - job.address)
            s_hi = min(len(job.image), table[index][0] + table[index][1] - job.address)
            if s_lo < s_hi:
                self._write_range(s_lo, s_hi, may_repair=False)
        return hi

    # -- verify --------------------------------------------------------------------------------
    def _differs(self, start: int, end: int, stage=None) -> list[tuple[int, bytes]]:
        """Image blocks in [start, end) whose flash content differs after three reads."""
        job = self.job
        bad = []
        for offset in range(start, min(end, len(job.image)), BLOCK):
            expected = job.image[offset:min(offset + BLOCK, end, len(job.image))]
            address = job.address + offset
            for read in range(3):
                got = self._read_block(address, len(expected), "verify")
                if got == expected:
                    break
                if read < 2:
                    self.retries += 1
                    self._note(f"verify at 0x{address:08X}: read-back differs; reading again")
            else:
                bad.append((offset, got))
            if stage:
                stage.advance(len(expected))
        return bad

    def _mismatch_text(self, offset: int, got: bytes) -> str:
        expected = self.job.image[offset:offset + len(got)]
        first = next(i for i in range(len(got)) if got[i] != expected[i])
        return (f"verify at 0x{self.job.address + offset + first:08X}: flash holds 0x{got[first]:02X}, "
                f"the image has 0x{expected[first]:02X}")

    def _verify(self) -> None:
        job = self.job
        stage = self.progress.stage("verify", len(job.image))
        bad = self._differs(0, len(job.image), stage)
        while bad:
            if self.repairs >= self.options.repairs:
                raise FlashError(f"{self._mismatch_text(*bad[0])} ({len(bad)} block(s) differ); the flash "
                                 "does not hold the image (worn, or write-protected?)")
            self._note(f"{self._mismatch_text(*bad[0])} ({len(bad)} block(s)); re-erasing and rewriting")
            offsets = [off for off, _ in bad]
            self._repair(offsets, BLOCK)
            again = []
            for index in sorted({i for off in offsets for i in job.flashing.sectors_for(job.address + off, BLOCK)}):
                start, size = job.flashing.sector_table()[index]
                again += self._differs(max(0, start - job.address), start + size - job.address)
            bad = again
        stage.finish(f"{len(job.image)} bytes read back and equal")

    # -- start ---------------------------------------------------------------------------------
    def _start(self) -> bool:
        self._step = "start"
        if leave_bootloader(self.link.ser, self.options.reset, sleep=self._sleep):
            self._note("start: reset into the application (BOOT0 low, NRST pulsed)")
            return True
        if GO not in self.commands:
            self._note("start: the bootloader has no GO command; reset the board to run the application")
            return False
        try:
            self.link.go(self.job.address)
        except (LinkError, PortGone) as exc:
            written = "verified" if self.options.verify else "written"
            self._note(f"start: GO 0x{self.job.address:08X} not confirmed ({exc}); the image is {written}, "
                       "reset the board if the application does not run")
            return False
        self._note(f"start: GO 0x{self.job.address:08X}")
        return True
