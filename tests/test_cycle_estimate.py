"""The cycle estimate of `run --profile`: the plugin's Thumb-2 classifier and cost table
(templates/profile/thumbcost.c, compiled alone and called through ctypes), and the estimate in a run."""

from __future__ import annotations

import ctypes
import json
import subprocess

import pytest
from conftest import REPO, cli

CONVERTER_MODELS = REPO / "tests" / "converter_models"

M4, M55 = 0, 1
SOURCE = REPO / "templates" / "profile" / "thumbcost.c"


@pytest.fixture(scope="module")
def thumbcost(tmp_path_factory):
    library = tmp_path_factory.mktemp("thumbcost") / "libthumbcost.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(library), str(SOURCE)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.tc_class_name.restype = ctypes.c_char_p
    lib.tc_insn_cycles.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_uint]
    lib.tc_insn_class.argtypes = [ctypes.c_char_p, ctypes.c_uint]
    lib.tc_insn_taken_penalty.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return lib


def encoding(halfwords: str) -> bytes:
    """'fb21 3002' (as objdump prints Thumb) -> the bytes in memory (each halfword little-endian)."""
    return b"".join(int(h, 16).to_bytes(2, "little") for h in halfwords.split())


def classify(lib, halfwords: str) -> str:
    code = encoding(halfwords)
    return lib.tc_class_name(lib.tc_insn_class(code, len(code))).decode()


def cycles(lib, halfwords: str, after: str | None = None, model: int = M4) -> int:
    code = encoding(halfwords)
    prev = encoding(after) if after else None
    return lib.tc_insn_cycles(model, code, len(code), prev, len(prev) if prev else 0)


# Encodings from arm-none-eabi-as (-march=armv8.1-m.main+mve.fp+fp.dp), as objdump prints them;
# cycles from the Cortex-M4 TRM table 3-1 (P = 2, SDIV/UDIV = 7) and its FPU table.
M4_TABLE = [
    ("1888", "adds r0, r1, r2", "alu", 1),
    ("6848", "ldr r0, [r1, #4]", "load", 2),
    ("6008", "str r0, [r1]", "store", 1),
    ("5088", "str r0, [r1, r2]", "store", 2),
    ("b5f0", "push {r4-r7, lr}", "store_multi", 6),
    ("bdf0", "pop {r4-r7, pc}", "pop_pc", 8),
    ("4770", "bx lr", "branch_reg", 3),
    ("e7f5", "b.n", "branch", 3),
    ("d0f4", "beq.n", "branch_cond", 1),
    ("b108", "cbz r0", "branch_cond", 1),
    ("bf08", "it eq", "it", 1),
    ("fb21 3002", "smlad r0, r1, r2, r3", "mul", 1),
    ("fbc2 0103", "smlal r0, r1, r2, r3", "mul", 1),
    ("fb91 f0f2", "sdiv r0, r1, r2", "div", 7),
    ("f8d1 0008", "ldr.w r0, [r1, #8]", "load", 2),
    ("f85d fb04", "ldr.w pc, [sp], #4", "load_pc", 4),
    ("e9d2 0100", "ldrd r0, r1, [r2]", "load_dual", 3),
    ("e8bd 8ff0", "pop.w {r4-r11, pc}", "pop_pc", 12),
    ("e8df f000", "tbb [pc, r0]", "table_branch", 4),
    ("f7ff ffe2", "bl", "branch", 3),
    ("f7ff bfe0", "b.w", "branch", 3),
    ("f43f afde", "beq.w", "branch_cond", 1),
    ("eb02 0083", "add.w r0, r2, r3, lsl #2", "alu", 1),
    ("ee30 0a81", "vadd.f32 s0, s1, s2", "fp_alu", 1),
    ("ee20 0a81", "vmul.f32 s0, s1, s2", "fp_alu", 1),
    ("ee00 0a81", "vmla.f32 s0, s1, s2", "fp_mac", 3),
    ("eea0 0a81", "vfma.f32 s0, s1, s2", "fp_mac", 3),
    ("ee80 0a81", "vdiv.f32 s0, s1, s2", "fp_div", 14),
    ("eeb1 0ae0", "vsqrt.f32 s0, s1", "fp_div", 14),
    ("ed90 0a00", "vldr s0, [r0]", "fp_load", 2),
    ("ed2d 8a10", "vpush {s16-s31}", "fp_store_multi", 17),
    ("ee10 0a10", "vmov r0, s0", "fp_alu", 1),
    ("ec41 0a10", "vmov s0, s1, r0, r1", "fp_move2", 2),
]


