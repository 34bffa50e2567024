"""Cortex-M0 (ARMv6-M): the QEMU microbit board (nRF51822, 256 KiB flash, 16 KiB RAM, nRF51 UART).

Every real fixture that builds for a Cortex-M core is tried there: the ones that fit run and match
their reference (int8 bit-exactly), the ones that do not fit are refused with exit 5 and the size
table — nothing in between."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import buildable, entry_id, manifest_entries, references_for
from mlfbuild.build import build
from mlfbuild.errors import OverBudgetError
from mlfbuild.project import ProjectOptions
from mlfbuild.run import run_build

BOARD = "microbit"
# What fits in 256 KiB flash + 16 KiB RAM: the small float MLP and the operator exports. If one of
# these stops fitting (or a bigger one starts to), the table below must change on purpose.
EXPECTED_TO_FIT = {"mlp_aot_c_unpacked.tar", "mlp_graph_c.tar", "mlp_graph_c_linkparams.tar",
                   "mlp_aot_c_unpacked_nousmp.tar", "op_vector_add_c.tar"}
M0_ENTRIES = [item for item in manifest_entries() if buildable(item[1], BOARD)
              and not str(item[1].get("target", "")).startswith("llvm")   # objects made for a Cortex-M4
              and "-keys=arm_cpu" not in str(item[1].get("target", ""))]  # DSP micro-kernels


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("item", M0_ENTRIES, ids=entry_id)
def test_fixture_runs_bit_exactly_or_is_refused(item, fixtures_dir, tmp_path):
    fixture_set, entry = item
    mlf = fixtures_dir / fixture_set / entry["file"]
    try:
        out = build(mlf, BOARD, tmp_path / "out", options=ProjectOptions(werror=True), jobs=2).outdir
    except OverBudgetError as refused:
        assert entry["file"] not in EXPECTED_TO_FIT, f"{entry['file']} should fit: {refused}"
        # the table holds the region that overflows: RAM (16 KiB) or, before compiling, flash (256 KiB)
        assert refused.exit_code == 5 and refused.table and ("16,384" in refused.table or "262,144" in refused.table)
        return
    assert entry["file"] in EXPECTED_TO_FIT, f"{entry['file']} fits now: add it to EXPECTED_TO_FIT"
    result = run_build(out, references=references_for(fixture_set, entry, fixtures_dir), timeout=120)
    assert result.status == "pass", result
    for model in result.models:
        for comparison in model.comparisons:
            if np.dtype(next(o["dtype"] for o in entry["outputs"])).kind in "iu":
                assert comparison.max_abs_error == 0
            else:
                assert comparison.max_abs_error <= 1e-5


@pytest.mark.cross
@pytest.mark.qemu
def test_cli_run_mlp_graph_matches_on_microbit(fixtures_dir):
    """The documented command: `mlfbuild run <tvm-0.13>/mlp_graph_c.tar --board microbit --reference mlp.npz`."""
    folder = fixtures_dir / "tvm-0.13"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(folder / "mlp_graph_c.tar"),
                             "--board", BOARD, "--reference", str(folder / "mlp.npz")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "result: pass" in result.stdout


@pytest.mark.cross
def test_too_big_model_exits_5_with_the_size_table(fixtures_dir, tmp_path):
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "build", str(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar"),
                             "--board", BOARD, "-o", str(tmp_path / "kws")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "ram" in result.stderr and "16,384" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.cross
def test_v6m_firmware_has_no_divide_or_v7_only_instructions(build_firmware, fixtures_dir):
    """ARMv6-M has no SDIV/UDIV, IT blocks or Thumb-2 data processing: the disassembly of the whole
    firmware (our runtime and the model) must not contain them."""
    out = build_firmware(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar", BOARD)
    text = subprocess.run(["arm-none-eabi-objdump", "-d", str(out / "firmware.elf")], capture_output=True,
                          text=True, timeout=120, check=True).stdout
    mnemonics = {line.split("\t")[2].split()[0] for line in text.splitlines() if line.count("\t") >= 2}
    assert not mnemonics & {"sdiv", "udiv", "it", "ite", "itt", "mls", "cbz", "cbnz", "ldrd", "strd", "orr.w"}
    assert "__aeabi_uidiv" in text or "__udivsi3" in text      # divisions go through libgcc
