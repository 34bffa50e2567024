"""One offline HTML page: a bar per region against its budget and a treemap per region
(category → symbols), drawn as inline SVG. No network, no external script or font."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from .attribution import CATEGORIES, CATEGORY_LABELS
from .render import live_columns, live_summary, pool_kind, pool_verdict

if TYPE_CHECKING:  # the report calls these forms; they only read its fields
    from .diff import SizeDiff
    from .facts import RegionUsage, SizeFacts

COLOURS = {"model": "#4e79a7", "runtime": "#f28e2b", "board": "#59a14f", "app": "#e15759", "libc": "#9c755f",
           "stack": "#76b7b2", "heap": "#edc948", "padding": "#bab0ac", "other": "#ff9da7"}
BAR_W, BAR_H = 880, 34
MAP_W, MAP_H = 880, 420
TILES_PER_CATEGORY = 40


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def squarify(values: list[float], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Squarified treemap (Bruls, Huizing, van Wijk): rectangles for `values` (sorted descending,
    positive) filling x, y, w, h, in the same order."""
    total = sum(values)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in values]
    scale = w * h / total
    areas = [v * scale for v in values]
    rects: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        j = i + 1

        while j < len(areas) and _worst(row + [areas[j]], side) <= _worst(row, side):
            row.append(areas[j])
            j += 1
        s = sum(row)
        if w >= h:  # lay the row out as a column on the left
            col_w = s / h if h else 0
            cy = y
            for a in row:
                rh = a / col_w if col_w else 0
                rects.append((x, cy, col_w, rh))
                cy += rh
            x += col_w
            w -= col_w
        else:  # as a row on top
            row_h = s / w if w else 0
            cx = x
            for a in row:
                rw = a / row_h if row_h else 0
                rects.append((cx, y, rw, row_h))
                cx += rw
            y += row_h
            h -= row_h
        i = j
    return rects


def _worst(row: list[float], side: float) -> float:
    """The worst aspect ratio of a row of areas laid along `side`."""
    total = sum(row)
    if total <= 0:
        return 0.0
    return max(max(side * side * a / (total * total), (total * total) / (side * side * a)) for a in row if a > 0)