@pytest.mark.parametrize("halfwords, text, cls, cost", M4_TABLE, ids=[row[1] for row in M4_TABLE])
def test_each_class_costs_what_the_cortex_m4_trm_says(thumbcost, halfwords, text, cls, cost):
    assert classify(thumbcost, halfwords) == cls, text
    assert cycles(thumbcost, halfwords) == cost, text


def test_a_load_after_a_load_is_pipelined_unless_it_needs_the_loaded_register(thumbcost):
    assert cycles(thumbcost, "681a", after="6848") == 1  # ldr r2, [r3] after ldr r0, [r1, #4]
    assert cycles(thumbcost, "6802", after="6848") == 2  # ldr r2, [r0]: its address is the loaded r0
    # TRM: "LDR R0,[R1,R2]; STR R1,[R3,R2] - normally three cycles total"; a store with an immediate
    # offset takes one cycle anyway.
    assert cycles(thumbcost, "5088", after="6848") == 1  # str r0, [r1, r2] after ldr r0: r0 is data, not address
    assert cycles(thumbcost, "6008", after="681a") == 1  # str r0, [r1] after ldr r2, [r3]
    assert cycles(thumbcost, "5088", after="1888") == 2  # after an add that writes r0 (not an address register)


def test_an_address_computed_just_before_stalls_a_cycle(thumbcost):
    assert cycles(thumbcost, "6808", after="3104") == 3  # ldr r0, [r1] after adds r1, #4
    assert cycles(thumbcost, "6808", after="3204") == 2  # after adds r2, #4


def test_conditional_branches_pay_the_refill_only_when_taken(thumbcost):
    for branch in ("d0f4", "b108", "f43f afde"):
        code = encoding(branch)
        assert thumbcost.tc_insn_taken_penalty(M4, code, len(code)) == 2
    code = encoding("e7f5")  # b.n: always taken, its refill already in its cost
    assert thumbcost.tc_insn_taken_penalty(M4, code, len(code)) == 0


MVE_TABLE = [
    ("ed90 1e00", "vldrb.s8 q0, [r0]", "vec_load"),
    ("ed81 1e00", "vstrb.8 q0, [r1]", "vec_store"),
    ("edb0 3f04", "vldrw.u32 q1, [r0, #16]!", "vec_load"),
    ("ef02 0844", "vadd.i8 q0, q1, q2", "vec_alu"),
    ("eef0 0f22", "vmladava.s8 r0, q0, q1", "vec_alu"),
    ("fe23 0e42", "vmla.u32 q0, q1, r2", "vec_alu"),
    ("fe71 0f4d", "vpst", "vec_pred"),
    ("f040 e001", "dls lr, r0", "loop_start"),
    ("f002 c003", "wlstp.8 lr, r2", "loop_start"),
    ("f00f c049", "le lr", "loop_end"),
    ("f01f c04d", "letp lr", "loop_end"),
]


@pytest.mark.parametrize("halfwords, text, cls", MVE_TABLE, ids=[row[1] for row in MVE_TABLE])
def test_mve_and_low_overhead_loops_are_recognised(thumbcost, halfwords, text, cls):
    assert classify(thumbcost, halfwords) == cls, text


def test_cortex_m55_vector_instructions_take_two_beats_and_overlap_across_pipes(thumbcost):
    vldrb, vadd, vmladava = "ed90 1e00", "ef02 0844", "eef0 0f22"
    assert cycles(thumbcost, vadd, model=M55) == 2
    assert cycles(thumbcost, vadd, after=vldrb, model=M55) == 1  # load/store pipe, then arithmetic
    assert cycles(thumbcost, vmladava, after=vadd, model=M55) == 2  # same pipe: no overlap
    assert cycles(thumbcost, vldrb, after=vldrb, model=M55) == 2
    le = encoding("f00f c049")
    assert thumbcost.tc_insn_taken_penalty(M55, le, len(le)) == 0  # low-overhead loop: no refill
    assert thumbcost.tc_insn_taken_penalty(M4, le, len(le)) == 2


