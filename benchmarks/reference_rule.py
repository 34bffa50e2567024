"""The figures behind the rule against the original model (docs/references.md), measured again.

    .venv/bin/python benchmarks/reference_rule.py [--fixtures ../shared/fixtures] [--models ../shared/models]
                                                  [--board host] [--seeds 10] [--samples 100]

1. LiteRT on each fixture reference's own input against TVM's output in that reference (kws of
   TVM 0.8, 0.13 and 0.18, ad, vww): max |diff| in LSB, values that differ, top-1.
2. Real firmware (a host build by default; `--board mps2-an386` for QEMU) of kws, of the kws + ad
   multi-module export and of vww (through CMSIS-NN, `--cmsis-nn DIR`) against the .tflite over `--samples` seeded random inputs for each of
   `--seeds` seeds: exact samples, max |diff|, top-1 agreement, verdict (`mlfbuild run --json`).
3. The same kws firmware with the weights of one convolution negated: the verdict must be a mismatch.
4. TVM's lowering of a quantized softmax (dequantize, float softmax, quantize) applied to LiteRT's own
   logits on 1,000 random inputs of kws, vww and ic, against LiteRT's softmax output (LiteRT in this
   process, with its debugging option that keeps every intermediate tensor).

Needs LiteRT (`pip install 'mlfbuild[reference]'`). Prints Markdown tables.
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
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from mlfbuild.reference.litert import run_model  # noqa: E402
from mlfwriter import negate_convolution_weights  # noqa: E402

REFERENCE_INPUTS = (("tvm-0.18/kws.npz", "kws_ref_model.tflite"), ("tvm-0.13/kws.npz", "kws_ref_model.tflite"),
                    ("tvm-0.8/kws.npz", "kws_ref_model.tflite"), ("tvm-0.18/vww.npz", "vww_96_int8.tflite"),
                    ("tvm-0.13/ad.npz", "ad01_int8.tflite"))
KWS = "tvm-0.13/kws_aot_c_unpacked_usmp.tar"
MULTI = "tvm-0.13/multi_kws_ad_aot_c_usmp.tar"
VWW = "tvm-0.18/vww_aot_cmsisnn_m4.tar"


def mlfbuild(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def litert_against_tvm(fixtures: Path, models: Path) -> None:
    print("| TVM reference | model | max |diff| (LSB) | values that differ | top-1 |\n|---|---|---|---|---|")
    for npz, model in REFERENCE_INPUTS:
        with np.load(fixtures / npz) as data:
            name = next(k for k in data.files if not k.startswith("output_"))
            tvm = data["output_0"].astype(int).reshape(-1)
            (ours,) = run_model(models / model, {name: data[name][None]})
        diff = np.abs(ours.astype(int).reshape(-1) - tvm)
        top1 = "agrees" if np.argmax(ours) == np.argmax(tvm) else "differs"
        print(f"| {npz} | {model} | {diff.max()} | {np.count_nonzero(diff)} of {diff.size} | {top1} |")


def firmware_rows(label: str, build: Path, references: list[str], seeds: int, samples: int) -> None:
    for seed in range(seeds):
        done = mlfbuild("run", str(build), *[a for r in references for a in ("--reference", r)],
                        "--samples", str(samples), "--seed", str(seed), "--json")
        result = json.loads(done.stdout)
        for model in result["models"]:
            for out in model["outputs"]:
                top1 = "—" if out["top1_agreement"] is None else f"{out['top1_agreement']}/{out['samples']}"
                print(f"| {label} | {model['name']}/{out['name']} | {seed} | {out['exact_samples']}/{out['samples']} "
                      f"| {out['max_abs_error']:g} | {top1} | {result['status']} |")


def softmax_alone(models: Path, count: int = 1000) -> None:
    from ai_edge_litert.interpreter import Interpreter

    from mlfbuild.run.samples import random_samples

    print("\n| model | samples | TVM's softmax = LiteRT's | top class below 120 |\n|---|---|---|---|")
    for name in ("kws_ref_model.tflite", "vww_96_int8.tflite", "pretrainedResnet_quant.tflite"):
        interpreter = Interpreter(model_path=str(models / name), experimental_preserve_all_tensors=True)
        interpreter.allocate_tensors()
        softmax = next(op for op in interpreter._get_ops_details() if op["op_name"] == "SOFTMAX")
        tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
        logits, probabilities = softmax["inputs"][0], softmax["outputs"][0]
        (in_scale, in_zero), (out_scale, out_zero) = (tensors[logits]["quantization"],
                                                      tensors[probabilities]["quantization"])
        source = interpreter.get_input_details()[0]
        inputs = random_samples(source["name"], "int8", tuple(source["shape"]), count, 0)
        same = unsaturated = 0
        for sample in inputs:
            interpreter.set_tensor(source["index"], sample)
            interpreter.invoke()
            real = (interpreter.get_tensor(logits).astype(np.float64).reshape(-1) - in_zero) * in_scale
            exp = np.exp(real - real.max())
            tvm = np.clip(np.round(exp / exp.sum() / out_scale) + out_zero, -128, 127)
            lite = interpreter.get_tensor(probabilities).astype(np.float64).reshape(-1)
            same += bool(np.array_equal(tvm, lite))
            unsaturated += bool(lite.max() < 120)
        print(f"| {name} | {count} | {same} | {unsaturated} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--models", type=Path, default=REPO.parent / "shared" / "models")
    parser.add_argument("--cmsis-nn", type=Path, default=REPO.parent / "shared" / "third_party" / "cmsis-nn-v6.0.0")
    parser.add_argument("--board", default="host")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    litert_against_tvm(args.fixtures, args.models)
    kws, ad = str(args.models / "kws_ref_model.tflite"), str(args.models / "ad01_int8.tflite")
    print("\n| firmware | output | seed | exact samples | max |diff| | top-1 agrees | verdict |\n|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="mlfbuild-reference-rule-") as work:
        builds = {}
        for label, mlf in (("kws", args.fixtures / KWS), ("kws+ad", args.fixtures / MULTI),
                           ("kws, damaged", negate_convolution_weights(args.fixtures / KWS, Path(work) / "damaged.tar")),
                           ("vww", args.fixtures / VWW)):
            builds[label] = Path(work) / label.replace(" ", "").replace(",", "-").replace("+", "-")
            library = ["--cmsis-nn", str(args.cmsis_nn)] if label == "vww" else []
            built = mlfbuild("build", str(mlf), "-b", args.board, "-o", str(builds[label]), *library)
            if built.returncode:
                sys.exit(f"building {mlf} failed: {built.stderr.strip()}")
        firmware_rows("kws", builds["kws"], [kws], args.seeds, args.samples)
        firmware_rows("kws+ad", builds["kws+ad"], [f"kws={kws}", f"ad={ad}"], 1, args.samples)
        firmware_rows("kws, damaged", builds["kws, damaged"], [kws], 1, args.samples)
        firmware_rows("vww", builds["vww"], [str(args.models / "vww_96_int8.tflite")], 1, args.samples)
    softmax_alone(args.models)


if __name__ == "__main__":
    main()
