"""Boards as data: one TOML file per board in boards/, validated into frozen dataclasses.

This module knows board files and their schema, nothing about models. The schema is
documented in boards/README.md (and boards/board.schema.json); in short:

    name, description, kind                       kind = qemu | host | hardware
    aliases                                       other names of the same board (Zephyr, PlatformIO)
    [cpu]      core, cflags, float_abi, elf_machine            (absent for host)
    [memory]   flash = {origin, length}, ram = {origin, length},
               stack_bytes, heap_bytes                          (absent for host)
    [console]  uart, base, baud, clock_hz, [[console.init]] {addr, clear, set}
    [timer]    systick_hz                                       (absent for host)
    [qemu]     machine, extra_args                              (only kind = qemu)
    [flashing] method, address, reset, baud, chip_id, sectors, notes,
               uf2_family, pyocd_target, openocd_config, [flashing.mcuboot]
                                                                (only kind = hardware)
    [flash_timing] clock_hz, wait_states, read_bytes, instruction_cache_lines,
               data_cache_lines, reads_per_line               (optional, kind = hardware)

Every problem is reported as a one-line BoardError naming the file and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .checked import describe_value, is_kind
from .errors import BoardError
from .flash_methods import FLASHERS
from .suggest import did_you_mean
from .resources import data_dir

DEFAULT_BOARD = "mps2-an386"

KINDS = ("qemu", "host", "hardware")
FLOAT_ABIS = ("soft", "softfp", "hard")
# console.uart: the UART peripheral families crt/ has a driver for (project/runtime.py maps each to
# the macros that select it).
UARTS = ("cmsdk", "pl011", "stm32", "stm32f7", "stm32-lpuart", "sercom", "nrf", "stdio")
FLASH_METHODS = tuple(FLASHERS)
# How the host puts the chip into its ROM bootloader (see boards/README.md):
#   dtr-rts: DTR drives BOOT0 (asserted = high), RTS drives NRST (asserted = reset):
#            DTR on, RTS on, 100 ms, RTS off, 100 ms, DTR off, then 0x7F;
#            to start the program afterwards: DTR off, RTS on, 100 ms, RTS off.
#   manual:  the user holds BOOT0 high and presses RESET when asked (SAM-BA: double-taps RESET).
#   touch-1200: (SAM-BA) open the USB serial port at 1200 baud and close it; the Arduino and
#            Adafruit cores reset into their bootloader, which may come back as another port.
RESET_METHODS = ("dtr-rts", "manual", "touch-1200")

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")  # used with fullmatch: "$" would let "name\n" through
_ALIAS_RE = re.compile(r"[a-z0-9][a-z0-9._/-]*")  # Zephyr's board targets have slashes (mps2/an386)
_U32 = 1 << 32


@dataclass(frozen=True)
class MemoryRegion:
    origin: int
    length: int

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.origin + self.length

    def contains(self, address: int) -> bool:
        return self.origin <= address < self.end

    def to_json(self) -> dict:
        return {"origin": self.origin, "length": self.length}


@dataclass(frozen=True)
class Cpu:
    core: str
    cflags: tuple[str, ...]
    float_abi: str
    elf_machine: str

    def to_json(self) -> dict:
        return {"core": self.core, "cflags": list(self.cflags), "float_abi": self.float_abi,
                "elf_machine": self.elf_machine}


@dataclass(frozen=True)
class Memory:
    flash: MemoryRegion
    ram: MemoryRegion
    stack_bytes: int
    heap_bytes: int

    def to_json(self) -> dict:
        return {"flash": self.flash.to_json(), "ram": self.ram.to_json(),
                "stack_bytes": self.stack_bytes, "heap_bytes": self.heap_bytes}


@dataclass(frozen=True)
class RegisterWrite:
    """`*addr = (*addr & ~clear) | set`, done by mlfrt_init() before the UART is set up
    (clock enables, GPIO alternate functions on real boards)."""

    addr: int
    clear: int
    set: int

    def to_json(self) -> dict:
        return {"addr": self.addr, "clear": self.clear, "set": self.set}


@dataclass(frozen=True)
class Console:
    uart: str
    base: int | None = None
    baud: int | None = None
    clock_hz: int | None = None
    init: tuple[RegisterWrite, ...] = ()

    def to_json(self) -> dict:
        out: dict[str, Any] = {"uart": self.uart}
        for key in ("base", "baud", "clock_hz"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.init:
            out["init"] = [w.to_json() for w in self.init]
        return out


@dataclass(frozen=True)
class Timer:
    systick_hz: int

    def to_json(self) -> dict:
        return {"systick_hz": self.systick_hz}


@dataclass(frozen=True)
class Qemu:
    machine: str
    extra_args: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out: dict[str, Any] = {"machine": self.machine}
        if self.extra_args:
            out["extra_args"] = list(self.extra_args)
        return out


@dataclass(frozen=True)
class FlashSectors:
    """`count` erase units of `size` bytes each, in address order."""

    count: int
    size: int

    def to_json(self) -> dict:
        return {"count": self.count, "size": self.size}


@dataclass(frozen=True)
class McubootLayout:
    """How imgtool signs for the board's MCUboot: the image header (firmware.bin is linked right
    after it, so the slot starts at flashing.address - header_size), the primary slot's size, the
    flash write alignment and the image version."""

    header_size: int
    slot_size: int
    align: int
    version: str

    def to_json(self) -> dict:
        return {"header_size": self.header_size, "slot_size": self.slot_size, "align": self.align,
                "version": self.version}


@dataclass(frozen=True)
class Flashing:
    method: str
    address: int
    reset: str
    sectors: tuple[FlashSectors, ...]
    baud: int = 115200
    chip_id: int | None = None
    notes: str = ""
    uf2_family: int | None = None          # UF2 family id of the board's UF2 bootloader: firmware.uf2
    pyocd_target: str | None = None        # pyOCD target type of the on-board probe's chip
    openocd_config: tuple[str, ...] = ()   # OpenOCD config files (-f) for the on-board probe
    mcuboot: McubootLayout | None = None

    def sector_table(self) -> list[tuple[int, int]]:
        """[(start address, size)] of every erase unit, numbered from 0 as the bootloader counts them."""
        table, address = [], self.address
        for group in self.sectors:
            for _ in range(group.count):
                table.append((address, group.size))
                address += group.size
        return table

    def sectors_for(self, start: int, length: int) -> list[int]:
        """Indices of the erase units that [start, start+length) touches."""
        end = start + length
        return [i for i, (addr, size) in enumerate(self.sector_table()) if addr < end and start < addr + size]

    def to_json(self) -> dict:
        out: dict[str, Any] = {"method": self.method, "address": self.address, "reset": self.reset,
                               "baud": self.baud, "sectors": [s.to_json() for s in self.sectors]}
        if self.chip_id is not None:
            out["chip_id"] = self.chip_id
        if self.notes:
            out["notes"] = self.notes
        for key in ("uf2_family", "pyocd_target"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.openocd_config:
            out["openocd_config"] = list(self.openocd_config)
        if self.mcuboot:
            out["mcuboot"] = self.mcuboot.to_json()
        return out


@dataclass(frozen=True)
class FlashTiming:
    """The chip's flash read path as `run --profile --cycles-for` models it (templates/profile/flashcost.c):
    at `clock_hz` a flash read costs `wait_states` cycles more than the core's timing table says; the
    flash accelerator's instruction and data caches hold that many lines of `reads_per_line` reads of
    `read_bytes` each."""

    clock_hz: int
    wait_states: int
    read_bytes: int
    instruction_cache_lines: int
    data_cache_lines: int
    reads_per_line: int

    def plugin_spec(self, flash: MemoryRegion) -> str:
        """The profiling plugin's flash= argument, for firmware whose flash is `flash` where it runs."""
        return (f"{flash.origin:x}:{flash.end:x}:{self.wait_states}:{self.read_bytes}:"
                f"{self.instruction_cache_lines}:{self.data_cache_lines}:{self.reads_per_line}")

    def to_json(self) -> dict:
        return {"clock_hz": self.clock_hz, "wait_states": self.wait_states, "read_bytes": self.read_bytes,
                "instruction_cache_lines": self.instruction_cache_lines, "data_cache_lines": self.data_cache_lines,
                "reads_per_line": self.reads_per_line}


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    kind: str
    console: Console
    cpu: Cpu | None = None
    memory: Memory | None = None
    timer: Timer | None = None
    qemu: Qemu | None = None
    flashing: Flashing | None = None
    aliases: tuple[str, ...] = ()
    source: Path | None = field(default=None, compare=False)
    flash_timing: FlashTiming | None = None

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    @property
    def is_emulated(self) -> bool:
        return self.kind == "qemu"

    @property
    def is_hardware(self) -> bool:
        return self.kind == "hardware"

    @property
    def cflags(self) -> tuple[str, ...]:
        """CPU flags for every compile and the link (empty for the host)."""
        return self.cpu.cflags if self.cpu else ()

    @property
    def semihosting(self) -> bool:
        """Firmware exits through semihosting only under QEMU; real boards print `[[exit N]]`."""
        return self.is_emulated

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "kind": self.kind}
        if self.aliases:
            out["aliases"] = list(self.aliases)
        for key in ("cpu", "memory", "console", "timer", "qemu", "flashing", "flash_timing"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value.to_json()
        return out


# ---------------------------------------------------------------------------------------------
# Validation helpers: each raises a one-line BoardError naming the file and the dotted key.


class _Table:
    """A TOML table being validated: tracks which keys were consumed so leftovers are errors."""

    def __init__(self, path: Path, prefix: str, data: Any):
        self.path, self.prefix = path, prefix
        if not isinstance(data, dict):
            self.fail(prefix or "(top level)", f"must be a table, got {describe_value(data, 'toml')}")
        self.data: dict = data
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, key: str, message: str) -> None:
        raise BoardError(f"{self.path}: {key}: {message}")

    def has(self, name: str) -> bool:
        return name in self.data

    def get(self, name: str, required: bool = True, why: str = "") -> Any:
        self.seen.add(name)
        if name not in self.data:
            if required:
                self.fail(self.key(name), f"missing (required{' ' + why if why else ''})")
            return None
        return self.data[name]

    def string(self, name: str, required: bool = True, choices: Iterable[str] | None = None) -> str | None:
        value = self.get(name, required)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(self.key(name), f"must be a string, got {describe_value(value, 'toml')}")
        if not value.strip():
            self.fail(self.key(name), "must not be empty")
        if choices is not None and value not in choices:
            self.fail(self.key(name), f"must be one of {', '.join(choices)}; got '{value}'")
        return value

    def integer(self, name: str, required: bool = True, minimum: int = 0, maximum: int = _U32 - 1) -> int | None:
        value = self.get(name, required)
        if value is None:
            return None
        if not is_kind(value, int):
            self.fail(self.key(name), f"must be an integer, got {describe_value(value, 'toml')}")
        if not minimum <= value <= maximum:
            self.fail(self.key(name), f"must be between {_num(minimum)} and {_num(maximum)}, got {_num(value)}")
        return value

    def strings(self, name: str, required: bool = True) -> tuple[str, ...] | None:
        value = self.get(name, required)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(self.key(name), f"must be a list of strings, got {describe_value(value, 'toml')}")
        return tuple(value)

    def table(self, name: str, required: bool = True, why: str = "") -> "_Table | None":
        value = self.get(name, required, why)
        if value is None:
            return None
        return _Table(self.path, self.key(name), value)

    def tables(self, name: str) -> list["_Table"]:
        value = self.get(name, required=False)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(self.key(name), f"must be an array of tables, got {describe_value(value, 'toml')}")
        return [_Table(self.path, f"{self.key(name)}[{i}]", item) for i, item in enumerate(value)]

    def forbid(self, name: str, why: str) -> None:
        if name in self.data:
            self.fail(self.key(name), f"not allowed {why}")

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            self.fail(self.key(extra[0]), "unknown key" + (f" (also: {', '.join(extra[1:])})" if extra[1:] else ""))


