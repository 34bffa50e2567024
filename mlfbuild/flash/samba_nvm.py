"""The NVM controllers of SAMD21 (and SAMR21, SAML21) and SAMD51 (and SAME5x), driven through the
SAM-BA monitor's register reads and writes.

Facts from the datasheets as BOSSA 1.9.1 uses them (D2xNvmFlash.cpp, D5xNvmFlash.cpp, Device.cpp):
  * The chip is told apart by the Cortex-M CPUID part number (0xE000ED00: 0xC60 M0+, 0xC24 M4) and
    the DSU device id (DID, 0x41002018 on both): PROCESSOR[31:28] FAMILY[27:23] SERIES[21:16]
    DIE[15:12] REVISION[11:8] DEVSEL[7:0]; die and revision (mask 0xFFFF00FF) do not change the part.
  * NVMCTRL at 0x41004000. PARAM (0x08): NVMP[15:0] pages, PSZ[18:16] page size = 8 << PSZ.
  * SAMD21: CTRLA (0x00) = 0xA500 | command executes it; INTFLAG (0x14) READY bit 0, ERROR bit 1;
    STATUS (0x18) PROGE bit 2, LOCKE bit 3, NVME bit 4 (write 1 to clear); ADDR (0x1C) takes the
    16-bit word address (byte address / 2). CTRLB (0x04) MANW bit 7: page buffer writes only reach
    flash on WP. Commands: ER 0x02 (erase the 4-page row at ADDR), WP 0x04, PBC 0x44.
  * SAMD51: the command register is CTRLB (0x04) = 0xA500 | command; CTRLA (0x00) WMODE[5:4]
    (0 = manual); INTFLAG (0x10, 16 bits) DONE bit 0, errors ADDRE 1, PROGE 2, LOCKE 3, NVME 6
    (mask 0xCE, write 1 to clear); STATUS (0x12) READY bit 0; ADDR (0x14) takes the byte address.
    Commands: EB 0x01 (erase the 16-page block at ADDR), WP 0x03, PBC 0x15.
  * A row or block inside the bootloader's BOOTPROT region, or in a locked region, is refused
    with LOCKE: the flash is left as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .samba_link import SambaLink
from .serial_link import LinkError

CPUID = 0xE000ED00
DSU_DID = 0x41002018
AIRCR = 0xE000ED0C
AIRCR_SYSRESETREQ = 0x05FA0004    # VECTKEY | SYSRESETREQ
NVMCTRL = 0x41004000
PARAM = NVMCTRL + 0x08
CMDEX_KEY = 0xA500
DID_PART_MASK = 0xFFFF00FF


class NvmError(Exception):
    """The NVM controller refused a command (locked region, programming error)."""


@dataclass(frozen=True)
class Family:
    """What differs between the controllers. `buffer` is SRAM the monitor leaves alone."""

    name: str
    cpuid_part: int            # CPUID[15:4]
    did_processor: int         # DID[31:28]: 1 = Cortex-M0+ (D21/R21/L21), 6 = Cortex-M4 (D51/E5x)
    erase_pages: int           # pages per erase unit (row or block)
    command_reg: int
    intflag_reg: int
    status_reg: int
    addr_reg: int
    erase_cmd: int
    write_cmd: int
    clear_cmd: int
    byte_address: bool         # ADDR takes bytes (D51) or 16-bit words (D21)
    buffer: int = 0x20005000


SAMD21 = Family("SAMD21", 0xC60, 1, erase_pages=4, command_reg=0x00, intflag_reg=0x14, status_reg=0x18,
                addr_reg=0x1C, erase_cmd=0x02, write_cmd=0x04, clear_cmd=0x44, byte_address=False)
SAMD51 = Family("SAMD51", 0xC24, 6, erase_pages=16, command_reg=0x04, intflag_reg=0x10, status_reg=0x12,
                addr_reg=0x14, erase_cmd=0x01, write_cmd=0x03, clear_cmd=0x15, byte_address=True)
FAMILIES = (SAMD21, SAMD51)

# DID & DID_PART_MASK -> part name, for messages (BOSSA's Device.cpp table, the parts boards use).
PARTS = {
    0x10010005: "ATSAMD21G18A", 0x10010000: "ATSAMD21J18A", 0x1001000A: "ATSAMD21E18A",
    0x10010006: "ATSAMD21G17A", 0x10010007: "ATSAMD21G16A", 0x10010019: "ATSAMR21G18A",
    0x60060005: "ATSAMD51J19A", 0x60060007: "ATSAMD51G19A", 0x60060006: "ATSAMD51J18A",
    0x60060004: "ATSAMD51J20A", 0x60060001: "ATSAMD51P19A", 0x60060000: "ATSAMD51P20A",
    0x61810002: "ATSAME51J19A", 0x61840000: "ATSAME54P20A",
}


def part_name(did: int) -> str:
    name = PARTS.get(did & DID_PART_MASK)
    return f"0x{did:08X} ({name})" if name else f"0x{did:08X}"


def family_of(cpuid: int, did: int) -> Family | None:
    part = (cpuid >> 4) & 0xFFF
    for family in FAMILIES:
        if family.cpuid_part == part and did >> 28 == family.did_processor:
            return family
    return None


class Nvm:
    """One NVM controller, reached through a SambaLink."""

    def __init__(self, link: SambaLink, family: Family, *, clock: Callable[[], float] = time.monotonic):
        self.link, self.family, self.clock = link, family, clock

    def geometry(self) -> tuple[int, int]:
        """(page size in bytes, number of pages) from PARAM."""
        param = self.link.read_word(PARAM)
        return 8 << ((param >> 16) & 7), param & 0xFFFF

    def manual_write(self) -> None:
        """Page buffer writes stay in the buffer until WP (no automatic write on the last word)."""
        if self.family is SAMD21:
            ctrlb = self.link.read_word(NVMCTRL + 0x04)
            self.link.write_word(NVMCTRL + 0x04, ctrlb | (1 << 7))
        else:
            ctrla = self.link.read_word(NVMCTRL + 0x00) & 0xFFFF
            self.link.write_half(NVMCTRL + 0x00, ctrla & ~0x30)

    def erase(self, address: int) -> None:
        self.command(self.family.erase_cmd, address, "erase")

    def clear_page_buffer(self) -> None:
        self.command(self.family.clear_cmd, None, "page buffer clear")

    def write_page(self, address: int) -> None:
        self.command(self.family.write_cmd, address, "write page")

    def command(self, cmd: int, address: int | None, what: str) -> None:
        """Run one NVM command and wait for it; NvmError when the controller flags an error."""
        f = self.family
        self._wait_ready(what)
        self._clear_errors()
        if address is not None:
            self._set_address(address)
        self.link.write_word(NVMCTRL + f.command_reg, CMDEX_KEY | cmd)
        self._wait_ready(what)
        error = self._error_text()
        if error:
            self._clear_errors()
            where = f" at 0x{address:08X}" if address is not None else ""
            raise NvmError(f"the NVM controller refused {what}{where}: {error}")

    def check_errors(self, what: str) -> None:
        """After the monitor drove the controller (Y): NvmError if it flagged an error."""
        error = self._error_text()
        if error:
            self._clear_errors()
            raise NvmError(f"the NVM controller flagged an error during {what}: {error}")

    # -- registers -------------------------------------------------------------------------------
    def _set_address(self, address: int) -> None:
        """ADDR must read back what was written (a word write has no checksum), so a garbled write
        can never let a command erase or program another row."""
        f = self.family
        expected = address if f.byte_address else address // 2
        self.link.write_word(NVMCTRL + f.addr_reg, expected)
        got = self.link.read_word(NVMCTRL + f.addr_reg) & (0xFFFFFF if f.byte_address else 0x3FFFFF)
        if got != expected:
            raise LinkError(f"the NVM address register reads 0x{got:X} after writing 0x{expected:X}")

    def _ready(self) -> bool:
        f = self.family
        if f is SAMD21:
            return bool(self.link.read_word(NVMCTRL + f.intflag_reg) & 0x1)
        return bool((self.link.read_word(NVMCTRL + 0x10) >> 16) & 0x1)   # STATUS.READY

    def _wait_ready(self, what: str) -> None:
        deadline = self.clock() + self.link.timeouts.nvm
        while not self._ready():
            if self.clock() >= deadline:
                raise LinkError(f"the NVM controller stayed busy for {self.link.timeouts.nvm:g} s ({what})")

    def _error_text(self) -> str:
        if self.family is SAMD21:
            flags = self.link.read_word(NVMCTRL + 0x14)
            if not flags & 0x2:
                return ""
            status = self.link.read_word(NVMCTRL + 0x18)
            names = [n for bit, n in ((3, "LOCKE: locked region (bootloader protection?)"),
                                      (2, "PROGE: invalid command or address"), (4, "NVME: NVM error"))
                     if status & (1 << bit)]
            return ", ".join(names) or "ERROR"
        flags = self.link.read_word(NVMCTRL + 0x10) & 0xFFFF
        names = [n for bit, n in ((3, "LOCKE: locked region (bootloader protection?)"), (1, "ADDRE: bad address"),
                                  (2, "PROGE: programming error"), (6, "NVME: NVM error"))
                 if flags & (1 << bit)]
        return ", ".join(names)

    def _clear_errors(self) -> None:
        if self.family is SAMD21:
            self.link.write_word(NVMCTRL + 0x18, 0x1C)    # PROGE, LOCKE, NVME: write 1 to clear
            self.link.write_word(NVMCTRL + 0x14, 0x2)     # INTFLAG.ERROR
        else:
            self.link.write_half(NVMCTRL + 0x10, 0xCE)
