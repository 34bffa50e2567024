"""`mlfbuild import` on the four MLPerf Tiny models and TFLM's micro_speech, measured beside TensorFlow
Lite Micro + CMSIS-NN.

    .venv/bin/python benchmarks/import_vs_tflm.py --cmsis-nn PATH/TO/CMSIS-NN-v7.0.0 [--models ../shared/models]
                                                  [--tflm-models DIR] [--boards mps2-an386 mps3-an547] [--samples 3]

micro_speech is TFLM's own example (tensorflow/lite/micro/examples/micro_speech/models/
micro_speech_quantized.tflite in the tflite-micro repository); it is measured when --tflm-models holds it
(for it only TFLM's instruction count is known). Each model is imported (`mlfbuild import --rounding
R --kernels K`, once per `--kernels` choice: generated, cmsis-nn), built at -Os (--opt) and run with
`mlfbuild run --profile`: instructions per inference from QEMU's TCG plugin and the plugin's cycle
estimate (the core's documented timings, docs/benchmarks.md), outputs checked against the model with
LiteRT. Flash is what `mlfbuild size` reports; RAM is data + bss + the
measured stack peak, the measure of the TFLM figures below (arena at the smallest size AllocateTensors
accepts, the same QEMU machines, arm-none-eabi-gcc at -Os, only the model's operators registered).
Prints a Markdown table with the ratio to TFLM in each cell, then the estimate in milliseconds at
the clock of the boards MLPerf Tiny published latencies for (PUBLISHED) beside those latencies;
with both --kernels choices, a table of their ratios (generated / cmsis-nn) comes between the two.
--cycles-for nucleo-l4r5zi adds that board's flash (wait states behind its flash caches) to the
Cortex-M4F's estimate, as the published runs read their code and weights from it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = {"kws": "kws_ref_model.tflite", "vww": "vww_96_int8.tflite", "ic": "pretrainedResnet_quant.tflite",
          "ad": "ad01_int8.tflite"}
TFLM_MODELS = {"micro_speech": "micro_speech_quantized.tflite"}
# TFLM + CMSIS-NN (flash, RAM, instructions per inference), measured as the docstring says.
TFLM = {
    ("kws", "mps2-an386"): (100_194, 24_300, 9_224_174), ("kws", "mps3-an547"): (95_314, 28_924, 2_453_830),
    ("vww", "mps2-an386"): (379_556, 102_188, 28_556_459), ("vww", "mps3-an547"): (374_676, 102_348, 8_497_938),
    ("ic", "mps2-an386"): (141_928, 56_476, 41_072_850), ("ic", "mps3-an547"): (136_772, 56_548, 5_301_235),
    ("ad", "mps2-an386"): (299_924, 3_960, 843_335), ("ad", "mps3-an547"): (296_224, 10_792, 243_152),
    ("micro_speech", "mps2-an386"): (None, None, 2_394_462), ("micro_speech", "mps3-an547"): (None, None, 1_281_811),
}

# Published MLPerf Tiny latencies (ms per inference) of Cortex-M4 boards running these models with
# CMSIS-NN: (label, clock in Hz, {model: ms}, source). Median throughput as the results report it, inverted.
PUBLISHED = {
    "mps2-an386": [
        ("MLPerf Tiny v0.5 reference, NUCLEO-L4R5ZI, TFLM 2.3.1", 120_000_000,
         {"kws": 1000 / 5.497, "vww": 1000 / 1.665, "ic": 1000 / 1.420, "ad": 1000 / 99.487},
         "https://github.com/mlcommons/tiny_results_v0.5/tree/main/closed/reference/results/Nucleo-L4R5ZI"),
        ("MLPerf Tiny v1.0 OctoML, NUCLEO-L4R5ZI, microTVM + CMSIS-NN", 120_000_000,
         {"kws": 1000 / 10.019, "vww": 1000 / 3.320, "ic": 1000 / 2.567, "ad": 1000 / 116.212},
         "https://github.com/mlcommons/tiny_results_v1.0/tree/main/closed/OctoML/results/microtvm_cmsis_nn/NUCLEO_L4R5ZI"),
    ],
}


def mlfbuild(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def measure(model: Path, board: str, tree: Path, samples: int, folder: Path, rounding: str,
            memory: str = "floor", kernels: str = "generated", opt: str = "-Os", cycles_for: str | None = None) -> dict:
    mlf = folder.with_suffix(".tar")
    imported = mlfbuild("import", str(model), "-o", str(mlf), "--rounding", rounding, "--memory", memory,
                        "--kernels", kernels)
    if imported.returncode != 0:
        sys.exit(f"import of {model.name} failed: {imported.stderr.strip()}")
    built = mlfbuild("build", str(mlf), "-b", board, f"--opt={opt}", "--cmsis-nn", str(tree), "-o", str(folder))
    if built.returncode != 0:
        sys.exit(f"build of {model.name} for {board} failed: {built.stderr.strip()}")
    size = json.loads(mlfbuild("size", "--json", str(folder)).stdout)
    chip = ("--cycles-for", cycles_for) if cycles_for and board in PUBLISHED else ()
    run = mlfbuild("run", str(folder), "--profile", "--json", "--samples", str(samples), *chip)
    if not run.stdout.strip():
        sys.exit(f"run of {model.name} on {board} failed: {run.stderr.strip()}")
    result = json.loads(run.stdout)
    record = result["models"][0]
    kinds = size["ram"]["by_kind"]
    outputs = record.get("outputs", [])
    return {"flash": size["flash"]["used"], "ram": kinds.get("data", 0) + kinds.get("bss", 0) + record["stack_peak"],
            "instructions": record["instructions"], "cycles": record["cycles"], "cycle_model": record["cycle_model"],
            "flash_reads": record.get("flash_reads"),
            "status": result["status"],
            "max_diff": max((o.get("max_abs_error", 0) for o in outputs), default=0)}


def cell(ours: int, theirs: int | None) -> str:
    return f"{ours:,} ({ours / theirs:.3f}×)" if theirs else f"{ours:,}"


def kernels_table(measured: dict[tuple[str, str, str], dict]) -> None:
    """`--kernels generated` beside `--kernels cmsis-nn` (today's TFLM + CMSIS-NN speed): the ratios."""
    print()
    print("| model | board | instructions: generated / cmsis-nn | estimated cycles: generated / cmsis-nn |")
    print("|---|---|---:|---:|")
    for (name, board, kernels), m in measured.items():
        base = measured.get((name, board, "cmsis-nn"))
        if kernels != "generated" or base is None:
            continue
        cycles = (f"{m['cycles']:,} / {base['cycles']:,} ({m['cycles'] / base['cycles']:.3f}×)"
                  if m["cycles"] and base["cycles"] else "no model")
        print(f"| {name} | {board} | {m['instructions']:,} / {base['instructions']:,} "
              f"({m['instructions'] / base['instructions']:.3f}×) | {cycles} |", flush=True)


def published_table(measured: dict[tuple[str, str], dict], kernels: str, opt: str) -> None:
    """The cycle estimate at each published board's clock beside its published latency."""
    print()
    print(f"The estimate against published latencies, with --kernels {kernels}, built at {opt}:")
    print("| model | estimate (model) | flash reads missed (instruction / data) | at the board's clock | published "
          "| error | source |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (name, board), m in measured.items():
        for label, clock, latencies, url in PUBLISHED.get(board, []):
            if name not in latencies or m["cycles"] is None:
                continue
            ms = 1000 * m["cycles"] / clock
            error = 100 * (ms - latencies[name]) / latencies[name]
            reads = m["flash_reads"]
            missed = f"{reads['instruction']:,} / {reads['data']:,}" if reads else "not modelled"
            print(f"| {name} | {m['cycles']:,} cycles ({m['cycle_model']}) | {missed} | {ms:.1f} ms at {clock / 1e6:g} MHz "
                  f"| {latencies[name]:.1f} ms ({label}) | {error:+.1f} % | {url} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cmsis-nn", type=Path, required=True, help="CMSIS-NN source tree (v7.0.0 for the TFLM figures)")
    parser.add_argument("--models", type=Path, default=REPO.parent / "shared" / "models")
    parser.add_argument("--tflm-models", type=Path, help="a folder holding TFLM's example models (micro_speech)")
    parser.add_argument("--only", nargs="+", help="measure these models only (kws, vww, ic, ad, micro_speech)")
    parser.add_argument("--boards", nargs="+", default=["mps2-an386", "mps3-an547"])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--rounding", choices=("tflite", "cmsis-nn"), default="tflite",
                        help="mlfbuild import --rounding (tflite: bit-exact with TFLite; cmsis-nn: TFLM's arithmetic)")
    parser.add_argument("--memory", choices=("floor", "min"), default="floor",
                        help="mlfbuild import --memory (floor: the liveness floor; min: convolutions over their inputs)")
    parser.add_argument("--kernels", nargs="+", choices=("generated", "cmsis-nn"), default=["generated", "cmsis-nn"],
                        help="mlfbuild import --kernels, each measured (both: a table of their ratios follows)")
    parser.add_argument("--cycles-for", metavar="BOARD",
                        help="run --profile --cycles-for BOARD on the Cortex-M4F: add that chip's flash wait states "
                             "and flash caches to the estimate (nucleo-l4r5zi: the board the published latencies ran on)")
    parser.add_argument("--opt", choices=("-Os", "-O2"), default="-Os",
                        help="the build's optimisation, CMSIS-NN's included (-Os: as the TFLM figures were measured; "
                             "-O2: as the OctoML submission built, Zephyr's CONFIG_SPEED_OPTIMIZATIONS)")
    args = parser.parse_args()
    print("| model | board | kernels | flash (ratio to TFLM) | RAM | instructions / inference | cycles / inference (estimate) "
          "| vs the .tflite (LiteRT) |")
    print("|---|---|---|---|---|---|---|---|")
    measured = {}
    with tempfile.TemporaryDirectory(prefix="mlfbuild-bench-") as work:
        models = {name: args.models / file for name, file in MODELS.items()}
        if args.tflm_models:
            models.update({name: args.tflm_models / file for name, file in TFLM_MODELS.items()})
        for name, path in models.items():
            if args.only and name not in args.only:
                continue
            for board in args.boards:
                for kernels in args.kernels:
                    m = measure(path, board, args.cmsis_nn, args.samples, Path(work) / f"{name}-{board}-{kernels}",
                                args.rounding, args.memory, kernels, args.opt, args.cycles_for)
                    measured[(name, board, kernels)] = m
                    flash, ram, insns = TFLM[(name, board)]
                    cycles = f"{m['cycles']:,} ({m['cycle_model']})" if m["cycles"] is not None else "no model"
                    print(f"| {name} | {board} | {kernels} | {cell(m['flash'], flash)} | {cell(m['ram'], ram)} | "
                          f"{cell(m['instructions'], insns)} | {cycles} | {m['status']}, max diff {m['max_diff']} LSB |",
                          flush=True)
    kernels_table(measured)
    # The published latencies ran CMSIS-NN's kernels: the estimate is checked on the same code where measured.
    checked = "cmsis-nn" if "cmsis-nn" in args.kernels else args.kernels[0]
    published_table({(name, board): m for (name, board, kernels), m in measured.items() if kernels == checked}, checked,
                    args.opt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
