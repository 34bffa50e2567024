"""`run --profile --cycles-for BOARD`: a real chip's flash read path added to the cycle estimate.
The cache model (templates/profile/flashcost.c, compiled alone and called through ctypes), the board
file's [flash_timing] table, and the wait states charged in a run, read by hand from the code run."""

from __future__ import annotations

import ctypes
import json
import subprocess

import pytest
from conftest import REPO, cli

from mlfbuild.boards import board_from_data, load_board
from mlfbuild.errors import BoardError

SOURCE = REPO / "templates" / "profile" / "flashcost.c"


@pytest.fixture(scope="module")
def flashcost(tmp_path_factory):
    library = tmp_path_factory.mktemp("flashcost") / "libflashcost.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(library), str(SOURCE)],
                   check=True)
    lib = ctypes.CDLL(str(library))
    lib.fc_test_access.argtypes = [ctypes.c_uint64, ctypes.c_uint]
    return lib


def reads(lib, accesses) -> list[int]:
    return [lib.fc_test_access(address, size) for address, size in accesses]


def test_a_read_unit_is_read_from_flash_once_while_its_line_stays(flashcost):
    flashcost.fc_test_init(2, 4, 8)  # 2 lines of 4 x 8 bytes
    # Two words of one double word: one read; the next double word of the same line: one more.
    assert reads(flashcost, [(0x100, 4), (0x104, 4), (0x108, 4), (0x100, 4)]) == [1, 0, 1, 0]


def test_an_access_across_two_read_units_reads_both(flashcost):
    flashcost.fc_test_init(2, 4, 8)
    assert reads(flashcost, [(0x106, 4), (0x100, 8), (0x108, 8)]) == [2, 0, 0]


def test_the_least_recently_used_line_makes_room(flashcost):
    flashcost.fc_test_init(2, 4, 8)  # lines of 32 bytes
    lines = [0x000, 0x020, 0x000, 0x040, 0x000, 0x020]
    # 0x000 and 0x020 fill the cache; 0x000 is used again, so 0x040 replaces 0x020, which then misses.
    assert reads(flashcost, [(a, 4) for a in lines]) == [1, 1, 0, 1, 0, 1]


def test_a_stream_larger_than_the_cache_misses_on_every_pass_and_a_smaller_one_once(flashcost):
    flashcost.fc_test_init(8, 4, 8)  # the STM32L4's data cache: 256 bytes
    small = [(a, 4) for a in range(0, 128, 4)] * 2
    assert sum(reads(flashcost, small)) == 128 // 8
    flashcost.fc_test_init(8, 4, 8)
    large = [(a, 4) for a in range(0, 512, 4)] * 2
    assert sum(reads(flashcost, large)) == 2 * 512 // 8


def test_no_cache_reads_every_access(flashcost):
    flashcost.fc_test_init(0, 4, 8)
    assert reads(flashcost, [(0, 4), (0, 4)]) == [0, 0]  # lines = 0: the plugin charges nothing


# -- the board file --------------------------------------------------------------------------------

TIMING = {"clock_hz": 120_000_000, "wait_states": 5, "read_bytes": 8, "instruction_cache_lines": 32,
          "data_cache_lines": 8, "reads_per_line": 4}


def _board_data(name: str) -> dict:
    import tomllib
    return tomllib.loads((REPO / "boards" / f"{name}.toml").read_text())


def test_the_nucleo_l4r5zi_carries_its_flash_timing():
    timing = load_board("nucleo-l4r5zi").flash_timing
    assert timing is not None and timing.to_json() == TIMING
    flash = load_board("mps2-an386").memory.flash
    assert timing.plugin_spec(flash) == "0:400000:5:8:32:8:4"


@pytest.mark.parametrize("change, message", [
    ({"reads_per_line": 9}, "flash_timing.reads_per_line"),
    ({"instruction_cache_lines": 65}, "flash_timing.instruction_cache_lines"),
    ({"colour": "red"}, "flash_timing.colour"),
])
def test_a_flash_timing_the_plugin_cannot_model_is_refused_naming_the_key(change, message, tmp_path):
    data = _board_data("nucleo-l4r5zi")
    data["flash_timing"] = {**TIMING, **change}
    with pytest.raises(BoardError, match=message.replace(".", r"\.")):
        board_from_data(tmp_path / "nucleo-l4r5zi.toml", data)


