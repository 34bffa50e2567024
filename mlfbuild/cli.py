"""The `mlfbuild` program: parse the command line, run one command (mlfbuild/commands/), and turn
what went wrong into one line and an exit code — here, once, for every command."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys

from . import __version__
from .cliargs import HelpFormatter, Parser, epilog, parse_arguments
from .commands import COMMANDS
from .errors import MlfError, StdoutError, os_error
from .style import RED, paint, printable


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
    message = printable(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__
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
