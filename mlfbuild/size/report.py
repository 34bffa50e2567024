"""The size report: regions, categories, symbols, per-module predicted vs linked, budgets, peaks.

`size_report(elf, record)` reads the linked ELF and build.json's description of the model and the
board — nothing else (no map file, no toolchain binaries), so it works on any machine that has the
two files.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError

from ..errors import InvalidInputError, OverBudgetError
from .attribution import CATEGORIES, Classifier, ModelFacts, Owner, Piece, attribute
from .elf import ElfImage, Region, load_elf
from .facts import Item, MemoryRow, ModuleReport, OperatorRow, RegionUsage, SizeFacts
from .html import format_html
from .linkmap import place_unplaced, read_link_map
from .render import budget_table, format_markdown, format_short, format_text

WARN_FRACTION = 0.90


class SizeReport(SizeFacts):
    """The size report of a linked firmware: its facts, the forms that show them, and the budget verdict."""

    def raise_if_over_budget(self) -> None:
        """OverBudgetError (exit 5) with the table when flash or RAM exceed their budget."""
        over = self.over_budget
        if not over:
            return
        parts = [f"{r.name} {r.used:,} B > {r.budget:,} B by {r.over_by:,} B" for r in over]
        raise OverBudgetError(f"the firmware does not fit: {'; '.join(parts)}", table=budget_table(self))

    def format_short(self) -> str:
        return format_short(self)

    def format_text(self, top: int = 20) -> str:
        return format_text(self, top=top)

    def format_markdown(self, top: int = 10) -> str:
        return format_markdown(self, top=top)

    def format_html(self, changes=None) -> str:
        """The HTML page; `changes` (a SizeDiff against a base) puts what changed first."""
        return format_html(self, changes)


# --- building the report -----------------------------------------------------------------------

def board_regions(record: dict) -> dict[str, Region] | None:
    memory = (record.get("board") or {}).get("memory")
    if not memory:
        return None
    try:
        return {name: Region(name, int(memory[name]["origin"]), int(memory[name]["length"])) for name in ("flash", "ram")}
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError("build.json: board.memory must give flash and ram as {origin, length}") from None


def size_report(elf: Path, record: dict, *, budget_flash: int | None = None, budget_ram: int | None = None,
                measured: dict[str, int] | None = None, profiles: list[dict] | None = None) -> SizeReport:
    """Attribute every byte of `elf` (flash and RAM) and join it with the model and board in
    `record` (build.json). Never raises for a budget: call `raise_if_over_budget()`."""
    if not isinstance(record, dict):
        raise InvalidInputError("build.json: not a JSON object")
    regions = board_regions(record)
    image = load_elf(Path(elf), regions)
    place_unplaced(image.symbols, read_link_map(Path(elf).with_suffix(".map")))
    try:
        report = _report(image, record, regions, budget_flash, budget_ram, measured)
        report.profiles = list(profiles or [])
        report.prepared = _prepared_calls(record)
        report.replaced_loops = _replaced_loops(record)
        return report
    except ELFError as exc:  # section contents that the headers promise but the file lacks
        raise InvalidInputError(f"{elf}: not a readable ELF image ({exc})") from None
    finally:
        image.close()


def _report(image: ElfImage, record: dict, regions, budget_flash, budget_ram, measured) -> SizeReport:
    facts = ModelFacts.from_record(record)
    pieces = attribute(image, Classifier(facts))
    items = _items(pieces)
    berkeley = {"text": 0, "data": 0, "bss": 0}
    for section in image.sections:
        berkeley[section.berkeley] += section.size
    flash = _region("flash", image, pieces, regions, budget_flash)
    ram = _region("ram", image, pieces, regions, budget_ram)
    notes: list[str] = []
    warnings: list[str] = []
    _explain_berkeley(image, berkeley, flash, ram, notes)
    if not image.has_dwarf:
        notes.append("the ELF has no DWARF: bytes are attributed by symbol names and STT_FILE entries only")
    other = sum(i.flash + i.ram for i in items if i.category == "other")
    if other:
        notes.append(f"{other:,} B could not be given an owner (unnamed bytes nothing refers to): category 'other'")
    for region in (flash, ram):
        if region.budget is not None and region.over_by == 0 and region.fraction is not None \
                and region.fraction > WARN_FRACTION:
            warnings.append(f"{region.name} is {100 * region.fraction:.1f} % full ({region.used:,} of "
                            f"{region.budget:,} B; warning above {100 * WARN_FRACTION:.0f} %)")
    modules = _modules(record, items)
    measured_rows = _measured(measured, image, items, record, warnings)
    board = record.get("board") or {}
    mlf = record.get("mlf") or {}
    build = {"board": board.get("name"), "toolchain": record.get("toolchain"),
             "mlf": {"name": mlf.get("name"), "sha256": mlf.get("sha256"), "version": mlf.get("version")},
             "mlfbuild_version": record.get("mlfbuild_version"), "templates": record.get("templates"),
             "runtime": record.get("runtime"), "cflags": (record.get("flags") or {}).get("cflags")}
    return SizeReport(elf_name=image.path.name, machine=image.machine, build=build, flash=flash, ram=ram,
                      berkeley=berkeley, items=items, modules=modules, measured=measured_rows,
                      warnings=warnings, notes=notes, stack=_stack(record, image, measured, warnings))


def _prepared_calls(record: dict) -> list[dict]:
    """build.json's CMSIS-NN calls prepared at build time (cmsis_nn.scratch.prepared), as recorded."""
    scratch = (record.get("cmsis_nn") or {}).get("scratch") or {}
    prepared = scratch.get("prepared") if isinstance(scratch, dict) else None
    return [p for p in prepared if isinstance(p, dict)] if isinstance(prepared, list) else []


