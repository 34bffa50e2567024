"""Text and Markdown forms of a size report: a short one for the end of `mlfbuild build`, a full
one for `mlfbuild size`, a PR-ready Markdown table, and the over-budget table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .markdown import md_code, md_text

if TYPE_CHECKING:  # the report calls these forms; they only read its fields
    from .facts import ModuleReport, RegionUsage, SizeFacts

_BAR_CELLS = 10


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _signed(value: int | None) -> str:
    return "—" if value is None else f"{value:+,}" if value else "0"


def _bar(region: RegionUsage) -> str:
    if not region.budget:
        return ""
    filled = min(_BAR_CELLS, round(_BAR_CELLS * region.used / region.budget))
    if region.used and not filled:
        filled = 1
    return "[" + "#" * filled + "." * (_BAR_CELLS - filled) + "]"


def _percent(region: RegionUsage) -> str:
    return f"{100.0 * region.fraction:.1f} %" if region.fraction is not None else "no limit"


def _category_line(region: RegionUsage, limit: int = 8) -> str:
    parts = sorted(((v, k) for k, v in region.by_category.items() if v), reverse=True)
    return " · ".join(f"{k} {v:,}" for v, k in parts[:limit])


def _short_symbol(name: str, module: str, width: int = 60) -> str:
    prefix = f"tvmgen_{module}_"
    if module and name.startswith(prefix) and len(name) > width:
        name = name[len(prefix):]
    if len(name) <= width:
        return name
    keep = width - 1
    return name[:keep - keep // 2] + "…" + name[len(name) - keep // 2:]  # the end tells _3 from _4


# --- text ------------------------------------------------------------------------------------------

def format_short(report: SizeFacts) -> str:
    """Three or four lines for the end of `mlfbuild build`."""
    board = report.build.get("board") or "?"
    lines = [f"size of {report.elf_name} ({board}):"]
    for region in (report.flash, report.ram):
        limit = f" / {region.budget:,} B" if region.budget else " B"
        lines.append(f"  {region.name:<5} {_bar(region):<12} {region.used:>10,}{limit:<14} {_percent(region):>8}   "
                     f"{_category_line(region)}")
    for region in report.over_budget:
        lines.append(f"  error: {region.name} over budget by {region.over_by:,} B")
    for warning in report.warnings:
        lines.append(f"  warning: {warning}")
    if report.prepared:
        lines.append(f"  CMSIS-NN calls prepared at build time: {_prepared_summary(report.prepared)} (mlfbuild size: why, cost)")
    if report.replaced_loops:
        lines.append(f"  TVM's loops replaced at build time: "
                     f"{'; '.join(_loop_headline(loop) for loop in report.replaced_loops)} (mlfbuild size: why, cost)")
    return "\n".join(lines)


def _loop_headline(loop: dict) -> str:
    return f"{loop.get('function')}: {str(loop.get('kind')).replace('_', ' ')} -> {loop.get('replacement')}"


def replaced_loop_lines(report: SizeFacts) -> list[str]:
    """Each loop of TVM's code replaced at build time: which, why, and what the function costs per
    inference where this build was profiled."""
    if not report.replaced_loops:
        return []
    profiled = _profiled_instructions(report.profiles)
    out = ["", f"TVM's loops replaced at build time ({len(report.replaced_loops)})"]
    for loop in report.replaced_loops:
        out.append(f"  {_loop_headline(loop)}")
        out.append(f"      why: {loop.get('reason')}")
        cost = profiled.get(str(loop.get("function")))
        out.append(f"      {_n(loop.get('bytes'))} B per call; " + (
            f"{cost:,} instructions per inference now (run --profile)" if cost is not None
            else "not profiled (mlfbuild run --profile)"))
    return out


def _prepared_summary(prepared: list[dict]) -> str:
    replaced = [_prepared_headline(c) for c in prepared if c.get("kind") == "replacement"]
    sums = [c for c in prepared if c.get("kind") == "kernel_sums"]
    parts = replaced + ([f"kernel sums of {len(sums)} call(s) in flash "
                         f"({sum(int(c.get('flash_bytes') or 0) for c in sums):,} B)"] if sums else [])
    return "; ".join(parts)


def _prepared_headline(call: dict) -> str:
    """`function: kernel -> replacement` or `function: kernel, kernel sums in flash`."""
    change = (f"-> {call.get('replacement')}" if call.get("kind") == "replacement"
              else "kernel sums in flash" if call.get("kind") == "kernel_sums" else str(call.get("kind")))
    return f"{call.get('function')}: {call.get('kernel')} {change}"


def _profiled_instructions(profiles: list[dict]) -> dict[str, int]:
    """Operator function -> instructions per inference in the last `run --profile` (what it calls included)."""
    return {str(row.get("function")): row["instructions"] for profile in profiles for row in profile.get("rows", [])
            if isinstance(row.get("instructions"), int)}


def prepared_lines(report: SizeFacts) -> list[str]:
    """Each CMSIS-NN call prepared at build time: which, why, the flash it adds, and what the call
    costs per inference where this build was profiled (`run --profile`)."""
    if not report.prepared:
        return []
    profiled = _profiled_instructions(report.profiles)
    out = ["", f"CMSIS-NN calls prepared at build time ({len(report.prepared)})"]
    for call in report.prepared:
        out.append(f"  {_prepared_headline(call)}")
        out.append(f"      why: {call.get('reason')}")
        arrays = ", ".join(map(str, call.get("arrays") or [])) or "no array"
        cost = profiled.get(str(call.get("function")))
        measured = (f"{cost:,} instructions per inference now (run --profile; the call and what it calls)"
                    if cost is not None else "not profiled (mlfbuild run --profile)")
        out.append(f"      flash +{_n(call.get('flash_bytes'))} B ({arrays}); {measured}")
    return out


def format_text(report: SizeFacts, top: int = 20) -> str:
    out: list[str] = []
    b = report.build
    mlf = b.get("mlf") or {}
    sha = (mlf.get("sha256") or "")[:12]
    out.append(f"{report.elf_name}: board {b.get('board') or '?'}, MLF {mlf.get('name') or '?'}"
               f"{f' (sha256 {sha}…)' if sha else ''}, {b.get('toolchain') or 'toolchain ?'}")
    out.append("")
    out.append(f"{'region':<8}{'used':>12}{'budget':>14}{'free':>14}{'use':>10}")
    for region in (report.flash, report.ram):
        free = (region.budget - region.used) if region.budget is not None else None
        out.append(f"{region.name:<8}{region.used:>12,}{_n(region.budget):>14}{_n(free):>14}{_percent(region):>10}  {_bar(region)}")
        if region.total is not None and region.budget is not None and region.budget < region.total:
            out.append(f"{'':<8}(budget tighter than the board's {region.total:,} B)")
    bk = report.berkeley
    out.append(f"arm-none-eabi-size (Berkeley): text {bk['text']:,}  data {bk['data']:,}  bss {bk['bss']:,}; "
               f"flash = text+data, RAM = data+bss, stack and heap reserves included")
    out.append("")
    out.append("sections")
    for region in (report.flash, report.ram):
        for i, section in enumerate(region.sections):
            head = region.name if i == 0 else ""
            kind = "data load image" if region.name == "flash" and section["kind"] == "data" else section["kind"]
            out.append(f"  {head:<6}{section['name']:<22}{kind:<16}{section['size']:>12,}")
    out.append("")
    out.append(f"{'where the bytes go':<52}{'flash':>12}{'ram':>12}")
    for category in report.categories():
        if not category["flash"] and not category["ram"]:
            continue
        out.append(f"  {category['label']:<50}{category['flash']:>12,}{category['ram']:>12,}")
        for sub in category["subcategories"]:
            label = sub["name"] + (f" [{sub['module']}]" if sub["module"] else "")
            out.append(f"      {label:<46}{sub['flash']:>12,}{sub['ram']:>12,}")
    out.append(f"  {'total':<50}{report.flash.used:>12,}{report.ram.used:>12,}")
    for module in report.modules:
        out.extend(_module_text(module))
    out.append("")
    out.append(f"top {top} symbols")
    out.append(f"  {'flash':>9}{'ram':>9}  {'category':<36} name")
    for item in report.top_items(n=top):
        where = f"{item.category}/{item.subcategory}" + (f" [{item.module}]" if item.module else "")
        out.append(f"  {item.flash:>9,}{item.ram:>9,}  {where:<36} {_short_symbol(item.name, item.module)}"
                   f"{'  ' + item.file if item.file else ''}")
    out.extend(prepared_lines(report))
    out.extend(replaced_loop_lines(report))
    if report.stack:
        out.append("")
        out.extend(stack_lines(report.stack))
    if report.measured:
        out.append("")
        out.append("measured on the target vs static")
        for row in report.measured:
            static = (f"{row['static']:,} B {row['static_label']}" if row.get("static")
                      else f"no {row['static_label'] or 'static figure'} in this image")
            pct = f" ({row['percent']} %, headroom {row['headroom']:,} B)" if row.get("percent") is not None else ""
            out.append(f"  {row['label']:<24}{row['measured']:>10,} B  of {static}{pct}")
    if report.warnings or report.notes or report.over_budget:
        out.append("")
    for region in report.over_budget:
        out.append(f"error: {region.name} over budget by {region.over_by:,} B")
    for warning in report.warnings:
        out.append(f"warning: {warning}")
    for note in report.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


def _module_text(module: ModuleReport) -> list[str]:
    out = [""]
    if module.name == "(shared)":
        parts = ", ".join(f"{k} {v['flash'] + v['ram']:,}" for k, v in module.by_subcategory.items())
        out.append(f"shared by all modules: flash {module.flash:,} B, RAM {module.ram:,} B ({parts})")
        return out
    flavour = module.executor + (", USMP" if module.usmp else "")
    out.append(f"model {module.name} ({flavour}): flash {module.flash:,} B, RAM {module.ram:,} B")
    if module.memory:
        out.append(f"  {'predicted vs linked':<14}{'dev':>4}{'metadata':>12}{'linked':>12}{'diff':>12}  why")
        for row in module.memory:
            out.append(f"  {row.kind:<14}{row.device:>4}{_n(row.predicted):>12}{_n(row.linked):>12}"
                       f"{_signed(row.difference):>12}  {row.explanation}")
    if module.pool:
        out.append(f"  workspace pool: {pool_figures(module.pool)}")
        if module.pool.get("live_bytes"):
            out.append(f"  live over the inference: {live_summary(module.pool)}")
    if module.operators:
        listed = sum(1 for o in module.operators if o.in_metadata)
        out.append(f"  operators ({listed} in metadata operator_functions)")
        out.append(f"  {'code B':>9}{'workspace B':>13}  function")
        rows = sorted(module.operators, key=lambda o: (not o.in_metadata, -(o.code_bytes or 0), o.name))
        for op in rows:
            mark = "" if op.in_metadata else "  (not in operator_functions)"
            code = _n(op.code_bytes) if op.code_bytes is not None else "not linked"
            out.append(f"  {code:>9}{_n(op.workspace_bytes):>13}  {_short_symbol(op.name, module.name, 80)}{mark}")
    return out


_BARS = "▁▂▃▄▅▆▇█"
LIVE_COLUMNS = 64  # a long inference's calls are shown as this many columns, each its calls' most


def live_columns(live: list[int], columns: int = LIVE_COLUMNS) -> list[int]:
    """The most bytes live in each of at most `columns` runs of consecutive calls."""
    if len(live) <= columns:
        return list(live)
    return [max(live[i * len(live) // columns:(i + 1) * len(live) // columns]) for i in range(columns)]


def live_summary(pool: dict) -> str:
    """`▁▃█▅▂ peak 24,576 B at call 1 of 28`: the bytes of the pool's regions live during each
    operator call of the inference."""
    live = pool.get("live_bytes") or []
    peak = max(live)
    bars = "".join(_BARS[min(len(_BARS) - 1, value * len(_BARS) // (peak + 1))] for value in live_columns(live))
    plan = f" (memory plan {pool['memory_plan']}" if pool.get("memory_plan") else ""
    plan += (f", {pool['kernels']} kernels)" if pool.get("kernels") else ")") if plan else ""
    return f"{bars} peak {peak:,} B at call {live.index(peak) + 1} of {len(live)}{plan}"


def pool_kind(pool: dict) -> str:
    return "TVMBackendAllocWorkspace" if pool.get("kind") == "allocator" else "USMP global_workspace"


def pool_verdict(pool: dict) -> str:
    if pool.get("kind") == "allocator":
        if pool.get("floor_bytes") is None:
            return f"not sized at its peak: {pool.get('reason')}"
        return "sized at the peak its allocations reach (a stack allocator's floor)"
    if pool.get("replanned"):
        return "re-planned at the liveness floor" if pool.get("bytes") == pool.get("floor_bytes") else "re-planned"
    return f"kept as {pool.get('producer', 'TVM')} laid it out: {pool.get('reason')}"


def pool_figures(pool: dict) -> str:
    """`TVM 72,000 B · mlfbuild 16,000 B · floor 16,000 B (re-planned ...)` for one module's pool: the
    size as its producer (TVM, or mlfbuild's importer) laid it out, as built, and its floor."""
    floor = "not known" if pool.get("floor_bytes") is None else f"{_n(pool.get('floor_bytes'))} B"
    return (f"{pool_kind(pool)}: {pool.get('producer', 'TVM')} {_n(pool.get('tvm_bytes'))} B · "
            f"mlfbuild {_n(pool.get('bytes'))} B · "
            f"floor {floor} ({pool_verdict(pool)})")


def budget_table(report: SizeFacts, top: int = 8) -> str:
    """The table OverBudgetError carries: by how much, and what is biggest in each region over."""
    lines = [f"{'region':<8}{'used':>12}{'budget':>12}{'over by':>12}{'use':>9}"]
    for region in (report.flash, report.ram):
        if region.budget is None:
            continue
        over = f"{region.over_by:+,}" if region.over_by else "fits"
        lines.append(f"{region.name:<8}{region.used:>12,}{region.budget:>12,}{over:>12}{_percent(region):>9}")
    for region in report.over_budget:
        lines.append(f"biggest in {region.name}:")
        for item in report.top_items(region.name, n=top):
            size = item.flash if region.name == "flash" else item.ram
            where = f"{item.category}/{item.subcategory}" + (f" [{item.module}]" if item.module else "")
            lines.append(f"  {size:>10,}  {where:<34} {_short_symbol(item.name, item.module, 50)}")
        categories = sorted(((v, k) for k, v in region.by_category.items() if v), reverse=True)
        lines.append("  by category: " + ", ".join(f"{k} {v:,}" for v, k in categories))
    return "\n".join(lines)


# --- markdown --------------------------------------------------------------------------------------

def format_markdown(report: SizeFacts, top: int = 10) -> str:
    b = report.build
    mlf = b.get("mlf") or {}
    out = [f"### Firmware size: {md_code(mlf.get('name') or report.elf_name)} on {md_code(b.get('board') or '?')}", ""]
    out.append("| region | used | budget | free | use |")
    out.append("|---|---:|---:|---:|---:|")
    for region in (report.flash, report.ram):
        free = (region.budget - region.used) if region.budget is not None else None
        out.append(f"| {region.name} | {region.used:,} | {_n(region.budget)} | {_n(free)} | {_percent(region)} |")
    out.append("")
    out.append("| category | flash | RAM |")
    out.append("|---|---:|---:|")
    for category in report.categories():
        if category["flash"] or category["ram"]:
            out.append(f"| {md_text(category['name'])} | {category['flash']:,} | {category['ram']:,} |")
    out.append(f"| **total** | **{report.flash.used:,}** | **{report.ram.used:,}** |")
    rows = [(m, r) for m in report.modules for r in m.memory]
    if rows:
        out.append("")
        out.append("| module | kind | metadata | linked | diff | why |")
        out.append("|---|---|---:|---:|---:|---|")
        for module, row in rows:
            out.append(f"| {md_text(module.name)} | {row.kind} | {_n(row.predicted)} | {_n(row.linked)} | "
                       f"{_signed(row.difference)} | {md_text(row.explanation)} |")
    pools = [m for m in report.modules if m.pool]
    if pools:
        out.append("")
        out.append("| module | workspace pool | laid out | built | floor | |")
        out.append("|---|---|---:|---:|---:|---|")
        for module in pools:
            pool = module.pool
            out.append(f"| {md_text(module.name)} | {pool_kind(pool)} | {_n(pool.get('tvm_bytes'))} | "
                       f"{_n(pool.get('bytes'))} | {_n(pool.get('floor_bytes'))} | {md_text(pool_verdict(pool))} |")
        for module in pools:
            if module.pool.get("live_bytes"):
                out.append(f"\n{md_text(module.name)}, live over the inference: {md_text(live_summary(module.pool))}")
    out.append("")
    out.append(f"<details><summary>top {top} symbols</summary>")
    out.append("")
    out.append("| flash | RAM | category | symbol |")
    out.append("|---:|---:|---|---|")
    for item in report.top_items(n=top):
        out.append(f"| {item.flash:,} | {item.ram:,} | {md_text(item.category + '/' + item.subcategory)} | "
                   f"{md_code(_short_symbol(item.name, item.module))} |")
    out.append("")
    out.append("</details>")
    for region in report.over_budget:
        out.append(f"\n**{region.name} over budget by {region.over_by:,} B**")
    for warning in report.warnings:
        out.append(f"\n> warning: {md_text(warning)}")
    out.append("")
    sha = (mlf.get("sha256") or "")[:12]
    out.append(f"<sub>{md_text(b.get('toolchain') or '')}{' · MLF sha256 ' + sha if sha else ''}</sub>")
    return "\n".join(out) + "\n"


def stack_lines(stack: dict) -> list[str]:
    """The stack section: static bound (and its deepest path), reserve, the last run's peak."""
    bound, peak = stack.get("bound"), stack.get("measured_peak")
    lines = ["stack"]
    if bound is None:
        lines.append(f"  {'static bound':<16}{'none':>10}    " + "; ".join(stack.get("unbounded") or []))
    else:
        lines.append(f"  {'static bound':<16}{bound:>10,} B  gcc -fstack-usage/-fcallgraph-info + "
                     f"{stack.get('exception_frame')} B exception frame")
        lines.append(f"  {'deepest path':<16}  {' -> '.join(stack.get('path') or [])}")
    lines.append(f"  {'reserve':<16}{stack.get('reserve') or 0:>10,} B  from the {stack.get('reserve_source')}")
    lines.append(f"  {'measured peak':<16}" + (f"{peak:>10,} B  last run" if peak is not None else f"{'—':>10}    no run yet"))
    return lines
