"""The `mlfbuild` command: a thin face over the library. Each command is a small class; errors are
caught here, once, and mapped to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
import tempfile
from pathlib import Path

from . import __version__
from .errors import InvalidInputError, MismatchError, MlfError, StdoutError, os_error
from .cliargs import (HelpFormatter, Parser, RepeatProgress, apply_project_file, default_output, epilog,
                      parse_arguments, temporary_folder_hidden)
from .flash.cli import FlashCommand, MonitorCommand
from .project import OPT_LEVELS, RUNTIMES
from .schemas import BOARDS as BOARDS_SCHEMA, INSPECT as INSPECT_SCHEMA
from .outfolder import write_file as write_report_file
from .ports import PortsCommand
from .size.command import parse_size
from .style import GREEN, RED, YELLOW, paint


class Command:
    name = ""
    help = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace) -> int:
        raise NotImplementedError


class InspectCommand(Command):
    name = "inspect"
    help = "describe an MLF: modules, executor, interface, files, tensors, memory summary"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, help="MLF tarball (.tar, .tar.gz, .tgz) or unpacked folder")
        parser.add_argument("--json", action="store_true", help="print the stable JSON description")
        parser.add_argument("--max-size", type=parse_size, default=None,
                            help="refuse archives that unpack to more than this (default 512M)")
        _add_max_nodes(parser)

    def run(self, args):
        from .mlf.archive import DEFAULT_MAX_TOTAL_BYTES
        from .mlf.reader import read_mlf
        from .mlf.summary import format_summary

        with tempfile.TemporaryDirectory(prefix="mlfbuild-inspect-") as work, temporary_folder_hidden(work, ""):
            lib = read_mlf(args.mlf, Path(work), max_total_bytes=args.max_size or DEFAULT_MAX_TOTAL_BYTES,
                           max_graph_nodes=args.max_nodes)
            if args.json:
                print(json.dumps({"schema": INSPECT_SCHEMA, **lib.to_json()}, indent=2, sort_keys=True))
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
            document = {"schema": BOARDS_SCHEMA, "boards": [b.to_json() for b in boards]}
            print(json.dumps(document, indent=2, sort_keys=True))
            return 0
        for board in boards:
            also = f" (also: {', '.join(board.aliases)})" if board.aliases else ""
            print(f"{board.name:<20} {board.kind:<9} {board.description}{also}")
        return 0


def _add_max_nodes(parser: argparse.ArgumentParser) -> None:
    from .mlf.limits import DEFAULT_MAX_GRAPH_NODES
    parser.add_argument("--max-nodes", type=int, default=DEFAULT_MAX_GRAPH_NODES, metavar="N",
                        help=f"refuse executor graphs of more nodes (default {DEFAULT_MAX_GRAPH_NODES})")


def _add_board_arguments(parser: argparse.ArgumentParser) -> None:
    from .boards import DEFAULT_BOARD
    parser.add_argument("--board", "-b", help=f"board name or alias (default: mlfbuild.toml's, else {DEFAULT_BOARD}; "
                                              "see `mlfbuild boards`)")
    parser.add_argument("--board-file", type=Path, action="append", default=[],
                        help="a board file of your own (TOML, same schema as boards/*.toml)")


def _add_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime", choices=RUNTIMES,
                        help="C runtime: mlfbuild's own (builtin, the default) or TVM's standalone CRT")
    parser.add_argument("--crt-dir", type=Path, help="TVM standalone CRT to use with --runtime tvm")
    parser.add_argument("--cmsis-nn", type=Path, help="CMSIS-NN source tree, for MLFs built with the CMSIS-NN BYOC")
    parser.add_argument("--cmsis-core", type=Path, metavar="DIR",
                        help="CMSIS-Core headers (CMSIS/Core/Include), for CMSIS-NN trees that include "
                             "cmsis_compiler.h and have none beside them")
    parser.add_argument("--toolchain-prefix", default="arm-none-eabi-", help="cross compiler prefix")
    parser.add_argument("--opt", choices=OPT_LEVELS,
                        help="optimisation level (default -Os; `--opt -O2` or `--opt=-O2`)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2, help="parallel compile jobs")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the compiler's output as it comes (it is always kept in OUT/build.log)")
    parser.add_argument("--budget-flash", type=parse_size, metavar="N", help="fail (exit 5) above this flash use")
    parser.add_argument("--budget-ram", type=parse_size, metavar="N", help="fail (exit 5) above this RAM use")
    _add_max_nodes(parser)
    parser.add_argument("--max-code-size", type=parse_size, default=None, metavar="N",
                        help="refuse to generate more C than this per build (default 64M)")
    parser.add_argument("--build-timeout", type=float, default=None, metavar="S",
                        help="stop make and the compiler after this many seconds (exit 4; default 1800)")
    parser.add_argument("--stack-bytes", type=parse_size, metavar="N",
                        help="fixed .stack reserve (default: the static stack bound + 256 B, else the board's)")


def build_from_args(args: argparse.Namespace, mlf: Path, outdir: Path):
    from .build import build
    from .project import ProjectOptions

    limits = {"max_code_bytes": args.max_code_size} if args.max_code_size else {}
    options = ProjectOptions(runtime=args.runtime, crt_dir=args.crt_dir, cmsis_nn=args.cmsis_nn,
                             cmsis_core=args.cmsis_core,
                             optimize=args.opt, toolchain_prefix=args.toolchain_prefix,
                             stack_bytes=args.stack_bytes, **limits)
    timeout = {"build_timeout": args.build_timeout} if args.build_timeout else {}
    quiet = getattr(args, "json", False)
    progress = None if quiet else _show_build_line
    return build(mlf, args.board, outdir, options=options, board_files=tuple(args.board_file),
                 jobs=args.jobs, progress=progress, budget_flash=args.budget_flash, budget_ram=args.budget_ram,
                 verbose=args.verbose, max_graph_nodes=args.max_nodes, **timeout)


def _show_build_line(line: str) -> None:
    if line.startswith("warning: "):
        line = paint("warning:", YELLOW, sys.stderr) + line[len("warning:"):]
    print(f"  {line}", file=sys.stderr, flush=True)


def _is_build_folder(target: Path) -> bool:
    """True for a build folder; False for an MLF (built first); InvalidInputError for anything else."""
    from .build import BUILD_RECORD

    if (target / BUILD_RECORD).is_file():
        return True
    if not target.exists():
        raise InvalidInputError(f"{target}: no such file or folder")
    if target.is_dir() and not (target / "metadata.json").is_file():
        raise InvalidInputError(f"{target}: neither a build folder (no {BUILD_RECORD}) nor an unpacked MLF "
                                "(no metadata.json)")
    return False


def _coloured_verdict(text: str) -> str:
    head, _, verdict = text.rpartition("\n")
    colour = GREEN if verdict.startswith("result: pass") else RED if "MISMATCH" in verdict else YELLOW
    return f"{head}\n{paint(verdict, colour, sys.stdout)}"


class BuildCommand(Command):
    name = "build"
    help = "render a board project around the MLF and compile it to firmware.elf/.bin/.hex"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, nargs="?",
                            help="MLF tarball or unpacked folder (default: mlfbuild.toml's mlf)")
        _add_board_arguments(parser)
        parser.add_argument("-o", "--output", type=Path, default=None, help="output folder (default build/<mlf>-<board>)")
        _add_build_arguments(parser)

    def run(self, args):
        apply_project_file(args, self.name)
        outdir = args.output or default_output(args.mlf, args.board)
        result = build_from_args(args, args.mlf, outdir)
        compiled = len(result.make.compiled)
        print(f"built {result.elf} for {result.board.name} "
              f"({'nothing recompiled' if compiled == 0 else f'{compiled} file(s) compiled'})")
        return 0


class RunCommand(Command):
    name = "run"
    help = "run firmware (a build folder, or an MLF to build first) in QEMU, on the host or a board; check outputs"

    def add_arguments(self, parser):
        parser.add_argument("target", type=Path, nargs="?",
                            help="build folder, or MLF tarball/folder (built first; default: mlfbuild.toml's mlf)")
        _add_board_arguments(parser)
        parser.add_argument("-o", "--output", type=Path, help="where to build when TARGET is an MLF (default: a temporary folder)")
        parser.add_argument("--input", type=Path, help="input tensors (.npz keyed by input name, or .npy)")
        parser.add_argument("--reference", action="append", default=[], metavar="[MODEL=]REF.npz",
                            help="expected outputs (keys output_0.. or output names); inputs too when --input is absent")
        parser.add_argument("--atol", type=float, help="absolute tolerance (default 0 for integers, 1e-5 for floats)")
        parser.add_argument("--rtol", type=float, help="relative tolerance (default 0 for integers, 1e-5 for floats)")
        parser.add_argument("--repeat", type=int, default=1,
                            help="inferences per model (timing is reported per run; progress shown for long runs)")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for any reply (default 60)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs used without --input")
        parser.add_argument("--port", help="serial port of a flashed board (instead of QEMU/host)")
        parser.add_argument("--baud", type=int, default=115200, help="baud rate of --port")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument("--junit", type=Path, help="write a JUnit XML report")
        parser.add_argument("--profile", action="store_true",
                            help="instructions and calls per operator function (QEMU)")
        _add_build_arguments(parser)

    def run(self, args):
        from .build import load_record
        from .run import MISMATCH, run_build
        from .run.report import format_run, junit_xml

        apply_project_file(args, self.name)
        with tempfile.TemporaryDirectory(prefix="mlfbuild-run-") as scratch, temporary_folder_hidden(scratch):
            build_dir = args.target
            if not _is_build_folder(args.target):
                build_dir = args.output or Path(scratch) / "build"
                build_from_args(args, args.target, build_dir)
            transport, finish = None, None
            if args.profile:
                from .run.profile import profiled_transport
                transport, finish = profiled_transport(build_dir, port=args.port, baud=args.baud)
            result = run_build(build_dir, port=args.port, baud=args.baud, inputs=args.input,
                               references=args.reference, atol=args.atol, rtol=args.rtol, repeat=args.repeat,
                               timeout=args.timeout, seed=args.seed, transport=transport,
                               progress=None if args.json else RepeatProgress())
            board = load_record(build_dir)["board"]
        result.target = str(args.target if build_dir != args.target and not args.output else build_dir)
        if finish:
            from .run.profile import format_profile, with_profile
            profile = finish(result)
            print(json.dumps(with_profile(result.to_json(), profile), indent=2, sort_keys=True) if args.json
                  else _coloured_verdict(format_run(result)) + "\n" + format_profile(profile))
        else:
            text = json.dumps(result.to_json(), indent=2, sort_keys=True) if args.json else format_run(result)
            print(text if args.json else _coloured_verdict(text))
        for warning in result.warnings:
            print(f"mlfbuild: warning: {warning}", file=sys.stderr)
        if args.junit:  # after the verdict is shown: a JUnit file that cannot be written loses nothing else
            write_report_file(args.junit, junit_xml(result, board))
        if result.status == MISMATCH:
            raise MismatchError("outputs differ from the reference (see above)")
        return 0


class MatrixCommand(Command):
    name = "matrix"
    help = "build and run many MLFs on several boards on a Dask cluster (local by default); JUnit, JSON, HTML"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, nargs="*", help="MLFs (no references: outputs are not checked)")
        parser.add_argument("--jobs-file", type=Path, help='JSON list of {"mlf": path, "references": '
                            '["[MODEL=]ref.npz", ...], "boards": [...], "atol": x, "rtol": y}')
        parser.add_argument("--retry-failed", type=Path, metavar="PREVIOUS.json",
                            help="run again only the jobs that failed or errored in an earlier matrix's JSON")
        parser.add_argument("--board", "-b", action="append", default=[], help="board (repeat; default mps2-an386)")
        parser.add_argument("-o", "--output", type=Path, default=Path("build/matrix"),
                            help="output folder: jobs/<id>/, matrix.json, matrix.html (default build/matrix)")
        parser.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                            help="run on this Dask cluster (default: a local cluster of --workers processes)")
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                            help="worker processes of the local cluster (default: the number of cores)")
        parser.add_argument("--build-only", action="store_true", help="build every job, run none")
        parser.add_argument("--cache", type=Path, help="build cache folder (default OUTPUT/cache)")
        parser.add_argument("--no-cache", action="store_true", help="neither read nor fill the build cache")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for any reply of a firmware")
        parser.add_argument("--job-timeout", type=float, default=900.0,
                            help="seconds a job's build, and then its run, may take (default 900)")
        parser.add_argument("--filter-board", action="append", default=[], metavar="GLOB", help="keep these boards")
        parser.add_argument("--filter-model", action="append", default=[], metavar="GLOB",
                            help="keep these models (MLF file name or folder/stem)")
        parser.add_argument("--filter-executor", action="append", default=[], choices=["aot", "graph", "operator"])
        parser.add_argument("--filter-interface", action="append", default=[], choices=["c", "packed", "none"])
        parser.add_argument("--board-file", type=Path, action="append", default=[],
                            help="a board file of your own (sent to the workers by content)")
        parser.add_argument("--runtime", choices=["builtin", "tvm"], default="builtin")
        parser.add_argument("--cmsis-nn", type=Path, help="CMSIS-NN source tree (sent to the workers by content)")
        parser.add_argument("--opt", default="-Os", choices=["-Os", "-O2", "-O3", "-O1", "-O0", "-Og"])
        parser.add_argument("--budget-flash", type=parse_size, metavar="N", help="a failure above this flash use")
        parser.add_argument("--budget-ram", type=parse_size, metavar="N", help="a failure above this RAM use")
        parser.add_argument("--junit", type=Path, help="write a JUnit XML report")
        parser.add_argument("--json", action="store_true", help="print the results as versioned JSON")

    def run(self, args):
        from . import matrix
        from .errors import UsageError

        jobs = _matrix_jobs(args)
        if not jobs:
            raise UsageError("nothing to do: give MLFs, --jobs-file or --retry-failed (or the filters left no job)")
        config = matrix.BuildConfig(opt=args.opt, runtime=args.runtime, board_files=tuple(args.board_file),
                                    cmsis_nn=args.cmsis_nn, budget_flash=args.budget_flash,
                                    budget_ram=args.budget_ram)
        limits = matrix.Limits(build_only=args.build_only, job_timeout=args.job_timeout, reply_timeout=args.timeout)
        cache = matrix.BuildCache(None if args.no_cache else args.cache or args.output / "cache")
        progress = matrix.Progress(len(jobs))
        with matrix.dask_client(args.scheduler, args.workers) as client:
            results = matrix.run_matrix(jobs, config, limits, client=client, outroot=args.output, cache=cache,
                                        on_result=progress.finished, on_running=progress.running)
        progress.close()
        report = matrix.document(results)
        write_report_file(args.output / "matrix.json", json.dumps(report, indent=2) + "\n")
        write_report_file(args.output / "matrix.html", matrix.html_grid(results))
        if args.junit:
            write_report_file(args.junit, matrix.junit_xml(results))
        print(json.dumps(report, indent=2) if args.json else matrix.summary_table(results))
        return report["exit_code"]


def _matrix_jobs(args: argparse.Namespace) -> list:
    from . import matrix
    from .errors import UsageError

    if args.retry_failed and (args.mlf or args.jobs_file):
        raise UsageError("--retry-failed takes its jobs from the earlier result: give no MLFs or --jobs-file with it")
    entries = [matrix.Entry(mlf=str(m.resolve())) for m in args.mlf]
    if args.jobs_file:
        entries += matrix.entries_from_file(args.jobs_file)
    jobs = matrix.jobs_to_retry(args.retry_failed) if args.retry_failed else matrix.cross(entries, args.board)
    filters = matrix.Filters(boards=args.filter_board, models=args.filter_model, executors=args.filter_executor,
                             interfaces=args.filter_interface)
    return matrix.apply_filters(jobs, filters)


class SizeCommand(Command):
    name = "size"
    help = "where every byte of flash and RAM goes; predicted vs linked; budgets (exit 5); --diff, --html"

    def add_arguments(self, parser):
        from .size import command as size_command
        size_command.add_arguments(parser)

    def run(self, args):
        from .size import command as size_command
        apply_project_file(args, self.name)
        return size_command.run(args)


class ExampleCommand(Command):
    name = "example"
    help = "write the bundled example MLF and its reference into DIR, to try every command on"

    def add_arguments(self, parser):
        parser.add_argument("dir", type=Path, nargs="?", default=Path("mlfbuild-example"),
                            help="folder to write tiny_aot.tar and tiny_aot.npz into (default: mlfbuild-example)")

    def run(self, args):
        from .example import write_example

        mlf, reference = write_example(args.dir)
        print(f"wrote {mlf} and {reference}; try:\n  mlfbuild build {mlf} -o build/example\n"
              f"  mlfbuild run build/example --reference {reference}\n  mlfbuild size build/example")
        return 0


COMMANDS: list[Command] = [InspectCommand(), BoardsCommand(), BuildCommand(), RunCommand(), SizeCommand(),
                           FlashCommand(), MonitorCommand(), MatrixCommand(), PortsCommand(), ExampleCommand()]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mlfbuild", description="Turn TVM Model Library Format exports into firmware.")
    parser.add_argument("--version", action="version", version=f"mlfbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help,
                                             epilog=epilog(command.name), formatter_class=HelpFormatter))
    return parser


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C, so every `finally` runs (emulators are killed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop_on(signum: int, frame) -> None:
    raise _Stopped(signum)


def _unwind_on_termination() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _stop_on)


def main(argv: list[str] | None = None) -> int:
    try:
        _unwind_on_termination()
        args = parse_arguments(build_parser(), argv)
        command = next(c for c in COMMANDS if c.name == args.command)
        code = command.run(args)
        sys.stdout.flush()  # a full disk or a closed pipe on stdout shows here, not at exit
        return code
    except MlfError as exc:
        return _report(exc)
    except StdoutError as exc:
        return _stdout_failed(exc)
    except BrokenPipeError as exc:
        return _stdout_failed(exc)
    except OSError as exc:  # what no stage expected: still one line, never a traceback
        return _report(os_error(exc, f"cannot use {exc.filename}" if exc.filename is not None else ""))
    except _Stopped as stop:
        import signal

        print(f"mlfbuild: stopped by {signal.Signals(stop.signum).name}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("mlfbuild: interrupted", file=sys.stderr)
        return 130


def _report(exc: MlfError) -> int:
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    print(f"mlfbuild: {paint('error:', RED, sys.stderr)} {message}", file=sys.stderr)
    table = getattr(exc, "table", "")
    if table:
        print(table, file=sys.stderr)
    return exc.exit_code


def _stdout_failed(exc: OSError) -> int:
    """`mlfbuild ... | head`: the reader has all it wanted — end quietly, as a SIGPIPE would. Any
    other failure on stdout (a full disk, a closed descriptor) is said in one line."""
    code = 128 + 13 if exc.errno == errno.EPIPE else _report(os_error(exc, "cannot write to standard output"))
    return _quiet_after_closed_stdout(code)


def _quiet_after_closed_stdout(code: int) -> int:
    """Point stdout at /dev/null so the interpreter's final flush does not fail a second time."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    return code


if __name__ == "__main__":
    sys.exit(main())