def _num(value: int) -> str:
    return f"0x{value:X}" if value >= 0x10000 else str(value)


def _region(t: _Table, name: str) -> MemoryRegion:
    r = t.table(name)
    assert r is not None
    origin = r.integer("origin")
    length = r.integer("length", minimum=1)
    r.done()
    assert origin is not None and length is not None
    if origin + length > _U32:
        t.fail(t.key(name), f"region 0x{origin:X}+0x{length:X} ends beyond the 32-bit address space")
    return MemoryRegion(origin, length)


_VERSION_RE = re.compile(r"^\d+(\.\d+){0,2}(\+\d+)?$")   # imgtool's major.minor.revision+build


def _flashing_extras(f: _Table, memory: Memory) -> dict:
    """The optional data of the other flashing methods a board supports (uf2, probes, MCUboot)."""
    out: dict[str, Any] = {"uf2_family": f.integer("uf2_family", required=False),
                           "pyocd_target": f.string("pyocd_target", required=False),
                           "openocd_config": f.strings("openocd_config", required=False) or ()}
    m = f.table("mcuboot", required=False)
    if m is not None:
        header, slot = m.integer("header_size", minimum=32), m.integer("slot_size", minimum=1)
        align, version = m.integer("align", minimum=1, maximum=32), m.string("version")
        m.done()
        assert header is not None and slot is not None and align is not None and version is not None
        if not _VERSION_RE.match(version):
            m.fail(m.key("version"), f"'{version}' is not major.minor.revision+build (e.g. 1.2.3+4)")
        if memory.flash.length > slot - header:
            m.fail(m.key("slot_size"), f"0x{slot:X} leaves less than memory.flash.length after the 0x{header:X}-byte "
                                       "header: the firmware could outgrow the slot")
        out["mcuboot"] = McubootLayout(header, slot, align, version)
    return out