def _replaced_loops(record: dict) -> list[dict]:
    """build.json's loops of TVM's code replaced at build time (models[].replaced_loops), as recorded."""
    models = record.get("models")
    return [loop for model in (models if isinstance(models, list) else []) if isinstance(model, dict)
            for loop in (model.get("replaced_loops") or []) if isinstance(loop, dict)]


def _stack(record: dict, image: ElfImage, measured: dict | None, warnings: list[str]) -> dict | None:
    """The stack: gcc's static bound (build.json "stack"), the linked reserve and the last run's peak."""
    static = record.get("stack")
    if not static:
        return None
    reserve = sum(s.size for s in image.sections if s.kind == "stack")
    peak = (measured or {}).get("stack_peak")
    summary = {"bound": static.get("bound"), "reserve": reserve, "reserve_source": static.get("reserve_source"),
               "margin": static.get("margin"), "exception_frame": static.get("exception_frame"),
               "path": static.get("path") or [], "unbounded": static.get("unbounded") or [],
               "measured_peak": int(peak) if peak is not None else None}
    bound = summary["bound"]
    if bound is None:
        warnings.append("no static stack bound (" + "; ".join(summary["unbounded"] or ["unknown"]) + f"): the "
                        f"reserve of {reserve:,} B comes from the {summary['reserve_source']}")
    elif summary["measured_peak"] is not None and summary["measured_peak"] > bound:
        warnings.append(f"measured stack peak {summary['measured_peak']:,} B exceeds the static bound of {bound:,} B")
    if bound is not None and reserve < bound:
        warnings.append(f"the stack reserve ({reserve:,} B) is below the static bound ({bound:,} B)")
    return summary


def _items(pieces: list[Piece]) -> list[Item]:
    table: dict[Owner, Item] = {}
    for piece in pieces:
        owner = piece.owner
        item = table.get(owner)
        if item is None:
            item = table[owner] = Item(owner.category, owner.subcategory, owner.module, owner.file, owner.name)
        if piece.section.in_flash:
            item.flash += piece.size
        if piece.section.in_ram:
            item.ram += piece.size
        item.sections.add(piece.section.name)
    # Two owners that differ only in subcategory (never in practice) would share a key: merge them.
    merged: dict[str, Item] = {}
    for item in table.values():
        if item.key in merged:
            other = merged[item.key]
            other.flash += item.flash
            other.ram += item.ram
            other.sections |= item.sections
        else:
            merged[item.key] = item
    return list(merged.values())


