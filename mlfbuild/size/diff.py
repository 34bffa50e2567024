"""Compare two size snapshots (the JSON of `SizeReport.to_json()`): growth by region, category,
subcategory and symbol, sorted by how much changed, as text or a Markdown table for a PR."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..schemas import SIZE_DIFF
from .attribution import CATEGORIES
from .facts import SizeFacts
from .snapshot import check_snapshot
from .markdown import md_code, md_text
from .difftext import d as _d, flag_differences as _flag_differences, identity as _identity, pct as _pct
from .difftext import short as _short


@dataclass
class SizeDiff:
    base: dict[str, Any]  # build identity of each side: board, mlf, toolchain
    current: dict[str, Any]
    regions: list[dict]  # {"name", "base", "current", "delta", "budget"}
    categories: list[dict]  # {"name", "flash": {base, current, delta}, "ram": {...}}
    subcategories: list[dict]  # {"category", "subcategory", "flash_delta", "ram_delta", ...}, changed only
    symbols: list[dict]  # {"name", "category", "subcategory", "module", "status", "flash_*", "ram_*"}, changed only
    modules: list[dict]  # predicted-vs-linked rows whose linked bytes changed
    caveats: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"schema": SIZE_DIFF, "base": self.base, "current": self.current, "regions": self.regions,
                "categories": self.categories, "subcategories": self.subcategories, "symbols": self.symbols, "modules": self.modules,
                "caveats": self.caveats}

    # --- text ---
    def format_text(self, top: int = 15) -> str:
        base_flags, current_flags = _flag_differences(self.base, self.current)
        out = [f"size diff: {_identity(self.base, base_flags)}  →  {_identity(self.current, current_flags)}"]
        for caveat in self.caveats:
            out.append(f"note: {caveat}")
        out.append("")
        out.append(f"{'region':<8}{'base':>12}{'current':>12}{'delta':>12}{'':>10}")
        for r in self.regions:
            out.append(f"{r['name']:<8}{r['base']:>12,}{r['current']:>12,}{_d(r['delta']):>12}{_pct(r['delta'], r['base']):>10}")
        changed = [c for c in self.categories if c["flash"]["delta"] or c["ram"]["delta"]]
        if changed:
            out.append("")
            out.append(f"{'by category':<44}{'flash Δ':>12}{'ram Δ':>12}")
            for c in changed:
                out.append(f"  {c['name']:<42}{_d(c['flash']['delta']):>12}{_d(c['ram']['delta']):>12}")
        if self.subcategories:
            out.append("")
            out.append(f"{'by subcategory':<44}{'flash Δ':>12}{'ram Δ':>12}")
            for s in self.subcategories:
                out.append(f"  {s['category'] + '/' + s['subcategory']:<42}{_d(s['flash_delta']):>12}{_d(s['ram_delta']):>12}")
        if self.modules:
            out.append("")
            out.append("predicted vs linked, per module")
            for m in self.modules:
                out.append(f"  {m['module']:<10}{m['kind']:<11} linked {_n(m['base_linked'])} → {_n(m['current_linked'])}"
                           f" (metadata {_n(m['base_predicted'])} → {_n(m['current_predicted'])})")
        if self.symbols:
            out.append("")
            out.append(f"top symbol changes ({len(self.symbols)} changed)")
            out.append(f"  {'flash Δ':>10}{'ram Δ':>10}  {'':<8} name")
            for s in self.symbols[:top]:
                where = f"{s['category']}/{s['subcategory']}" + (f" [{s['module']}]" if s["module"] else "")
                out.append(f"  {_d(s['flash_delta']):>10}{_d(s['ram_delta']):>10}  {s['status']:<8} {_short(s['name'])}  ({where})")
        if not (changed or self.subcategories or self.symbols or self.modules
                or any(r["delta"] for r in self.regions)):
            out.append("")
            out.append("no change")
        return "\n".join(out)

    def format_markdown(self, top: int = 10) -> str:
        base_flags, current_flags = _flag_differences(self.base, self.current)
        out = [f"### Firmware size change: {md_text(_identity(self.current, current_flags))}", ""]
        out.append(f"Base: {md_text(_identity(self.base, base_flags))}")
        for caveat in self.caveats:
            out.append(f"\n> {md_text(caveat)}")
        out.append("")
        out.append("| region | base | current | Δ | Δ % |")
        out.append("|---|---:|---:|---:|---:|")
        for r in self.regions:
            out.append(f"| {r['name']} | {r['base']:,} | {r['current']:,} | {_bold(r['delta'])} | {_pct(r['delta'], r['base'])} |")
        if self.subcategories:
            out.append("")
            out.append("| what | flash Δ | RAM Δ |")
            out.append("|---|---:|---:|")
            for s in self.subcategories:
                out.append(f"| {md_text(s['category'] + '/' + s['subcategory'])} | {_d(s['flash_delta'])} | {_d(s['ram_delta'])} |")
        if self.symbols:
            out.append("")
            out.append(f"<details><summary>top {min(top, len(self.symbols))} of {len(self.symbols)} symbol changes</summary>")
            out.append("")
            out.append("| flash Δ | RAM Δ | status | symbol | category |")
            out.append("|---:|---:|---|---|---|")
            for s in self.symbols[:top]:
                out.append(f"| {_d(s['flash_delta'])} | {_d(s['ram_delta'])} | {s['status']} | {md_code(_short(s['name']))} | "
                           f"{md_text(s['category'] + '/' + s['subcategory'])} |")
            out.append("")
            out.append("</details>")
        return "\n".join(out) + "\n"


def _n(value) -> str:
    return "—" if value is None else f"{value:,}"


def _bold(delta: int) -> str:
    return f"**{delta:+,}**" if delta else "0"


def _snapshot(value) -> dict:
    return value.to_json() if isinstance(value, SizeFacts) else check_snapshot(value)


def _module_names(snapshot: dict) -> list[str]:
    return [m["name"] for m in snapshot.get("modules") or [] if m.get("name") != "(shared)"]


def _renamer(old: str, new: str):
    """Rewrite one module's name into another's in symbol names and files (tvmgen_a_ → tvmgen_b_)."""
    patterns = [(re.compile(rf"^tvmgen_{re.escape(old)}_"), f"tvmgen_{new}_"),
                (re.compile(rf"^mlf_{re.escape(old)}_"), f"mlf_{new}_"),
                (re.compile(rf"^mlf_model_{re.escape(old)}$"), f"mlf_model_{new}"),
                (re.compile(rf"(^|/){re.escape(old)}_lib(\d+)"), rf"\g<1>{new}_lib\2"),
                (re.compile(rf"(^|/)model_{re.escape(old)}\.c$"), rf"\g<1>model_{new}.c")]

    def rename(text: str) -> str:
        for pattern, replacement in patterns:
            text = pattern.sub(replacement, text)
        return text
    return rename


def diff(base, current) -> SizeDiff:
    """What changed from `base` to `current` (snapshots as dicts, or SizeReports)."""
    base, current = _snapshot(base), _snapshot(current)
    caveats, rename, module_map = _comparability(base, current)
    return SizeDiff(base=base.get("build") or {}, current=current.get("build") or {},
                    regions=_region_changes(base, current), categories=_category_changes(base, current),
                    subcategories=_subcategory_changes(base, current),
                    symbols=_symbol_changes(base, current, rename, module_map),
                    modules=_module_changes(base, current, module_map), caveats=caveats)


def _comparability(base: dict, current: dict) -> tuple[list[str], Callable[[str], str], dict[str, str]]:
    """Caveats about what differs besides the code, and how the base's names map onto the current
    ones (a single module renamed — `default` vs `kws` — is compared as the same module)."""
    caveats = []
    bb, cb = base.get("build") or {}, current.get("build") or {}
    if bb.get("board") != cb.get("board"):
        caveats.append(f"different boards: {bb.get('board')} vs {cb.get('board')}")
    if bb.get("toolchain") != cb.get("toolchain"):
        caveats.append(f"different toolchains: {bb.get('toolchain')} vs {cb.get('toolchain')}")
    if (bb.get("mlf") or {}).get("sha256") != (cb.get("mlf") or {}).get("sha256"):
        caveats.append("different MLFs (sha256 differs)")
    base_modules, current_modules = _module_names(base), _module_names(current)
    if len(base_modules) == 1 and len(current_modules) == 1 and base_modules != current_modules:
        old, new = base_modules[0], current_modules[0]
        caveats.append(f"module '{old}' of the base compared as '{new}'")
        return caveats, _renamer(old, new), {old: new}
    return caveats, lambda text: text, {m: m for m in base_modules}


def _region_changes(base: dict, current: dict) -> list[dict]:
    regions = []
    for name in ("flash", "ram"):
        b, c = base[name]["used"], current[name]["used"]
        regions.append({"name": name, "base": b, "current": c, "delta": c - b, "budget": current[name].get("budget")})
    return regions


def _category_changes(base: dict, current: dict) -> list[dict]:
    bc, cc = ({c["name"]: c for c in snapshot.get("categories") or []} for snapshot in (base, current))
    categories = []
    for name in CATEGORIES:
        if name not in bc and name not in cc:
            continue
        entry = {"name": name}
        for region in ("flash", "ram"):
            b = (bc.get(name) or {}).get(region, 0)
            c = (cc.get(name) or {}).get(region, 0)
            entry[region] = {"base": b, "current": c, "delta": c - b}
        categories.append(entry)
    return categories


def _subcategory_totals(snapshot: dict) -> dict[tuple[str, str], list[int]]:
    table: dict[tuple[str, str], list[int]] = {}
    for category in snapshot.get("categories") or []:
        for sub in category.get("subcategories") or []:
            slot = table.setdefault((category["name"], sub["name"]), [0, 0])
            slot[0] += sub["flash"]
            slot[1] += sub["ram"]
    return table


def _subcategory_changes(base: dict, current: dict) -> list[dict]:
    bs, cs = _subcategory_totals(base), _subcategory_totals(current)
    subcategories = []
    for key in sorted(set(bs) | set(cs)):
        b, c = bs.get(key, [0, 0]), cs.get(key, [0, 0])
        if b != c:
            subcategories.append({"category": key[0], "subcategory": key[1], "flash_base": b[0], "flash_current": c[0],
                                  "flash_delta": c[0] - b[0], "ram_base": b[1], "ram_current": c[1],
                                  "ram_delta": c[1] - b[1]})
    subcategories.sort(key=lambda s: (-(abs(s["flash_delta"]) + abs(s["ram_delta"])), s["category"], s["subcategory"]))
    return subcategories


def _symbol_totals(snapshot: dict, rename: Callable[[str], str], modules: dict[str, str]) -> dict[tuple, dict]:
    table: dict[tuple, dict] = {}
    for s in snapshot.get("symbols") or []:
        module = modules.get(s.get("module"), s.get("module"))
        key = (s["category"], module, rename(s.get("file") or ""), rename(s["name"]))
        entry = table.setdefault(key, {"name": rename(s["name"]), "category": s["category"],
                                       "subcategory": s["subcategory"], "module": module, "flash": 0, "ram": 0})
        entry["flash"] += s.get("flash", 0)
        entry["ram"] += s.get("ram", 0)
    return table


def _symbol_changes(base: dict, current: dict, rename: Callable[[str], str], module_map: dict[str, str]) -> list[dict]:
    bsym = _symbol_totals(base, rename, module_map)
    csym = _symbol_totals(current, lambda t: t, {})
    symbols = []
    for key in set(bsym) | set(csym):
        b, c = bsym.get(key), csym.get(key)
        ref = c or b
        bf, br = (b["flash"], b["ram"]) if b else (0, 0)
        cf, cr = (c["flash"], c["ram"]) if c else (0, 0)
        if (bf, br) == (cf, cr):
            continue
        status = "added" if b is None else "removed" if c is None else "changed"
        symbols.append({"name": ref["name"], "category": ref["category"], "subcategory": ref["subcategory"],
                        "module": ref["module"], "status": status, "flash_base": bf, "flash_current": cf,
                        "flash_delta": cf - bf, "ram_base": br, "ram_current": cr, "ram_delta": cr - br})
    symbols.sort(key=lambda s: (-(abs(s["flash_delta"]) + abs(s["ram_delta"])), s["name"]))
    return symbols


def _module_changes(base: dict, current: dict, module_map: dict[str, str]) -> list[dict]:
    """The predicted-vs-linked rows that are new or changed."""
    modules = []
    base_rows = {(module_map.get(m["name"], m["name"]), r["kind"], r["device"]): r
                 for m in base.get("modules") or [] for r in m.get("predicted_vs_linked") or []}
    for m in current.get("modules") or []:
        for r in m.get("predicted_vs_linked") or []:
            b = base_rows.get((m["name"], r["kind"], r["device"]))
            if b is None or b.get("linked") != r.get("linked") or b.get("predicted") != r.get("predicted"):
                modules.append({"module": m["name"], "kind": r["kind"], "device": r["device"],
                                "base_linked": b.get("linked") if b else None, "current_linked": r.get("linked"),
                                "base_predicted": b.get("predicted") if b else None,
                                "current_predicted": r.get("predicted"), "explanation": r.get("explanation")})
    return modules
