"""`mlfbuild export`: MLFs + board → a folder of the model library and its build glue."""

from __future__ import annotations

import json
from pathlib import Path

from ..cliargs import apply_project_file
from ..toolchain import OPT_LEVELS
from .base import Command
from .common import add_board_arguments, add_cmsis_nn_arguments, add_module_rename


class ExportCommand(Command):
    name = "export"
    help = "write the model library (headers, sources, static libraries, CMake and Make glue) for your own firmware"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, nargs="+", help="MLF tarball(s) or unpacked folder(s)")
        add_board_arguments(parser)
        parser.add_argument("-o", "--output", type=Path, required=True,
                            help="the export folder (new, empty, or a previous export)")
        parser.add_argument("--name", help="the CMake package and library name (default: the module names)")
        parser.add_argument("--opt", choices=OPT_LEVELS,
                            help="optimisation level of the prebuilt libraries (default -Os)")
        parser.add_argument("--toolchain-prefix", default="arm-none-eabi-", help="cross compiler prefix")
        add_cmsis_nn_arguments(parser)
        parser.add_argument("--model", action="append", default=[], metavar="[MODULE=]MODEL.tflite",
                            help="the original model of a module: its inputs' and outputs' scale and zero point "
                                 "go into mlf_<mod>.h (checked to describe the same graph)")
        add_module_rename(parser)
        parser.add_argument("--json", action="store_true", help="print the export's description (docs/json.md)")

    def run(self, args):
        from ..export import export
        from ..project import ProjectOptions

        apply_project_file(args, self.name)
        options = ProjectOptions(optimize=args.opt, toolchain_prefix=args.toolchain_prefix, cmsis_nn=args.cmsis_nn,
                                 cmsis_core=args.cmsis_core)
        result = export(args.mlf, args.board, args.output, name=args.name, board_files=tuple(args.board_file),
                        options=options, models=args.model, renames=args.renames)
        if args.json:
            print(json.dumps(result.description, indent=2))
        else:
            cmake = result.description["cmake"]
            print(f"exported {', '.join(m['name'] for m in result.description['models'])} for "
                  f"{result.description['board']} to {result.folder} (CMake targets {cmake['model_target']}, "
                  f"{cmake['board_target']}; see its README.md)")
        return 0