# -- in a run -------------------------------------------------------------------------------------


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board, label", [("mps2-an386", "Cortex-M4 TRM timings"),
                                          ("mps3-an547", "Cortex-M55: M4 scalar timings, MVE dual-beat"),
                                          ("mps2-an385", None)])
def test_the_json_carries_the_estimate_and_its_model(build_firmware, board, label):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", board)
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)["models"][0]
    assert model["cycle_model"] == label
    if label is None:  # the Cortex-M3 has no model: no figure rather than the M4's
        assert model["cycles"] is None and all(row["cycles"] is None for row in model["profile"])
        return
    assert model["cycles"] >= model["instructions"] > 0
    rows = [row for row in model["profile"] if not row["folded_into"]]
    assert rows and all(row["cycles"] >= row["instructions"] for row in rows)
    assert sum(row["cycles"] for row in rows) <= model["cycles"]


@pytest.mark.cross
@pytest.mark.qemu
def test_an_imported_model_on_the_m4_reports_cycles_beside_instructions(cmsis_nn, tmp_path):
    out = tmp_path / "dense"
    built = cli("build", str(CONVERTER_MODELS / "dense_2d.tflite"), "-b", "mps2-an386",
                "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(out))
    assert built.returncode == 0, built.stderr
    table = cli("run", str(out), "--profile")
    assert table.returncode == 0, table.stderr
    head = next(line for line in table.stdout.splitlines() if line.startswith("profile of"))
    assert "cycles (estimate: Cortex-M4 TRM timings)" in head, head
    data = json.loads(cli("run", str(out), "--profile", "--json").stdout)["models"][0]
    assert data["cycles"] >= data["instructions"] > 0
    assert f"{data['cycles']:,} cycles" in head


# Operators in hand-written Thumb whose cost the Cortex-M4 table fixes: a counted loop (SUBS; BNE
# back) and an IT-conditional return. Each block's cost is summed at translation; a BNE's refill is
# added only when the next block run is not its fall-through.
LOOPS = """
#include <stdint.h>
__attribute__((naked, noinline)) int32_t tiny_loop_once(void) {
  __asm__ volatile("movs r0, #1\\n1: subs r0, #1\\n bne 1b\\n bx lr\\n");
}
__attribute__((naked, noinline)) int32_t tiny_loop_thrice(void) {
  __asm__ volatile("movs r0, #3\\n1: subs r0, #1\\n bne 1b\\n bx lr\\n");
}
__attribute__((naked, noinline)) int32_t tiny_it_return(int32_t x) {
  __asm__ volatile("cmp r0, #0\\n it eq\\n bxeq lr\\n movs r0, #0\\n bx lr\\n");
}
"""


@pytest.mark.cross
@pytest.mark.qemu
def test_conditional_branches_are_charged_the_refill_only_when_taken(build_firmware, tmp_path):
    from mlfwriter import TinyModel, tar_tree

    files = TinyModel().files_with_operators(
        LOOPS, "int32_t tiny_loop_once(void);\nint32_t tiny_loop_thrice(void);\nint32_t tiny_it_return(int32_t x);\n",
        "  { volatile int32_t sink = tiny_loop_once() + tiny_loop_thrice() + tiny_it_return(0) + tiny_it_return(1);"
        " (void)sink; }\n")
    out = build_firmware(tar_tree(files, tmp_path / "loops.tar"), "mps2-an386")
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["function"]: row for row in json.loads(result.stdout)["models"][0]["profile"]}
    # movs 1, subs 1, bne not taken 1, bx lr 1+P: 4 instructions, 6 cycles.
    assert (rows["tiny_loop_once"]["instructions"], rows["tiny_loop_once"]["cycles"]) == (4, 6)
    # movs 1, 3 x (subs 1 + bne 1), 2 taken x P, bx lr 3: 8 instructions, 14 cycles.
    assert (rows["tiny_loop_thrice"]["instructions"], rows["tiny_loop_thrice"]["cycles"]) == (8, 14)
    # Called twice: x = 0 returns at the IT's BXEQ (cmp 1, it 1, bxeq 1+P = 5 cycles); x = 1 goes on
    # (cmp, it, bxeq not taken 1, movs 1, bx lr 3 = 7): 3 + 5 instructions, 5 + 7 cycles.
    assert rows["tiny_it_return"]["calls"] == 2
    assert (rows["tiny_it_return"]["instructions"], rows["tiny_it_return"]["cycles"]) == (8, 12)
