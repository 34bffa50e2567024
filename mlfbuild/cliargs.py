"""What the command line needs besides the commands themselves: help pages with examples, exit codes
and defaults; "did you mean" for mistyped flags and choices; `--opt -O2` as well as `--opt=-O2`;
the project file's values where no flag was given; progress lines; temporary folders kept out of
messages."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from .errors import MlfError, UsageError
from .suggest import did_you_mean
from .units import build_memory, parse_byte_count, seconds, tolerance

# Per command: examples (command lines after `mlfbuild`) and the exit codes it can end with.
GUIDE: dict[str, tuple[tuple[str, ...], str]] = {
    "import": (("import kws_ref_model.tflite -o kws.tar", "import model.tflite --name kws --json"),
               "0 ok, 2 usage, 3 invalid or unsupported model (the operator and its index are named), "
               "9 disk full or read-only"),
    "inspect": (("inspect model.tar", "inspect model.tar --json > model.json"),
                "0 ok, 2 usage, 3 invalid MLF, 9 no room to unpack it"),
    "boards": (("boards", "boards --json --board-file my-board.toml"),
               "0 ok, 2 usage, 3 invalid board file"),
    "build": (("build model.tar -b mps2-an386 -o build/kws",
               "build model.tar -b nucleo_f446re --opt -O2 --budget-flash 256K",
               "build default.tar -b mps2-an386 --module default=kws"),
              "0 ok, 2 usage (or an output folder that cannot be used), 3 invalid input (MLF, board file), "
              "4 build failed, 5 over budget, 9 disk full or read-only"),
    "run": (("run build/kws --reference kws.npz --repeat 10",
             "run model.tar -b host --reference kws.npz --json",
             "run build/kws --reference kws.tflite --samples 100",
             "run build/kws --reference host --samples 1000"),
            "0 ok (or outputs not checked), 2 usage, 3 invalid input, 4 build failed (MLF targets) or LiteRT "
            "not installed (a .tflite reference: pip install 'mlfbuild[reference]'), "
            "6 run failed or timed out, 7 outputs differ from the reference, 9 disk full or read-only"),
    "reference": (("reference kws.tflite --samples 100 -o kws-ref.npz",
                   "reference kws.tflite --input recordings.npz -o kws-ref.npz"),
                  "0 ok, 2 usage, 3 invalid input (model, tensors), 4 LiteRT not installed "
                  "(pip install 'mlfbuild[reference]'), 6 LiteRT did not finish, 9 disk full or read-only"),
    "size": (("size build/kws", "size build/kws --json > base.json && mlfbuild size build/kws --diff base.json"),
             "0 ok, 2 usage, 3 invalid input, 5 over budget, 9 disk full or read-only"),
    "export": (("export model.tar -b mps2-an386 -o kws-export",
                "export kws.tar ad.tar -b nucleo_f446re -o models --name models --json",
                "export a.tar b.tar -b mps2-an386 -o models --module default=kws --module default=ad"),
               "0 ok, 2 usage (or an output folder that is not an export), 3 invalid input (MLF, board file), "
               "4 the prebuilt libraries failed to compile, 9 disk full or read-only"),
    "flash": (("flash build/f446 --port /dev/ttyUSB0",),
              "0 ok, 2 usage, 3 invalid input, 4 flashing tool missing (imgtool, pyOCD, OpenOCD), "
              "8 flash or verify failed"),
    "monitor": (("monitor --port /dev/ttyACM0",), "0 ok, 1 port closed, 2 usage, 3 port unusable"),
    "matrix": (("matrix kws.tar ad.tar -b mps2-an386 -b mps2-an385 --junit matrix.xml",),
               "0 all passed (or not checked), 2 usage (or -o/--cache not a usable folder), 9 a --scheduler "
               "that does not answer as Dask; else the jobs' first code in this order: 3 invalid "
               "input, 4 a build failed, 6 a run failed, 9 infrastructure error, 5 over budget, 7 an output "
               "differed (docs/matrix.md)"),
    "ports": (("ports", "ports --json"), "0 ok, 2 usage"),
    "example": (("example", "example my-first-model && mlfbuild run my-first-model/tiny_aot.tar "
                            "--reference my-first-model/tiny_aot.npz"),
                "0 ok, 2 usage (DIR holds other files of those names), 9 disk full or read-only"),
}

_OPTIONS_TAKING_FLAGS = ("--opt", "--cmsis-nn-opt")  # their values start with '-' (-O2), which argparse takes for a flag


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default unless its help already says it; keeps the epilog's lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = bool(action.option_strings) and action.default not in (None, False, [], argparse.SUPPRESS)
        if shown and "default" not in text:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" after an invalid choice (a mistyped command, board kind, ...)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if "invalid choice: '" in message and "(choose from " in message:
            word = message.split("invalid choice: '", 1)[1].split("'", 1)[0]
            choices = [c.strip(" '") for c in message.split("(choose from ", 1)[1].rstrip(")").split(",")]
            message += did_you_mean(word, choices)
        super().error(message)


def epilog(command: str) -> str:
    examples, codes = GUIDE[command]
    lines = ["examples:", *(f"  mlfbuild {line}" for line in examples), "", f"exit codes: {codes}"]
    return "\n".join(lines)


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, with `--opt -O2` accepted and a "did you mean" for unknown flags (exit 2)."""
    argv = join_flag_values(list(sys.argv[1:] if argv is None else argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _subparser(parser, getattr(args, "command", None)) or parser
        known = [s for action in command._actions for s in action.option_strings]
        hints = "".join(did_you_mean(word.split("=", 1)[0], known) for word in extra if word.startswith("-"))
        command.error(f"unrecognized arguments: {' '.join(extra)}{hints}")
    return args


def join_flag_values(argv: list[str]) -> list[str]:
    """`--opt -O2` → `--opt=-O2`: the one option whose values look like flags."""
    out: list[str] = []
    for word in argv:
        if out and out[-1] in _OPTIONS_TAKING_FLAGS and word.startswith("-O"):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None


# --- the project file ------------------------------------------------------------------------------

def apply_project_file(args: argparse.Namespace, command: str) -> None:
    """Fill what no flag gave from ./mlfbuild.toml (when there is one), then the built-in defaults;
    resolve a board alias to the board's name. Commands: build, run, size."""
    from .boards import DEFAULT_BOARD, load_board
    from .projectfile import find_project_file

    project = find_project_file(Path("."))
    take = (lambda key: getattr(project, key)) if project else (lambda key: None)
    board_files = getattr(args, "board_file", [])
    board = getattr(args, "board", None) or take("board") or DEFAULT_BOARD
    board = load_board(board, board_files).name
    if hasattr(args, "board"):
        args.board = board
    for key, default in (("opt", "-Os"), ("runtime", "builtin")):
        if hasattr(args, key):
            setattr(args, key, getattr(args, key) or take(key) or default)
    for key in ("budget_flash", "budget_ram"):
        if getattr(args, key, None) is None:
            setattr(args, key, take(key))
    for key in ("atol", "rtol"):
        if hasattr(args, key) and getattr(args, key) is None:
            setattr(args, key, take(key))
    if hasattr(args, "build_memory") and args.build_memory is None:
        args.build_memory = take("build_memory")
    if hasattr(args, "app") and args.app is None:
        args.app = take("app")
    if hasattr(args, "reference") and not args.reference:
        args.reference = list(take("references") or ())
    if getattr(args, "samples", 0) is None:
        args.samples = take("samples")
    _apply_target(args, command, take("mlf"), board)


def _apply_target(args: argparse.Namespace, command: str, mlf: Path | None, board: str) -> None:
    if command in ("build", "run"):
        key = "mlf" if command == "build" else "target"
        if getattr(args, key) is None:
            if mlf is None:
                raise UsageError(f"no MLF given: name one (mlfbuild {command} MODEL.tar) or write "
                                 f"mlf = \"MODEL.tar\" into mlfbuild.toml")
            setattr(args, key, mlf)
            if command == "run":  # the project's build folder: run it there, so size finds run.json
                folder = default_output(mlf, board)
                from .record import is_build_folder

                if is_build_folder(folder):
                    args.target = folder
                elif getattr(args, "output", None) is None:
                    args.output = folder
    elif command == "size" and args.target is None:
        if mlf is None:
            raise UsageError("no build folder given: name one (mlfbuild size build/NAME) or write "
                             "mlf = \"MODEL.tar\" into mlfbuild.toml to size its default build folder")
        args.target = default_output(mlf, board)


def default_output(mlf: Path, board: str) -> Path:
    """Where `mlfbuild build` writes without -o: build/<mlf name>-<board>."""
    return Path("build") / f"{Path(mlf).name.split('.')[0]}-{board}"


# --- progress and messages -------------------------------------------------------------------------

class RepeatProgress:
    """`model: n/N inferences` on stderr once a model's inferences take longer than an interval
    (0.5 s on a terminal, rewritten in place; 5 s elsewhere, a line each time), then its last count."""

    def __init__(self, stream=None, interval: float | None = None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else 0.5 if self.tty else 5.0
        self.shown_at = time.monotonic()  # nothing is shown before a first interval has passed
        self.showing = ""  # the model whose count is on screen

    def __call__(self, model: str, done: int, total: int) -> None:
        now = time.monotonic()
        due = now - self.shown_at >= self.interval
        if not (due or (done == total and self.showing == model)):
            return
        self.shown_at, self.showing = now, model
        text = f"  {model}: {done}/{total} inferences"
        if self.tty:
            self.stream.write(f"\r{text}" + ("\n" if done == total else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


@contextlib.contextmanager
def temporary_folder_hidden(folder: str, keep_hint: str = " (use -o DIR to keep the build)") -> Iterator[None]:
    """Errors raised inside may name `folder`, which is deleted by the time they are shown: they say
    "<temporary build folder>" instead, and how to keep one."""
    try:
        yield
    except MlfError as exc:
        text = str(exc)
        if folder in text:
            text = text.replace(os.path.join(folder, "build"), "<temporary build folder>")
            exc.args = (text.replace(folder, "<temporary folder>") + keep_hint,)
        raise


def parse_size(text: str) -> int:
    """A byte count for argparse: 65536, 0x10000, 64K, 64KiB, 1M (K/M/G are powers of 1024)."""
    try:
        return parse_byte_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tolerance_arg(flag: str):
    """An argparse type for a tolerance flag; a wrong value is one line naming the flag (exit 2)."""
    return _checked_arg(flag, tolerance)


def seconds_arg(flag: str):
    """An argparse type for a time limit flag; a wrong value is one line naming the flag (exit 2)."""
    return _checked_arg(flag, seconds)


def build_memory_arg(flag: str):
    """An argparse type for the build's memory limit; a wrong value is one line naming the flag (exit 2)."""
    return _checked_arg(flag, build_memory)


def _checked_arg(flag: str, rule):
    def convert(text: str):
        try:
            return rule(text)
        except ValueError as exc:  # not argparse's error: it would print the whole usage first
            raise UsageError(f"{flag}: {exc}") from None
    convert.__name__ = flag.lstrip("-").replace("-", "_")
    return convert


def _sample_count(text: str) -> int:
    """A count of samples: 1 .. 100,000."""
    from .projectfile import MAX_SAMPLES

    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"not a whole number: '{text}'") from None
    if not 1 <= value <= MAX_SAMPLES:
        raise ValueError(f"must be between 1 and {MAX_SAMPLES:,}, got {value}")
    return value


samples_arg = _checked_arg("--samples", _sample_count)  # run, reference and matrix: one rule, one line
