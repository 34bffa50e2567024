"""Who points at an address: scanners over a linked image's bytes that find the addresses code and
data refer to (pointer-sized words, Thumb-2 MOVW/MOVT pairs, Thumb PC-relative loads, x86-64
RIP-relative operands) and the ARM unwind index, so that anonymous string literals and constants
get the owner that uses them.
"""

from __future__ import annotations

import numpy as np

from .elf import ElfImage, Section


def word_references(image: ElfImage, section: Section) -> tuple[np.ndarray, np.ndarray]:
    """(addresses of aligned pointer-sized words in `section`, their values)."""
    data = image.data(section)
    width = 8 if image.elfclass == 64 else 4
    start = (-section.addr) % width
    usable = (len(data) - start) // width * width
    if usable <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    dtype = ("<" if image.little_endian else ">") + ("u8" if width == 8 else "u4")
    values = np.frombuffer(data, dtype=dtype, count=usable // width, offset=start).astype(np.int64, copy=False)
    where = section.addr + start + np.arange(values.size, dtype=np.int64) * width
    return where, values


def thumb_movw_movt(image: ElfImage, section: Section) -> tuple[np.ndarray, np.ndarray]:
    """Addresses built with a Thumb-2 MOVW/MOVT pair (LLVM's way to load an address on Cortex-M)."""
    data = image.data(section)
    if len(data) < 8 or not image.little_endian:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    count = len(data) // 2
    hw = np.frombuffer(data, dtype="<u2", count=count).astype(np.int64)
    first = hw[:-1]
    second = hw[1:]
    is_movw = (first & 0xFBF0) == 0xF240
    is_movt = (first & 0xFBF0) == 0xF2C0
    candidates = np.nonzero((is_movw | is_movt) & ((second & 0x8000) == 0))[0]
    if candidates.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    h1, h2 = first[candidates], second[candidates]
    imm = ((h1 & 0xF) << 12) | (((h1 >> 10) & 1) << 11) | (((h2 >> 12) & 7) << 8) | (h2 & 0xFF)
    reg = (h2 >> 8) & 0xF
    top = is_movt[candidates]
    where_out, values_out = [], []
    low: dict[int, tuple[int, int]] = {}
    for position, value, rd, is_top in zip(candidates.tolist(), imm.tolist(), reg.tolist(), top.tolist()):
        if not is_top:
            low[rd] = (position, value)
        elif rd in low and position - low[rd][0] <= 16:  # MOVT within 16 halfwords of its MOVW
            where_out.append(section.addr + position * 2)
            values_out.append((value << 16) | low.pop(rd)[1])
    return np.asarray(where_out, dtype=np.int64), np.asarray(values_out, dtype=np.int64)


def thumb_pc_relative(image: ElfImage, section: Section) -> tuple[np.ndarray, np.ndarray]:
    """Position-independent literals: `ldr rX, [pc, #imm]` loads an offset that a following
    `add rX, pc` turns into an address (LLVM's code for string constants)."""
    data = image.data(section)
    if len(data) < 8 or not image.little_endian:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    hw = np.frombuffer(data, dtype="<u2", count=len(data) // 2).astype(np.int64)
    adds = np.nonzero((hw & 0xFFF8) == 0x4478)[0]
    where_out, values_out = [], []
    base = section.addr
    for position in adds.tolist():
        rd = int(hw[position]) & 7
        for back in range(1, 5):
            k = position - back
            if k < 0:
                break
            word = int(hw[k])
            if (word & 0xF800) == 0x4800 and ((word >> 8) & 7) == rd:
                literal = ((base + k * 2 + 4) & ~3) + (word & 0xFF) * 4
                offset = literal - base
                if 0 <= offset <= len(data) - 4:
                    value = int.from_bytes(data[offset:offset + 4], "little")
                    where_out.append(base + position * 2)
                    values_out.append((base + position * 2 + 4 + value) & 0xFFFFFFFF)
                break
    return np.asarray(where_out, dtype=np.int64), np.asarray(values_out, dtype=np.int64)


def x86_rip_relative(image: ElfImage, section: Section) -> tuple[np.ndarray, np.ndarray]:
    """Targets of `lea reg, [rip + disp32]` (how x86-64 code takes the address of a literal)."""
    data = image.data(section)
    if len(data) < 7:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)
    rex = (raw[:-6] & 0xF0) == 0x40
    hits = np.nonzero(rex & (raw[1:-5] == 0x8D) & ((raw[2:-4] & 0xC7) == 0x05))[0]
    if hits.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    disp = (raw[hits + 3].astype(np.int64) | (raw[hits + 4].astype(np.int64) << 8)
            | (raw[hits + 5].astype(np.int64) << 16) | (raw[hits + 6].astype(np.int64) << 24))
    disp = np.where(disp >= 1 << 31, disp - (1 << 32), disp)
    where = section.addr + hits.astype(np.int64)
    return where, where + 7 + disp


def arm_exidx(image: ElfImage, section: Section) -> list[tuple[int, int, int | None]]:
    """(entry address, function address, .ARM.extab address or None) per EHABI index entry."""
    data = image.data(section)
    out = []
    for offset in range(0, len(data) - 7, 8):
        word0 = int.from_bytes(data[offset:offset + 4], "little")
        word1 = int.from_bytes(data[offset + 4:offset + 8], "little")
        address = section.addr + offset
        function = (address + _prel31(word0)) & 0xFFFFFFFF
        table = None
        if word1 != 1 and not word1 & 0x80000000:
            table = (address + 4 + _prel31(word1)) & 0xFFFFFFFF
        out.append((address, function, table))
    return out


def _prel31(word: int) -> int:
    value = word & 0x7FFFFFFF
    return value - (1 << 31) if value & 0x40000000 else value
