"""ABI facts of the LLVM object files an MLF may ship (codegen/host/lib/*.o), read with pyelftools."""

from __future__ import annotations

from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import MetadataError
from .model import ObjectFile

# ELF e_flags (ARM EABI): which calling convention the object was built for.
_EF_ARM_ABI_FLOAT_HARD = 0x400


def inspect_object(path: Path, relative: str) -> ObjectFile:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            machine = elf["e_machine"]
            attrs = _arm_attributes(elf) if machine == "EM_ARM" else {}
            hard_flag = bool(elf.header["e_flags"] & _EF_ARM_ABI_FLOAT_HARD)
            symbols, undefined = _symbols(elf)
    except (ELFError, OSError, ValueError, KeyError) as exc:
        raise MetadataError(f"{relative}: not a readable ELF object ({exc})") from None
    # Tag_ABI_VFP_args == 1 means float arguments travel in VFP registers (-mfloat-abi=hard);
    # Tag_FP_arch > 0 means the code itself uses the FPU (hard or softfp).
    has_fpu = int(attrs.get("TAG_FP_ARCH", 0) or 0) > 0
    if attrs.get("TAG_ABI_VFP_ARGS") == 1 or hard_flag:
        float_abi = "hard"
    else:
        float_abi = "softfp" if has_fpu else "soft"
    cpu = attrs.get("TAG_CPU_NAME")
    return ObjectFile(path=relative, machine=str(machine), cpu=str(cpu).lower() if cpu else None,
                      float_abi=float_abi, has_fpu_code=has_fpu, symbols=symbols, undefined=undefined)


def _symbols(elf: ELFFile) -> tuple[frozenset[str], frozenset[str]]:
    """(defined global/weak symbols, undefined symbols) of an object file."""
    table = elf.get_section_by_name(".symtab")
    if table is None or not hasattr(table, "iter_symbols"):
        return frozenset(), frozenset()
    defined, undefined = set(), set()
    for symbol in table.iter_symbols():
        if not symbol.name or symbol["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK"):
            continue
        (undefined if symbol["st_shndx"] == "SHN_UNDEF" else defined).add(symbol.name)
    return frozenset(defined), frozenset(undefined)


def _arm_attributes(elf: ELFFile) -> dict[str, object]:
    section = elf.get_section_by_name(".ARM.attributes")
    found: dict[str, object] = {}
    if section is None or not hasattr(section, "iter_subsections"):
        return found
    for subsection in section.iter_subsections():
        for subsubsection in subsection.iter_subsubsections():
            for attribute in subsubsection.iter_attributes():
                found[str(attribute.tag)] = attribute.value
    return found
