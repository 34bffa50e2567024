"""`mlfbuild size TARGET [--json] [--html FILE] [--markdown] [--diff BASE.json] [--budget-flash N]
[--budget-ram N]`, and the short report at the end of `mlfbuild build`.

cli.py owns the parser; it calls `add_arguments(parser)` and `run(args)` from here, so everything
about the size command lives in this package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import InvalidInputError, UsageError
from ..outfolder import write_file
from ..units import parse_byte_count
from .diff import diff
from .report import SizeReport, load_snapshot, size_report

SIZE_SNAPSHOT = "size.json"
_RECORD = "build.json"
_ELF = "firmware.elf"


def parse_size(text: str) -> int:
    """A byte count for argparse: 65536, 0x10000, 64K, 64KiB, 1M (K/M/G are powers of 1024)."""
    try:
        return parse_byte_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def resolve_target(target: Path) -> tuple[Path, dict]:
    """(ELF, build.json record) from a build folder, or from an .elf with build.json beside it (or in
    a parent folder: the ELF inside project/build/ works too)."""
    target = Path(target)
    if target.is_dir():
        elf, folders = target / _ELF, [target]
    elif target.is_file():
        elf, folders = target, [target.parent, *list(target.parent.parents)[:3]]
    else:
        raise InvalidInputError(f"{target}: no such build folder or ELF file")
    if not elf.is_file():
        raise InvalidInputError(f"{target}: no {_ELF} here — not an mlfbuild build folder")
    for folder in folders:
        record_path = folder / _RECORD
        if record_path.is_file():
            try:
                record = json.loads(record_path.read_text())
            except (OSError, ValueError) as exc:
                raise InvalidInputError(f"{record_path}: not valid JSON ({exc})") from None
            if not isinstance(record, dict):
                raise InvalidInputError(f"{record_path}: not a build record (a JSON object expected)")
            return elf, record
    raise InvalidInputError(f"{target}: no {_RECORD} beside the ELF — not an mlfbuild build folder")


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace, out=None, err=None) -> int:
    """Print the requested form; raise OverBudgetError (exit 5) after printing when over budget."""
    out = out or sys.stdout
    err = err or sys.stderr
    elf, record = resolve_target(args.target)
    from ..run import measured_peaks  # the last `mlfbuild run` of this build, if any

    report = size_report(elf, record, budget_flash=args.budget_flash, budget_ram=args.budget_ram,
                         measured=measured_peaks(elf.parent))
    if args.html:
        write_file(args.html, report.format_html())
    if args.diff:
        changes = diff(load_snapshot(args.diff), report.to_json())
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


def report_build(outdir: Path, record: dict, *, budget_flash: int | None = None,
                 budget_ram: int | None = None, write_snapshot: bool = True) -> SizeReport:
    """The size step at the end of `mlfbuild build`: report on OUTDIR/firmware.elf and keep the JSON
    snapshot as OUTDIR/size.json (a ready --diff base). Does not raise for budgets: the caller
    prints `report.format_short()` and then calls `report.raise_if_over_budget()`."""
    outdir = Path(outdir)
    report = size_report(outdir / _ELF, record, budget_flash=budget_flash, budget_ram=budget_ram)
    if write_snapshot:
        write_file(outdir / SIZE_SNAPSHOT, report.to_json_text())
    return report
