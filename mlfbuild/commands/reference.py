"""`mlfbuild reference`: run the original model with LiteRT and keep inputs and outputs as a .npz that
`mlfbuild run --reference` reads where LiteRT is not installed."""

from __future__ import annotations

import io
from pathlib import Path

from ..cliargs import samples_arg
from ..outfolder import write_file
from .base import Command


class ReferenceCommand(Command):
    name = "reference"
    help = "run the original model (.tflite) with LiteRT on seeded random or given inputs; write REF.npz for run --reference"

    def add_arguments(self, parser):
        parser.add_argument("model", type=Path, help="the original model: a .tflite file")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--samples", type=samples_arg, metavar="N",
                            help="N seeded random inputs, as `mlfbuild run --samples N` makes them (default 1)")
        source.add_argument("--input", type=Path,
                            help="inputs (.npz keyed by input name, a leading axis of N samples; float values "
                                 "for a quantized input are quantized with the model's parameters)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
        parser.add_argument("-o", "--output", type=Path, required=True, help="the .npz to write")

    def run(self, args):
        import numpy as np

        from ..run.references import model_reference_tensors
        from ..run.tensorfile import load_tensors

        tensors = model_reference_tensors(args.model, load_tensors(args.input), str(args.input), args.samples,
                                          args.seed)
        buffer = io.BytesIO()
        np.savez(buffer, **tensors)
        write_file(args.output, buffer.getvalue())
        print(f"wrote {args.output}: {tensors['output_0'].shape[0]} sample(s) and the outputs of {args.model} (LiteRT)")
        return 0
