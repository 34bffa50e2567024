"""`mlfbuild import`: an int8 .tflite compiled ahead of time into an MLF that calls CMSIS-NN."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import MlfError, UsageError
from ..schemas import IMPORT as IMPORT_SCHEMA
from .base import Command


class ImportCommand(Command):
    name = "import"
    help = "compile an int8 .tflite model into an MLF (TVM's layout, CMSIS-NN calls) for every other command"

    def add_arguments(self, parser):
        parser.add_argument("model", type=Path, help="the model: an int8 .tflite file")
        parser.add_argument("-o", "--output", type=Path,
                            help="the MLF tarball to write (default: <model>.tar in the current folder)")
        parser.add_argument("--name", help="module name: tvmgen_<name>_run and friends (default: from the file name)")
        parser.add_argument("--rounding", choices=("tflite", "cmsis-nn"), default="tflite",
                            help="tflite: bit-exact with TFLite's reference kernels (fully connected layers round "
                                 "once; the default); cmsis-nn: CMSIS-NN's default rounding everywhere, as TFLM with "
                                 "CMSIS-NN computes (within an LSB per layer)")
        parser.add_argument("--memory", choices=("floor", "min"), default="floor",
                            help="floor: every layer writes a tensor of its own (the liveness floor; the default); "
                                 "min: convolutions and pads also write their output over their dying input row by "
                                 "row, and the first convolutions run in stripes, where that makes the pool smaller "
                                 "and the inputs and outputs are tensors of the pool (tvmgen_<name>_map_inputs and "
                                 "_map_outputs give their bytes) (a little more compute: calls per row, rows of the "
                                 "stripes recomputed)")
        parser.add_argument("--kernels", choices=("generated", "cmsis-nn"), default="generated",
                            help="generated: convolutions, depthwise convolutions and fully connected layers get C "
                                 "generated for their shapes where it beats CMSIS-NN, used on cores with DSP and no "
                                 "MVE (Cortex-M4/M7/M33) and on the host, their CMSIS-NN call elsewhere (the default); "
                                 "cmsis-nn: every layer calls CMSIS-NN. Both compute the same values")
        parser.add_argument("--json", action="store_true", help="print what was imported as JSON")

    def run(self, args):
        from ..importer import import_tflite
        from ..importer.kernels import generated_layers

        out = args.output or Path(f"{args.model.stem}.tar")
        if out.is_dir():
            raise UsageError(f"-o {out}: is a folder; name the MLF tarball to write")
        if out.resolve() == args.model.resolve():
            raise UsageError(f"-o {out}: is the model itself")
        try:
            result = import_tflite(args.model, out, args.name, args.rounding, args.memory, args.kernels)
        except MlfError as error:
            if args.json:  # the refusal as a document too; the one line on stderr and the exit code stay
                operator = getattr(error, "operator", None)
                print(json.dumps({"schema": IMPORT_SCHEMA, "status": "refused", "model": str(args.model),
                                  "error": str(error), "exit_code": error.exit_code,
                                  "operator": {"index": operator.index, "name": operator.name} if operator else None},
                                 indent=2))
            raise
        if args.json:
            print(json.dumps({"schema": IMPORT_SCHEMA, "status": "imported", **result.to_json()}, indent=2))
            return 0
        calls = [s for s in result.steps if s.function]
        kernels = [s for s in result.steps if s.kernel]
        own = f" and {len(kernels)} kernel(s) of mlfbuild's" if kernels else ""
        generated = generated_layers(result.steps)
        own += f" ({generated} of the calls a kernel generated for the layer, on DSP and MVE cores)" if generated else ""
        print(f"imported {args.model} → {out}: module {result.module}, {len(result.steps)} operator(s) as "
              f"{len(calls)} CMSIS-NN call(s){own}, workspace {result.pool_bytes:,} B "
              + (f"(liveness floor {result.floor_bytes:,} B) + io {result.io_bytes:,} B" if args.memory == "floor"
                 else "with the inputs and outputs inside (--memory min)"))
        for note in result.notes:
            print(f"  {note}")
        return 0
