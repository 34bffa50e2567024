"""What `--opt` (and gcc's -flto) buys on a real model, measured in one run.

    .venv/bin/python benchmarks/opt_levels.py [--fixtures ../shared/fixtures] [--model tvm-0.13/kws_graph_c]

For -Os, -O2 and -O3, each without and with link-time optimisation, on mps2-an386: flash and RAM
(arm-none-eabi-size: text+data, data+bss), instructions per inference (`mlfbuild run --profile`,
QEMU's TCG plugin) and whether the outputs still match TVM's reference. The -flto variants
rebuild mlfbuild's generated project with its plain Makefile, `-flto` added to the compile and
link flags: mlfbuild does not offer it (see README, Build options). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOARD = "mps2-an386"
OPT_LEVELS = ("-Os", "-O2", "-O3")


def mlfbuild(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def relink_with_lto(folder: Path) -> None:
    """Rebuild the generated project with -flto on every compile and on the link."""
    project = folder / "project"
    makefile = (project / "Makefile").read_text()
    link = re.search(r"^LINK_FLAGS  := (.*)$", makefile, re.M).group(1)
    opt = re.search(r"^OPT_FLAGS   := (.*)$", makefile, re.M).group(1)
    shutil.rmtree(project / "build", ignore_errors=True)
    subprocess.run(["make", "-j2", "--no-print-directory", f"OPT_FLAGS={opt} -flto",
                    f"LINK_FLAGS={link} {opt} -flto"], cwd=project, check=True, capture_output=True)
    for suffix in ("elf", "bin", "hex"):
        shutil.copy(project / "build" / f"firmware.{suffix}", folder / f"firmware.{suffix}")


def measure(folder: Path, reference: Path) -> dict:
    size = subprocess.run(["arm-none-eabi-size", "-A", str(folder / "firmware.elf")], capture_output=True,
                          text=True, check=True).stdout
    sections = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\.\S+)\s+(\d+)", size, re.M)}
    flash = sum(v for k, v in sections.items() if k in (".isr_vector", ".text", ".rodata", ".ARM.exidx", ".data"))
    ram = sum(v for k, v in sections.items() if k in (".data", ".bss", ".stack", ".heap", ".noinit"))
    run = mlfbuild("run", str(folder), "--profile", "--json", "--reference", str(reference))
    data = json.loads(run.stdout)
    return {"flash": flash, "ram": ram, "instructions": data["models"][0]["instructions"], "status": data["status"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--model", default="tvm-0.13/kws_graph_c", help="fixture set/name, without .tar")
    parser.add_argument("--reference", type=Path, help="reference .npz (default: <set>/<model prefix>.npz)")
    args = parser.parse_args()
    mlf = args.fixtures / f"{args.model}.tar"
    reference = args.reference or mlf.parent / f"{mlf.stem.split('_')[0]}.npz"
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for opt in OPT_LEVELS:
            folder = Path(scratch) / opt.strip("-")
            built = mlfbuild("build", str(mlf), "-b", BOARD, f"--opt={opt}", "-o", str(folder))
            if built.returncode != 0:
                sys.exit(f"build with {opt} failed: {built.stderr.strip()}")
            rows.append((opt, measure(folder, reference)))
            relink_with_lto(folder)
            rows.append((f"{opt} -flto", measure(folder, reference)))
    base = rows[0][1]
    print(f"`{args.model}` on {BOARD}:\n")
    print("| flags | flash (B) | vs -Os | RAM (B) | instructions per inference | vs -Os | outputs |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for flags, row in rows:
        print(f"| `{flags}` | {row['flash']:,} | {row['flash'] - base['flash']:+,} | {row['ram']:,} | "
              f"{row['instructions']:,} | {100 * (row['instructions'] / base['instructions'] - 1):+.1f} % | "
              f"{row['status']} |")


if __name__ == "__main__":
    main()
