"""`mlfbuild run`: run a build (or an MLF, built first) and check its outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from .. import record
from ..cliargs import (RepeatProgress, apply_project_file, samples_arg, seconds_arg, temporary_folder_hidden,
                       tolerance_arg)
from ..errors import InvalidInputError, MismatchError
from ..outfolder import write_file as write_report_file
from .base import Command
from .common import add_board_arguments, add_build_arguments, build_from_args, coloured_verdict, is_build_folder_or_mlf


class RunCommand(Command):
    name = "run"
    help = "run firmware (a build folder, or an MLF to build first) in QEMU, on the host or a board; check outputs"

    def add_arguments(self, parser):
        parser.add_argument("target", type=Path, nargs="?",
                            help="build folder, or MLF tarball/folder (built first; default: mlfbuild.toml's mlf)")
        add_board_arguments(parser)
        parser.add_argument("-o", "--output", type=Path, help="where to build when TARGET is an MLF (default: a temporary folder)")
        parser.add_argument("--input", type=Path,
                            help="input tensors (.npz keyed by input name, or .npy); a leading axis of N samples "
                                 "runs each; float values for a quantized input are quantized with the model's "
                                 "parameters (needs --reference MODEL.tflite)")
        parser.add_argument("--reference", action="append", default=[], metavar="[MODEL=]REF",
                            help="expected outputs: a .npz (keys output_0.. or output names; inputs too when "
                                 "--input is absent) or the original model, a .tflite run with LiteRT on the "
                                 "same inputs (pip install 'mlfbuild[reference]')")
        parser.add_argument("--samples", type=samples_arg, metavar="N",
                            help="run N seeded random inputs (or the first N samples of a file) in one session")
        parser.add_argument("--dequantize", action="store_true",
                            help="show the last sample's outputs as real numbers (scale and zero point from "
                                 "the reference)")
        parser.add_argument("--atol", type=tolerance_arg("--atol"), help="absolute tolerance (default 0 for integers, 1e-5 for floats)")
        parser.add_argument("--rtol", type=tolerance_arg("--rtol"), help="relative tolerance (default 0 for integers, 1e-5 for floats)")
        parser.add_argument("--repeat", type=int, default=1,
                            help="inferences per model (timing is reported per run; progress shown for long runs)")
        parser.add_argument("--timeout", type=seconds_arg("--timeout"), default=60.0, help="seconds to wait for any reply (default 60)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs used without --input")
        parser.add_argument("--port", help="serial port of a flashed board (instead of QEMU/host)")
        parser.add_argument("--baud", type=int, default=115200, help="baud rate of --port")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        parser.add_argument("--junit", type=Path, help="write a JUnit XML report")
        parser.add_argument("--profile", action="store_true",
                            help="instructions and calls per operator function (QEMU)")
        parser.add_argument("--cycles-for", metavar="BOARD",
                            help="(implies --profile) add BOARD's flash wait states and flash caches to the cycle "
                                 "estimate, as if the firmware ran from that chip's flash (boards with "
                                 "[flash_timing], e.g. nucleo-l4r5zi; the same core as the build's)")
        add_build_arguments(parser)

    def run(self, args):
        from ..run import MISMATCH, run_build
        from ..run.report import format_run, junit_xml

        apply_project_file(args, self.name)
        with tempfile.TemporaryDirectory(prefix="mlfbuild-run-") as scratch, temporary_folder_hidden(scratch):
            build_dir = args.target
            if not is_build_folder_or_mlf(args.target):
                _check_models_litert_runs(args)
                build_dir = args.output or Path(scratch) / "build"
                build_from_args(args, args.target, build_dir)
            if record.load(build_dir).data.get("app"):
                return _run_app(args, build_dir)
            result = run_build(build_dir, port=args.port, baud=args.baud, inputs=args.input,
                               references=args.reference, atol=args.atol, rtol=args.rtol, repeat=args.repeat,
                               timeout=args.timeout, seed=args.seed, profile=args.profile or bool(args.cycles_for),
                               samples=args.samples, cycles_for=args.cycles_for,
                               progress=None if args.json else RepeatProgress())
        result.target = str(args.target if build_dir != args.target and not args.output else build_dir)
        if args.json:
            print(json.dumps(result.to_json(dequantize=args.dequantize), indent=2, sort_keys=True))
        else:
            print(coloured_verdict(format_run(result, dequantize=args.dequantize)))
            if result.profile is not None:
                from ..run.profile import format_profile
                print(format_profile(result.profile))
        for warning in result.warnings:
            print(f"mlfbuild: warning: {warning}", file=sys.stderr)
        if args.junit:  # after the verdict is shown: a JUnit file that cannot be written loses nothing else
            write_report_file(args.junit, junit_xml(result))
        if result.status == MISMATCH:
            verdicts = [m.chain_verdict for m in result.models if m.status == "mismatch" and m.chain_verdict]
            raise MismatchError(f"{verdicts[0] if verdicts else 'outputs differ from the reference'} (see above)")
        return 0


def _check_models_litert_runs(args) -> None:
    """Before building: a .tflite reference LiteRT cannot run is refused, and a .tflite built without
    --reference (checked against itself by default) is said to be checked against its host twin only."""
    from ..importer import is_tflite
    from ..reference.litert import cannot_run
    from ..run import unrunnable_model_note

    if importlib.util.find_spec("ai_edge_litert") is None:
        return
    for item in args.reference:
        path = Path(item.rpartition("=")[2] if "=" in item and not Path(item).exists() else item)
        why = cannot_run(path) if is_tflite(path) else None
        if why:
            raise InvalidInputError(f"--reference {item}: {why}; `--reference host` checks the firmware against "
                                    "its own MLF compiled for the host instead")
    if not args.reference and args.target is not None and is_tflite(args.target):
        note = unrunnable_model_note(args.target)
        if note:
            print(f"mlfbuild: warning: {note}", file=sys.stderr)


def _run_app(args, build_dir: Path) -> int:
    """A build of the user's application: its console as it comes, its exit status as the verdict."""
    from ..run import run_app_build

    if args.reference or args.input or args.profile or args.cycles_for or args.repeat != 1:
        print("mlfbuild: warning: --reference, --input, --repeat, --profile and --cycles-for do not apply to an application "
              "built with --app (it checks its own outputs)", file=sys.stderr)
    out = sys.stderr if args.json else sys.stdout
    echo = (lambda data: (out.buffer.write(data), out.flush())) if hasattr(out, "buffer") else None
    result = run_app_build(build_dir, timeout=args.timeout, port=args.port, baud=args.baud, echo=echo)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        verdict = "pass" if result.passed else "FAIL"
        print(coloured_verdict(f"\nresult: {verdict} — the application exited with status {result.exit_code}"))
    if not result.passed:
        raise MismatchError(f"the application exited with status {result.exit_code}")
    return 0
