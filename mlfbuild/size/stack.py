"""A static worst-case stack depth for a Cortex-M firmware.

Frames and calls come from gcc itself for every file the project compiles (`-fstack-usage` writes
`<obj>.su`, `-fcallgraph-info=su` writes `<obj>.ci`, gcc >= 10). Code gcc did not compile here
(newlib, libgcc, LLVM objects of the model) and calls gcc cannot see (inline assembly) are read from
the linked image's disassembly (`objdump -d`): the prologue's pushes and `sub sp` give the frame,
branches to other functions give the calls.

Indirect calls (gcc's `__indirect_call`, `blx rN`) may reach any function whose address the image
stores: a word a relocation sets (the link keeps them, `--emit-relocs`) that holds a function's
address — the model table's run functions, constructors, literal pools — or a relocation of another
kind that names a function. The bound takes the deepest of them. A word that merely equals an address
(a weight, a bias) is data, not a candidate: taken for one, it made callers of pointers look
recursive. Exception handlers are never candidates (the core enters them). An exception stacks a
frame on top of the deepest thread path (8 words, 26 with the FPU's lazy state, plus 4 B of
alignment) and runs the deepest interrupt handler; a handler that moves MSP (the fault reporter)
starts from the top of a fresh stack instead.

Branches are read by address, never by objdump's label: a target that starts a function is a call (a
tail call `b` counts as one, which can only raise the bound); any other target is a jump inside a
function (or a cold part's way back into its parent), whatever symbol happens to share its value —
an absolute linker symbol such as `__stack_size` can. Functions gcc folded into another
(identical-code folding at -Os/-O2) are known by the name the image shows at their address.

One recursion libc's own guard bounds — newlib's stdio set-up, `__sinit.part.0 -> __sfp` — is walked
as the chain it can be (the body twice, `libc_guards.py`) once the image's instructions show the guard.

Where no bound exists — recursion, a stack pointer moved by a run-time amount, an indirect call with
no candidate — the result names the functions and has no bound.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile

from .libc_guards import GUARDED, unroll_newlib_sinit

# Words the core stacks on exception entry (ARMv7-M/ARMv8-M ARM, B1.5.6): R0-R3, R12, LR, PC, xPSR,
# plus S0-S15, FPSCR and a reserved word when the FPU context is active; +4 B for STKALIGN.
BASIC_FRAME = 8 * 4 + 4
FPU_FRAME = 26 * 4 + 4
# The reserve is the bound plus this margin (a safety allowance for what static analysis cannot see:
# a debugger's or semihosting's own use, and code paths reached in ways the image does not show).
STACK_MARGIN = 256

_SU_LINE = re.compile(r"^(?P<where>.*):(?P<name>[^:\s]+)\t(?P<bytes>\d+)\t(?P<kind>[\w,]+)$")
_CI_NODE = re.compile(r'node: \{ title: "(?P<title>[^"]+)" label: "[^"]*"')
_CI_EDGE = re.compile(r'edge: \{ sourcename: "(?P<src>[^"]+)" targetname: "(?P<dst>[^"]+)"')
_FUNCTION_HEAD = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$")
_BRANCH_TARGET = re.compile(r"(?:^|,\s*)([0-9a-f]+)(?: <[^>]*>)?$")
_CONDITIONS = "eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al"
_BRANCH = re.compile(rf"(bl?x?|cbn?z)({_CONDITIONS})?")
_REGISTER_LIST = re.compile(r"\{([^}]*)\}")


@dataclass
class Function:
    frame: int | None = None  # bytes of its own frame; None: moved by a run-time amount
    calls: set[str] = field(default_factory=set)
    indirect: bool = False  # calls through a pointer
    fresh_stack: bool = False  # sets MSP itself (runs from the top of a fresh stack)
    source: str = ""  # gcc | objdump


@dataclass(frozen=True)
class StackBound:
    bound: int | None  # bytes; None when it cannot be computed
    thread: int | None  # deepest path from Reset_Handler
    handlers: int | None  # exception frame + deepest interrupt handler on top of it
    exception_frame: int
    path: tuple[str, ...]  # the deepest path (thread, then the handler)
    unbounded: tuple[str, ...]  # why there is no bound: "function: reason"
    from_gcc: int  # functions whose frame gcc reported
    from_objdump: int  # functions read from the disassembly

    def to_json(self) -> dict:
        return {"bound": self.bound, "thread": self.thread, "handlers": self.handlers,
                "exception_frame": self.exception_frame, "path": list(self.path), "unbounded": list(self.unbounded),
                "frames_from_gcc": self.from_gcc, "frames_from_objdump": self.from_objdump}


@dataclass(frozen=True)
class CallDepth:
    """How deep one function's calls go below its caller's stack pointer (its frame and its deepest callee
    chain), without exception frames: what a caller adds to its own depth at the call."""
    bytes: int | None  # None when it cannot be bounded
    path: tuple[str, ...]
    unbounded: tuple[str, ...]  # why there is no bound: "function: reason"

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "path": list(self.path), "unbounded": list(self.unbounded)}


def compute_stack_bound(elf_path: Path, build_dir: Path, objdump: str, fpu: bool) -> StackBound:
    functions, vectors, address_taken = _function_table(elf_path, build_dir, objdump)
    frame = FPU_FRAME if fpu else BASIC_FRAME
    walker = _Walker(functions, address_taken)
    thread, thread_path = walker.depth("Reset_Handler") if "Reset_Handler" in functions else (None, ())
    handler_depths = []
    for handler in sorted(set(vectors) - {"Reset_Handler"}):
        depth, path = walker.depth(handler)
        handler_depths.append((depth, path, functions[handler].fresh_stack))
    stacked = [(d, p) for d, p, fresh in handler_depths if not fresh]
    fresh = [(d, p) for d, p, is_fresh in handler_depths if is_fresh]
    worst_handler = max(stacked, key=lambda item: item[0] or 0, default=(0, ()))
    handlers = None if any(d is None for d, _ in stacked) else frame + (worst_handler[0] or 0)
    bound = None
    if thread is not None and handlers is not None and all(d is not None for d, _ in fresh):
        bound = max([thread + handlers] + [d for d, _ in fresh])
    return StackBound(bound=bound, thread=thread, handlers=handlers, exception_frame=frame,
                      path=tuple(thread_path) + tuple(worst_handler[1]), unbounded=tuple(sorted(walker.unbounded)),
                      from_gcc=sum(1 for f in functions.values() if f.source == "gcc"),
                      from_objdump=sum(1 for f in functions.values() if f.source == "objdump"))


def call_depths(elf_path: Path, build_dir: Path, objdump: str, entries: list[str]) -> dict[str, CallDepth]:
    """The depth of each function in `entries` in the linked image (frames and calls as for the bound)."""
    functions, _, address_taken = _function_table(elf_path, build_dir, objdump)
    depths = {}
    for name in entries:
        walker = _Walker(functions, address_taken)  # one per entry: its reasons are its own
        depth, path = walker.depth(name)
        depths[name] = CallDepth(bytes=depth, path=path, unbounded=tuple(sorted(walker.unbounded)))
    return depths


def _function_table(elf_path: Path, build_dir: Path, objdump: str
                    ) -> tuple[dict[str, Function], list[str], list[str] | None]:
    """Every function of the image with its frame and calls (gcc's reports where it compiled the code,
    the disassembly elsewhere), the vector table's handlers and the address-taken functions."""
    functions, listing = _disassembly(elf_path, objdump)
    in_image = set(functions)
    for name, info in _gcc_reports(build_dir).items():
        if name in functions:
            functions[name].frame = info.frame
            functions[name].calls |= {c for c in info.calls if c in in_image}
            functions[name].indirect |= info.indirect
            functions[name].source = "gcc"
    vectors, address_taken = _vectors_and_address_taken(elf_path, functions)
    unroll_newlib_sinit(functions, listing, _symbol_address(elf_path, "_global_impure_ptr"))
    return functions, vectors, None if address_taken is None else sorted(address_taken)