def _parse(path: Path, data: dict) -> Board:
    """A board file's data, checked section by section; each section is read by one function below."""
    top = _Table(path, "", data)
    name = top.string("name")
    assert name is not None
    if not _NAME_RE.fullmatch(name):
        top.fail("name", f"'{name}' may only use lowercase letters, digits, '.', '_' and '-'")
    if name != path.stem:
        top.fail("name", f"'{name}' must equal the file name without .toml ('{path.stem}')")
    description = top.string("description")
    aliases = _aliases(top, name)
    kind = top.string("kind", choices=KINDS)
    assert description is not None and kind is not None

    cpu = memory = timer = None
    if kind == "host":
        for section in ("cpu", "memory", "timer"):
            top.forbid(section, "for kind = host")
    else:
        cpu = _cpu(_section(top, "cpu", kind))
        memory = _memory(_section(top, "memory", kind))
        timer = _timer(_section(top, "timer", kind))
    console_table = top.table("console")
    assert console_table is not None
    console = _console(console_table, host=kind == "host")
    qemu = flashing = None
    if kind == "qemu":
        qemu = _qemu(_section(top, "qemu", kind))
    else:
        top.forbid("qemu", f"for kind = {kind} (only kind = qemu)")
    if kind == "hardware":
        assert memory is not None
        flashing = _flashing(_section(top, "flashing", kind), memory)
    else:
        top.forbid("flashing", f"for kind = {kind} (only kind = hardware)")
    flash_timing = None
    if kind == "hardware" and top.has("flash_timing"):
        flash_timing = _flash_timing(_section(top, "flash_timing", kind))
    else:
        top.forbid("flash_timing", "for a QEMU or host board (only kind = hardware: a real chip's flash)")
    top.done()
    return Board(name=name, description=description, kind=kind, console=console, cpu=cpu,
                 memory=memory, timer=timer, qemu=qemu, flashing=flashing, aliases=aliases, source=path,
                 flash_timing=flash_timing)