def _region(name: str, image: ElfImage, pieces: list[Piece], regions, budget: int | None) -> RegionUsage:
    inside = [s for s in image.sections if (s.in_flash if name == "flash" else s.in_ram)]
    by_kind: dict[str, int] = defaultdict(int)
    for section in inside:
        by_kind[section.kind] += section.size
    by_category = {c: 0 for c in CATEGORIES}
    for piece in pieces:
        if piece.section.in_flash if name == "flash" else piece.section.in_ram:
            by_category[piece.owner.category] += piece.size
    total = regions[name].length if regions else None
    limits = [v for v in (total, budget) if v is not None]
    return RegionUsage(name=name, used=sum(s.size for s in inside), total=total,
                       budget=min(limits) if limits else None,
                       sections=[{"name": s.name, "kind": s.kind, "size": s.size, "address": s.lma if name == "flash" else s.addr}
                                 for s in inside],
                       by_kind=dict(by_kind), by_category={k: v for k, v in by_category.items() if v})


def _explain_berkeley(image: ElfImage, berkeley: dict, flash: RegionUsage, ram: RegionUsage, notes: list[str]) -> None:
    if flash.used != berkeley["text"] + berkeley["data"]:
        notes.append(f"flash used {flash.used:,} B differs from arm-none-eabi-size text+data "
                     f"({berkeley['text'] + berkeley['data']:,} B): some loadable section is outside the board's flash")
    writable_in_flash = [s for s in image.sections if s.berkeley == "data" and s.in_flash and not s.in_ram]
    if writable_in_flash:
        total = sum(s.size for s in writable_in_flash)
        names = ", ".join(f"{s.name} ({s.size:,} B)" for s in writable_in_flash)
        notes.append(f"arm-none-eabi-size counts {names} as data, and so as RAM, but it lives in flash: a writable "
                     f"input section (TVM before 0.17 declares its USMP constant pool in .rodata.tvm without const) "
                     f"made it writable. RAM used here is data+bss minus {total:,} B; marking the output section "
                     f"(READONLY) in the linker script makes the two agree")
    elif ram.used != berkeley["data"] + berkeley["bss"]:
        notes.append(f"RAM used {ram.used:,} B differs from arm-none-eabi-size data+bss "
                     f"({berkeley['data'] + berkeley['bss']:,} B)")


# --- per module: predicted vs linked, operators ----------------------------------------------------

# Where a user reads why TVM's figures differ from what is linked.
_SECTION_REF = "see docs/size-report.md"


def _modules(record: dict, items: list[Item]) -> list[ModuleReport]:
    library = record.get("library") or {}
    lowered = {m.get("name"): m for m in record.get("models") or []}
    modules = library.get("modules") or []
    by_module: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    functions: dict[str, int] = defaultdict(int)
    for item in items:
        if item.category != "model":
            continue
        slot = by_module[item.module][item.subcategory]
        slot[0] += item.flash
        slot[1] += item.ram
        if item.subcategory in ("operators", "executor") and not item.name.startswith("("):
            functions[item.name] += item.flash
    pool = sum(v[1] for subs in by_module.values() for s, v in subs.items() if s == "workspace pool")
    pool_users = [m.get("name") for m in record.get("models") or [] if m.get("workspace_bytes")]
    out = []
    for module in modules:
        name = module.get("name", "")
        subs = by_module.get(name, {})
        rows = _memory_rows(module, lowered.get(name, {}), dict(subs), pool, pool_users)
        out.append(ModuleReport(
            name=name, executor=module.get("executor") or "operator", usmp=bool(module.get("usmp")),
            flash=sum(v[0] for v in subs.values()), ram=sum(v[1] for v in subs.values()),
            by_subcategory={s: {"flash": v[0], "ram": v[1]} for s, v in sorted(subs.items())},
            memory=rows, operators=_operators(module, functions), pool=_pool_with_plan(lowered.get(name, {}))))
    if "(shared)" in by_module and len(modules) > 1:
        subs = by_module["(shared)"]
        out.append(ModuleReport(name="(shared)", executor="", usmp=False, flash=sum(v[0] for v in subs.values()),
                                ram=sum(v[1] for v in subs.values()),
                                by_subcategory={s: {"flash": v[0], "ram": v[1]} for s, v in sorted(subs.items())},
                                memory=[], operators=[]))
    return out