def _bar(region: RegionUsage) -> str:
    scale = max(region.budget or 0, region.used) or 1
    parts = [f'<svg class="bar" id="bar-{region.name}" width="{BAR_W}" height="{BAR_H + 22}" '
             f'viewBox="0 0 {BAR_W} {BAR_H + 22}" role="img" aria-label="{region.name} usage">',
             f'<rect class="track" x="0" y="0" width="{BAR_W}" height="{BAR_H}" fill="#eee"/>']
    x = 0.0
    for category in CATEGORIES:
        value = region.by_category.get(category, 0)
        if not value:
            continue
        width = BAR_W * value / scale
        parts.append(f'<rect class="seg" data-category="{category}" x="{x:.2f}" y="0" width="{width:.2f}" '
                     f'height="{BAR_H}" fill="{COLOURS[category]}"><title>{_e(category)}: {value:,} B</title></rect>')
        x += width
    if region.budget:
        bx = BAR_W * region.budget / scale
        wx = BAR_W * 0.9 * region.budget / scale
        parts.append(f'<line class="warn-mark" x1="{wx:.2f}" y1="0" x2="{wx:.2f}" y2="{BAR_H}" stroke="#b07a00" '
                     f'stroke-dasharray="4 3"/>')
        parts.append(f'<line class="budget-mark" x1="{bx - 1:.2f}" y1="0" x2="{bx - 1:.2f}" y2="{BAR_H + 4}" '
                     f'stroke="#c00" stroke-width="2"/>')
    label = f"{region.used:,} B" + (f" of {region.budget:,} B ({100 * region.used / region.budget:.1f} %)"
                                    if region.budget else " (no budget)")
    parts.append(f'<text x="0" y="{BAR_H + 16}" font-size="13">{_e(region.name)}: {_e(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _shared_prefix(names: list[str]) -> str:
    """What the tiles' names all begin with, up to a `_` or `.` (tvmgen_kws_fused_): dropped from their
    labels, so tiles read apart (the tooltip keeps the whole name)."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    common = next((i for i, (a, b) in enumerate(zip(first, last)) if a != b), min(len(first), len(last)))
    cut = max(first.rfind("_", 0, common), first.rfind(".", 0, common)) + 1
    return first[:cut] if cut > 3 else ""


def _treemap(report: SizeFacts, region: str) -> str:
    attr = "flash" if region == "flash" else "ram"
    groups = []
    for category in CATEGORIES:
        items = sorted((i for i in report.items if i.category == category and getattr(i, attr) > 0),
                       key=lambda i: -getattr(i, attr))
        total = sum(getattr(i, attr) for i in items)
        if total:
            shown = items[:TILES_PER_CATEGORY]
            tiles = [(i.name, i.subcategory, i.module, getattr(i, attr)) for i in shown]
            rest = items[TILES_PER_CATEGORY:]
            if rest:
                tiles.append((f"({len(rest)} smaller)", "", "", sum(getattr(i, attr) for i in rest)))
            groups.append((category, total, tiles))
    parts = [f'<svg class="treemap" id="treemap-{region}" width="{MAP_W}" height="{MAP_H}" '
             f'viewBox="0 0 {MAP_W} {MAP_H}" role="img" aria-label="{region} treemap">']
    outer = squarify([g[1] for g in groups], 0, 0, MAP_W, MAP_H)
    for (category, total, tiles), (x, y, w, h) in zip(groups, outer):
        parts.append(f'<g class="group" data-category="{category}">')
        parts.append(f'<rect class="cat" x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" fill="{COLOURS[category]}" '
                     f'stroke="#fff" stroke-width="2"><title>{_e(CATEGORY_LABELS[category])}: {total:,} B</title></rect>')
        head = 16 if h > 40 and w > 60 else 0
        inner = squarify([t[3] for t in tiles], x + 2, y + head + 1, max(w - 4, 0), max(h - head - 3, 0))
        shared = _shared_prefix([t[0] for t in tiles if not t[0].startswith("(")])
        for (name, sub, module, size), (tx, ty, tw, th) in zip(tiles, inner):
            tip = f"{name} — {category}/{sub}{f' [{module}]' if module else ''}: {size:,} B"
            parts.append(f'<rect class="tile" x="{tx:.2f}" y="{ty:.2f}" width="{tw:.2f}" height="{th:.2f}" '
                         f'fill="{COLOURS[category]}" fill-opacity="0.55" stroke="#fff" stroke-width="0.6" '
                         f'data-tip="{_e(tip)}"><title>{_e(tip)}</title></rect>')
            if tw > 70 and th > 14:
                chars = int(tw / 6.3)
                short = "…" + name[len(shared):] if shared and name.startswith(shared) else name
                text = f"{short} [{module}]" if module and len(report.modules) > 1 else short
                text = text if len(text) <= chars else text[:max(chars - 1, 1)] + "…"
                parts.append(f'<text x="{tx + 3:.2f}" y="{ty + 11:.2f}" font-size="10" pointer-events="none">{_e(text)}</text>')
        if head:
            chars = int(w / 7)
            label = f"{category} {total:,} B"
            parts.append(f'<text class="cat-label" x="{x + 4:.2f}" y="{y + 12:.2f}" font-size="12" font-weight="bold" '
                         f'fill="#fff" pointer-events="none">{_e(label[:max(chars, 1)])}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


_STYLE = """
body{font:14px system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
svg{max-width:100%;height:auto}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child,td.l,th.l{text-align:left}
td,th{white-space:nowrap}td.l{white-space:normal;overflow-wrap:anywhere}.num{white-space:nowrap}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.warn{color:#a15c00}.err{color:#b00;font-weight:bold}.note{color:#555}
#tip{min-height:1.4em;font-family:monospace;font-size:12px;color:#333}
svg .tile:hover{fill-opacity:0.9}
"""

_SCRIPT = """
(function(){
  var charts=document.querySelectorAll('svg.bar, svg.treemap'), shown=0;
  charts.forEach(function(svg){var r=svg.getBoundingClientRect(); if(r.width>0&&r.height>0){shown++;}});
  var segs=0; document.querySelectorAll('svg.bar rect.seg').forEach(function(r){if(r.getBBox().width>0){segs++;}});
  var tiles=document.querySelectorAll('svg.treemap rect.tile').length;
  document.body.setAttribute('data-rendered', shown+' '+segs+' '+tiles);
})();
document.querySelectorAll('svg.treemap').forEach(function(svg){
  svg.addEventListener('mousemove',function(ev){
    var t=ev.target; var tip=document.getElementById('tip');
    if(t&&t.getAttribute&&t.getAttribute('data-tip')){tip.textContent=t.getAttribute('data-tip');}
  });
});
"""


def format_html(report: SizeFacts, changes: SizeDiff | None = None) -> str:
    """The page; with `changes` (size --diff) it opens with what changed from the base."""
    b = report.build
    mlf = b.get("mlf") or {}
    title = f"Firmware size: {mlf.get('name') or report.elf_name} on {b.get('board') or '?'}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{_e(title)}</title>", f"<style>{_STYLE}</style></head><body>", f"<h1>{_e(title)}</h1>",
           f'<p class="note">{_e(report.elf_name)} · {_e(b.get("toolchain") or "")} · MLF sha256 '
           f'{_e((mlf.get("sha256") or "")[:16])} · mlfbuild {_e(b.get("mlfbuild_version") or "")}</p>']
    for region in report.over_budget:
        out.append(f'<p class="err">{_e(region.name)} over budget by {region.over_by:,} B</p>')
    for warning in report.warnings:
        out.append(f'<p class="warn">warning: {_e(warning)}</p>')
    if changes is not None:
        out.extend(_changes(changes))
    out.append("<h2>Regions against budget</h2>")
    out.append(_bar(report.flash))
    out.append(_bar(report.ram))
    out.append('<p class="legend">' + "".join(
        f'<span><i style="background:{COLOURS[c]}"></i>{_e(c)}</span>' for c in CATEGORIES) + "</p>")
    if report.flash.budget or report.ram.budget:
        out.append('<p class="legend budget-legend"><span><svg width="14" height="12"><line x1="7" y1="0" x2="7" '
                   'y2="12" stroke="#c00" stroke-width="2"/></svg> budget</span><span><svg width="14" height="12">'
                   '<line x1="7" y1="0" x2="7" y2="12" stroke="#b07a00" stroke-dasharray="4 3"/></svg> 90 % of the '
                   'budget</span></p>')
    out.append("<table><tr><th>category</th><th>flash</th><th>RAM</th></tr>")
    for category in report.categories():
        if category["flash"] or category["ram"]:
            out.append(f'<tr><td>{_e(category["label"])}</td><td>{category["flash"]:,}</td><td>{category["ram"]:,}</td></tr>')
    out.append(f"<tr><th>total</th><th>{report.flash.used:,}</th><th>{report.ram.used:,}</th></tr></table>")
    out.append('<h2>Flash treemap</h2><div id="tip"></div>')
    out.append(_treemap(report, "flash"))
    out.append("<h2>RAM treemap</h2>")
    out.append(_treemap(report, "ram"))
    for module in report.modules:
        if not module.memory:
            continue
        out.append(f"<h2>Model {_e(module.name)}: metadata vs linked</h2>")
        out.append('<table><tr><th class="l">kind</th><th>device</th><th>metadata</th><th>linked</th><th>diff</th>'
                   '<th class="l">why</th></tr>')
        for row in module.memory:
            diff = "—" if row.difference is None else f"{row.difference:+,}" if row.difference else "0"
            out.append(f'<tr><td>{_e(row.kind)}</td><td>{row.device}</td><td>{_e(_n(row.predicted))}</td>'
                       f'<td>{_e(_n(row.linked))}</td><td>{diff}</td><td class="l">{_e(row.explanation)}</td></tr>')
        out.append("</table>")
    pools = [m for m in report.modules if m.pool]
    if pools:
        out.append('<h2>Workspace pools</h2><table><tr><th class="l">model</th><th class="l">pool</th><th>laid out</th>'
                   '<th>built</th><th>floor</th><th class="l">why</th></tr>')
        for module in pools:
            pool = module.pool
            out.append(f'<tr><td class="l">{_e(module.name)}</td><td class="l">{_e(pool_kind(pool))}</td>'
                       f'<td>{_e(_n(pool.get("tvm_bytes")))}</td><td>{_e(_n(pool.get("bytes")))}</td>'
                       f'<td>{_e(_n(pool.get("floor_bytes")))}</td><td class="l">{_e(pool_verdict(pool))}</td></tr>')
        out.append("</table>")
        for module in pools:
            if module.pool.get("live_bytes"):
                out.append(_live_chart(module.name, module.pool))
    out.append("<h2>Top symbols</h2>")
    out.append('<table><tr><th>flash</th><th>RAM</th><th class="l">category</th><th class="l">symbol</th><th class="l">file</th></tr>')
    for item in report.top_items(n=30):
        out.append(f'<tr><td>{item.flash:,}</td><td>{item.ram:,}</td><td class="l">{_e(item.category)}/{_e(item.subcategory)}'
                   f'{_e(f" [{item.module}]" if item.module else "")}</td><td class="l">{_e(item.name)}</td>'
                   f'<td class="l">{_e(item.file)}</td></tr>')
    out.append("</table>")
    if report.stack:
        stack = report.stack
        out.append("<h2>Stack</h2><table><tr><th class='l'>what</th><th>bytes</th><th class='l'>from</th></tr>")
        out.append(f"<tr><td>static bound</td><td>{_e(_n(stack.get('bound')))}</td><td class='l'>"
                   f"{_e(' -> '.join(stack.get('path') or []) or '; '.join(stack.get('unbounded') or []))}</td></tr>")
        out.append(f"<tr><td>reserve</td><td>{_e(_n(stack.get('reserve')))}</td><td class='l'>"
                   f"{_e(str(stack.get('reserve_source')))}</td></tr>")
        out.append(f"<tr><td>measured peak</td><td>{_e(_n(stack.get('measured_peak')))}</td><td class='l'>last run</td></tr>")
        out.append("</table>")
    if report.measured:
        out.append("<h2>Measured on the target</h2><table><tr><th class='l'>what</th><th>measured</th><th>static</th><th>use</th></tr>")
        for row in report.measured:
            out.append(f"<tr><td>{_e(row['label'])}</td><td>{row['measured']:,}</td><td>{_e(_n(row.get('static')))}</td>"
                       f"<td>{_e(str(row['percent']) + ' %' if row.get('percent') is not None else '—')}</td></tr>")
        out.append("</table>")
    out.extend(_profiles(report.profiles))
    for note in report.notes:
        out.append(f'<p class="note">note: {_e(note)}</p>')
    out.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"


def _changes(changes: SizeDiff) -> list[str]:
    """size --diff in the page: the two builds, regions, categories and the symbols that changed."""
    from .difftext import d as _d, flag_differences as _flag_differences, identity as _identity, pct as _pct
    from .difftext import short as _short

    base_flags, current_flags = _flag_differences(changes.base, changes.current)
    out = ['<h2>Change from the base</h2>',
           f'<p class="note">base: {_e(_identity(changes.base, base_flags))} → '
           f'{_e(_identity(changes.current, current_flags))}</p>']
    out += [f'<p class="note">note: {_e(caveat)}</p>' for caveat in changes.caveats]
    out.append('<table class="diff"><tr><th class="l">region</th><th>base</th><th>current</th><th>Δ</th><th>Δ %</th></tr>')
    for r in changes.regions:
        out.append(f'<tr><td class="l">{_e(r["name"])}</td><td>{r["base"]:,}</td><td>{r["current"]:,}</td>'
                   f'<td>{_d(r["delta"])}</td><td>{_e(_pct(r["delta"], r["base"]))}</td></tr>')
    out.append("</table>")
    changed = [c for c in changes.categories if c["flash"]["delta"] or c["ram"]["delta"]]
    if changed:
        out.append('<table class="diff"><tr><th class="l">category</th><th>flash Δ</th><th>RAM Δ</th></tr>')
        out += [f'<tr><td class="l">{_e(c["name"])}</td><td>{_d(c["flash"]["delta"])}</td>'
                f'<td>{_d(c["ram"]["delta"])}</td></tr>' for c in changed]
        out.append("</table>")
    if changes.symbols:
        out.append(f'<table class="diff"><tr><th>flash Δ</th><th>RAM Δ</th><th class="l">status</th>'
                   f'<th class="l">symbol ({len(changes.symbols)} changed)</th></tr>')
        out += [f'<tr><td>{_d(s["flash_delta"])}</td><td>{_d(s["ram_delta"])}</td><td class="l">{_e(s["status"])}</td>'
                f'<td class="l" title="{_e(s["name"])}">{_e(_short(s["name"]))}</td></tr>' for s in changes.symbols[:30]]
        out.append("</table>")
    if not changed and not changes.symbols and not any(r["delta"] for r in changes.regions):
        out.append('<p class="note">no change</p>')
    return out


def _profiles(profiles: list[dict]) -> list[str]:
    """The last `run --profile`: per model, each operator function in call order."""
    out = []
    for profile in profiles:
        total, cycles = profile.get("instructions"), profile.get("cycles")
        head = f"{_count(total)} instructions per inference (QEMU)" if isinstance(total, int) else "last run"
        estimated = isinstance(cycles, int)
        if estimated:
            head += f", {_count(cycles)} cycles (estimate: {profile.get('cycle_model')})"
        out.append(f"<h2>Per-operator profile: {_e(profile['model'])}</h2><p class='note'>{_e(head)}</p>")
        cycles_head = "<th>cycles (est.)</th>" if estimated else ""
        out.append(f"<table><tr><th>calls</th><th>instructions</th>{cycles_head}<th>share</th>"
                   "<th class='l'>function</th></tr>")
        for row in profile["rows"]:
            share = row.get("share")
            cycles_cell = f"<td>{_count(row.get('cycles'))}</td>" if estimated else ""
            out.append(f"<tr><td>{_count(row.get('calls'))}</td><td>{_count(row.get('instructions'))}</td>{cycles_cell}"
                       f"<td>{_e(f'{100 * share:.2f} %' if isinstance(share, (int, float)) else '—')}</td>"
                       f"<td class='l'>{_e(_profiled_function(row))}</td></tr>")
        out.append("</table>")
    return out


def _profiled_function(row: dict) -> str:
    """The function's name, and where the compiler folded it into an identical twin."""
    name = str(row.get("function"))
    if row.get("folded_into"):
        return f"{name}: folded into {row['folded_into']} by the compiler (identical code; counted there)"
    if isinstance(row.get("folded"), list) and row["folded"]:
        return f"{name} (with {', '.join(map(str, row['folded']))}: identical code folded into this one)"
    return name


def _count(value) -> str:
    """A count read back from run.json: shown when it is one, a dash otherwise."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "—"


def _n(value) -> str:
    return "—" if value is None else f"{value:,}"


def _live_chart(name: str, pool: dict) -> str:
    """The pool's bytes live over the inference as bars (inline SVG), the peak marked."""
    live = live_columns(pool["live_bytes"])
    peak, width, height = max(live) or 1, 6, 80
    bars = "".join(f'<rect x="{i * width}" y="{height - value * height // peak}" width="{width - 1}" '
                   f'height="{value * height // peak}" fill="{"#c0392b" if value == peak else "#5b8def"}">'
                   f'<title>{value:,} B</title></rect>' for i, value in enumerate(live))
    return (f'<p>{_e(name)}, live over the inference: {_e(live_summary(pool))}</p>'
            f'<svg width="{len(live) * width}" height="{height}" role="img" aria-label="live bytes over the inference">{bars}</svg>')