def _section(top: _Table, name: str, kind: str) -> _Table:
    section = top.table(name, why=f"for kind = {kind}")
    assert section is not None
    return section


def _cpu(c: _Table) -> Cpu:
    core = c.string("core")
    cflags = c.strings("cflags")
    float_abi = c.string("float_abi", choices=FLOAT_ABIS)
    elf_machine = c.string("elf_machine")
    c.done()
    assert core and cflags is not None and float_abi and elf_machine
    if not cflags:
        c.fail(c.key("cflags"), "must not be empty")
    for flag in cflags:
        # Flags land in a Makefile recipe: plain compiler options only, nothing a shell would act on.
        if not re.fullmatch(r"-[A-Za-z0-9_=.+,:/-]+", flag):
            c.fail(c.key("cflags"), f"'{flag}' is not a plain compiler option")
        if flag.startswith("-mfloat-abi=") and flag.split("=", 1)[1] != float_abi:
            c.fail(c.key("cflags"), f"'{flag}' contradicts float_abi = '{float_abi}'")
    return Cpu(core, cflags, float_abi, elf_machine)


def _memory(m: _Table) -> Memory:
    flash = _region(m, "flash")
    ram = _region(m, "ram")
    stack_bytes = m.integer("stack_bytes", minimum=256)
    heap_bytes = m.integer("heap_bytes")
    m.done()
    assert stack_bytes is not None and heap_bytes is not None
    if stack_bytes % 8:
        m.fail(m.key("stack_bytes"), f"must be a multiple of 8, got {stack_bytes}")
    if flash.origin < ram.end and ram.origin < flash.end:
        m.fail(m.key("ram"), "overlaps memory.flash")
    if stack_bytes + heap_bytes > ram.length:
        m.fail(m.key("stack_bytes"), "stack_bytes + heap_bytes exceed memory.ram.length")
    return Memory(flash, ram, stack_bytes, heap_bytes)