def _operators(module: dict, functions: dict[str, int]) -> list[OperatorRow]:
    listed = (module.get("memory") or {}).get("operator_functions") or []
    rows, seen = [], set()
    for op in listed:
        fname = op.get("function_name", "")
        seen.add(fname)
        rows.append(OperatorRow(fname, op.get("workspace_size_bytes"), functions.get(fname), True))
    name = module.get("name", "")
    prefix = f"tvmgen_{name}_"
    for fname, size in sorted(functions.items()):
        if fname in seen:
            continue
        if fname.startswith(prefix) or (module.get("entry_function") == fname):
            rows.append(OperatorRow(fname, None, size, False))
    return rows


@dataclass
class _LinkedModule:
    """What the image holds for one module, beside which TVM's memory summary is explained."""
    executor: str
    usmp: bool
    tensors: int  # bytes of its inputs and outputs
    usmp_pool: int
    module_pool: int  # its TVMBackendAllocWorkspace pool (possibly shared)
    arena: int
    io: int
    constants: int
    weights: int
    plan: dict
    pool_users: list
    pool: dict  # build.json's workspace_pool
    io_in_pool: bool = False  # inputs and outputs are tensors of its USMP pool (tvmgen_<mod>_map_inputs)


def _pool_with_plan(model: dict) -> dict | None:
    """build.json's workspace_pool, with the memory plan and layer kernels an imported model was made
    with (--memory, --kernels; an MLF from before --kernels: cmsis-nn)."""
    imported = model.get("imported_from") or {}
    pool, plan = model.get("workspace_pool"), imported.get("memory")
    if pool is None or not plan:
        return pool
    return dict(pool, memory_plan=plan, kernels=imported.get("kernels", "cmsis-nn"))


def _memory_rows(module: dict, lowered: dict, linked: dict, pool: int, pool_users: list) -> list[MemoryRow]:
    def get(sub: str, index: int) -> int:
        return linked.get(sub, [0, 0])[index]

    own_pool = get("workspace pool", 1)
    facts = _LinkedModule(
        executor=module.get("executor") or "operator", usmp=bool(module.get("usmp")),
        tensors=sum(t.get("size_bytes") or 0 for t in (module.get("inputs") or []) + (module.get("outputs") or [])),
        usmp_pool=get("USMP workspace pool", 1),
        module_pool=own_pool if own_pool else (pool if lowered.get("workspace_bytes") else 0),
        arena=get("graph arena", 1), io=get("io buffers", 1), constants=get("constants", 0),
        weights=get("weights (params file)", 0), plan=lowered.get("memory_plan") or {}, pool_users=pool_users,
        pool=lowered.get("workspace_pool") or {}, io_in_pool=bool(module.get("io_in_pool")))
    memory = (module.get("memory") or {}).get("main") or []
    if not memory:  # operator style: no main function, so no summary; still show what is linked
        if not (facts.module_pool or facts.io):
            return []
        return [MemoryRow("workspace", 1, None, facts.module_pool,
                          "operator export: no memory summary; TVMBackendAllocWorkspace pool sized from the allocation sites"),
                MemoryRow("io", 1, None, facts.io, f"operator export: one static buffer per argument ({facts.tensors:,} B)")]
    rows: list[MemoryRow] = []
    for entry in memory:
        device = int(entry.get("device", 1))
        ws, cs, ios = (int(entry.get(k) or 0) for k in ("workspace_size_bytes", "constants_size_bytes", "io_size_bytes"))
        if device != 1:
            rows += [MemoryRow(kind, device, value, None, f"device type {device} is not the CPU: not part of this firmware")
                     for kind, value in (("workspace", ws), ("constants", cs), ("io", ios))]
            continue
        rows += [_workspace_row(ws, device, facts), _constants_row(cs, device, facts), _io_row(ios, device, facts)]
    return rows


