"""CMSIS-NN builds measured: mlfbuild's side of the TFLM comparison, and generic vs fast library paths.

    .venv/bin/python benchmarks/cmsis_nn.py [--fixtures ../shared/fixtures] [--third-party ../shared/third_party]
                                            [--tree v7.0.0=PATH ...]

Every build is `mlfbuild build` at -Os, every run `mlfbuild run --profile` (instructions per inference
counted by the TCG plugin, QEMU) checked against TVM's reference; flash and RAM as `mlfbuild size`
reports them (RAM: data + bss + stack and heap reserves). "generic" rebuilds the same project with the
CMSIS-NN sources compiled without `__ARM_FEATURE_DSP`/`__ARM_FEATURE_MVE` (the library's generic C
paths, as mlfbuild compiled it before it supplied buffers). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GENERIC_FLAGS = "CMSIS_NN_FLAGS=-U__ARM_FEATURE_DSP -U__ARM_FEATURE_MVE"
PATHS_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547")
PATHS_MODELS = {"mps3-an547": "tvm-0.18/kws_aot_cmsisnn"}  # the others: tvm-0.18/kws_aot_cmsisnn_m4


def mlfbuild(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def build(mlf: Path, board: str, out: Path, tree: Path | None) -> Path:
    built = mlfbuild("build", str(mlf), "-b", board, "--opt=-Os", "-o", str(out),
                     *(["--cmsis-nn", str(tree)] if tree else []))
    if built.returncode != 0:
        sys.exit(f"build of {mlf.name} for {board} failed: {built.stderr.strip()}")
    return out


def rebuild_generic(folder: Path) -> Path:
    project = folder / "project"
    shutil.rmtree(project / "build", ignore_errors=True)
    subprocess.run(["make", "-j2", "--no-print-directory", GENERIC_FLAGS], cwd=project, check=True,
                   capture_output=True)
    for suffix in ("elf", "bin", "hex"):
        shutil.copy(project / "build" / f"firmware.{suffix}", folder / f"firmware.{suffix}")
    return folder


def measure(folder: Path, reference: Path) -> dict:
    size = json.loads(mlfbuild("size", "--json", str(folder)).stdout)
    run = mlfbuild("run", str(folder), "--profile", "--json", "--reference", str(reference), "--atol", "1")
    data = json.loads(run.stdout)
    model = data["models"][0]
    return {"flash": size["flash"]["used"], "ram": size["ram"]["used"], "instructions": model["instructions"],
            "status": data["status"], "max_diff": max(o["max_abs_error"] for o in model["outputs"])}


def comparison(fixtures: Path, v6: Path, work: Path) -> None:
    print("kws on mps2-an386 (Cortex-M4F), -Os, mlfbuild's side:\n")
    print("| build | flash B | RAM B | instructions / inference | outputs |")
    print("|---|---:|---:|---:|---|")
    rows = (("TVM 0.18 `kws_aot_cmsisnn_m4` + CMSIS-NN v6.0.0", "tvm-0.18/kws_aot_cmsisnn_m4", v6),
            ("TVM 0.18 plain C, AOT + USMP (`kws_aot_c_unpacked_usmp`)", "tvm-0.18/kws_aot_c_unpacked_usmp", None))
    for label, fixture, tree in rows:
        folder = build(fixtures / f"{fixture}.tar", "mps2-an386", work / fixture.replace("/", "-"), tree)
        row = measure(folder, fixtures / "tvm-0.18" / "kws.npz")
        print(f"| {label} | {row['flash']:,} | {row['ram']:,} | {row['instructions']:,} | "
              f"{row['status']}, max diff {row['max_diff']} |")
    print()


def paths(fixtures: Path, trees: dict[str, Path], work: Path) -> None:
    print("kws instructions per inference, -Os (tvm-0.18 `kws_aot_cmsisnn_m4`; `kws_aot_cmsisnn` on mps3-an547):\n")
    print("| board | CMSIS-NN | generic C paths | fast paths (mlfbuild's build) | paths | max diff |")
    print("|---|---|---:|---:|---|---:|")
    for board in PATHS_BOARDS:
        fixture = PATHS_MODELS.get(board, "tvm-0.18/kws_aot_cmsisnn_m4")
        for version, tree in trees.items():
            folder = build(fixtures / f"{fixture}.tar", board, work / f"{board}-{version}", tree)
            record = json.loads((folder / "build.json").read_text())["cmsis_nn"]
            fast = measure(folder, fixtures / "tvm-0.18" / "kws.npz")
            generic = measure(rebuild_generic(folder), fixtures / "tvm-0.18" / "kws.npz")
            print(f"| {board} | {version} | {generic['instructions']:,} | {fast['instructions']:,} | "
                  f"{record['paths']} | {max(fast['max_diff'], generic['max_diff'])} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--third-party", type=Path, default=REPO.parent / "shared" / "third_party")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="another CMSIS-NN tree to measure (e.g. v7.0.0=/path/to/CMSIS-NN)")
    args = parser.parse_args()
    trees = {version: args.third_party / f"cmsis-nn-{version}" for version in ("v4.1.0", "v6.0.0")}
    trees.update(dict((name, Path(path)) for name, path in (item.split("=", 1) for item in args.tree)))
    with tempfile.TemporaryDirectory() as scratch:
        comparison(args.fixtures, trees["v6.0.0"], Path(scratch))
        paths(args.fixtures, trees, Path(scratch))


if __name__ == "__main__":
    main()
