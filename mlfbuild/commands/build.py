"""`mlfbuild build`: MLF + board → firmware."""

from __future__ import annotations

from pathlib import Path

from ..cliargs import apply_project_file, default_output
from .base import Command
from .common import add_board_arguments, add_build_arguments, build_from_args


class BuildCommand(Command):
    name = "build"
    help = "render a board project around the MLF and compile it to firmware.elf/.bin/.hex"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, nargs="?",
                            help="MLF tarball or unpacked folder (default: mlfbuild.toml's mlf)")
        add_board_arguments(parser)
        parser.add_argument("-o", "--output", type=Path, default=None, help="output folder (default build/<mlf>-<board>)")
        add_build_arguments(parser)

    def run(self, args):
        apply_project_file(args, self.name)
        outdir = args.output or default_output(args.mlf, args.board)
        result = build_from_args(args, args.mlf, outdir)
        compiled = len(result.make.compiled)
        print(f"built {result.elf} for {result.board.name} "
              f"({'nothing recompiled' if compiled == 0 else f'{compiled} file(s) compiled'})")
        return 0
