"""Arguments and steps several commands share: board choice, build options, building from them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..cliargs import build_memory_arg, parse_size, seconds_arg
from ..errors import InvalidInputError
from ..toolchain import OPT_LEVELS, RUNTIMES
from ..record import BUILD_RECORD, is_build_folder
from ..style import GREEN, RED, YELLOW, paint


def add_max_nodes(parser: argparse.ArgumentParser) -> None:
    from ..mlf.limits import DEFAULT_MAX_GRAPH_NODES
    parser.add_argument("--max-nodes", type=int, default=DEFAULT_MAX_GRAPH_NODES, metavar="N",
                        help=f"refuse executor graphs of more nodes (default {DEFAULT_MAX_GRAPH_NODES})")


def add_board_arguments(parser: argparse.ArgumentParser) -> None:
    from ..boards import DEFAULT_BOARD
    parser.add_argument("--board", "-b", help=f"board name or alias (default: mlfbuild.toml's, else {DEFAULT_BOARD}; "
                                              "see `mlfbuild boards`)")
    parser.add_argument("--board-file", type=Path, action="append", default=[],
                        help="a board file of your own (TOML, same schema as boards/*.toml)")


def add_cmsis_nn_arguments(parser: argparse.ArgumentParser) -> None:
    """--cmsis-nn and --cmsis-core, as build and export take them (docs/cmsis-nn.md)."""
    parser.add_argument("--cmsis-nn", type=Path, metavar="DIR",
                        help="CMSIS-NN source tree, for MLFs built with the CMSIS-NN BYOC (docs/cmsis-nn.md)")
    parser.add_argument("--cmsis-core", type=Path, metavar="DIR",
                        help="CMSIS-Core headers (CMSIS/Core/Include), for CMSIS-NN trees that include "
                             "cmsis_compiler.h and have none beside them")


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime", choices=RUNTIMES,
                        help="C runtime: mlfbuild's own (builtin, the default) or TVM's standalone CRT")
    parser.add_argument("--crt-dir", type=Path, help="TVM standalone CRT to use with --runtime tvm")
    add_cmsis_nn_arguments(parser)
    parser.add_argument("--toolchain-prefix", default="arm-none-eabi-", help="cross compiler prefix")
    parser.add_argument("--opt", choices=OPT_LEVELS,
                        help="optimisation level (default -Os; `--opt -O2` or `--opt=-O2`)")
    parser.add_argument("--cmsis-nn-opt", choices=OPT_LEVELS, metavar="LEVEL",
                        help="optimisation level of CMSIS-NN's sources alone (default: --opt's); TFLM compiles "
                             "them at -O2 beside an -Os core")
    parser.add_argument("--jobs", "-j", type=positive_int, default=os.cpu_count() or 2,
                        help="parallel compile jobs")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the compiler's output as it comes (it is always kept in OUT/build.log)")
    parser.add_argument("--budget-flash", type=parse_size, metavar="N", help="fail (exit 5) above this flash use")
    parser.add_argument("--budget-ram", type=parse_size, metavar="N", help="fail (exit 5) above this RAM use")
    add_max_nodes(parser)
    parser.add_argument("--max-code-size", type=parse_size, default=None, metavar="N",
                        help="refuse to generate more C than this per build (default 64M)")
    parser.add_argument("--build-timeout", type=seconds_arg("--build-timeout"), default=None, metavar="S",
                        help="stop make and the compiler after this many seconds (exit 4; default 1800)")
    parser.add_argument("--build-memory", type=build_memory_arg("--build-memory"), default=None, metavar="N",
                        help="address space make and each compiler may use, 64M to 1024G (exit 4 beyond it; "
                             "default 4G)")
    parser.add_argument("--app", type=Path, metavar="DIR",
                        help="your application's C/C++ sources, instead of mlfbuild's console main.c "
                             "(default: mlfbuild.toml's app; docs/export.md)")
    add_module_rename(parser)
    parser.add_argument("--stack-bytes", type=parse_size, metavar="N",
                        help="fixed .stack reserve, a multiple of 8 up to the board's RAM; not on the host (default: "
                             "the static stack bound + 256 B, else the board's)")


def add_module_rename(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--module", action="append", default=[], metavar="OLD=NEW", dest="renames",
                        help="name module OLD NEW: its tvmgen_<old>_* symbols, header, macros, file names "
                             "(LLVM objects through objcopy); repeatable, each renames the first module OLD "
                             "not renamed yet (TVM's 'default': --module default=kws)")


def build_from_args(args: argparse.Namespace, mlf: Path, outdir: Path):
    from ..build import build
    from ..project import ProjectOptions

    limits = {"max_code_bytes": args.max_code_size} if args.max_code_size else {}
    if args.build_memory is not None:
        limits["build_memory"] = args.build_memory
    options = ProjectOptions(runtime=args.runtime, crt_dir=args.crt_dir, cmsis_nn=args.cmsis_nn,
                             cmsis_core=args.cmsis_core,
                             optimize=args.opt, cmsis_nn_optimize=args.cmsis_nn_opt,
                             toolchain_prefix=args.toolchain_prefix,
                             stack_bytes=args.stack_bytes, app=args.app, **limits)
    timeout = {"build_timeout": args.build_timeout} if args.build_timeout else {}
    quiet = getattr(args, "json", False)
    progress = None if quiet else show_build_line
    return build(mlf, args.board, outdir, options=options, board_files=tuple(args.board_file),
                 jobs=args.jobs, progress=progress, budget_flash=args.budget_flash, budget_ram=args.budget_ram,
                 verbose=args.verbose, max_graph_nodes=args.max_nodes, renames=args.renames, **timeout)


def show_build_line(line: str) -> None:
    if line.startswith("warning: "):
        line = paint("warning:", YELLOW, sys.stderr) + line[len("warning:"):]
    print(f"  {line}", file=sys.stderr, flush=True)


def is_build_folder_or_mlf(target: Path) -> bool:
    """True for a build folder; False for an MLF (built first); InvalidInputError for anything else."""
    if is_build_folder(target):
        return True
    if not target.exists():
        raise InvalidInputError(f"{target}: no such file or folder")
    if target.is_dir() and not (target / "metadata.json").is_file():
        raise InvalidInputError(f"{target}: neither a build folder (no {BUILD_RECORD}) nor an unpacked MLF "
                                "(no metadata.json)")
    return False


def coloured_verdict(text: str) -> str:
    head, _, verdict = text.rpartition("\n")
    colour = GREEN if verdict.startswith("result: pass") else RED if "MISMATCH" in verdict else YELLOW
    return f"{head}\n{paint(verdict, colour, sys.stdout)}"


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (`-j 0` would run no compiler at all)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value