def stack_reserve(bound: int | None, fallback: int, margin: int = STACK_MARGIN) -> int:
    """The .stack reserve: the bound plus the margin, 8-aligned (AAPCS); the fallback without a bound."""
    if bound is None:
        return fallback
    return (bound + margin + 7) // 8 * 8


class _Walker:
    def __init__(self, functions: dict[str, Function], address_taken: list[str] | None):
        self.functions = functions
        self.address_taken = address_taken
        self.memo: dict[str, tuple[int | None, tuple[str, ...]]] = {}
        self.unbounded: set[str] = set()

    def depth(self, name: str, active: tuple[str, ...] = ()) -> tuple[int | None, tuple[str, ...]]:
        if name in active:
            self.unbounded.add(self._recursion(active[active.index(name):] + (name,)))
            return None, ()
        if name in self.memo:
            return self.memo[name]
        function = self.functions.get(name)
        if function is None:
            self.unbounded.add(f"{name}: called, but not found as a function in the image")
            self.memo[name] = (None, ())
            return self.memo[name]
        if function.frame is None:
            self.unbounded.add(f"{name}: moves the stack pointer by a run-time amount")
            self.memo[name] = (None, ())
            return self.memo[name]
        callees = set(function.calls)
        if function.indirect:
            if self.address_taken is None:
                self.unbounded.add(f"{name}: calls through a pointer, and the image keeps no relocations to "
                                   "tell which addresses it stores (link with -Wl,--emit-relocs)")
                self.memo[name] = (None, ())
                return self.memo[name]
            if not self.address_taken:
                self.unbounded.add(f"{name}: calls through a pointer that no stored address resolves")
                self.memo[name] = (None, ())
                return self.memo[name]
            callees |= set(self.address_taken)
        deepest, deepest_path = 0, ()
        for callee in sorted(callees):
            depth, path = self.depth(callee, active + (name,))
            if depth is None:
                self.memo[name] = (None, ())
                return self.memo[name]
            if depth > deepest:
                deepest, deepest_path = depth, path
        self.memo[name] = (function.frame + deepest, (name,) + deepest_path)
        return self.memo[name]


    def _recursion(self, cycle: tuple[str, ...]) -> str:
        """Why a cycle gives no bound; a step taken only as a call through a pointer is marked, as
        such a call is taken to reach every function whose address the image stores."""
        steps = [cycle[0]]
        for caller, callee in zip(cycle, cycle[1:]):
            steps.append(callee if callee in self.functions[caller].calls else f"(pointer) {callee}")
        text = f"{cycle[0]}: recursion ({' -> '.join(steps)})"
        if len(steps) != sum(1 for s in steps if not s.startswith("(pointer)")):
            text += (", closed by a call through a pointer, which is taken to reach every function whose address "
                     "the image stores (so the cycle may not be real; no bound is claimed)")
        return text


