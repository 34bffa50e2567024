"""`mlfbuild size`: where every byte goes, budgets, --diff and --html."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import record
from ..cliargs import apply_project_file, parse_size
from ..outfolder import write_file
from .base import Command


class SizeCommand(Command):
    name = "size"
    help = "where every byte of flash and RAM goes; predicted vs linked; budgets (exit 5); --diff, --html"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", type=Path, nargs="?",
                            help="build folder, or a firmware .elf with its build.json beside it "
                                 "(default: the build folder of mlfbuild.toml's mlf and board)")
        form = parser.add_mutually_exclusive_group()
        form.add_argument("--json", action="store_true", help="print the stable JSON snapshot (use it as --diff base)")
        form.add_argument("--markdown", action="store_true", help="print a Markdown table ready for a pull request")
        parser.add_argument("--html", type=Path, metavar="FILE", help="also write one offline HTML page (bars + treemap)")
        parser.add_argument("--diff", type=Path, metavar="BASE.json",
                            help="show growth against a snapshot written by `mlfbuild size --json`")
        parser.add_argument("--budget-flash", type=parse_size, metavar="N", help="flash budget in bytes (64K, 1M, ...)")
        parser.add_argument("--budget-ram", type=parse_size, metavar="N",
                            help="RAM budget in bytes, stack and heap reserves included")

    def run(self, args: argparse.Namespace, out=None, err=None) -> int:
        """Print the requested form; raise OverBudgetError (exit 5) after printing when over budget."""
        from ..size import diff, load_snapshot, size_report  # loaded here: the other commands need none of it

        out = out or sys.stdout
        err = err or sys.stderr
        apply_project_file(args, self.name)
        elf, build = record.load_for_elf(args.target)
        report = size_report(elf, build.data, budget_flash=args.budget_flash, budget_ram=args.budget_ram,
                             measured=record.measured_peaks(elf.parent),
                             profiles=record.measured_profiles(elf.parent))
        changes = diff(load_snapshot(args.diff), report.to_json()) if args.diff else None
        if args.html:
            write_file(args.html, report.format_html(changes))
        if changes is not None:
            if args.json:
                out.write(json.dumps(changes.to_json(), indent=2, sort_keys=True) + "\n")
            elif args.markdown:
                out.write(changes.format_markdown())
            else:
                out.write(changes.format_text() + "\n")
        elif args.json:
            out.write(report.to_json_text())
        elif args.markdown:
            out.write(report.format_markdown())
        else:
            out.write(report.format_text() + "\n")
        if args.json or args.markdown or args.diff:  # the warnings are not in these forms' main text
            for warning in report.warnings:
                err.write(f"mlfbuild: warning: {warning}\n")
        if args.html:
            err.write(f"wrote {args.html}\n")
        report.raise_if_over_budget()
        return 0
