"""A depthwise convolution of one input channel as CMSIS-NN's depthwise call and as its convolution
call, on one core: the measurement behind the build's choice (canalysis/cmsis_nn_prepare.py,
`convolution_is_faster`).

    .venv/bin/python benchmarks/one_channel_depthwise.py --cmsis-nn PATH/TO/CMSIS-NN [--board mps2-an386]

Each layer shape is a one-operator .tflite (tests/tflitewriter.py), built at -Os twice — once with the
build's choice forced to the depthwise call, once to the convolution — and run with `run --profile`
(instructions per inference in QEMU, outputs checked against the model with LiteRT). Prints a Markdown
table: both counts, their ratio, and what the build chooses.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
# (kernel h, kernel w, channel multiplier, input h, input w, stride): micro_speech's and kws's first
# layers, and the multipliers around the crossover.
SHAPES = [(10, 8, 8, 49, 40, 2), (10, 8, 16, 49, 40, 2), (10, 8, 32, 49, 40, 2), (10, 4, 16, 49, 10, 2),
          (10, 4, 64, 49, 10, 2), (3, 3, 8, 32, 32, 1), (3, 3, 32, 32, 32, 1)]
# Runs mlfbuild with the build's choice forced: argv[1] is "depthwise" or "convolution".
_FORCED = ("import sys\nimport mlfbuild.canalysis.cmsis_nn_prepare as prepare\n"
           "call = sys.argv.pop(1)\nprepare.convolution_is_faster = lambda features, multiplier: call == 'convolution'\n"
           "from mlfbuild.launch import main\nsys.argv[0] = 'mlfbuild'\nsys.exit(main())\n")


def forced(call: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _FORCED, call, *args], capture_output=True, text=True, cwd=REPO)


def instructions(model: Path, call: str, board: str, tree: Path, folder: Path) -> int:
    built = forced(call, "build", str(model), "-b", board, "--opt=-Os", "--cmsis-nn", str(tree), "-o", str(folder))
    if built.returncode != 0:
        sys.exit(f"build of {model.name} ({call}) failed: {built.stderr.strip()}")
    ran = forced(call, "run", str(folder), "--profile", "--json")
    result = json.loads(ran.stdout)
    if result["status"] != "pass":
        sys.exit(f"{model.name} ({call}) does not match LiteRT: {ran.stderr.strip()}")
    return result["models"][0]["instructions"]


def main() -> int:
    from mlfbuild.boards import load_board
    from mlfbuild.canalysis.cmsis_nn_prepare import convolution_is_faster
    from mlfbuild.project.cmsis_nn import core_features
    from tflitewriter import bundle_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cmsis-nn", type=Path, required=True)
    parser.add_argument("--board", default="mps2-an386")
    args = parser.parse_args()
    features = core_features(load_board(args.board).cpu.core) or frozenset()
    print(f"| layer ({args.board}) | depthwise call | convolution | convolution / depthwise | the build's choice |")
    print("|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory(prefix="mlfbuild-dw-") as work:
        for kh, kw, m, h, w, stride in SHAPES:
            case = ("DEPTHWISE_CONV_2D", {"channels": 1, "depth_multiplier": m, "kernel_h": kh, "kernel_w": kw,
                                          "batch": 1, "height": h, "width": w, "stride_h": stride, "stride_w": stride,
                                          "padding": "SAME", "dilation_h": 1, "dilation_w": 1})
            model = bundle_model(np.random.default_rng(0), [case]).write(Path(work) / f"dw{kh}x{kw}m{m}.tflite")
            counts = {call: instructions(model, call, args.board, args.cmsis_nn, Path(work) / f"{model.stem}-{call}")
                      for call in ("depthwise", "convolution")}
            choice = "convolution" if convolution_is_faster(features, m) else "depthwise"
            print(f"| {kh}x{kw}, multiplier {m}, {h}x{w} input, stride {stride} | {counts['depthwise']:,} | "
                  f"{counts['convolution']:,} | {counts['convolution'] / counts['depthwise']:.3f} | {choice} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
