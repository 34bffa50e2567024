"""The MLPerf Tiny models' TVM CMSIS-NN builds on the Cortex-M4F and the Cortex-M55: instructions and
estimated cycles per inference, flash, RAM with the measured stack, and the calls prepared at build time.

    .venv/bin/python benchmarks/mlperf_tiny.py [--fixtures ../shared/fixtures] [--third-party ../shared/third_party]
                                               [--tree v7.0.0=PATH ...] [--mlf ic=PATH_M4.tar,PATH_M55.tar ...]

Every build is `mlfbuild build --opt=-Os`; every run `mlfbuild run --profile` (instructions counted by
the TCG plugin in QEMU, cycles estimated by it from the core's documented timings, docs/benchmarks.md) against TVM's reference (within 2 LSB, CMSIS-NN's requantisation) and again
against the host twin (`--reference host`: the same MLF on the host with the library's generic C,
exactly). Flash as `mlfbuild size` reports it; RAM = data + bss + the stack peak the run measured.
The models whose MLF is not found (ic is not among the shared fixtures) are listed as such.
`run --profile` charges library code to the operator that calls it, so the per-call preparation
CMSIS-NN would repeat (`arm_transpose_s8`, `arm_vector_sum_s8`) is counted on its own too: a second
run under the TCG plugin `benchmarks/insncount.c` over those functions' addresses in the ELF
(difference of a 3-inference and a 1-inference session: per inference; "not linked" when the ELF
has no such function). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from elftools.elf.elffile import ELFFile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mlfbuild.run import run_build  # noqa: E402
from mlfbuild.run.transports import QemuTransport  # noqa: E402

# CMSIS-NN functions that only prepare constants (a filter's layout, kernel sums): none should run
# per inference once that work is done at build time. Their static helpers share the prefix.
PREPARATION_FUNCTIONS = ("arm_transpose_s8", "arm_vector_sum_s8")
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


def function_ranges(elf: Path, prefixes: tuple[str, ...]) -> list[tuple[int, int]]:
    """[lo, hi) of every function in the ELF whose name starts with one of `prefixes`."""
    with elf.open("rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        return sorted({(s["st_value"] & ~1, (s["st_value"] & ~1) + s["st_size"]) for s in symbols.iter_symbols()
                       if s["st_info"]["type"] == "STT_FUNC" and s["st_size"] and s.name.startswith(prefixes)})


class _CountingQemu(QemuTransport):
    def __init__(self, elf: Path, machine: str, plugin: Path, ranges: Path, log: Path):
        super().__init__(elf, machine)
        self.plugin_args = ["-plugin", f"{plugin},ranges={ranges}", "-d", "plugin", "-D", str(log)]

    def command(self, listen_fd: int) -> list[str]:
        return super().command(listen_fd) + self.plugin_args


def preparation_per_inference(out: Path, plugin: Path) -> int | None:
    """Instructions per inference inside PREPARATION_FUNCTIONS (None: none is linked)."""
    ranges = function_ranges(out / "firmware.elf", PREPARATION_FUNCTIONS)
    if not ranges:
        return None
    ranges_file = out / "preparation-ranges.txt"
    ranges_file.write_text("".join(f"{lo:x} {hi:x}\n" for lo, hi in ranges))
    machine = json.loads((out / "build.json").read_text())["board"]["qemu"]["machine"]
    counted = {}
    for repeat in (1, 3):
        log = out / f"preparation-{repeat}.txt"
        run_build(out, transport=_CountingQemu(out / "firmware.elf", machine, plugin, ranges_file, log),
                  repeat=repeat, timeout=300)
        counted[repeat] = int(log.read_text().split("in_range=")[1].split()[0])
    return (counted[3] - counted[1]) // 2


def measure(mlf: Path, reference: Path, board: str, tree: Path, out: Path, plugin: Path) -> dict:
    built = mlfbuild("build", str(mlf), "-b", board, "--opt=-Os", "-o", str(out), "--cmsis-nn", str(tree))
    if built.returncode != 0:
        sys.exit(f"build of {mlf.name} for {board} failed: {built.stderr.strip()}")
    size = json.loads(mlfbuild("size", "--json", str(out)).stdout)
    run = json.loads(mlfbuild("run", str(out), "--profile", "--json", "--reference", str(reference),
                              "--atol", TOLERANCE_LSB).stdout)
    twin_run = mlfbuild("run", str(out), "--json", "--reference", "host", "--samples", "4")
    twin = (json.loads(twin_run.stdout) if twin_run.stdout.strip()
            else {"status": f"not run ({twin_run.stderr.strip().splitlines()[-1][:120]})"})
    model = run["models"][0]
    kinds = size["ram"]["by_kind"]
    prepared = json.loads((out / "build.json").read_text())["cmsis_nn"].get("scratch", {}).get("prepared", [])
    return {"flash": size["flash"]["used"], "ram": kinds.get("data", 0) + kinds.get("bss", 0) + model["stack_peak"],
            "instructions": model["instructions"], "cycles": model.get("cycles"), "reference": run["status"], "twin": twin["status"],
            "max_diff": max(o["max_abs_error"] for o in model["outputs"]),
            "prepared": [p["kind"] for p in prepared], "preparation": preparation_per_inference(out, plugin)}


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
          "cycles / inference (estimate) | vs TVM's reference | vs host twin | prepared at build time | "
          "transpose + vector sum / inference |")
    print("|---|---|---|---:|---:|---:|---:|---|---|---|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        plugin = Path(scratch) / "libinsncount.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(plugin), str(REPO / "benchmarks" / "insncount.c")],
                       check=True)
        for name, (m4, m55, reference) in models.items():
            for (board, core), mlf in zip(BOARDS.items(), (m4, m55)):
                for version, tree in trees.items():
                    if not mlf.is_file():
                        print(f"| {name} | {board} ({core}) | {version} | | | | | no MLF ({mlf.name}) | | | |")
                        continue
                    row = measure(mlf, reference, board, tree, Path(scratch) / f"{name}-{board}-{version}", plugin)
                    prepared = ", ".join(f"{row['prepared'].count(k)} {k.replace('_', ' ')}"
                                         for k in sorted(set(row["prepared"]))) or "none"
                    preparation = "not linked" if row["preparation"] is None else f"{row['preparation']:,}"
                    cycles = "no model" if row["cycles"] is None else f"{row['cycles']:,}"
                    print(f"| {name} | {board} ({core}) | {version} | {row['flash']:,} | {row['ram']:,} | "
                          f"{row['instructions']:,} | {cycles} | {row['reference']} (max {row['max_diff']} LSB) | {row['twin']} | "
                          f"{prepared} | {preparation} |", flush=True)


if __name__ == "__main__":
    main()
