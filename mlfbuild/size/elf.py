"""What a linked firmware ELF holds, read with pyelftools: allocated sections (with the memory region
each one occupies), sized symbols and the compile unit each symbol came from (DWARF). The scanners that find which
addresses code and data refer to are references.py.

Only headers, the symbol table, the top-level DWARF entries and the bytes of code sections are
read: a 1 MiB image takes a few tens of milliseconds.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import InvalidInputError

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
NOBITS = "SHT_NOBITS"


@dataclass(frozen=True)
class Region:
    name: str  # flash | ram
    origin: int
    length: int

    def contains(self, address: int, size: int = 1) -> bool:
        return self.origin <= address and address + max(size, 1) <= self.origin + self.length


@dataclass
class Section:
    index: int
    name: str
    type: str
    flags: int
    addr: int  # VMA
    lma: int  # load address (from the program headers; = VMA when no segment says otherwise)
    size: int
    in_flash: bool = False  # occupies flash (code, constants, the load image of .data)
    in_ram: bool = False  # occupies RAM (.data, .bss, .noinit, .heap, .stack)
    kind: str = ""  # text | rodata | data | bss | noinit | stack | heap | other

    @property
    def end(self) -> int:
        return self.addr + self.size

    @property
    def writable(self) -> bool:
        return bool(self.flags & SHF_WRITE)

    @property
    def executable(self) -> bool:
        return bool(self.flags & SHF_EXECINSTR)

    @property
    def has_contents(self) -> bool:
        return self.type != NOBITS

    @property
    def berkeley(self) -> str:
        """How GNU size (Berkeley format) counts this section: text, data or bss."""
        if self.executable or not self.writable:
            return "text"
        return "data" if self.has_contents else "bss"


@dataclass
class Symbol:
    index: int
    name: str
    addr: int  # Thumb bit cleared for functions
    size: int
    type: str  # FUNC | OBJECT | NOTYPE | TLS
    bind: str  # LOCAL | GLOBAL | WEAK
    section: int
    file: str | None = None  # STT_FILE basename a local symbol follows
    path: str | None = None  # source file (normalised) from DWARF, when known


@dataclass
class ElfImage:
    path: Path
    machine: str
    elfclass: int
    little_endian: bool
    sections: list[Section]
    symbols: list[Symbol]
    cu_paths: list[str]  # every compile unit's source path (normalised)
    has_dwarf: bool
    _data: dict[int, bytes] = field(default_factory=dict, repr=False)
    _stream: BinaryIO | None = field(default=None, repr=False)
    _elf: ELFFile | None = field(default=None, repr=False)

    def data(self, section: Section) -> bytes:
        if section.index not in self._data:
            self._data[section.index] = self._elf.get_section(section.index).data() if self._elf else b""
        return self._data[section.index]

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            self._elf = None


_UPWARD = re.compile(r"^(\.\./|\./)+")


def normalise_path(path: str, comp_dir: str | None = None) -> str:
    """A stable, machine-independent spelling of a compile unit's source path: project paths stay
    relative (src/main.c), toolchain sources lose their ../../ prefixes (newlib/libc/string/memset.c),
    absolute paths keep only what follows a known root (or their last three parts)."""
    text = path.replace("\\", "/")
    if text.startswith("/"):
        for marker in ("/newlib/", "/libgcc/", "/libstdc++-v3/", "/glibc/", "/picolibc/"):
            position = text.find(marker)
            if position >= 0:
                return text[position + 1:]
        if comp_dir and text.startswith(comp_dir.rstrip("/") + "/"):
            return text[len(comp_dir.rstrip("/")) + 1:]
        parts = [p for p in text.split("/") if p]
        return "/".join(parts[-3:])
    return _UPWARD.sub("", text)


def load_elf(path: Path, regions: dict[str, Region] | None = None) -> ElfImage:
    """Read an ELF image. `regions` (flash, ram) come from the board; without them (host builds)
    sections are put in flash/RAM the way GNU size counts them (text+data / data+bss)."""
    path = Path(path)
    try:
        stream = path.open("rb")
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the ELF ({exc.strerror or exc})") from None
    try:
        elf = ELFFile(stream)
        image = _read(elf, path, regions or {})
    except (ELFError, ValueError, KeyError, IndexError, AssertionError, OSError) as exc:
        stream.close()
        raise InvalidInputError(f"{path}: not a readable ELF image ({exc})") from None
    image._stream, image._elf = stream, elf
    return image


def _read(elf: ELFFile, path: Path, regions: dict[str, Region]) -> ElfImage:
    segments = [(s["p_vaddr"], s["p_paddr"], s["p_memsz"]) for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
    sections: list[Section] = []
    for index, sec in enumerate(elf.iter_sections()):
        flags = sec["sh_flags"]
        if not flags & SHF_ALLOC or sec["sh_size"] == 0 or sec["sh_type"] == "SHT_NULL":
            continue
        addr = sec["sh_addr"]
        lma = addr
        for vaddr, paddr, memsz in segments:
            if vaddr <= addr < vaddr + max(memsz, 1):
                lma = paddr + (addr - vaddr)
                break
        section = Section(index=index, name=sec.name, type=sec["sh_type"], flags=flags, addr=addr, lma=lma,
                          size=sec["sh_size"])
        _place(section, regions)
        sections.append(section)
    symbols = _symbols(elf)
    has_dwarf = elf.has_dwarf_info() and elf.get_section_by_name(".debug_info") is not None
    cu_paths: list[str] = []
    if has_dwarf:
        cu_paths = _attach_dwarf(elf, symbols)
    return ElfImage(path=path, machine=str(elf["e_machine"]), elfclass=elf.elfclass,
                    little_endian=elf.little_endian, sections=sections, symbols=symbols, cu_paths=cu_paths,
                    has_dwarf=has_dwarf)


def _place(section: Section, regions: dict[str, Region]) -> None:
    flash, ram = regions.get("flash"), regions.get("ram")
    name = section.name
    if flash is not None and ram is not None:
        section.in_ram = ram.contains(section.addr, section.size)
        section.in_flash = section.has_contents and flash.contains(section.lma, section.size)
        if not section.in_ram and not section.in_flash:  # outside the board's regions: count as GNU size does
            section.in_flash = section.berkeley in ("text", "data")
            section.in_ram = section.berkeley in ("data", "bss")
    else:
        section.in_flash = section.berkeley in ("text", "data")
        section.in_ram = section.berkeley in ("data", "bss")
    if section.in_ram:
        if name == ".stack" or name.startswith(".stack."):
            section.kind = "stack"
        elif name == ".heap" or name.startswith(".heap."):
            section.kind = "heap"
        elif "noinit" in name:
            section.kind = "noinit"
        elif section.has_contents:
            section.kind = "data"
        else:
            section.kind = "bss"
    elif section.executable:
        section.kind = "text"
    else:
        section.kind = "rodata"


# st_info: type in the low nibble, binding in the high one.
_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 6: "TLS", 10: "FUNC"}  # 10: STT_GNU_IFUNC
_STT_FILE = 4
_BINDS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "GLOBAL"}  # 10: STB_GNU_UNIQUE
_SHN_LORESERVE = 0xFF00


def _symbols(elf: ELFFile) -> list[Symbol]:
    """The symbol table, parsed in one go with numpy (pyelftools' per-symbol parsing is ~100x slower)."""
    table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
    if table is None or table["sh_entsize"] == 0:
        return []
    strtab = elf.get_section(table["sh_link"]).data()
    end = "<" if elf.little_endian else ">"
    if elf.elfclass == 64:
        dtype = np.dtype([("name", end + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", end + "u2"),
                          ("value", end + "u8"), ("size", end + "u8")])
    else:
        dtype = np.dtype([("name", end + "u4"), ("value", end + "u4"), ("size", end + "u4"), ("info", "u1"),
                          ("other", "u1"), ("shndx", end + "u2")])
    raw = table.data()
    if dtype.itemsize != table["sh_entsize"]:
        raise ValueError(f"symbol entries of {table['sh_entsize']} bytes")
    entries = np.frombuffer(raw, dtype=dtype, count=len(raw) // dtype.itemsize)
    thumb = elf["e_machine"] == "EM_ARM"
    out: list[Symbol] = []
    current_file: str | None = None
    names = entries["name"].tolist()
    infos = entries["info"].tolist()
    shndxs = entries["shndx"].tolist()
    values = entries["value"].tolist()
    sizes = entries["size"].tolist()

    def string(offset: int) -> str:
        stop = strtab.find(b"\0", offset)
        return strtab[offset:stop if stop >= 0 else len(strtab)].decode(errors="replace")
    for index in range(len(names)):
        info = infos[index]
        kind = info & 0xF
        if kind == _STT_FILE:
            current_file = string(names[index]) or None
            continue
        symtype = _TYPES.get(kind)
        shndx = shndxs[index]
        if symtype is None or shndx == 0 or shndx >= _SHN_LORESERVE:
            continue
        name = string(names[index])
        if not name or name.startswith("$") or (symtype == "NOTYPE" and name.startswith(".L")):
            continue  # ARM mapping symbols ($t, $d, $a) and assembler-local labels
        bind = _BINDS.get(info >> 4, "GLOBAL")
        value = values[index]
        if symtype == "FUNC" and thumb:
            value &= ~1
        out.append(Symbol(index=index, name=name, addr=value, size=sizes[index], type=symtype, bind=bind,
                          section=shndx, file=current_file if bind == "LOCAL" else None))
    return out


def _die_name(die) -> str | None:
    attr = die.attributes.get("DW_AT_name")
    if attr is not None:
        value = attr.value
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    for ref in ("DW_AT_specification", "DW_AT_abstract_origin"):
        if ref in die.attributes:
            try:
                return _die_name(die.get_DIE_from_attribute(ref))
            except Exception:  # a broken reference only costs the name
                return None
    return None


def _location_address(die, address_size: int) -> int | None:
    attr = die.attributes.get("DW_AT_location")
    if attr is None or attr.form not in ("DW_FORM_exprloc", "DW_FORM_block1", "DW_FORM_block", "DW_FORM_block2",
                                         "DW_FORM_block4"):
        return None
    expr = attr.value
    if len(expr) >= 1 + address_size and expr[0] == 0x03:  # DW_OP_addr
        return int.from_bytes(bytes(expr[1:1 + address_size]), "little")
    return None


def _attach_dwarf(elf: ELFFile, symbols: list[Symbol]) -> list[str]:
    """Give every symbol whose definition DWARF describes its compile unit's source path.

    Matching is by (name, address) against the top-level subprogram and variable entries of each
    unit — never by address alone, because --gc-sections leaves the entries of discarded functions
    pointing at address 0. Function-scope statics (`hex.0`) and symbols without a matching entry
    fall back to the unit's address ranges (functions only) and to the STT_FILE they follow.

    The model's generated units (model/…, thousands of operators in a big model) are only walked
    when a symbol is still unplaced after that: functions are placed by address range and statics
    by STT_FILE, which is all those units define in practice."""
    # A linked image's debug sections hold final values; the relocations a build keeps beside them
    # (--emit-relocs, for the stack bound) must not be applied a second time.
    dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
    by_key: dict[tuple[str, int], str] = {}
    cu_paths: list[str] = []
    cu_offsets: dict[int, str] = {}
    deferred = []
    for cu in dwarf.iter_CUs():
        top = cu.get_top_DIE()
        name_attr = top.attributes.get("DW_AT_name")
        if name_attr is None:
            continue
        raw = name_attr.value.decode(errors="replace") if isinstance(name_attr.value, bytes) else str(name_attr.value)
        comp_dir = top.attributes.get("DW_AT_comp_dir")
        comp = comp_dir.value.decode(errors="replace") if comp_dir is not None and isinstance(comp_dir.value, bytes) else None
        path = normalise_path(raw, comp)
        cu_paths.append(path)
        cu_offsets[cu.cu_offset] = path
        if path.startswith("model/"):
            deferred.append((cu, top, path))
        else:
            _walk_unit(cu, top, path, by_key)
    ranges: list[tuple[int, int, str]] = []
    try:
        aranges = dwarf.get_aranges()
    except Exception:  # malformed .debug_aranges: ranges are only a fallback
        aranges = None
    if aranges is not None:
        for entry in aranges.entries:
            path = cu_offsets.get(entry.info_offset)
            if path is not None and entry.begin_addr > 1 and entry.length > 0:
                ranges.append((entry.begin_addr, entry.begin_addr + entry.length, path))
    ranges.sort()
    starts = [r[0] for r in ranges]
    basenames: dict[str, set[str]] = {}
    for path in cu_paths:
        basenames.setdefault(path.rsplit("/", 1)[-1], set()).add(path)
    deferred_bases = {path.rsplit("/", 1)[-1] for _, _, path in deferred}

    def place(sym: Symbol) -> None:
        path = by_key.get((sym.name, sym.addr))
        if path is None and sym.type == "FUNC" and ranges:
            i = bisect.bisect_right(starts, sym.addr) - 1
            if i >= 0 and ranges[i][0] <= sym.addr < ranges[i][1]:
                path = ranges[i][2]
        if path is None and sym.file:
            candidates = basenames.get(sym.file)
            if candidates and len(candidates) == 1:
                path = next(iter(candidates))
        sym.path = path

    for sym in symbols:
        place(sym)
    unplaced = [s for s in symbols if s.path is None and s.size > 0 and s.type != "NOTYPE"
                and (s.bind != "LOCAL" or s.file in deferred_bases)]
    if deferred and unplaced:
        for cu, top, path in deferred:
            _walk_unit(cu, top, path, by_key)
        for sym in unplaced:
            place(sym)
    return cu_paths


def _walk_unit(cu, top, path: str, by_key: dict[tuple[str, int], str]) -> None:
    address_size = cu["address_size"]
    for die in top.iter_children():
        tag = die.tag
        if tag == "DW_TAG_subprogram":
            low = die.attributes.get("DW_AT_low_pc")
            if low is None:
                continue
            name = _die_name(die)
            if name:
                by_key[(name, low.value)] = path
        elif tag == "DW_TAG_variable":
            address = _location_address(die, address_size)
            if address is None:
                continue
            name = _die_name(die)
            if name:
                by_key[(name, address)] = path
