"""Which object file the linker took each input section from, read from GNU ld's map file.

DWARF names the source of everything the compiler described, but not symbols that inline or
top-level assembly defines (a table in `__asm__`, a hand-written routine): those would fall to
"libc". The map the build writes beside the ELF (`-Wl,-Map`) names the object of every input
section, so such a symbol is placed by the address range of the section that holds it.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from .elf import Symbol

# " .text.foo  0x00000fb8  0x10 build/model/x.o", or the same with the name alone on the line before.
_INPUT_SECTION = re.compile(r"^ (?P<name>\.\S+)?\s+0x(?P<addr>[0-9a-fA-F]+)\s+0x(?P<size>[0-9a-fA-F]+)\s+(?P<object>\S.*)$")
_NAME_ALONE = re.compile(r"^ \.\S+$")
_BUILD_DIR = "build/"   # the project's object folder (templates/Makefile.j2)


@dataclass(frozen=True)
class InputSection:
    start: int
    end: int
    source: str  # project-relative source path ("model/…/x_lib1.c"), or the library member


def read_link_map(path: Path) -> list[InputSection]:
    """Input sections with bytes, sorted by address; [] when there is no readable map."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    _, found, body = text.partition("\nLinker script and memory map\n")
    sections: list[InputSection] = []
    after_name = False
    for line in body.splitlines() if found else ():
        match = _INPUT_SECTION.match(line)
        if match and (match["name"] or after_name):
            start, size = int(match["addr"], 16), int(match["size"], 16)
            if size and start > 0:
                sections.append(InputSection(start, start + size, _source_of(match["object"].strip())))
        after_name = bool(_NAME_ALONE.match(line))
    sections.sort(key=lambda s: s.start)
    return sections


def place_unplaced(symbols: list[Symbol], sections: list[InputSection]) -> None:
    """Give symbols no DWARF or STT_FILE placed the source of the input section holding them."""
    starts = [s.start for s in sections]
    for sym in symbols:
        if sym.path is not None or sym.size == 0 or sym.type == "NOTYPE" or sym.addr == 0:
            continue
        i = bisect.bisect_right(starts, sym.addr) - 1
        if i >= 0 and sym.addr < sections[i].end:
            sym.path = sections[i].source


def _source_of(obj: str) -> str:
    """build/model/codegen/host/src/m_lib1.o → model/codegen/host/src/m_lib1.c (as DWARF names it);
    a library member (libc_nano.a(lib_a-memcpy.o)) stays as the linker wrote it."""
    if obj.startswith(_BUILD_DIR) and obj.endswith(".o"):
        return obj[len(_BUILD_DIR):-2] + ".c"
    return obj
