"""A fake STM32 system-memory bootloader (ST AN3155, USART) on a pseudo-terminal, for tests.

It speaks the bootloader side of the protocol over an in-memory chip (flash erased to 0xFF, written
with NOR semantics: programming can only clear bits; RAM; a product id; a GET command list with
EXTENDED ERASE or legacy ERASE) well enough for the real `stm32flash` to write and verify through
it, and it can misbehave on purpose (see Fault).

In a test:

    with FakeBootloader(chip="f446", faults=[Fault.parse("nack:write:3")]) as fake:
        flash_through(fake.path)          # /dev/pts/N
        assert fake.flash_bytes(0x08000000, n) == image

As a process (prints `PTY /dev/pts/N` once ready; dumps the flash on SIGTERM/SIGINT):

    python tests/fake_stm32_bootloader.py --pty-link /tmp/stm32 --dump flash.bin \
        [--chip f446|f746|f103] [--fault nack:write:3] [--bad-cell 0x08000010] [-v]

Faults, `ACTION[:COMMAND[:NTH[:ARG]]]`; COMMAND is any|get|version|id|read|write|erase|go|
rp|rup|wp|wup, NTH counts that command from 1 (default 1; "N+" = every one from the Nth on),
offsets count the bytes of that command's exchange from its opcode (host to fake: opcode 0,
complement 1, address 2...; fake to host: first ACK 0...):
    nack[:C:N[:STAGE]]       NACK instead of ACK at STAGE = command|address|length|data (default command)
    stall:C:N:SECONDS        wait before the exchange's last ACK (a slow erase, a stuck write)
    drop-rx:C:N:OFFSET       lose the host's byte at OFFSET (>= 2)
    corrupt-rx:C:N:OFFSET    flip bit 4 of the host's byte at OFFSET (>= 2)
    drop-tx:C:N:OFFSET       lose the fake's byte at OFFSET
    corrupt-tx:C:N:OFFSET    flip bit 4 of the fake's byte at OFFSET
    disconnect:C:N:OFFSET    hang up (close the PTY) when the host's byte at OFFSET is due (>= 2)
    flash-corrupt:write:N:OFFSET   program that block, ACK it, but flip bit 4 of byte OFFSET in flash
Each fault fires once. --bad-cell ADDR: that flash byte always reads back with bit 4 flipped.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import signal
import sys
import threading
import time
import tty
from dataclasses import dataclass
from pathlib import Path

ACK, NACK = 0x79, 0x1F

OPCODES = {0x00: "get", 0x01: "version", 0x02: "id", 0x11: "read", 0x21: "go", 0x31: "write",
           0x43: "erase", 0x44: "erase", 0x63: "wp", 0x73: "wup", 0x82: "rp", 0x92: "rup"}
NAMES = set(OPCODES.values()) | {"any"}
F4_COMMANDS = (0x00, 0x01, 0x02, 0x11, 0x21, 0x31, 0x44, 0x63, 0x73, 0x82, 0x92)
F1_COMMANDS = (0x00, 0x01, 0x02, 0x11, 0x21, 0x31, 0x43, 0x63, 0x73, 0x82, 0x92)


@dataclass(frozen=True)
class Chip:
    name: str
    pid: int
    version: int
    commands: tuple[int, ...]
    flash_base: int
    sectors: tuple[tuple[int, int], ...]      # (count, size) groups
    ram_base: int = 0x20000000
    ram_size: int = 0x20000
    sysmem_base: int = 0x1FFF0000
    sysmem_size: int = 0x7800

    @property
    def sector_table(self) -> list[tuple[int, int]]:
        out, address = [], self.flash_base
        for count, size in self.sectors:
            for _ in range(count):
                out.append((address, size))
                address += size
        return out

    @property
    def flash_size(self) -> int:
        return sum(c * s for c, s in self.sectors)


CHIPS = {
    "f446": Chip("STM32F446", 0x421, 0x31, F4_COMMANDS, 0x08000000, ((4, 0x4000), (1, 0x10000), (3, 0x20000))),
    "f407": Chip("STM32F407", 0x413, 0x31, F4_COMMANDS, 0x08000000, ((4, 0x4000), (1, 0x10000), (7, 0x20000))),
    "f746": Chip("STM32F746", 0x449, 0x90, F4_COMMANDS, 0x08000000, ((4, 0x8000), (1, 0x20000), (3, 0x40000)),
                 ram_size=0x50000),
    "f103": Chip("STM32F103xB", 0x410, 0x22, F1_COMMANDS, 0x08000000, ((128, 0x400),), ram_size=0x5000,
                 sysmem_base=0x1FFFF000, sysmem_size=0x800),
}

ACTIONS = ("nack", "stall", "drop-rx", "corrupt-rx", "drop-tx", "corrupt-tx", "disconnect", "flash-corrupt")


@dataclass
class Fault:
    action: str
    command: str = "any"
    nth: int = 1
    arg: str | None = None
    repeat: bool = False          # NTH written "N+": every occurrence from the Nth on
    fired: bool = False

    @classmethod
    def parse(cls, text: str) -> "Fault":
        parts = text.split(":")
        action = parts[0]
        if action not in ACTIONS:
            raise ValueError(f"unknown fault action '{action}' (one of {', '.join(ACTIONS)})")
        command = parts[1] if len(parts) > 1 and parts[1] else "any"
        if command not in NAMES:
            raise ValueError(f"unknown command '{command}' in fault '{text}'")
        nth_text = parts[2] if len(parts) > 2 and parts[2] else "1"
        repeat = nth_text.endswith("+")
        nth = int(nth_text.rstrip("+"), 0)
        arg = parts[3] if len(parts) > 3 else None
        if action in ("drop-rx", "corrupt-rx", "drop-tx", "corrupt-tx", "disconnect") and arg is None:
            raise ValueError(f"fault '{text}' needs a byte offset")
        if action == "stall" and arg is None:
            raise ValueError(f"fault '{text}' needs seconds")
        return cls(action, command, nth, arg, repeat)

    @property
    def offset(self) -> int:
        """The byte offset of a byte fault (-1 for the others)."""
        if self.action in ("nack", "stall"):
            return -1
        return int(self.arg or "0", 0)


class _Stop(Exception):
    pass


class _Hangup(Exception):
    pass


class FakeBootloader:
    """The bootloader on the master side of a PTY; `path` is the slave for the client."""

    def __init__(self, chip: str | Chip = "f446", faults: list[Fault] | tuple[Fault, ...] = (),
                 bad_cells: tuple[int, ...] = (), link: str | os.PathLike | None = None, verbose: bool = False,
                 read_protected: bool = False):
        self.chip = CHIPS[chip] if isinstance(chip, str) else chip
        self.faults = list(faults)
        self.bad_cells = set(bad_cells)
        self.link = Path(link) if link else None
        self.verbose = verbose
        self.flash = bytearray(b"\xff" * self.chip.flash_size)
        self.ram = bytearray(self.chip.ram_size)
        self.log: list[str] = []
        self.counts: dict[str, int] = {}
        self.rx_bytes = 0           # every byte the host sent, faults included
        self.synced = False
        self.read_protected = read_protected
        self.go_address: int | None = None
        self.hung_up = False
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._buf = bytearray()
        self._active: list[Fault] = []
        self._rx_off = self._tx_off = 0
        self._thread: threading.Thread | None = None
        self.master = self.slave = -1
        self.path = ""

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "FakeBootloader":
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)          # no echo, no line discipline, before any client opens it
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        if self.link:
            if self.link.is_symlink() or self.link.exists():
                self.link.unlink()
            self.link.symlink_to(self.path)
        self._thread = threading.Thread(target=self._run, name="fake-stm32-bootloader", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self._close()
        if self.link and self.link.is_symlink():
            self.link.unlink()

    def __enter__(self) -> "FakeBootloader":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _close(self) -> None:
        for name in ("master", "slave"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)

    # -- memory --------------------------------------------------------------------------------
    def flash_bytes(self, address: int, size: int) -> bytes:
        start = address - self.chip.flash_base
        return bytes(self.flash[start:start + size])

    def load(self, address: int, data: bytes) -> None:
        start = address - self.chip.flash_base
        self.flash[start:start + len(data)] = data

    def _region(self, address: int, size: int):
        c = self.chip
        for base, mem in ((c.flash_base, self.flash), (c.ram_base, self.ram)):
            if base <= address and address + size <= base + len(mem):
                return base, mem
        if c.sysmem_base <= address and address + size <= c.sysmem_base + c.sysmem_size:
            return c.sysmem_base, None
        return None

    def _read_mem(self, address: int, size: int) -> bytes:
        base, mem = self._region(address, size)
        if mem is None:
            return bytes(size)
        data = bytearray(mem[address - base:address - base + size])
        if mem is self.flash:
            for cell in self.bad_cells:
                if address <= cell < address + size:
                    data[cell - address] ^= 0x10
        return bytes(data)

    # -- bytes ---------------------------------------------------------------------------------
    def _fill(self) -> None:
        while not self._buf:
            if self._stop.is_set():
                raise _Stop
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:      # no client and no slave fd: cannot happen while we hold it
                    time.sleep(0.01)
                    continue
                raise
            self._buf += chunk
            self.rx_bytes += len(chunk)

    def _raw_rx(self) -> int:
        self._fill()
        byte = self._buf[0]
        del self._buf[0]
        return byte

    def _rx(self) -> int:
        """One host byte of the current command, with the rx faults applied."""
        while True:
            for fault in self._active:
                if fault.action == "disconnect" and not fault.fired and fault.offset == self._rx_off:
                    fault.fired = True
                    self._note(f"FAULT hang up at host byte {self._rx_off}")
                    raise _Hangup
            byte = self._raw_rx()
            dropped = False
            for fault in self._active:
                if fault.fired or fault.offset != self._rx_off:
                    continue
                if fault.action == "drop-rx":
                    fault.fired, dropped = True, True
                    self._note(f"FAULT drop host byte {self._rx_off} (0x{byte:02X})")
                elif fault.action == "corrupt-rx":
                    fault.fired = True
                    self._note(f"FAULT corrupt host byte {self._rx_off} (0x{byte:02X} -> 0x{byte ^ 0x10:02X})")
                    byte ^= 0x10
            if dropped:
                continue
            self._rx_off += 1
            return byte

    def _rx_n(self, n: int) -> bytes:
        return bytes(self._rx() for _ in range(n))

    def _tx(self, data: bytes | list[int]) -> None:
        out = bytearray()
        for byte in bytes(data):
            keep = True
            for fault in self._active:
                if fault.fired or fault.offset != self._tx_off or fault.action not in ("drop-tx", "corrupt-tx"):
                    continue
                fault.fired = True
                if fault.action == "drop-tx":
                    keep = False
                    self._note(f"FAULT drop reply byte {self._tx_off} (0x{byte:02X})")
                else:
                    self._note(f"FAULT corrupt reply byte {self._tx_off} (0x{byte:02X} -> 0x{byte ^ 0x10:02X})")
                    byte ^= 0x10
            self._tx_off += 1
            if keep:
                out.append(byte)
        self._write(bytes(out))

    def _write(self, data: bytes) -> None:
        while data:
            if self._stop.is_set():
                raise _Stop
            _, ready, _ = select.select([], [self.master], [], 0.05)
            if not ready:
                continue
            try:
                n = os.write(self.master, data)
            except BlockingIOError:
                continue
            data = data[n:]

    def _note(self, text: str) -> None:
        self.log.append(text)
        if self.verbose:
            print(f"fake-stm32: {text}", file=sys.stderr, flush=True)

    # -- protocol ------------------------------------------------------------------------------
    def _ack(self, stage: str, final: bool = False) -> bool:
        """Send ACK (or a fault's NACK) for `stage`; False when NACKed."""
        for fault in self._active:
            if fault.fired:
                continue
            if fault.action == "nack" and (fault.arg or "command") == stage:
                fault.fired = True
                self._note(f"FAULT NACK at {stage}")
                self._tx([NACK])
                return False
            if fault.action == "stall" and final:
                fault.fired = True
                self._note(f"FAULT stall {fault.arg} s before the last ACK")
                end = time.monotonic() + float(fault.arg or 0)
                while time.monotonic() < end:
                    if self._stop.is_set():
                        raise _Stop
                    time.sleep(0.01)
        self._tx([ACK])
        return True

    def _refuses(self, stage: str) -> bool:
        """A nack fault is due at `stage`: the bootloader refuses (and does not carry out) the request."""
        if any(f.action == "nack" and not f.fired and (f.arg or "command") == stage for f in self._active):
            self._ack(stage)
            return True
        return False

    def _nack(self, why: str) -> None:
        self._note(f"NACK: {why}")
        self._tx([NACK])

    def _run(self) -> None:
        try:
            while True:
                if not self.synced:
                    if self._raw_rx() == 0x7F:
                        self.synced = True
                        self._active, self._tx_off = [], 0
                        self._note("sync 0x7F -> ACK")
                        self._write(bytes([ACK]))
                    continue
                self._active, self._rx_off, self._tx_off = [], 0, 0
                op = self._raw_rx()
                comp = self._raw_rx()
                self._rx_off = 2
                if op ^ comp != 0xFF:
                    self._nack(f"bad command pair 0x{op:02X} 0x{comp:02X}")
                    continue
                name = OPCODES.get(op)
                if name is None or op not in self.chip.commands:
                    self._nack(f"unknown command 0x{op:02X}")
                    continue
                self.counts["any"] = self.counts.get("any", 0) + 1
                self.counts[name] = self.counts.get(name, 0) + 1
                self._active = []
                for f in self.faults:
                    count = self.counts["any" if f.command == "any" else name] if f.command in ("any", name) else 0
                    if f.repeat and count >= f.nth:
                        f.fired = False
                        self._active.append(f)
                    elif not f.fired and count == f.nth:
                        self._active.append(f)
                getattr(self, f"_cmd_{name}")(op)
        except (_Stop, _Hangup) as exc:
            if isinstance(exc, _Hangup):
                self.hung_up = True
                self._close()
        except BaseException as exc:  # noqa: BLE001 - kept for the test to see
            self.error = exc
            self._note(f"crashed: {exc!r}")

    def _address(self) -> int | None:
        raw = self._rx_n(5)
        if raw[4] != raw[0] ^ raw[1] ^ raw[2] ^ raw[3]:
            self._nack("address checksum")
            return None
        return int.from_bytes(raw[:4], "big")

    def _cmd_get(self, op: int) -> None:
        if not self._ack("command", final=True):
            return
        body = bytes([self.chip.version, *self.chip.commands])
        self._note("GET")
        self._tx(bytes([len(body) - 1]) + body)
        self._ack("end")

    def _cmd_version(self, op: int) -> None:
        if not self._ack("command", final=True):
            return
        self._note("GET VERSION")
        self._tx([self.chip.version, 0x00, 0x00])
        self._ack("end")

    def _cmd_id(self, op: int) -> None:
        if not self._ack("command", final=True):
            return
        self._note("GET ID")
        self._tx([1, self.chip.pid >> 8, self.chip.pid & 0xFF])
        self._ack("end")

    def _cmd_read(self, op: int) -> None:
        if self.read_protected:
            return self._nack("READ while read-protected")
        if not self._ack("command"):
            return
        address = self._address()
        if address is None:
            return
        if not self._ack("address"):
            return
        n, c = self._rx_n(2)
        if n ^ c != 0xFF:
            return self._nack("read length complement")
        if self._region(address, n + 1) is None:
            return self._nack(f"READ outside memory 0x{address:08X}")
        if not self._ack("length", final=True):
            return
        self._note(f"READ 0x{address:08X} {n + 1}")
        self._tx(self._read_mem(address, n + 1))

    def _cmd_write(self, op: int) -> None:
        if self.read_protected:
            return self._nack("WRITE while read-protected")
        if not self._ack("command"):
            return
        address = self._address()
        if address is None:
            return
        if address % 4:
            return self._nack(f"unaligned WRITE address 0x{address:08X}")
        if not self._ack("address"):
            return
        n = self._rx() + 1
        data = self._rx_n(n)
        checksum = self._rx()
        x = n - 1
        for b in data:
            x ^= b
        if x != checksum:
            return self._nack(f"WRITE data checksum at 0x{address:08X}")
        region = self._region(address, n)
        if region is None or region[1] is None or n % 4:
            return self._nack(f"WRITE outside writable memory or length {n} at 0x{address:08X}")
        if self._refuses("data"):
            return
        base, mem = region
        start = address - base
        if mem is self.flash:
            for i, b in enumerate(data):
                mem[start + i] &= b             # NOR flash: programming only clears bits
            for fault in self._active:
                if fault.action == "flash-corrupt" and not fault.fired:
                    fault.fired = True
                    mem[start + fault.offset] ^= 0x10
                    self._note(f"FAULT flash byte 0x{address + fault.offset:08X} corrupted")
        else:
            mem[start:start + n] = data
        self._note(f"WRITE 0x{address:08X} {n}")
        self._ack("data", final=True)

    def _erase_pages(self, pages: list[int]) -> bool:
        table = self.chip.sector_table
        if any(p >= len(table) for p in pages):
            return False
        for p in pages:
            address, size = table[p]
            start = address - self.chip.flash_base
            self.flash[start:start + size] = b"\xff" * size
        return True

    def _cmd_erase(self, op: int) -> None:
        if self.read_protected:
            return self._nack("ERASE while read-protected")
        if not self._ack("command"):
            return
        if op == 0x43:
            n = self._rx()
            if n == 0xFF:
                if self._rx() != 0x00:
                    return self._nack("global erase complement")
                self.flash[:] = b"\xff" * len(self.flash)
                self._note("ERASE (legacy) all")
                self._ack("data", final=True)
                return
            pages = list(self._rx_n(n + 1))
            checksum = self._rx()
            x = n
            for p in pages:
                x ^= p
        else:
            raw = self._rx_n(2)
            n = int.from_bytes(raw, "big")
            if n >= 0xFFF0:
                checksum = self._rx()
                if checksum != raw[0] ^ raw[1]:
                    return self._nack("special erase checksum")
                if n != 0xFFFF:
                    return self._nack(f"bank erase 0x{n:04X} not supported by this chip")
                self.flash[:] = b"\xff" * len(self.flash)
                self._note("EXTENDED ERASE mass")
                self._ack("data", final=True)
                return
            body = self._rx_n(2 * (n + 1))
            checksum = self._rx()
            x = raw[0] ^ raw[1]
            for b in body:
                x ^= b
            pages = [int.from_bytes(body[i:i + 2], "big") for i in range(0, len(body), 2)]
        if x != checksum:
            return self._nack("erase checksum")
        if self._refuses("data"):
            return
        if not self._erase_pages(pages):
            return self._nack(f"erase of an unknown page in {pages}")
        self._note(f"{'ERASE' if op == 0x43 else 'EXTENDED ERASE'} {pages}")
        self._ack("data", final=True)

    def _cmd_go(self, op: int) -> None:
        if self.read_protected:
            return self._nack("GO while read-protected")
        if not self._ack("command"):
            return
        address = self._address()
        if address is None:
            return
        if self._region(address, 4) is None:
            return self._nack(f"GO outside memory 0x{address:08X}")
        if not self._ack("address", final=True):
            return
        self.go_address = address
        self._note(f"GO 0x{address:08X}")
        self.synced = False                     # "the application runs": a new session needs 0x7F

    def _cmd_rup(self, op: int) -> None:
        if not self._ack("command"):
            return
        self.flash[:] = b"\xff" * len(self.flash)
        self.read_protected = False
        self._note("READOUT UNPROTECT (mass erase, reset)")
        self._ack("data", final=True)
        self.synced = False

    def _cmd_rp(self, op: int) -> None:
        if not self._ack("command"):
            return
        self.read_protected = True
        self._note("READOUT PROTECT (reset)")
        self._ack("data", final=True)
        self.synced = False

    def _cmd_wup(self, op: int) -> None:
        if not self._ack("command"):
            return
        self._note("WRITE UNPROTECT (reset)")
        self._ack("data", final=True)
        self.synced = False

    def _cmd_wp(self, op: int) -> None:
        if not self._ack("command"):
            return
        n = self._rx()
        self._rx_n(n + 1)
        self._rx()
        self._note("WRITE PROTECT (ignored, reset)")
        self._ack("data", final=True)
        self.synced = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pty-link", type=Path, help="make this symlink point at the PTY")
    parser.add_argument("--chip", choices=sorted(CHIPS), default="f446")
    parser.add_argument("--fault", action="append", default=[], help="ACTION[:COMMAND[:NTH[:ARG]]], repeatable")
    parser.add_argument("--bad-cell", action="append", default=[], type=lambda s: int(s, 0))
    parser.add_argument("--read-protected", action="store_true", help="start with read-out protection on")
    parser.add_argument("--load", type=Path, help="preload the flash from this file (at the flash base)")
    parser.add_argument("--dump", type=Path, help="write the whole flash here on exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every exchange on stderr")
    args = parser.parse_args(argv)
    try:
        faults = [Fault.parse(f) for f in args.fault]
    except ValueError as exc:
        parser.error(str(exc))
    fake = FakeBootloader(args.chip, faults, tuple(args.bad_cell), args.pty_link, args.verbose, args.read_protected)
    if args.load:
        fake.load(fake.chip.flash_base, args.load.read_bytes())
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    fake.start()
    print(f"PTY {fake.path}", flush=True)
    try:
        while not done.wait(0.1):
            if fake._thread is not None and not fake._thread.is_alive():
                break
    finally:
        fake.stop()
        if args.dump:
            args.dump.write_bytes(bytes(fake.flash))
    return 1 if fake.error else 0


if __name__ == "__main__":
    sys.exit(main())