def _workspace_row(ws: int, device: int, f: _LinkedModule) -> MemoryRow:
    if f.executor == "graph":
        if f.module_pool:
            text = (f"graph executor: activations in mlfbuild's planned arena ({f.arena:,} B, inputs and outputs "
                    f"inside) + operator scratch in the TVMBackendAllocWorkspace pool ({f.module_pool:,} B); TVM's "
                    f"figure is sized for its own graph runtime")
        else:
            text = (f"graph executor: one arena planned by mlfbuild ({f.arena:,} B; floor {f.plan.get('floor_bytes', 0):,} B) "
                    f"holds activations, inputs, outputs and each operator's scratch, sharing bytes where "
                    f"lifetimes do not meet; TVM's figure is sized for its own graph runtime")
        return MemoryRow("workspace", device, ws, f.arena + f.module_pool, text)
    if f.usmp:
        diff = f.usmp_pool - ws
        if f.usmp_pool == 0:
            text = "USMP on but no pool in the image (external pools, or nothing to plan)"
        elif f.pool.get("replanned"):
            text = (f"USMP pool global_workspace re-planned by mlfbuild from {f.pool.get('producer', 'TVM')}'s "
                    f"{f.pool['tvm_bytes']:,} B to "
                    f"{f.pool['bytes']:,} B (floor {f.pool['floor_bytes']:,} B): regions share bytes where "
                    f"their lifetimes do not meet")
        elif diff == 0 and f.pool.get("reason"):
            text = (f"USMP pool global_workspace as {f.pool.get('producer', 'TVM')} laid it out (not re-planned: "
                    f"{f.pool['reason']})")
        elif diff == 0:
            text = "USMP pool global_workspace, exactly as planned"
        else:
            text = f"USMP pool global_workspace {'+' if diff > 0 else ''}{diff:,} B vs the summary (alignment)"
        if f.module_pool:
            text += f"; plus the TVMBackendAllocWorkspace pool ({f.module_pool:,} B)"
        return MemoryRow("workspace", device, ws, f.usmp_pool + f.module_pool, text)
    slack = f.module_pool - ws
    if f.pool.get("floor_bytes") is not None:
        text = (f"no USMP: TVM sized this for a stack allocator; the TVMBackendAllocWorkspace pool holds the "
                f"peak the code's allocations reach, replayed call by call ({f.pool['floor_bytes']:,} B)")
    else:
        text = (f"no USMP: TVM sized this for a stack allocator (largest operator workspace + main's "
                f"intermediates); the TVMBackendAllocWorkspace pool adds {slack:,} B of alignment slack "
                f"(16 B per allocation site)")
    if len(f.pool_users) > 1:
        text += f", shared by {len(f.pool_users)} modules and sized for the largest"
    return MemoryRow("workspace", device, ws, f.module_pool, text)


