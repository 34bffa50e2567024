"""STM32 system-memory bootloader over a UART (ST AN3155), in pure Python on pyserial.

Two layers:
  * `Stm32Link`: one AN3155 exchange per method (GET, GET VERSION, GET ID, READ/WRITE MEMORY,
    ERASE / EXTENDED ERASE, GO), plus the init (0x7F) and resync rules of stm32flash. It raises
    `LinkError` (NACK, timeout, unexpected byte), which callers may retry, and `PortGone` when the
    serial connection itself is lost, which nobody retries.
  * `Stm32UartFlasher`: connect, check the chip, erase what the image covers, write in blocks of at
    most 256 bytes with per-block retries, read everything back, start the application. Every
    failure that survives the retries is a FlashError naming the step and the address.

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

import serial

from ..errors import FlashError, UsageError
from ..serialport import parity_applied
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress
from .reset import enter_bootloader, leave_bootloader

ACK = 0x79
NACK = 0x1F

GET, GET_VERSION, GET_ID = 0x00, 0x01, 0x02
READ_MEMORY, GO, WRITE_MEMORY = 0x11, 0x21, 0x31
ERASE, EXTENDED_ERASE = 0x43, 0x44
WRITE_PROTECT, WRITE_UNPROTECT, READOUT_PROTECT, READOUT_UNPROTECT = 0x63, 0x73, 0x82, 0x92
GET_CHECKSUM = 0xA1

COMMAND_NAMES = {GET: "GET", GET_VERSION: "GET VERSION", GET_ID: "GET ID", READ_MEMORY: "READ MEMORY",
                 GO: "GO", WRITE_MEMORY: "WRITE MEMORY", ERASE: "ERASE", EXTENDED_ERASE: "EXTENDED ERASE",
                 WRITE_PROTECT: "WRITE PROTECT", WRITE_UNPROTECT: "WRITE UNPROTECT",
                 READOUT_PROTECT: "READOUT PROTECT", READOUT_UNPROTECT: "READOUT UNPROTECT",
                 GET_CHECKSUM: "GET CHECKSUM"}

# Product ids (GET ID) of common parts, for messages only.
CHIP_NAMES = {
    0x410: "STM32F10x medium-density", 0x412: "STM32F10x low-density", 0x414: "STM32F10x high-density",
    0x413: "STM32F405/407/415/417", 0x419: "STM32F42x/43x", 0x421: "STM32F446", 0x423: "STM32F401xB/C",
    0x431: "STM32F411", 0x433: "STM32F401xD/E", 0x434: "STM32F469/479", 0x441: "STM32F412",
    0x449: "STM32F74x/75x", 0x451: "STM32F76x/77x", 0x452: "STM32F72x/73x", 0x415: "STM32L47x/48x",
    0x435: "STM32L43x/44x", 0x461: "STM32L49x/4Ax", 0x470: "STM32L4Rx/4Sx", 0x450: "STM32H74x/75x",
    0x460: "STM32G07x/08x", 0x468: "STM32G43x/44x", 0x469: "STM32G47x/48x", 0x440: "STM32F05x",
    0x444: "STM32F03x", 0x448: "STM32F07x",
}

BLOCK = 256          # WRITE/READ MEMORY maximum
LEGACY_MAX_PAGES = 255


def chip_name(pid: int) -> str:
    name = CHIP_NAMES.get(pid)
    return f"0x{pid:03X} ({name})" if name else f"0x{pid:03X}"


def xor(data: bytes | bytearray | list[int], seed: int = 0) -> int:
    for b in data:
        seed ^= b
    return seed


def address_bytes(address: int) -> bytes:
    a = address.to_bytes(4, "big")
    return a + bytes([xor(a)])


@dataclass
class Timeouts:
    """Seconds. Defaults follow stm32flash (block write 1 s, mass erase 35 s) and the STM32F4
    datasheets (a 128 KiB sector takes up to 4 s to erase at x8 parallelism)."""

    answer: float = 1.0           # ACK to a command, an address, a length; GET/ID replies
    write_block: float = 1.0      # ACK after a WRITE MEMORY data block
    erase_per_mib: float = 50.0   # page/sector erase, scaled by the bytes erased...
    erase_min: float = 1.0        # ...but at least this per sector
    mass_erase: float = 35.0
    sync: float = 0.5             # answer to 0x7F
    resync: float = 10.0          # total budget to get back in step after an error
    quiet: float = 0.05           # silence that ends a drain


class LinkError(Exception):
    """A NACK, a timeout or an unexpected byte: the exchange can be retried after a resync.
    `data_sent` is True when the failure came after a WRITE data block went out (it may have been
    programmed)."""

    def __init__(self, what: str, data_sent: bool = False, nacked: bool = False):
        super().__init__(what)
        self.data_sent = data_sent
        self.nacked = nacked


class PortGone(Exception):
    """The serial connection failed (unplugged, closed, I/O error). Never retried."""


class Stm32Link:
    """AN3155 exchanges over an open pyserial port (timeout small, set by the caller)."""

    def __init__(self, ser, *, baudrate: int = 115200, timeouts: Timeouts | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.ser = ser
        self.timeouts = timeouts or Timeouts()
        self.byte_time = 11.0 / max(baudrate, 1)   # 8E1: 11 bits a byte; generous for 8N1
        self.clock = clock
        self.bytes_sent = 0

    # -- bytes -----------------------------------------------------------------------------------
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
        """Read and discard until the line has been silent for `quiet` seconds."""
        quiet = self.timeouts.quiet if quiet is None else quiet
        end = self.clock() + limit
        junk = bytearray()
        while self.clock() < end:
            chunk = self.read(256, quiet)
            if not chunk:
                break
            junk += chunk
        return bytes(junk)

    def expect_ack(self, timeout: float, what: str, data_sent: bool = False) -> None:
        reply = self.read(1, timeout)
        if not reply:
            raise LinkError(f"no ACK to {what} within {timeout:g} s", data_sent)
        if reply[0] == ACK:
            return
        if reply[0] == NACK:
            raise LinkError(f"NACK to {what}", data_sent, nacked=True)
        raise LinkError(f"unexpected byte 0x{reply[0]:02X} instead of ACK to {what}", data_sent)

    def command(self, op: int) -> None:
        self.write(bytes([op, op ^ 0xFF]))
        self.expect_ack(self.timeouts.answer, f"{COMMAND_NAMES.get(op, hex(op))} (0x{op:02X})")

    # -- sync --------------------------------------------------------------------------------------
    def init(self, attempts: int = 2) -> str:
        """0x7F autobaud as stm32flash does it. Returns how the sync happened."""
        for _ in range(attempts):
            self.drain()
            self.write(b"\x7f")
            reply = self.read(1, self.timeouts.sync)
            if reply == bytes([ACK]):
                return "synced"
            if reply == bytes([NACK]):
                return "already synced (NACK to 0x7F: the bootloader was left mid-command)"
            if not reply:
                # The bootloader may have taken the 0x7F as a command byte: a second one completes
                # an invalid command and must be NACKed.
                self.write(b"\x7f")
                reply = self.read(1, self.timeouts.sync)
                if reply == bytes([NACK]):
                    return "already synced (0x7F taken as a command byte)"
                if reply == bytes([ACK]):
                    return "synced (first 0x7F lost)"
        # Perhaps the bootloader is waiting for the rest of a data block: fill it up.
        self.resync()
        return "resynced"

    def listen(self, first: float) -> bytes:
        """Everything that arrives: wait up to `first` s for a byte, then until the line is quiet."""
        data = self.read(1, first)
        if data:
            data += self.drain()
        return data

    def resync(self) -> None:
        """Get back to a command boundary after an error (the bootloader has no timeouts: it may be
        waiting for the rest of a command, an address or a data block).

        1. Send 0xFF 0x00 (an invalid command, as stm32flash does) in growing bursts until a NACK
           comes back: this completes any half-received command or data block (at most 258 bytes).
        2. Prove the boundary with GET (0x00 0xFF), which must be answered in full. If the
           bootloader was one byte out of step, GET's first byte completes the pending pair and is
           NACKed; a lone 0x00 then completes the pending 0xFF and GET is tried again.
        """
        deadline = self.clock() + self.timeouts.resync
        wait = min(self.timeouts.answer, 0.2)
        while self.clock() < deadline:
            self.drain()
            nacked = False
            for pairs in (1, 4, 16, 64, 130):
                self.write(b"\xff\x00" * pairs)
                if NACK in self.listen(wait + 2 * pairs * self.byte_time):
                    nacked = True
                    break
                if self.clock() >= deadline:
                    break
            if not nacked:
                continue
            if self._probe():
                return
            self.write(b"\x00")
            self.drain()
            if self._probe():
                return
        raise LinkError(f"no sensible answer to the resync sequence within {self.timeouts.resync:g} s")

    def _probe(self) -> bool:
        """GET, and nothing else, answered in full: the bootloader is at a command boundary."""
        self.write(bytes([GET, GET ^ 0xFF]))
        wait = min(self.timeouts.answer, 0.2)
        if self.read(1, wait) != bytes([ACK]):
            self.drain()
            return False
        n = self.read(1, wait)
        if not n or len(self.read(n[0] + 1, wait)) != n[0] + 1 or self.read(1, wait) != bytes([ACK]):
            self.drain()
            return False
        return not self.drain()

    # -- commands ------------------------------------------------------------------------------
    def get(self) -> tuple[int, list[int]]:
        """(bootloader version, supported command codes)."""
        self.command(GET)
        n = self.read_exact(1, self.timeouts.answer, "the GET length")[0]
        data = self.read_exact(n + 1, self.timeouts.answer, "the GET reply")
        self.expect_ack(self.timeouts.answer, "the end of GET")
        return data[0], list(data[1:])

    def get_version(self) -> tuple[int, int, int]:
        self.command(GET_VERSION)
        data = self.read_exact(3, self.timeouts.answer, "the GET VERSION reply")
        self.expect_ack(self.timeouts.answer, "the end of GET VERSION")
        return data[0], data[1], data[2]

    def get_id(self) -> int:
        self.command(GET_ID)
        n = self.read_exact(1, self.timeouts.answer, "the GET ID length")[0]
        data = self.read_exact(n + 1, self.timeouts.answer, "the GET ID reply")
        self.expect_ack(self.timeouts.answer, "the end of GET ID")
        if len(data) < 2:
            raise LinkError("GET ID answered with a 1-byte id")
        return (data[0] << 8) | data[1]

    def read_memory(self, address: int, size: int) -> bytes:
        assert 1 <= size <= BLOCK
        self.command(READ_MEMORY)
        self.write(address_bytes(address))
        self.expect_ack(self.timeouts.answer, "the READ MEMORY address")
        self.write(bytes([size - 1, (size - 1) ^ 0xFF]))
        self.expect_ack(self.timeouts.answer, "the READ MEMORY length")
        return self.read_exact(size, self.timeouts.answer, f"{size} bytes of READ MEMORY")

    def write_memory(self, address: int, data: bytes) -> None:
        assert 4 <= len(data) <= BLOCK and len(data) % 4 == 0 and address % 4 == 0
        self.command(WRITE_MEMORY)
        self.write(address_bytes(address))
        self.expect_ack(self.timeouts.answer, "the WRITE MEMORY address")
        block = bytes([len(data) - 1]) + data
        self.write(block + bytes([xor(block)]))
        self.expect_ack(self.timeouts.write_block + len(block) * self.byte_time,
                        "the WRITE MEMORY data block", data_sent=True)

    def erase(self, extended: bool, pages: list[int] | None, timeout: float) -> None:
        """Erase `pages` (erase-unit numbers), or everything when `pages` is None."""
        op = EXTENDED_ERASE if extended else ERASE
        self.write(bytes([op, op ^ 0xFF]))
        try:
            self.expect_ack(self.timeouts.answer, f"{COMMAND_NAMES[op]} (0x{op:02X})")
        except LinkError as exc:
            if not exc.nacked:
                # The command may have arrived and only its ACK got lost: the bootloader then waits
                # for an erase body, and the resync bytes (0xFF 0x00...) would be one (a global
                # erase, or a count of 0xFF00 pages). Give it a one-page body with a wrong
                # checksum instead: NACKed whether it is read as a body or as two invalid commands.
                self.write(b"\x00\x00\x00\x00\x01" if extended else b"\x00\x00\x01")
            raise
        if pages is None:
            self.write(b"\xff\xff\x00" if extended else b"\xff\x00")
        elif extended:
            body = (len(pages) - 1).to_bytes(2, "big") + b"".join(p.to_bytes(2, "big") for p in pages)
            self.write(body + bytes([xor(body)]))
        else:
            body = bytes([len(pages) - 1, *pages])
            self.write(body + bytes([xor(body)]))
        self.expect_ack(timeout, "the erase", data_sent=True)

    def go(self, address: int) -> None:
        self.command(GO)
        self.write(address_bytes(address))
        self.expect_ack(self.timeouts.answer, "the GO address")


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
