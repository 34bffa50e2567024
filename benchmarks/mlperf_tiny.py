"""The MLPerf Tiny models' TVM CMSIS-NN builds on the Cortex-M4F and the Cortex-M55: instructions per
inference, flash, RAM with the measured stack, and the calls prepared at build time.

    .venv/bin/python benchmarks/mlperf_tiny.py [--fixtures ../shared/fixtures] [--third-party ../shared/third_party]
                                               [--tree v7.0.0=PATH ...] [--mlf ic=PATH_M4.tar,PATH_M55.tar ...]

Every build is `mlfbuild build --opt=-Os`; every run `mlfbuild run --profile` (instructions counted by
the TCG plugin in QEMU) against TVM's reference (within 2 LSB, CMSIS-NN's requantisation) and again
against the host twin (`--reference host`: the same MLF on the host with the library's generic C,
exactly). Flash as `mlfbuild size` reports it; RAM = data + bss + the stack peak the run measured.
The models whose MLF is not found (ic is not among the shared fixtures) are listed as such.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOARDS = {"mps2-an386": "M4F", "mps3-an547": "M55"}
# model -> (MLF for the M4F, MLF for the M55), under the fixtures folder, and its reference
MODELS = {
    "kws": ("tvm-0.18/kws_aot_cmsisnn_m4.tar", "tvm-0.18/kws_aot_cmsisnn.tar", "tvm-0.18/kws.npz"),
    "vww": ("tvm-0.18/vww_aot_cmsisnn_m4.tar", "tvm-0.18/vww_aot_cmsisnn_m4.tar", "tvm-0.18/vww.npz"),
    "ic": ("tvm-0.18/ic_aot_cmsisnn_m4.tar", "tvm-0.18/ic_aot_cmsisnn.tar", "tvm-0.18/ic.npz"),
    "ad": ("tvm-0.18/ad_aot_cmsisnn_m4.tar", "tvm-0.18/ad_aot_cmsisnn.tar", "tvm-0.18/ad.npz"),
}
TOLERANCE_LSB = "2"


def mlfbuild(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def measure(mlf: Path, reference: Path, board: str, tree: Path, out: Path) -> dict:
    built = mlfbuild("build", str(mlf), "-b", board, "--opt=-Os", "-o", str(out), "--cmsis-nn", str(tree))
    if built.returncode != 0:
        sys.exit(f"build of {mlf.name} for {board} failed: {built.stderr.strip()}")
    size = json.loads(mlfbuild("size", "--json", str(out)).stdout)
    run = json.loads(mlfbuild("run", str(out), "--profile", "--json", "--reference", str(reference),
                              "--atol", TOLERANCE_LSB).stdout)
    twin = json.loads(mlfbuild("run", str(out), "--json", "--reference", "host", "--samples", "4").stdout)
    model = run["models"][0]
    kinds = size["ram"]["by_kind"]
    prepared = json.loads((out / "build.json").read_text())["cmsis_nn"].get("scratch", {}).get("prepared", [])
    return {"flash": size["flash"]["used"], "ram": kinds.get("data", 0) + kinds.get("bss", 0) + model["stack_peak"],
            "instructions": model["instructions"], "reference": run["status"], "twin": twin["status"],
            "max_diff": max(o["max_abs_error"] for o in model["outputs"]),
            "prepared": [p["kind"] for p in prepared]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--third-party", type=Path, default=REPO.parent / "shared" / "third_party")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="another CMSIS-NN tree to measure (e.g. v7.0.0=/path/to/CMSIS-NN)")
    parser.add_argument("--mlf", action="append", default=[], metavar="MODEL=M4.tar,M55.tar",
                        help="a model's MLFs outside the fixtures (e.g. ic)")
    args = parser.parse_args()
    trees = {"v6.0.0": args.third_party / "cmsis-nn-v6.0.0"}
    trees.update(dict((name, Path(path)) for name, path in (item.split("=", 1) for item in args.tree)))
    models = {name: (args.fixtures / m4, args.fixtures / m55, args.fixtures / ref) for name, (m4, m55, ref) in MODELS.items()}
    for item in args.mlf:
        name, paths = item.split("=", 1)
        m4, m55 = paths.split(",")
        models[name] = (Path(m4), Path(m55), models[name][2])
    print("| model | board | CMSIS-NN | flash B | RAM B (measured stack) | instructions / inference | "
          "vs TVM's reference | vs host twin | prepared at build time |")
    print("|---|---|---|---:|---:|---:|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name, (m4, m55, reference) in models.items():
            for (board, core), mlf in zip(BOARDS.items(), (m4, m55)):
                for version, tree in trees.items():
                    if not mlf.is_file():
                        print(f"| {name} | {board} ({core}) | {version} | | | | no MLF ({mlf.name}) | | |")
                        continue
                    row = measure(mlf, reference, board, tree, Path(scratch) / f"{name}-{board}-{version}")
                    prepared = ", ".join(f"{row['prepared'].count(k)} {k.replace('_', ' ')}"
                                         for k in sorted(set(row["prepared"]))) or "none"
                    print(f"| {name} | {board} ({core}) | {version} | {row['flash']:,} | {row['ram']:,} | "
                          f"{row['instructions']:,} | {row['reference']} (max {row['max_diff']} LSB) | {row['twin']} | "
                          f"{prepared} |", flush=True)


if __name__ == "__main__":
    main()
