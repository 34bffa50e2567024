"""Measure mlfbuild's runtime against TVM's own (its standalone CRT) on the shared fixtures, in one run.

    .venv/bin/python benchmarks/runtime_comparison.py [--fixtures ../shared/fixtures] [--out docs/benchmarks.md]

For every fixture that builds with both runtimes on mps2-an386 (-Os):
  * flash and RAM (arm-none-eabi-size: text+data, data+bss incl. stack/heap reserves) builtin vs tvm,
    and each runtime's overhead over the floor = what the size report attributes to the model
    (generated code, weights, pools, planned activations, io);
  * instructions per inference under QEMU -icount with a TCG plugin (benchmarks/insncount.c):
    the operators' share and everything else (executor, argument set-up, allocator) per inference;
  * time of the pipeline (unpack, render, size) vs the compiler, the no-op rebuild, and the size
    report on the largest ELF.
Writes a Markdown table with the date and the machine. Run by hand; CI does not run it.
"""

from __future__ import annotations

import argparse
import re
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mlfbuild.boards import load_board  # noqa: E402
from mlfbuild.build import build  # noqa: E402
from mlfbuild.errors import MlfError  # noqa: E402
from mlfbuild.mlf.reader import read_mlf  # noqa: E402
from mlfbuild.project import ProjectOptions, render_project  # noqa: E402
from mlfbuild.run import run_build  # noqa: E402
from mlfbuild.run.transports import QemuTransport  # noqa: E402
from mlfbuild.size import size_report  # noqa: E402
from mlfbuild.toolchain import run_make  # noqa: E402

BOARD = "mps2-an386"
INSTRUCTIONS_PER_TICK = 40  # SysTick 25 MHz under -icount shift=0 (1 ns per instruction)


def plugin(workdir: Path) -> Path:
    library = workdir / "libinsncount.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(REPO / "benchmarks" / "insncount.c")],
                   check=True)
    return library


_MAP_SECTION = re.compile(r"^ (\.text\S*)\s*(?:\n\s+)?0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)", re.M)


# Code that runs inside an inference on behalf of the runtime or executor: our workspace pool and TVM
# backend API, the lowered executors and model table, TVM's CRT and its platform hooks. Not the
# console protocol, the UART polling or the timer interrupt, which serve the measurement.
_RUNTIME_OBJECTS = ("build/crt/src/backend.o", "build/crt/src/func_registry.o", "build/src/models.o",
                    "build/src/model_", "build/tvm_crt/", "build/lib/")


def _runtime_code_ranges(build_dir: Path, out: Path) -> Path:
    """Address ranges of runtime and executor code, from the link map (it names the object of every
    input section). Library code the operators call (memset, expf) counts as operator work."""
    text = (build_dir / "project" / "build" / "firmware.map").read_text()
    # Sections the linker dropped (--gc-sections) are listed first, all at address 0: skip them.
    text = text.split("Linker script and memory map", 1)[1]
    ranges = []
    for name, address, size, obj in _MAP_SECTION.findall(text):
        if int(size, 16) and obj.startswith(_RUNTIME_OBJECTS):
            lo = int(address, 16)
            ranges.append((lo, lo + int(size, 16)))
    out.write_text("".join(f"{lo:x} {hi:x}\n" for lo, hi in sorted(ranges)))
    return out


class _Counting(QemuTransport):
    def __init__(self, elf: Path, machine: str, library: Path, ranges: Path, log: Path):
        super().__init__(elf, machine)
        self.extra = ["-plugin", f"{library},ranges={ranges}", "-d", "plugin", "-D", str(log)]

    def command(self, listen_fd: int) -> list[str]:
        return super().command(listen_fd) + self.extra


