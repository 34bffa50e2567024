"""What a size report says, as data: regions, categories, symbols, per-module predicted vs linked.

The forms that show it (render.py: text and Markdown; html.py) and the report that reads an ELF
(report.py) are built on these classes; nothing here knows of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..schemas import SIZE as SCHEMA
from .attribution import CATEGORIES, CATEGORY_LABELS


@dataclass
class RegionUsage:
    name: str  # flash | ram
    used: int
    total: int | None  # the board's region length (None: the host has no fixed memory)
    budget: int | None  # the tighter of total and the user's budget
    sections: list[dict]  # [{"name", "kind", "size"}]
    by_kind: dict[str, int]
    by_category: dict[str, int]

    @property
    def fraction(self) -> float | None:
        return self.used / self.budget if self.budget else None

    @property
    def over_by(self) -> int:
        return self.used - self.budget if self.budget is not None and self.used > self.budget else 0

    def to_json(self) -> dict:
        return {"used": self.used, "total": self.total, "budget": self.budget,
                "free": (self.budget - self.used) if self.budget is not None else None,
                "percent": round(100.0 * self.fraction, 2) if self.fraction is not None else None,
                "sections": self.sections, "by_kind": self.by_kind, "by_category": self.by_category}


@dataclass
class Item:
    """One named owner of bytes: a symbol, or an anonymous group ("(anonymous literals)")."""

    category: str
    subcategory: str
    module: str
    file: str
    name: str
    flash: int = 0
    ram: int = 0
    sections: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return "/".join((self.category, self.module, self.file, self.name))

    def to_json(self) -> dict:
        return {"name": self.name, "category": self.category, "subcategory": self.subcategory,
                "module": self.module, "file": self.file, "sections": sorted(self.sections),
                "flash": self.flash, "ram": self.ram}


@dataclass
class MemoryRow:
    kind: str  # workspace | constants | io
    device: int
    predicted: int | None
    linked: int | None
    explanation: str

    @property
    def difference(self) -> int | None:
        if self.predicted is None or self.linked is None:
            return None
        return self.linked - self.predicted

    def to_json(self) -> dict:
        return {"kind": self.kind, "device": self.device, "predicted": self.predicted, "linked": self.linked,
                "difference": self.difference, "explanation": self.explanation}


@dataclass
class OperatorRow:
    name: str
    workspace_bytes: int | None  # from the metadata (None: not in operator_functions)
    code_bytes: int | None  # linked code (None: not in the image)
    in_metadata: bool

    def to_json(self) -> dict:
        return {"name": self.name, "workspace_bytes": self.workspace_bytes, "code_bytes": self.code_bytes,
                "in_metadata": self.in_metadata}


@dataclass
class ModuleReport:
    name: str
    executor: str
    usmp: bool
    flash: int
    ram: int
    by_subcategory: dict[str, dict[str, int]]  # subcategory -> {"flash", "ram"}
    memory: list[MemoryRow]
    operators: list[OperatorRow]
    pool: dict | None = None  # build.json's workspace_pool: TVM's size, the firmware's, the floor, why kept

    def to_json(self) -> dict:
        return {"name": self.name, "executor": self.executor, "usmp": self.usmp, "flash": self.flash,
                "ram": self.ram, "by_subcategory": self.by_subcategory,
                "predicted_vs_linked": [r.to_json() for r in self.memory],
                "workspace_pool": _pool_summary(self.pool),
                "operators": [o.to_json() for o in self.operators]}


def _pool_summary(pool: dict | None) -> dict | None:
    if not pool:
        return None
    return {key: pool.get(key) for key in ("kind", "tvm_bytes", "bytes", "floor_bytes", "replanned", "reason",
                                           "live_bytes", "memory_plan", "kernels")
            if key in pool or key not in ("live_bytes", "memory_plan", "kernels")}


@dataclass
class SizeFacts:
    """One firmware's size, as report.py found it: what render.py, html.py and diff.py show and compare."""

    elf_name: str
    machine: str
    build: dict[str, Any]
    flash: RegionUsage
    ram: RegionUsage
    berkeley: dict[str, int]
    items: list[Item]
    modules: list[ModuleReport]
    measured: list[dict]
    warnings: list[str]
    notes: list[str]
    stack: dict | None = None  # static bound, reserve and the last run's measured peak (Cortex-M builds)
    profiles: list[dict] = field(default_factory=list)  # the last `run --profile`, per model (run.json's rows)
    prepared: list[dict] = field(default_factory=list)  # CMSIS-NN calls prepared at build time (build.json)
    replaced_loops: list[dict] = field(default_factory=list)  # TVM's loops replaced at build time (build.json)

    # --- views ---
    def categories(self) -> list[dict]:
        """[{"name", "label", "flash", "ram", "subcategories": [{"name", "module", "flash", "ram"}]}]"""
        subs: dict[str, dict[tuple[str, str], list[int]]] = {c: {} for c in CATEGORIES}
        for item in self.items:
            slot = subs.setdefault(item.category, {}).setdefault((item.subcategory, item.module), [0, 0])
            slot[0] += item.flash
            slot[1] += item.ram
        out = []
        for name in CATEGORIES:
            entries = subs.get(name, {})
            flash = sum(v[0] for v in entries.values())
            ram = sum(v[1] for v in entries.values())
            if not entries and name in ("other", "heap", "stack"):
                continue
            out.append({"name": name, "label": CATEGORY_LABELS[name], "flash": flash, "ram": ram,
                        "subcategories": [{"name": s, "module": m, "flash": v[0], "ram": v[1]}
                                          for (s, m), v in sorted(entries.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))]})
        return out

    def top_items(self, region: str | None = None, n: int = 20) -> list[Item]:
        if region == "flash":
            key = lambda i: i.flash  # noqa: E731
        elif region == "ram":
            key = lambda i: i.ram  # noqa: E731
        else:
            key = lambda i: i.flash + i.ram  # noqa: E731
        return sorted((i for i in self.items if key(i) > 0), key=lambda i: (-key(i), i.key))[:n]

    @property
    def over_budget(self) -> list[RegionUsage]:
        return [r for r in (self.flash, self.ram) if r.over_by > 0]

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "elf": self.elf_name,
            "machine": self.machine,
            "build": self.build,
            "flash": self.flash.to_json(),
            "ram": self.ram.to_json(),
            "berkeley": self.berkeley,
            "categories": self.categories(),
            "modules": [m.to_json() for m in self.modules],
            "symbols": [i.to_json() for i in sorted(self.items, key=lambda i: (-(i.flash + i.ram), i.key))],
            "measured": self.measured,
            "stack": self.stack,
            "profiles": self.profiles,
            "prepared": self.prepared,
            "replaced_loops": self.replaced_loops,
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"