def _timer(t: _Table) -> Timer:
    systick_hz = t.integer("systick_hz", minimum=1000)
    t.done()
    assert systick_hz is not None
    return Timer(systick_hz)


def _console(con: _Table, host: bool) -> Console:
    uart = con.string("uart", choices=UARTS)
    assert uart is not None
    if host != (uart == "stdio"):
        con.fail(con.key("uart"), "'stdio' is the host console and the host's only one"
                 if host else "'stdio' is only for kind = host")
    if host:
        for key in ("base", "baud", "clock_hz", "init"):
            con.forbid(key, "for the stdio console")
        con.done()
        return Console(uart)
    base = con.integer("base")
    baud = con.integer("baud", minimum=300, maximum=20_000_000)
    clock_hz = con.integer("clock_hz", minimum=1)
    writes = []
    for w in con.tables("init"):
        addr, clear, set_ = w.integer("addr"), w.integer("clear"), w.integer("set")
        w.done()
        assert addr is not None and clear is not None and set_ is not None
        if addr % 4:
            w.fail(w.key("addr"), f"0x{addr:08X} is not 4-byte aligned")
        writes.append(RegisterWrite(addr, clear, set_))
    assert base is not None and baud is not None and clock_hz is not None
    if base % 4:
        con.fail(con.key("base"), f"0x{base:08X} is not 4-byte aligned")
    con.done()
    return Console(uart, base, baud, clock_hz, tuple(writes))


def _flash_timing(t: _Table) -> FlashTiming:
    # The plugin's limits (flashcost.c: FC_MAX_LINES, FC_MAX_READS_PER_LINE).
    timing = FlashTiming(clock_hz=t.integer("clock_hz", minimum=1), wait_states=t.integer("wait_states", maximum=64),
                         read_bytes=t.integer("read_bytes", minimum=1, maximum=64),
                         instruction_cache_lines=t.integer("instruction_cache_lines", maximum=64),
                         data_cache_lines=t.integer("data_cache_lines", maximum=64),
                         reads_per_line=t.integer("reads_per_line", minimum=1, maximum=8))
    t.done()
    return timing


