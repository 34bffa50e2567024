"""`mlfbuild inspect`: describe an MLF."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ..cliargs import parse_size, temporary_folder_hidden
from ..schemas import INSPECT as INSPECT_SCHEMA
from .base import Command
from .common import add_max_nodes


class InspectCommand(Command):
    name = "inspect"
    help = "describe an MLF: modules, executor, interface, files, tensors, memory summary"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, help="MLF tarball (.tar, .tar.gz, .tgz) or unpacked folder")
        parser.add_argument("--json", action="store_true", help="print the stable JSON description")
        parser.add_argument("--max-size", type=parse_size, default=None,
                            help="refuse archives that unpack to more than this (default 512M)")
        parser.add_argument("--model", action="append", default=[], metavar="[MODULE=]MODEL.tflite",
                            help="the original model of a module: shows each input's and output's scale and "
                                 "zero point (checked to describe the same graph)")
        add_max_nodes(parser)

    def run(self, args):
        from ..mlf.archive import DEFAULT_MAX_TOTAL_BYTES
        from ..mlf.reader import read_mlf
        from ..mlf.summary import format_summary

        with tempfile.TemporaryDirectory(prefix="mlfbuild-inspect-") as work, temporary_folder_hidden(work, ""):
            lib = read_mlf(args.mlf, Path(work), max_total_bytes=args.max_size or DEFAULT_MAX_TOTAL_BYTES,
                           max_graph_nodes=args.max_nodes)
            document = lib.to_json()
            quantized = _quantization(document["modules"], args.model)
            if args.json:
                for module in document["modules"]:
                    for tensor in module["inputs"] + module["outputs"]:
                        scale, zero = quantized.get(module["name"], {}).get(tensor["name"], (None, None))
                        if scale is not None:
                            tensor["quantization"] = {"scale": scale, "zero_point": zero}
                print(json.dumps({"schema": INSPECT_SCHEMA, **document}, indent=2, sort_keys=True))
            else:
                print(format_summary(lib, str(args.mlf)))
                for module, tensors in quantized.items():
                    print(f"quantization of {module} (from its model):")
                    for name, (scale, zero) in tensors.items():
                        print(f"  {name}: scale {scale:.7g} zero point {zero}")
                for warning in lib.warnings:
                    print(f"mlfbuild: warning: {warning}", file=sys.stderr)
        return 0


def _quantization(modules: list[dict], models: list[str]) -> dict[str, dict[str, tuple[float, int]]]:
    """Module → tensor → (scale, zero point), from the original models given with --model."""
    from ..run.references import resolve

    chosen = resolve(models, modules)
    return {m["name"]: chosen[m["name"]].quantization_of(m) for m in modules if m["name"] in chosen}
