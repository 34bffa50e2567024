"""The `mlfbuild` command: a thin face over the library. Each command is a small class; errors are
caught here, once, and mapped to exit codes."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from . import __version__
from .errors import MlfError


class Command:
    name = ""
    help = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


def _size_limit(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().removesuffix("ib").removesuffix("b")
    factor = units.get(text[-1:], 1)
    try:
        return int(text[:-1] if factor > 1 else text, 0) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 512M, 1G, 1048576)") from None


class InspectCommand(Command):
    name = "inspect"
    help = "describe an MLF: modules, executor, interface, files, tensors, memory summary"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, help="MLF tarball (.tar, .tar.gz, .tgz) or unpacked folder")
        parser.add_argument("--json", action="store_true", help="print the stable JSON description")
        parser.add_argument("--max-size", type=_size_limit, default=None,
                            help="refuse archives that unpack to more than this (default 512M)")

    def run(self, args):
        from .mlf.archive import DEFAULT_MAX_TOTAL_BYTES
        from .mlf.reader import read_mlf
        from .mlf.summary import format_summary

        with tempfile.TemporaryDirectory(prefix="mlfbuild-inspect-") as work:
            lib = read_mlf(args.mlf, Path(work), max_total_bytes=args.max_size or DEFAULT_MAX_TOTAL_BYTES)
            if args.json:
                print(json.dumps(lib.to_json(), indent=2, sort_keys=True))
            else:
                print(format_summary(lib, str(args.mlf)))
                for warning in lib.warnings:
                    print(f"mlfbuild: warning: {warning}", file=sys.stderr)
        return 0


class BoardsCommand(Command):
    name = "boards"
    help = "list the boards mlfbuild can build for"

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--board-file", type=Path, action="append", default=[],
                            help="also load this board file")

    def run(self, args):
        from .boards import list_boards, load_board_file

        boards = list_boards() + [load_board_file(p) for p in args.board_file]
        if args.json:
            print(json.dumps([b.to_json() for b in boards], indent=2, sort_keys=True))
            return 0
        for board in boards:
            print(f"{board.name:<20} {board.kind:<9} {board.description}")
        return 0


COMMANDS: list[Command] = [InspectCommand(), BoardsCommand()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mlfbuild", description="Turn TVM Model Library Format exports into firmware.")
    parser.add_argument("--version", action="version", version=f"mlfbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = next(c for c in COMMANDS if c.name == args.command)
    try:
        return command.run(args)
    except MlfError as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"mlfbuild: error: {message}", file=sys.stderr)
        table = getattr(exc, "table", "")
        if table:
            print(table, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("mlfbuild: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
