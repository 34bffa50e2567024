"""Workspace pools of every shared AOT fixture: TVM's size, mlfbuild's and the floor, from real builds.

    .venv/bin/python benchmarks/pool_sizes.py [--fixtures ../shared/fixtures] [--cmsis-nn TREE]
                                              [--baseline-src OLD_CHECKOUT] [--jobs 2]

Builds each AOT fixture of the shared manifests for mps2-an386 (CMSIS-NN ones with --cmsis-nn, by
default ../shared/third_party/cmsis-nn-v6.0.0), reads build.json's `workspace_pool` (TVM's size, the
pool the firmware holds, the floor, why a pool was kept), the firmware's RAM from `mlfbuild size
--json` (stack reserve included), and runs it in QEMU against TVM's reference (CMSIS-NN: 1 LSB).
With --baseline-src (a checkout of an older mlfbuild, e.g. `git archive <commit> | tar -x -C DIR`)
each fixture is also built by that tree and its RAM shown beside: before and after, both measured.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOARD = "mps2-an386"


def mlfbuild(source: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=source,
                          env=env, check=False)


def fixtures(root: Path) -> list[tuple[str, dict]]:
    found = []
    for manifest in sorted(root.glob("tvm-*/manifest.json")):
        for entry in json.loads(manifest.read_text())["fixtures"]:
            if entry.get("executor") == "aot" and not entry.get("known_issue"):
                found.append((manifest.parent.name, entry))
    return found


def build(source: Path, mlf: Path, out: Path, cmsis_nn: Path | None, jobs: int) -> dict | None:
    args = ["build", str(mlf), "-b", BOARD, "-o", str(out), "-j", str(jobs)]
    if cmsis_nn:
        args += ["--cmsis-nn", str(cmsis_nn)]
    done = mlfbuild(source, *args)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    size = json.loads(mlfbuild(source, "size", str(out), "--json").stdout)
    return {"record": json.loads((out / "build.json").read_text()), "ram": size["ram"]["used"]}


def check(mlf_set: Path, entry: dict, out: Path, cmsis: bool) -> str:
    references = [f"{m['mod_name']}={mlf_set / m['reference_npz']}" for m in entry["modules"]]
    args = ["run", str(out), "--json"] + [a for ref in references for a in ("--reference", ref)]
    if cmsis:
        args += ["--atol", "1"]
    done = mlfbuild(REPO, *args)
    try:
        return json.loads(done.stdout)["status"]
    except ValueError:
        return f"run failed ({done.returncode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--cmsis-nn", type=Path, default=REPO.parent / "shared" / "third_party" / "cmsis-nn-v6.0.0")
    parser.add_argument("--baseline-src", type=Path, help="an older mlfbuild checkout to measure RAM before")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = ["| fixture | model | pool | TVM B | mlfbuild B | floor B | firmware RAM B"
            + (" | RAM before B" if args.baseline_src else "") + " | outputs | kept because |",
            "|---|---|---|---:|---:|---:|---:|" + ("---:|" if args.baseline_src else "") + "---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for fixture_set, entry in fixtures(args.fixtures):
            mlf = args.fixtures / fixture_set / entry["file"]
            cmsis = args.cmsis_nn if entry.get("cmsisnn") else None
            name = f"{fixture_set}/{entry['file'].removesuffix('.tar')}"
            out = Path(scratch) / name.replace("/", "_")
            after = build(REPO, mlf, out, cmsis, args.jobs)
            before = build(args.baseline_src, mlf, Path(scratch) / (out.name + "-before"), cmsis, args.jobs) \
                if args.baseline_src else None
            if "error" in after:
                rows.append(f"| {name} | | | | | | | {'| ' if before else ''}build failed: {after['error']} | |")
                continue
            status = check(args.fixtures / fixture_set, entry, out, bool(cmsis))
            for model in after["record"]["models"]:
                pool = model.get("workspace_pool")
                if not pool:
                    continue
                kind = "USMP" if pool["kind"] == "usmp" else "TVMBackendAllocWorkspace"
                floor = f"{pool['floor_bytes']:,}" if pool["floor_bytes"] is not None else "—"
                ram_before = (f" | {before['ram']:,}" if before and "ram" in before else " | —") if before else ""
                why = (pool["reason"] or "").replace("|", "/")
                rows.append(f"| {name} | {model['name']} | {kind} | {pool['tvm_bytes']:,} | {pool['bytes']:,} | {floor} | "
                            f"{after['ram']:,}{ram_before} | {status} | {why} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