def _gcc_reports(build_dir: Path) -> dict[str, Function]:
    """Frames (.su) and calls (.ci) of every object compiled in `build_dir`, keyed by function name
    (a static function's name may repeat across files: the largest frame and every call are kept)."""
    functions: dict[str, Function] = {}
    for su in sorted(build_dir.rglob("*.su")):
        if not su.with_suffix(".o").is_file():
            continue
        for line in su.read_text(errors="replace").splitlines():
            match = _SU_LINE.match(line)
            if not match:
                continue
            function = functions.setdefault(match["name"], Function(frame=0))
            if match["kind"] == "dynamic":  # alloca or a VLA of unbounded size
                function.frame = None
            elif function.frame is not None:
                function.frame = max(function.frame, int(match["bytes"]))
    for ci in sorted(build_dir.rglob("*.ci")):
        if not ci.with_suffix(".o").is_file():
            continue
        for match in _CI_EDGE.finditer(ci.read_text(errors="replace")):
            source = match["src"].rsplit(":", 1)[-1]
            target = match["dst"].rsplit(":", 1)[-1]
            function = functions.setdefault(source, Function(frame=0))
            if target == "__indirect_call":
                function.indirect = True
            else:
                function.calls.add(target)
    return functions


def _disassembly(elf_path: Path, objdump: str) -> tuple[dict[str, Function], dict[str, list]]:
    """Every function's frame and calls, and the instructions of the functions libc_guards reads."""
    try:
        text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(elf_path)], check=True,
                              capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeError(f"{objdump} could not disassemble {elf_path}: {exc}") from None
    functions: dict[str, Function] = {}
    listing: dict[str, list] = {}
    heads = {int(m.group(1), 16): m.group(2) for m in map(_FUNCTION_HEAD.match, text.splitlines()) if m}
    current: Function | None = None
    name = ""
    for line in text.splitlines():
        head = _FUNCTION_HEAD.match(line)
        if head:
            name = head.group(2)
            current = functions.setdefault(name, Function(frame=0, source="objdump"))
            continue
        match = _INSTRUCTION.match(line)
        if current is None or not match:
            continue
        _read_instruction(current, name, match.group(1), match.group(2), heads)
        if name in GUARDED:
            listing.setdefault(name, []).append((int(line.split(":")[0], 16), match.group(1), match.group(2)))
    return functions, listing