def _qemu(q: _Table) -> Qemu:
    machine = q.string("machine")
    extra = q.strings("extra_args", required=False) or ()
    q.done()
    assert machine
    return Qemu(machine, extra)


def _flashing(f: _Table, memory: Memory) -> Flashing:
    method = f.string("method", choices=FLASH_METHODS)
    address = f.integer("address")
    reset = f.string("reset", choices=RESET_METHODS)
    baud = f.integer("baud", required=False, minimum=1200, maximum=1_000_000)
    chip_id = f.integer("chip_id", required=False)
    notes = f.string("notes", required=False) or ""
    extras = _flashing_extras(f, memory)
    if method == "stm32-uart" and not f.has("sectors"):
        f.get("sectors", why="to know the flash erase layout")  # raises
    groups = []
    for s in f.tables("sectors"):
        count, size = s.integer("count", minimum=1), s.integer("size", minimum=1)
        s.done()
        assert count is not None and size is not None
        groups.append(FlashSectors(count, size))
    f.done()
    assert method and reset and address is not None
    if f.has("sectors") and not groups:
        f.fail(f.key("sectors"), "must list at least one {count, size} group")
    if not memory.flash.contains(address):
        f.fail(f.key("address"), f"0x{address:08X} is outside memory.flash")
    total = sum(g.count * g.size for g in groups)
    if groups and address + total != memory.flash.end:
        f.fail(f.key("sectors"), f"cover 0x{total:X} bytes from 0x{address:08X}, "
                                 f"but memory.flash ends at 0x{memory.flash.end:08X}")
    return Flashing(method, address, reset, tuple(groups), baud or 115200, chip_id, notes, **extras)


def _aliases(top: _Table, name: str) -> tuple[str, ...]:
    aliases = top.strings("aliases", required=False) or ()
    for alias in aliases:
        if not _ALIAS_RE.fullmatch(alias):
            top.fail("aliases", f"'{alias}' may only use lowercase letters, digits, '.', '_', '/' and '-'")
        if alias == name:
            top.fail("aliases", f"'{alias}' is the board's own name")
    return aliases


# ---------------------------------------------------------------------------------------------
# Public API


def load_board_file(path: Path) -> Board:
    """Read and validate one board file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BoardError(f"{path}: cannot read board file ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BoardError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise BoardError(f"{path}: invalid TOML: {str(exc).splitlines()[0]}") from None
    return board_from_data(path, data)


def board_from_data(path: Path, data: dict) -> Board:
    """Validate a board file's parsed TOML (`path` names it in messages and gives the expected name)."""
    return _parse(Path(path), data)


def boards_dir() -> Path:
    return data_dir("boards")


def list_boards() -> list[Board]:
    """Every board shipped with mlfbuild, sorted by name."""
    return sorted((load_board_file(p) for p in sorted(boards_dir().glob("*.toml"))), key=lambda b: b.name)


def load_board(name: str, extra_files: Iterable[Path] = ()) -> Board:
    """The board called `name` (or known by the alias `name`): from `extra_files` (a user's
    --board-file, later files win) if one of them defines it, else from the shipped boards."""
    extra = [load_board_file(Path(p)) for p in extra_files]
    for board in reversed(extra):
        if name == board.name or name in board.aliases:
            return board
    path = boards_dir() / f"{name}.toml"
    if _NAME_RE.fullmatch(name) and path.is_file():
        return load_board_file(path)
    shipped = list_boards()
    for board in shipped:
        if name in board.aliases:
            return board
    known = sorted({b.name for b in shipped} | {b.name for b in extra})
    aliases = [alias for b in shipped + extra for alias in b.aliases]
    raise BoardError(f"unknown board '{name}'{did_you_mean(name, known + aliases)}; "
                     f"known boards: {', '.join(known)}")