def instructions(out: Path, record: dict, library: Path, references: list[str], work: Path) -> dict:
    """Per inference: total (firmware ticks × 40) and inside runtime/executor code (plugin, difference
    of a 3-run and a 1-run session, so start-up, first-run set-up and the last read-out cancel out)."""
    ranges = _runtime_code_ranges(out, work / "ranges.txt")
    inside = {}
    ticks = None
    for repeat in (1, 3):
        log = work / f"plugin-{repeat}.txt"
        transport = _Counting(out / "firmware.elf", BOARD, library, ranges, log)
        result = run_build(out, transport=transport, repeat=repeat, references=references, timeout=120)
        if not result.ok:
            raise RuntimeError(f"{out}: outputs differ from the reference")
        ticks = sum(m.ticks[-1] for m in result.models)  # a multi-module firmware runs every model
        text = log.read_text()
        inside[repeat] = int(text.split("in_range=")[1].split()[0])
    total = ticks * INSTRUCTIONS_PER_TICK
    per_run = (inside[3] - inside[1]) // 2
    # Set-up: runtime code that runs once (start-up, executor creation, parameter loading, the
    # first run's extra work). The C library it calls (memset of TVM's pool) is not counted.
    return {"total": total, "outside": per_run, "setup": inside[1] - per_run}


def timed_build(mlf: Path, outdir: Path, options: ProjectOptions) -> dict:
    """Pipeline (unpack, describe, render, size) vs compiler time, and the no-op rebuild."""
    board = load_board(BOARD)
    started = time.perf_counter()
    library = read_mlf(mlf, outdir / "scratch")
    project = render_project(library, board, outdir / "project", options)
    rendered = time.perf_counter()
    run_make(project.path, jobs=2, log=outdir / "build.log")
    compiled = time.perf_counter()
    shutil.rmtree(outdir / "scratch")
    result = build(mlf, BOARD, outdir / "full", options=options)
    started_size = time.perf_counter()
    size_report(result.elf, result.record)
    sized = time.perf_counter()
    again = time.perf_counter()
    build(mlf, BOARD, outdir / "full", options=options)
    rebuilt = time.perf_counter()
    return {"pipeline": (rendered - started) + (sized - started_size), "compiler": compiled - rendered,
            "noop_rebuild": rebuilt - again, "size_report": sized - started_size}