def _read_instruction(function: Function, name: str, mnemonic: str, operands: str, heads: dict[int, str]) -> None:
    """One disassembled instruction of `function`; `heads` names the functions by start address."""
    base = mnemonic.split(".")[0]
    if base in ("push", "stmdb", "stmfd") and (base == "push" or operands.startswith("sp!")):
        function.frame = _add(function.frame, 4 * _count_registers(operands))
    elif base == "vpush":
        registers = _count_registers(operands)
        function.frame = _add(function.frame, registers * (8 if "d" in operands else 4))
    elif base in ("sub", "subw") and operands.startswith("sp,"):
        immediate = re.search(r"#(\d+)", operands)
        function.frame = _add(function.frame, int(immediate.group(1))) if immediate else None
    elif base == "msr" and operands.upper().startswith("MSP"):
        function.fresh_stack = True
    elif re.search(r"\[sp, #-(\d+)\]!", operands):  # pre-indexed store: str lr, [sp, #-4]!
        function.frame = _add(function.frame, int(re.search(r"\[sp, #-(\d+)\]!", operands).group(1)))
    elif _BRANCH.fullmatch(base):
        target = _BRANCH_TARGET.search(operands)
        if target is None:
            if base.startswith(("bx", "blx")):
                function.indirect |= operands.strip() != "lr"
            return
        # Only a function's first instruction is a call target; objdump's label is not trusted.
        callee = heads.get(int(target.group(1), 16))
        if callee is not None and callee != name:
            function.calls.add(callee)


def _add(frame: int | None, amount: int) -> int | None:
    return None if frame is None else frame + amount


def _count_registers(operands: str) -> int:
    match = _REGISTER_LIST.search(operands)
    if not match:
        return 0
    count = 0
    for item in match.group(1).split(","):
        item = item.strip()
        if "-" in item:
            low, high = (int(re.sub(r"\D", "", part)) for part in item.split("-"))
            count += high - low + 1
        elif item:
            count += 1
    return count


# Relocations that make a branch or an unwinding entry, not a stored address (ELF for the Arm
# Architecture, "Relocation codes"): R_ARM_NONE 0, PC24 1, THM_CALL 10, CALL 28, JUMP24 29,
# THM_JUMP24 30, V4BX 40, PREL31 42, THM_JUMP19 51, THM_JUMP6 52, THM_JUMP11 102, THM_JUMP8 103.
_BRANCH_RELOCATIONS = {0, 1, 10, 28, 29, 30, 40, 42, 51, 52, 102, 103}
# Relocations whose word in the image is the absolute address itself: R_ARM_ABS32, R_ARM_TARGET1.
_ABSOLUTE_WORD = {2, 38}


def _vectors_and_address_taken(elf_path: Path, functions: dict[str, Function]) -> tuple[list[str], set[str] | None]:
    """The vector table's handlers, and the functions whose address the image stores (None when the
    image keeps no relocations to tell)."""
    with open(elf_path, "rb") as stream:
        elf = ELFFile(stream)
        symtab = elf.get_section_by_name(".symtab")
        symbols = list(symtab.iter_symbols()) if symtab else []
        by_address: dict[int, str] = {}
        for symbol in symbols:
            if symbol["st_info"]["type"] == "STT_FUNC" and symbol.name in functions:
                by_address.setdefault(symbol["st_value"] & ~1, symbol.name)
        vector_section = elf.get_section_by_name(".isr_vector")
        vectors = {by_address[word & ~1] for word in _words(vector_section.data())[1:]
                   if word & 1 and word & ~1 in by_address} if vector_section else set()
        taken: set[str] | None = None
        for relocations in elf.iter_sections():
            if relocations["sh_type"] != "SHT_REL":
                continue
            target = elf.get_section(relocations["sh_info"])
            if not target["sh_flags"] & 0x2:  # debug information: no code reads it
                continue
            taken = taken or set()
            data = target.data() if target["sh_type"] != "SHT_NOBITS" else b""
            for relocation in relocations.iter_relocations():
                kind = relocation["r_info_type"]
                if kind in _BRANCH_RELOCATIONS:
                    continue
                if kind in _ABSOLUTE_WORD:
                    offset = relocation["r_offset"] - target["sh_addr"]
                    address = int.from_bytes(data[offset:offset + 4], "little") & ~1
                else:
                    symbol = symbols[relocation["r_info_sym"]] if relocation["r_info_sym"] < len(symbols) else None
                    if symbol is None or symbol["st_info"]["type"] != "STT_FUNC":
                        continue
                    address = symbol["st_value"] & ~1
                if address in by_address:
                    taken.add(by_address[address])
    # Handlers are entered by the core, not called; a stored word that equals one is taken as data.
    return sorted(vectors), None if taken is None else taken - vectors


def _symbol_address(elf_path: Path, name: str) -> int | None:
    with open(elf_path, "rb") as stream:
        symtab = ELFFile(stream).get_section_by_name(".symtab")
        symbol = symtab.get_symbol_by_name(name) if symtab else None
        return symbol[0]["st_value"] if symbol else None


def _words(data: bytes) -> list[int]:
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data) - 3, 4)]
