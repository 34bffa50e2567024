"""Every byte of flash and RAM to exactly one owner.

An owner is (category, subcategory, module, file, name): category is one of CATEGORIES; model bytes
also name their MLF module. The source of truth, in order: the compile unit DWARF gives a symbol,
the STT_FILE a local symbol follows, the symbol's name (tvmgen_<mod>_…, mlf_<mod>_…), the section.
Bytes no symbol covers are split further: anonymous literals go to the code that refers to them
(literal pools, MOVW/MOVT pairs, RIP-relative LEA), EHABI unwind entries and constructor tables to
the function they describe, the .stack/.heap reserves to their own categories, and whatever is left
is alignment padding (zero-filled or under 16 bytes) or, rarely, "other" (unnamed bytes nothing
points to).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import numpy as np

from .elf import ElfImage, Section, Symbol
from .references import arm_exidx, thumb_movw_movt, thumb_pc_relative, word_references, x86_rip_relative

CATEGORIES = ("model", "runtime", "board", "app", "libc", "stack", "heap", "padding", "other")
CATEGORY_LABELS = {
    "model": "model (operators, constants, pools, io)",
    "runtime": "runtime (crt)",
    "board": "board (startup, vectors, console)",
    "app": "app (main.c protocol, model table)",
    "libc": "libc / libgcc / toolchain",
    "stack": "stack reserve",
    "heap": "heap reserve",
    "padding": "padding / alignment",
    "other": "other (unnamed, unreferenced)",
}

# crt/src files that port the firmware to a board rather than run the model.
_BOARD_FILES = {"startup_cortexm.c", "platform_cortexm.c", "platform_host.c", "newlib_syscalls.c"}
# Names TVM's generated code uses whatever the module is called.
_MODEL_ENTRY = re.compile(r"^(__tvm_main__|TVMSystemLibEntryPoint|_lookup_linked_param|__tvm_module_ctx|"
                          r"__tvm_dev_mblob.*|tvmgen_.*_(run|run_model|__tvm_main__|get_c_metadata|"
                          r"_lookup_linked_param|entrypoint))$")
_LIB_FILE = re.compile(r"^(?P<mod>.+?)_lib\d+\.(c|cc|o)$")
_PADDING_LIMIT = 16


@dataclass(frozen=True, order=True)
class Owner:
    category: str
    subcategory: str
    module: str  # MLF module for model bytes, "" otherwise
    file: str  # normalised source path, "" when unknown
    name: str  # symbol name, or a "(…)" label for anonymous bytes


@dataclass
class Piece:
    owner: Owner
    section: Section
    size: int


@dataclass
class ModelFacts:
    """What the attribution needs to know about the model, from build.json."""

    modules: tuple[str, ...]
    operators: dict[str, str]  # operator function name -> module
    usmp: dict[str, bool]
    planned: frozenset[str] = frozenset()  # modules whose arena holds a memory plan (lowered graphs)

    @classmethod
    def from_record(cls, record: dict) -> "ModelFacts":
        library = record.get("library") or {}
        modules, operators, usmp = [], {}, {}
        for module in library.get("modules") or []:
            name = module.get("name", "")
            modules.append(name)
            usmp[name] = bool(module.get("usmp"))
            for op in (module.get("memory") or {}).get("operator_functions") or []:
                if op.get("function_name"):
                    operators[op["function_name"]] = name
            if module.get("entry_function"):
                operators.setdefault(module["entry_function"], name)
        if not modules:
            modules = [m.get("name", "") for m in record.get("models") or []]
        planned = frozenset(m.get("name", "") for m in record.get("models") or [] if m.get("memory_plan"))
        return cls(modules=tuple(sorted(modules, key=len, reverse=True)), operators=operators, usmp=usmp,
                   planned=planned)


_IO_BUFFER = re.compile(r"^mlf_.+_(input|output)\d+_data$")


class Classifier:
    def __init__(self, facts: ModelFacts):
        self.facts = facts

    # --- which module ---
    def module_of(self, name: str, path: str | None) -> str:
        facts = self.facts
        for module in facts.modules:  # longest names first, so "kws2" wins over "kws"
            if (name.startswith(f"tvmgen_{module}_") or name.startswith(f"mlf_{module}_")
                    or name == f"mlf_model_{module}"):
                return module
        if name in facts.operators:
            return facts.operators[name]
        if path:
            base = path.rsplit("/", 1)[-1]
            match = _LIB_FILE.match(base)
            if match and match.group("mod") in facts.modules:
                return match.group("mod")
            if base.startswith("model_") and base[6:].rsplit(".", 1)[0] in facts.modules:
                return base[6:].rsplit(".", 1)[0]
        if len(facts.modules) == 1:
            return facts.modules[0]
        return "(shared)"

    # --- which category ---
    def owner(self, sym: Symbol, section: Section) -> Owner:
        path = sym.path or ""
        name = sym.name
        file = path or (sym.file or "")
        category = self._category(name, path, sym.file)
        if category == "model":
            module = self.module_of(name, path)
            return Owner("model", self._model_subcategory(sym, section, path, module), module, file, name)
        if category == "board" and section.name == ".isr_vector":
            return Owner("board", "vector table", "", file, name)
        if category == "libc":
            return Owner("libc", _libc_subcategory(path, sym.file, name), "", file, name)
        if category == "app":
            sub = "model table" if path.endswith("src/models.c") else (path.rsplit("/", 1)[-1] or "app")
            return Owner("app", sub, "", file, name)
        return Owner(category, path.rsplit("/", 1)[-1] or category, "", file, name)

    def _category(self, name: str, path: str, stt_file: str | None) -> str:
        if name in self.facts.operators or name.startswith("tvmgen_") or _MODEL_ENTRY.match(name):
            return "model"
        if name in ("global_workspace", "global_const_workspace") and (not path or path.startswith("model/")):
            return "model"
        if path:
            if path.startswith("model/") or path.endswith(".tir") or path.startswith("lib/"):
                return "model"
            if path.startswith("src/model_") or _ARENA_FILE.fullmatch(path):
                return "model"
            if path == "src/models.c":  # the console's table; the models' I/O buffers count as theirs
                return "model" if name.startswith("mlf_workspace_pool") or _IO_BUFFER.search(name) else "app"
            if path in (_CMSIS_NN_SCRATCH_FILE, _CMSIS_NN_SCRATCH_HEADER):
                return "model"
            if path.startswith(("src/", "app/")):  # our console, or the user's application (build --app)
                return "app"
            if path.startswith("crt/"):
                return "board" if path.rsplit("/", 1)[-1] in _BOARD_FILES else "runtime"
            if path.startswith("tvm_crt/"):
                return "runtime"
            return "libc"
        # No debug information for this symbol: go by name, then by the STT_FILE it follows.
        if name.startswith("mlf_workspace_pool") or name == _CMSIS_NN_SCRATCH:
            return "model"
        if name.startswith("mlf_model_") or name.startswith("mlf_") and any(
                name.startswith(f"mlf_{m}_") for m in self.facts.modules):
            return "model"
        if name.startswith("mlfrt_") or name.startswith("TVM"):
            return "runtime"
        if stt_file in _BOARD_FILES:
            return "board"
        if stt_file in ("main.c", "models.c") or name == "main":
            return "app"
        if stt_file in ("backend.c", "func_registry.c", "mlfrt_common.c"):
            return "runtime"
        if stt_file and (stt_file.startswith("model_") or _LIB_FILE.match(stt_file)):
            return "model"
        return "libc"

    def _model_subcategory(self, sym: Symbol, section: Section, path: str, module: str) -> str:
        name = sym.name
        if path.startswith("lib/"):
            return "kernel library"
        if sym.type == "FUNC":
            if _MODEL_ENTRY.match(name):
                return "executor"
            if path.startswith("src/model_"):
                return "glue"
            return "operators"
        if name == "global_workspace" or name.startswith("global_workspace"):
            return "USMP workspace pool"
        if name == "global_const_workspace" or name.startswith("global_const_workspace"):
            return "constants"
        if name.startswith("mlf_workspace_pool"):
            return "workspace pool"
        if name == _CMSIS_NN_SCRATCH:
            return "CMSIS-NN scratch"
        if path.startswith("src/model_") or name.startswith("mlf_"):
            if name.endswith("_arena"):  # a module's arena: its planned tensors, or only its workspace pool
                return "graph arena" if module in self.facts.planned else "workspace pool"
            if _IO_BUFFER.search(name):
                return "io buffers"
            if re.search(r"_param\d+$", name):
                return "weights (params file)"
            return "glue"
        if section.kind in ("text", "rodata"):
            return "constants"
        return "data"


# The scratch region the model's CMSIS-NN calls share (templates/project/src/mlf_cmsis_nn_scratch.c.j2).
_CMSIS_NN_SCRATCH = "mlf_cmsis_nn_scratch"
_CMSIS_NN_SCRATCH_FILE = "src/mlf_cmsis_nn_scratch.c"
_CMSIS_NN_SCRATCH_HEADER = "src/mlf_cmsis_nn_scratch.h"  # where the region is defined (common: one per image)
_ARENA_FILE = re.compile(r"src/mlf_.+_arena\.c")  # a module's arena, an object of its own (library/mlf_arena.c.j2)


def _libc_subcategory(path: str, stt_file: str | None, name: str) -> str:
    text = path or stt_file or ""
    if "libgcc" in text or name.startswith("__aeabi_") or name.startswith("__gnu_") or re.match(r"^_?_(arm|aeabi)", text):
        return "libgcc"
    if "libm/" in text or "/math/" in text:
        return "libm"
    if text:
        return "libc"
    return "no debug info"


# --- the sweep ------------------------------------------------------------------------------------

_PRIORITY = {"FUNC": 0, "OBJECT": 0, "TLS": 0, "NOTYPE": 1}
_BIND_PRIORITY = {"GLOBAL": 0, "LOCAL": 1, "WEAK": 2}
_POINTER_TABLES = (".init_array", ".fini_array", ".preinit_array", ".ctors", ".dtors")
_NO_REFERRERS = {"constants", "weights (params file)", "USMP workspace pool", "workspace pool", "graph arena",
                 "io buffers"}


@dataclass
class _Span:
    start: int
    end: int
    owner: Owner | None  # None: a gap no symbol covers


def attribute(image: ElfImage, classifier: Classifier) -> list[Piece]:
    """Partition every allocated section in flash or RAM into owned pieces (sizes sum exactly)."""
    by_section: dict[int, list[Symbol]] = {}
    for sym in image.symbols:
        by_section.setdefault(sym.section, []).append(sym)
    spans: dict[int, list[_Span]] = {}
    # Address -> owner of sized symbols, to find who refers to anonymous bytes.
    owner_starts: list[int] = []
    owner_spans: list[_Span] = []
    for section in image.sections:
        if not (section.in_flash or section.in_ram):
            continue
        section_spans = _sweep(section, by_section.get(section.index, []), classifier,
                               image.data(section) if section.has_contents else b"")
        spans[section.index] = section_spans
        for span in section_spans:
            if span.owner is not None and not span.owner.name.startswith("("):
                owner_starts.append(span.start)
                owner_spans.append(span)
    order = sorted(range(len(owner_starts)), key=owner_starts.__getitem__)
    owner_starts = [owner_starts[i] for i in order]
    owner_spans = [owner_spans[i] for i in order]

    def owner_at(address: int) -> Owner | None:
        i = bisect.bisect_right(owner_starts, address) - 1
        if i >= 0 and owner_spans[i].start <= address < owner_spans[i].end:
            return owner_spans[i].owner
        return None

    pieces: list[Piece] = []
    gaps = [(section, span) for section in image.sections if section.index in spans
            for span in spans[section.index] if span.owner is None]
    references = _references(image, gaps, owner_at) if gaps else {}
    for section in image.sections:
        if section.index not in spans:
            continue
        for span in spans[section.index]:
            if span.owner is not None:
                pieces.append(Piece(span.owner, section, span.end - span.start))
            else:
                pieces.extend(_fill_gap(image, section, span, references.get((section.index, span.start), []),
                                        owner_at))
    return pieces


def _sweep(section: Section, symbols: list[Symbol], classifier: Classifier, data: bytes = b"") -> list[_Span]:
    """Sized symbols clipped to the section, earliest first; zero-size functions (assembly without
    .size) own the bytes up to the next symbol, less the zero fill before it; the rest are gaps."""
    start, end = section.addr, section.end
    if section.kind in ("stack", "heap") and not any(s.size for s in symbols):
        label = f"({section.name} reserve)"
        return [_Span(start, end, Owner(section.kind, section.name, "", "", label))]
    ordered = sorted((s for s in symbols if start <= s.addr < end),
                     key=lambda s: (s.addr, -s.size, _PRIORITY.get(s.type, 2), _BIND_PRIORITY.get(s.bind, 3), s.name))
    out: list[_Span] = []
    cursor = start
    anchors = [s for s in ordered if s.size == 0 and s.type == "FUNC"]
    sized = [s for s in ordered if s.size > 0 and (s.type != "NOTYPE" or s.bind != "LOCAL")]
    anchor_starts = [a.addr for a in anchors]
    for sym in sized:
        s_end = min(sym.addr + sym.size, end)
        if s_end <= cursor:
            continue  # an alias or a symbol inside one already counted
        if sym.addr > cursor:
            out.extend(_anchor_gap(cursor, sym.addr, anchors, anchor_starts, section, classifier, data))
        out.append(_Span(max(cursor, sym.addr), s_end, classifier.owner(sym, section)))
        cursor = s_end
    if cursor < end:
        out.extend(_anchor_gap(cursor, end, anchors, anchor_starts, section, classifier, data))
    return out


def _anchor_gap(start: int, end: int, anchors: list[Symbol], anchor_starts: list[int], section: Section,
                classifier: Classifier, data: bytes = b"") -> list[_Span]:
    i = bisect.bisect_left(anchor_starts, start)
    inside = []
    while i < len(anchors) and anchors[i].addr < end:
        if not inside or inside[-1].addr != anchors[i].addr:
            inside.append(anchors[i])
        i += 1
    if not inside:
        return [_Span(start, end, None)]
    out = []
    if inside[0].addr > start:
        out.append(_Span(start, inside[0].addr, None))
    for k, anchor in enumerate(inside):
        stop = inside[k + 1].addr if k + 1 < len(inside) else end
        fill = 0
        if data:  # alignment zeros before the next symbol are padding, not the function's
            while fill < _PADDING_LIMIT - 1 and stop - fill - 1 > anchor.addr \
                    and data[stop - fill - 1 - section.addr] == 0:
                fill += 1
        out.append(_Span(anchor.addr, stop - fill, classifier.owner(anchor, section)))
        if fill:
            out.append(_Span(stop - fill, stop, None))
    return out


def _references(image: ElfImage, gaps: list[tuple[Section, _Span]], owner_at) -> dict[tuple[int, int], list]:
    """For each gap in a section with contents: the (address, owner) pairs of code or small data
    that point into it. Pointers held by model constants or weights are ignored: their bytes are
    numbers, and numbers can look like addresses."""
    content_gaps = [(s, g) for s, g in gaps if s.has_contents and s.kind not in ("text",)]
    if not content_gaps:
        return {}
    content_gaps.sort(key=lambda item: item[1].start)
    starts = np.asarray([g.start for _, g in content_gaps], dtype=np.int64)
    ends = np.asarray([g.end for _, g in content_gaps], dtype=np.int64)
    found: dict[tuple[int, int], list] = {}
    arm = image.machine == "EM_ARM"
    x86 = image.machine == "EM_X86_64"
    for section in image.sections:
        if not section.has_contents or not (section.in_flash or section.in_ram):
            continue
        sources = [word_references(image, section)]
        if section.executable and arm:
            sources.append(thumb_movw_movt(image, section))
            sources.append(thumb_pc_relative(image, section))
        if section.executable and x86:
            sources.append(x86_rip_relative(image, section))
        for where, values in sources:
            if values.size == 0:
                continue
            slot = np.searchsorted(starts, values, side="right") - 1
            valid = slot >= 0
            slot_c = np.where(valid, slot, 0)
            hit = valid & (values < ends[slot_c])
            for address, value, k in zip(where[hit].tolist(), values[hit].tolist(), slot_c[hit].tolist()):
                owner = owner_at(address)
                if owner is None or owner.subcategory in _NO_REFERRERS:
                    continue
                gap_section, gap = content_gaps[k]
                found.setdefault((gap_section.index, gap.start), []).append((value, owner))
    return found


def _fill_gap(image: ElfImage, section: Section, span: _Span, refs: list, owner_at) -> list[Piece]:
    if section.type == "SHT_ARM_EXIDX" or section.name.startswith(".ARM.exidx"):
        return _exidx_pieces(image, section, span, owner_at)
    if section.name in _POINTER_TABLES or section.type in ("SHT_INIT_ARRAY", "SHT_FINI_ARRAY", "SHT_PREINIT_ARRAY"):
        return _pointer_table_pieces(image, section, span, owner_at)
    if section.name.startswith(".ARM.extab"):
        refs = refs + _extab_refs(image, span, owner_at)
    pieces: list[Piece] = []
    if refs:
        refs = sorted(refs, key=lambda r: (r[0], r[1]))
        first = refs[0][0]
        if first > span.start:
            pieces.extend(_leftover(image, section, span.start, first, None))
        points = []
        for value, owner in refs:
            if not points or points[-1][0] != value:
                points.append((value, owner))
        for k, (value, owner) in enumerate(points):
            stop = points[k + 1][0] if k + 1 < len(points) else span.end
            label = "(anonymous literals)" if section.has_contents else "(anonymous data)"
            pieces.append(Piece(Owner(owner.category, owner.subcategory, owner.module, owner.file, label),
                                section, stop - value))
        return pieces
    return _leftover(image, section, span.start, span.end, owner_at)


def _leftover(image: ElfImage, section: Section, start: int, end: int, owner_at) -> list[Piece]:
    """Unowned bytes: alignment padding, or code/data no symbol names."""
    size = end - start
    if size <= 0:
        return []
    if not section.has_contents:
        return [Piece(Owner("padding", section.name, "", "", f"(alignment in {section.name})"), section, size)]
    if section.kind in ("stack", "heap"):
        return [Piece(Owner(section.kind, section.name, "", "", f"({section.name} reserve)"), section, size)]
    data = image.data(section)[start - section.addr:end - section.addr]
    if size < _PADDING_LIMIT or not data.strip(b"\x00"):
        return [Piece(Owner("padding", section.name, "", "", f"(alignment in {section.name})"), section, size)]
    if section.executable and owner_at is not None and start > section.addr:
        before = owner_at(start - 1)
        if before is not None:  # unnamed code right after a function: a local helper of the same file
            return [Piece(Owner(before.category, before.subcategory, before.module, before.file, "(code without symbol)"),
                          section, size)]
    if _is_toolchain_section(section):  # .plt, .got, .eh_frame, .dynamic, .interp, ...: made by the linker
        return [Piece(Owner("libc", "toolchain", "", "", section.name), section, size)]
    return [Piece(Owner("other", section.name, "", "", f"(unnamed bytes in {section.name})"), section, size)]


def _is_toolchain_section(section: Section) -> bool:
    return not section.name.startswith((".text", ".rodata", ".data", ".bss", ".isr_vector"))


def _exidx_pieces(image: ElfImage, section: Section, span: _Span, owner_at) -> list[Piece]:
    pieces, covered = [], 0
    for address, function, _ in arm_exidx(image, section):
        if not span.start <= address < span.end:
            continue
        owner = owner_at(function)
        size = min(8, span.end - address)
        covered += size
        if owner is None:
            owner = Owner("libc", "toolchain", "", "", "(unwind index .ARM.exidx)")
        else:
            owner = Owner(owner.category, owner.subcategory, owner.module, owner.file, "(unwind index .ARM.exidx)")
        pieces.append(Piece(owner, section, size))
    if covered < span.end - span.start:
        pieces.append(Piece(Owner("padding", section.name, "", "", f"(alignment in {section.name})"), section,
                            span.end - span.start - covered))
    return pieces


def _extab_refs(image: ElfImage, span: _Span, owner_at) -> list:
    refs = []
    for section in image.sections:
        if section.type == "SHT_ARM_EXIDX" or section.name.startswith(".ARM.exidx"):
            for _, function, table in arm_exidx(image, section):
                if table is not None and span.start <= table < span.end:
                    owner = owner_at(function)
                    if owner is not None:
                        refs.append((table, owner))
    return refs


def _pointer_table_pieces(image: ElfImage, section: Section, span: _Span, owner_at) -> list[Piece]:
    where, values = word_references(image, section)
    pieces, covered = [], 0
    width = 8 if image.elfclass == 64 else 4
    for address, value in zip(where.tolist(), values.tolist()):
        if not span.start <= address < span.end:
            continue
        owner = owner_at(value & ~1)
        label = f"({section.name} entry)"
        owner = (Owner(owner.category, owner.subcategory, owner.module, owner.file, label) if owner
                 else Owner("libc", "toolchain", "", "", label))
        size = min(width, span.end - address)
        covered += size
        pieces.append(Piece(owner, section, size))
    if covered < span.end - span.start:
        pieces.append(Piece(Owner("libc", "toolchain", "", "", section.name), section, span.end - span.start - covered))
    return pieces