def footprint(result) -> dict:
    report = result.size
    category = {c["name"]: c for c in report.categories()}
    empty = {"flash": 0, "ram": 0}
    return {"flash": report.flash.used, "ram": report.ram.used, "model_flash": category["model"]["flash"],
            "model_ram": category["model"]["ram"], "stack": result.board.memory.stack_bytes,
            "runtime_flash": category.get("runtime", empty)["flash"], "runtime_ram": category.get("runtime", empty)["ram"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mlfbuild-bench-"))
    library = plugin(work)
    crt_dir = work / "crt"
    subprocess.run(["tar", "xf", str(args.fixtures / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"), "-C", str(work),
                    "./runtime"], check=True)
    (work / "runtime").rename(crt_dir)

    rows, notes = [], []
    for manifest in sorted(args.fixtures.glob("*/manifest.json")):
        for entry in json.loads(manifest.read_text())["fixtures"]:
            mlf = manifest.parent / entry["file"]
            label = f"{manifest.parent.name}/{entry['file'][:-4]}"
            refs = [f"{m['mod_name']}={manifest.parent / m['reference_npz']}" for m in entry["modules"]]
            row = {"fixture": label, "executor": f"{entry['executor'] or 'operator'} {entry.get('interface_api') or ''}".strip()}
            for runtime in ("builtin", "tvm"):
                options = ProjectOptions(runtime=runtime, crt_dir=crt_dir if runtime == "tvm" else None)
                outdir = work / f"{label.replace('/', '-')}-{runtime}"
                try:
                    result = build(mlf, BOARD, outdir, options=options)
                    row[runtime] = footprint(result) | instructions(outdir, result.record, library, refs, outdir)
                except (MlfError, RuntimeError) as exc:
                    row[runtime] = {"error": str(exc).splitlines()[0][:90]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    largest = max(rows, key=lambda r: r.get("builtin", {}).get("flash", 0))
    timing = timed_build(args.fixtures / largest["fixture"].split("/")[0] / (largest["fixture"].split("/")[1] + ".tar"),
                         work / "timing", ProjectOptions())
    args.out.write_text(render(rows, timing, largest["fixture"], notes))
    print(f"wrote {args.out}")
    return 0


# TVM's runtime-free AOT floor for kws on this board at -Os (its minimal harness, no runtime).
TVM_AOT_FLOOR_FLASH = 61_808


def targets(rows: list[dict]) -> list[str]:
    by = {r["fixture"]: r for r in rows}
    out = []
    graph = by.get("tvm-0.13/kws_graph_c", {}).get("builtin", {})
    if "flash" in graph:
        over_flash = graph["flash"] - TVM_AOT_FLOOR_FLASH
        over_ram = graph["ram"] - graph["model_ram"] - graph["stack"]
        out.append(f"- graph (kws): flash {over_flash:,} B above TVM's runtime-free AOT floor ({TVM_AOT_FLOOR_FLASH:,} B; "
                   f"target ≤ 8 KiB; TVM's graph executor +53 KB); RAM = planned activations + largest operator workspace "
                   f"+ {over_ram:,} B (target ≤ 1 KiB; TVM ≈450 KB); no set-up cost (no JSON parsing, no weight copies).")
    packed = by.get("tvm-0.13/kws_aot_packed", {}).get("builtin", {})
    plain = by.get("tvm-0.13/kws_aot_c_unpacked_nousmp", {}).get("builtin", {})
    if "flash" in packed and "flash" in plain:
        out.append(f"- AOT packed (kws) vs the same model with the C interface and the same firmware around it: flash "
                   f"{packed['flash'] - plain['flash']:+,} B (the packed kernels' own argument unpacking, model code), RAM "
                   f"{packed['ram'] - plain['ram']:+,} B; runtime alone {packed['runtime_flash']:,} B flash / "
                   f"{packed['runtime_ram']:,} B RAM (targets ≤ 2 KiB / ≤ 1 KiB; TVM +21 KB / +133 KB).")
    setup = by.get("tvm-0.13/kws_graph_c", {})
    if "setup" in setup.get("builtin", {}):
        tvm_setup = f"{setup['tvm']['setup']:,}" if "setup" in setup.get("tvm", {}) else "—"
        out.append(f"- graph (kws) set-up: {setup['builtin']['setup']:,} runtime and executor instructions before the "
                   f"first inference (TVM's graph executor here: {tvm_setup}; TVM's own measurement: 3.2 M).")
    worst = max(((r["builtin"]["outside"] / r["builtin"]["total"], r["fixture"]) for r in rows
                 if r.get("builtin", {}).get("total", 0) > 1_000_000), default=(0.0, "none"))
    out.append(f"- per-inference runtime and executor instructions, models above 1 M instructions: at most "
               f"{100 * worst[0]:.3f} % ({worst[1]}; target ≤ 0.3 %; TVM's graph executor 0.29 % for kws).")
    out.append(f"- against TVM's runtime, fixture by fixture where both build: {verdict(rows)}")
    return out


def verdict(rows: list[dict]) -> str:
    """Where the builtin runtime does not come out ahead (flash, RAM, per-inference and set-up
    instructions), with the margins; differences within the 16-byte section alignment are ties."""
    losses, compared = [], 0
    for row in rows:
        b, t = row.get("builtin", {}), row.get("tvm", {})
        if "flash" not in b or "flash" not in t:
            continue
        compared += 1
        for key, label in (("flash", "flash"), ("ram", "RAM"), ("outside", "per-inference instructions"),
                           ("setup", "set-up instructions")):
            if key in b and key in t and b[key] > t[key] + (16 if key in ("flash", "ram") else 0):
                losses.append(f"{row['fixture']} {label} +{b[key] - t[key]:,}")
    if not losses:
        return f"builtin is smaller or equal (within 16 B) and does less runtime work on all {compared}."
    return f"builtin is behind on {len(losses)} count(s) of {compared} fixtures: " + "; ".join(losses) + "."


def _cell(data: dict, key: str) -> str:
    return f"{data[key]:,}" if key in data else "—"


def render(rows: list[dict], timing: dict, largest: str, notes: list[str]) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gcc = subprocess.run(["arm-none-eabi-gcc", "-dumpversion"], capture_output=True, text=True).stdout.strip()
    qemu = subprocess.run(["qemu-system-arm", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    lines = [
        "# Benchmarks: mlfbuild's runtime vs TVM's standalone CRT",
        "",
        f"Measured {date.today().isoformat()} on {platform.node() or 'this machine'} ({cpu}, "
        f"{platform.system()} {platform.release()}), arm-none-eabi-gcc {gcc}, {qemu}; board {BOARD}, -Os.",
        "Re-run with `.venv/bin/python benchmarks/runtime_comparison.py` (about ten minutes).",
        "",
        "**Footprint** (bytes; flash = text+data, RAM = data+bss including the "
        f"{rows[0].get('builtin', {}).get('stack', 0):,} B stack reserve). *Floor* = the model's own bytes in the builtin",
        "build as the size report attributes them (generated code, weights, USMP pools or planned activations + the",
        "largest operator workspace, io buffers); *over floor* = everything else, stack reserve excluded: runtime,",
        "executor, console protocol (main.c, which also speaks MLPerf Tiny), start-up, libc. The same floor is used",
        "for both runtimes, so TVM's copies of the weights, its graph JSON and its memory pool count as overhead.",
        "",
        "*Runtime alone* = the size report's runtime category: our `crt/` (workspace pool, TVM backend API) or TVM's",
        "standalone CRT with its platform hooks and pool.",
        "",
        "| fixture | executor | flash builtin | flash tvm | RAM builtin | RAM tvm | builtin over floor (flash / RAM) | tvm over floor (flash / RAM) | runtime alone builtin | runtime alone tvm |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        b, t = row.get("builtin", {}), row.get("tvm", {})
        floor = b if "flash" in b else None
        over = lambda d: (f"{d['flash'] - floor['model_flash']:,} / {d['ram'] - floor['model_ram'] - d['stack']:,}"
                          if "flash" in d and floor else d.get("error", "—"))
        alone = lambda d: f"{d['runtime_flash']:,} / {d['runtime_ram']:,}" if "runtime_flash" in d else "—"
        lines.append(f"| {row['fixture']} | {row['executor']} | {_cell(b, 'flash')} | {_cell(t, 'flash')} | "
                     f"{_cell(b, 'ram')} | {_cell(t, 'ram')} | {over(b)} | {over(t)} | {alone(b)} | {alone(t)} |")
    lines += [
        "",
        "**Instructions per inference** (steady state; *total* from the firmware's SysTick under QEMU -icount × 40, so",
        "±40; *runtime and executor* counted by the TCG plugin `benchmarks/insncount.c` over the code the link map",
        "attributes to the runtime: our workspace pool and backend API, the lowered executors and model table, or TVM's",
        "CRT with its hooks. Operators, TVM's AOT main and the C library they call are model work.)",
        "",
        "*Set-up* = runtime and executor instructions that run once, before and in the first inference (start-up,",
        "executor creation, JSON parsing and parameter loading for TVM's graph executor), not counting the C library",
        "they call (TVM's `memset` of its pool), so TVM's figures are lower bounds.",
        "",
        "| fixture | builtin total | builtin runtime + executor | builtin set-up | tvm total | tvm runtime + executor | tvm set-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        b, t = row.get("builtin", {}), row.get("tvm", {})
        share = lambda d: (f"{d['outside']:,} ({100 * d['outside'] / d['total']:.3f} %)" if d.get("total") else "—")
        lines.append(f"| {row['fixture']} | {_cell(b, 'total')} | {share(b)} | {_cell(b, 'setup')} | "
                     f"{_cell(t, 'total')} | {share(t)} | {_cell(t, 'setup')} |")
    lines += ["", "**Against the targets** (TVM's own figures for kws: TVM 0.13's CRT and graph executor measured on mps2-an386):", ""]
    lines += targets(rows)
    lines += [
        "",
        f"**Build time** ({largest}, builtin runtime, 2 jobs): pipeline (unpack, describe, render, size) "
        f"{timing['pipeline']:.2f} s, compiler {timing['compiler']:.2f} s, no-op rebuild {timing['noop_rebuild']:.2f} s, "
        f"size report {timing['size_report']:.3f} s.",
        "",
    ] + notes
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
