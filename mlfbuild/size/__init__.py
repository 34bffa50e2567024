"""Where every byte of a firmware goes, checked against the model's memory summary and the board.

    from mlfbuild.size import size_report, diff
    report = size_report(Path("out/firmware.elf"), record)        # record = build.json as a dict
    print(report.format_text()); report.raise_if_over_budget()     # OverBudgetError, exit 5
    snapshot = report.to_json()                                    # stable, for --diff
    print(diff(base_snapshot, snapshot).format_markdown())
"""

from __future__ import annotations

from .attribution import CATEGORIES, CATEGORY_LABELS
from .diff import SizeDiff, diff
from .html import format_html
from .render import budget_table, format_markdown, format_short, format_text
from ..schemas import SIZE as SCHEMA
from .report import SizeReport, board_regions, size_report
from .snapshot import load_snapshot

__all__ = ["CATEGORIES", "CATEGORY_LABELS", "SCHEMA", "SizeDiff", "SizeReport", "board_regions", "budget_table",
           "diff", "format_html", "format_markdown", "format_short", "format_text", "load_snapshot", "size_report"]
