"""The STM32 system-memory bootloader's UART protocol (ST AN3155), as a link layer on pyserial.

`Stm32Link` does one AN3155 exchange per method (GET, GET VERSION, GET ID, READ/WRITE MEMORY,
ERASE / EXTENDED ERASE, GO), plus the init (0x7F) and the resync rules of stm32flash. It raises
`LinkError` (NACK, timeout, unexpected byte), which callers may retry, and `PortGone` when the
serial connection itself is lost, which nobody retries. The flasher built on it is stm32_uart.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .serial_link import LinkError, SerialLink

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


class Stm32Link(SerialLink):
    """AN3155 exchanges over an open pyserial port (timeout small, set by the caller)."""

    def __init__(self, ser, *, baudrate: int = 115200, timeouts: Timeouts | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.timeouts = timeouts or Timeouts()
        # 8E1: 11 bits a byte; generous for 8N1
        super().__init__(ser, byte_time=11.0 / max(baudrate, 1), clock=clock)

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