def _constants_row(cs: int, device: int, f: _LinkedModule) -> MemoryRow:
    linked_constants = f.constants + f.weights
    if f.weights and not f.constants:
        text = (f"weights from the params file, linked into flash by mlfbuild as 16-B aligned const arrays"
                f"{' (+' + format(f.weights - cs, ',') + ' B)' if f.weights != cs else ''}")
    elif f.usmp and f.constants and f.constants == cs:
        text = "USMP constant pool global_const_workspace, exactly as predicted"
    elif cs == 0 and linked_constants:
        text = (f"TVM reports 0 without a USMP constant pool, although the constants are compiled into the "
                f"kernels ({_SECTION_REF})")
    elif linked_constants == cs:
        text = "as predicted"
    elif linked_constants == 0:
        text = "no constants in the image (params loaded at run time, or none)"
    else:
        diff = linked_constants - cs
        text = (f"{'+' if diff > 0 else ''}{diff:,} B: constant arrays are aligned (16 B each) and the "
                f"summary counts main's constants only")
    return MemoryRow("constants", device, cs, linked_constants, text)


def _io_row(ios: int, device: int, f: _LinkedModule) -> MemoryRow:
    if f.io_in_pool:
        text = (f"inputs and outputs inside the USMP pool global_workspace (tensors {f.tensors:,} B, at the "
                f"offsets the module's map_inputs/map_outputs give): no buffers of their own")
        if f.io:
            text += f"; {f.io:,} B of io buffers linked all the same"
        return MemoryRow("io", device, ios, f.io, text)
    if f.executor == "graph":
        text = f"graph executor: inputs and outputs live inside the planned arena (tensors {f.tensors:,} B)"
        return MemoryRow("io", device, ios, f.io, text)
    if ios == f.tensors:
        text = "one static buffer per input and output, as predicted"
    elif ios == 2 * f.tensors:
        text = (f"TVM's AOT io_size_bytes counts inputs and outputs twice ({_SECTION_REF}); buffers are "
                f"sized from the per-tensor sizes ({f.tensors:,} B)")
    else:
        text = (f"TVM's AOT io_size_bytes is not inputs+outputs ({_SECTION_REF}); buffers are sized from "
                f"the per-tensor sizes ({f.tensors:,} B)")
    if f.io and f.io != f.tensors:
        text += f"; {f.io - f.tensors:+,} B vs the tensors"
    return MemoryRow("io", device, ios, f.io, text)


# --- measured peaks --------------------------------------------------------------------------------

_MEASURED_LABELS = {"stack_peak": "stack high-water mark", "workspace_peak": "workspace peak",
                    "heap_peak": "heap peak"}


def _measured(measured: dict | None, image: ElfImage, items: list[Item], record: dict, warnings: list[str]) -> list[dict]:
    if not measured:
        return []
    stack = sum(s.size for s in image.sections if s.kind == "stack")
    if not stack:
        stack = int(((record.get("board") or {}).get("memory") or {}).get("stack_bytes") or 0)
    heap = sum(s.size for s in image.sections if s.kind == "heap")
    pool = sum(i.ram for i in items if i.subcategory == "workspace pool")
    static = {"stack_peak": ("stack reserve (.stack)", stack), "workspace_peak": ("TVMBackendAllocWorkspace pool", pool),
              "heap_peak": ("heap reserve (.heap)", heap)}
    rows = []
    for key in sorted(measured):
        value = measured[key]
        if value is None:
            continue
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise InvalidInputError(f"measured {key}: not a byte count ({value!r})") from None
        label, capacity = static.get(key, (None, None))
        row = {"name": key, "label": _MEASURED_LABELS.get(key, key), "measured": value,
               "static_label": label, "static": capacity or None,
               "percent": round(100.0 * value / capacity, 1) if capacity else None,
               "headroom": (capacity - value) if capacity else None}
        rows.append(row)
        if capacity and value > capacity:
            warnings.append(f"measured {row['label']} {value:,} B exceeds the {label} of {capacity:,} B")
        # The workspace pool is sized at the peak the code's allocations reach: full is by design.
        elif capacity and value > WARN_FRACTION * capacity and key != "workspace_peak":
            warnings.append(f"measured {row['label']} {value:,} B is {100.0 * value / capacity:.0f} % of the "
                            f"{label} ({capacity:,} B)")
    return rows