def test_a_qemu_board_has_no_flash_timing(tmp_path):
    data = _board_data("mps2-an386")
    data["flash_timing"] = dict(TIMING)
    with pytest.raises(BoardError, match="flash_timing"):
        board_from_data(tmp_path / "mps2-an386.toml", data)


# -- in a run ----------------------------------------------------------------------------------------

# Two table walks, the same code at the same alignment (one macro): each reads its table twice, word by word. The
# 128-byte table stays in the STM32L4's 256-byte data cache (16 double words read once); the
# 512-byte one streams through it (64 double words, read again on the second pass). The walks'
# estimates differ by exactly the 112 extra reads at 5 wait states.
WALKS = """
#include <stdint.h>
static const uint32_t walk_small_table[32] __attribute__((aligned(32))) = {1};
static const uint32_t walk_large_table[128] __attribute__((aligned(32))) = {1};
#define WALK(name, table, words)                                                   \\
  __attribute__((noinline, aligned(32))) uint32_t name(void) {                     \\
    uint32_t sum = 0;                                                             \\
    for (int pass = 0; pass < 2; pass++)                                          \\
      for (int i = 0; i < (words); i++) sum += ((volatile const uint32_t*)(table))[i]; \\
    return sum;                                                                   \\
  }
WALK(walk_small, walk_small_table, 32)
WALK(walk_large, walk_large_table, 128)
"""


@pytest.mark.cross
@pytest.mark.qemu
def test_flash_reads_the_caches_miss_cost_their_wait_states(build_firmware, tmp_path):
    from mlfwriter import TinyModel, tar_tree

    files = TinyModel().files_with_operators(
        WALKS, "#include <stdint.h>\nuint32_t walk_small(void);\nuint32_t walk_large(void);\n",
        "  { volatile uint32_t sink = walk_small() + walk_large(); (void)sink; }\n")
    out = build_firmware(tar_tree(files, tmp_path / "walks.tar"), "mps2-an386")
    plain = json.loads(cli("run", str(out), "--profile", "--json").stdout)["models"][0]
    timed = cli("run", str(out), "--cycles-for", "nucleo-l4r5zi", "--json")
    assert timed.returncode == 0, timed.stderr
    chip = json.loads(timed.stdout)["models"][0]
    assert chip["cycle_model"].startswith("Cortex-M4 TRM timings + nucleo-l4r5zi flash: 5 wait states at 120 MHz")
    assert chip["instructions"] == plain["instructions"]
    reads = chip["flash_reads"]
    assert chip["cycles"] - plain["cycles"] == 5 * (reads["instruction"] + reads["data"])
    added = {row["function"]: row["cycles"] for row in chip["profile"]}
    base = {row["function"]: row["cycles"] for row in plain["profile"]}
    small = added["walk_small"] - base["walk_small"]
    large = added["walk_large"] - base["walk_large"]
    assert large - small == 5 * (2 * 512 // 8 - 128 // 8), (small, large)
    table = cli("run", str(out), "--cycles-for", "nucleo-l4r5zi").stdout
    assert (f"flash reads the chip's caches missed, per inference: {reads['instruction']:,} of instructions, "
            f"{reads['data']:,} of data") in table
    assert f"{chip['cycles']:,} cycles (estimate: {chip['cycle_model']})" in table


@pytest.mark.cross
@pytest.mark.qemu
def test_a_board_without_flash_timing_is_refused(build_firmware):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", "mps2-an386")
    missing = cli("run", str(out), "--cycles-for", "mps3-an547")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == [
        "mlfbuild: error: --cycles-for mps3-an547: the board file has no [flash_timing], so there is no flash to "
        "model (boards with one: nucleo-l4r5zi)"]


def test_a_build_for_another_core_is_refused_naming_the_boards_to_build_for(build_firmware):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", "host")
    refused = cli("run", str(out), "--cycles-for", "nucleo-l4r5zi")
    assert refused.returncode == 6, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "mlfbuild: error: --cycles-for nucleo-l4r5zi: the build is for the host, not nucleo-l4r5zi's cortex-m4; "
        "build for mps2-an386 or netduinoplus2"]
