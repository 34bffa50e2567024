"""Real builds: every shared fixture for the M4F QEMU board and the host, with the real cross
compiler; reproducible, incremental, warning-free; and every way a build must fail."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, cli, entry_id, fixture_boards
from mlfbuild.build import build
from mlfbuild.errors import InvalidInputError
from mlfbuild.project import ProjectOptions

EXAMPLE = REPO / "examples" / "tiny_aot.tar"




# The fixtures that must not build (producer defects, Cortex-M objects on the host) have failure tests
# of their own below; the CMSIS-NN ones build with the library in test_cmsis_nn.py.
BUILDS = fixture_boards(("mps2-an386", "host"))


@pytest.mark.parametrize("item, board", [pytest.param(i, b, id=f"{entry_id(i)}-{b}",
                                                    marks=() if b == "host" else pytest.mark.cross) for i, b in BUILDS])
def test_every_fixture_builds(item, board, fixtures_dir, build_firmware):
    fixture_set, entry = item
    out = build_firmware(fixtures_dir / fixture_set / entry["file"], board)
    record = json.loads((out / "build.json").read_text())
    assert (out / "firmware.elf").stat().st_size > 0
    if board != "host":
        assert (out / "firmware.bin").stat().st_size > 0 and (out / "firmware.hex").read_text().startswith(":")
    assert record["mlf"]["version"] == entry["mlf_metadata_version"]
    assert record["outputs"]["firmware.elf"]
    make_log = (out / "project").exists()
    assert make_log


@pytest.mark.cross
def test_build_record_and_project_are_self_contained(build_firmware, tmp_path):
    out = build_firmware(EXAMPLE, "mps2-an386")
    record = json.loads((out / "build.json").read_text())
    assert record["board"]["name"] == "mps2-an386"
    assert record["runtime"] == "builtin"
    assert "arm-none-eabi-gcc" in record["toolchain"]
    assert record["models"][0]["inputs"][0]["shape"] == [1, 16]
    # The rendered project rebuilds with plain make, without mlfbuild.
    copy = tmp_path / "project"
    subprocess.run(["cp", "-r", str(out / "project"), str(copy)], check=True)
    subprocess.run(["make", "clean"], cwd=copy, check=True, capture_output=True)
    result = subprocess.run(["make", "-j2"], cwd=copy, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (copy / "build" / "firmware.bin").read_bytes() == (out / "firmware.bin").read_bytes()


@pytest.mark.cross
def test_builds_are_reproducible_and_incremental(tmp_path, fixtures_dir):
    mlf = fixtures_dir / "tvm-0.13" / "kws_graph_c.tar"
    first = build(mlf, "mps2-an386", tmp_path / "a")
    second = build(mlf, "mps2-an386", tmp_path / "b")
    assert (tmp_path / "a" / "firmware.bin").read_bytes() == (tmp_path / "b" / "firmware.bin").read_bytes()
    assert first.record["outputs"]["firmware.bin"] == second.record["outputs"]["firmware.bin"]
    again = build(mlf, "mps2-an386", tmp_path / "a")
    assert again.make.compiled == [] and not again.make.linked


def _board_file(tmp_path: Path, clock_hz: int) -> Path:
    """A board file of the user's own: the default board under another name and UART clock."""
    text = (REPO / "boards" / "mps2-an386.toml").read_text()
    text = text.replace('name = "mps2-an386"', 'name = "my-board"').replace("clock_hz = 25000000", f"clock_hz = {clock_hz}")
    path = tmp_path / str(clock_hz) / "my-board.toml"
    path.parent.mkdir()
    path.write_text(text)
    return path


def _rebuild_cases(fixtures: Path, third_party: Path, tmp_path: Path) -> dict[str, tuple[dict, dict]]:
    """Two builds that differ in one input each: (first, second) keyword arguments of build()."""
    kws_aot = fixtures / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"  # bundles TVM's CRT for --runtime tvm
    kws_cmsis_nn = fixtures / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar"
    return {
        "cmsis-nn-tree": (dict(mlf=kws_cmsis_nn, options=ProjectOptions(cmsis_nn=third_party / "cmsis-nn-v4.1.0")),
                          dict(mlf=kws_cmsis_nn, options=ProjectOptions(cmsis_nn=third_party / "cmsis-nn-v6.0.0"))),
        "opt": (dict(mlf=EXAMPLE, options=ProjectOptions(optimize="-Os")),
                dict(mlf=EXAMPLE, options=ProjectOptions(optimize="-O0"))),
        "board": (dict(mlf=EXAMPLE, board_name="mps2-an386"), dict(mlf=EXAMPLE, board_name="mps2-an385")),
        "board-to-host": (dict(mlf=EXAMPLE, board_name="mps2-an386"), dict(mlf=EXAMPLE, board_name="host")),
        "runtime": (dict(mlf=kws_aot, options=ProjectOptions(runtime="builtin")),
                    dict(mlf=kws_aot, options=ProjectOptions(runtime="tvm"))),
        "board-file-edit": (dict(mlf=EXAMPLE, board_name="my-board", board_files=(_board_file(tmp_path, 25_000_000),)),
                            dict(mlf=EXAMPLE, board_name="my-board", board_files=(_board_file(tmp_path, 12_500_000),))),
        # The same file names and module name, other code: only the contents tell them apart.
        "mlf": (dict(mlf=fixtures / "tvm-0.8" / "mlp_graph_c.tar"), dict(mlf=fixtures / "tvm-0.13" / "mlp_graph_c.tar")),
    }


@pytest.mark.cross
@pytest.mark.parametrize("case", ["opt", "board", "board-to-host", "runtime", "board-file-edit", "mlf",
                                  pytest.param("cmsis-nn-tree", marks=pytest.mark.qemu)])  # its size probe
def test_a_rebuild_into_a_used_folder_equals_a_fresh_build(case, fixtures_dir, third_party_dir, tmp_path):
    first, second = _rebuild_cases(fixtures_dir, third_party_dir, tmp_path)[case]

    def build_into(folder: str, kwargs: dict):
        kwargs = {"board_name": "mps2-an386", **kwargs}
        return build(kwargs.pop("mlf"), kwargs.pop("board_name"), tmp_path / folder, jobs=2, **kwargs)

    build_into("used", first)
    rebuilt = build_into("used", second)
    build_into("fresh", second)
    assert rebuilt.make.compiled, "the changed input recompiled nothing"
    for name in ("firmware.elf", "firmware.bin", "firmware.hex"):
        if (tmp_path / "fresh" / name).exists() or (tmp_path / "used" / name).exists():
            assert (tmp_path / "used" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name
    assert (tmp_path / "used" / "build.json").read_text() == (tmp_path / "fresh" / "build.json").read_text()
    again = build_into("used", second)
    assert again.make.compiled == [] and not again.make.linked


@pytest.mark.cross
def test_plain_make_rebuilds_what_a_makefile_edit_affects(build_firmware, tmp_path):
    """The rendered project keeps the property without mlfbuild: edit OPT_FLAGS, run make."""
    out = build_firmware(EXAMPLE, "mps2-an386")
    project = tmp_path / "project"
    subprocess.run(["cp", "-a", str(out / "project"), str(project)], check=True)
    assert subprocess.run(["make"], cwd=project, capture_output=True, text=True).stdout == ""
    makefile = project / "Makefile"
    makefile.write_text(makefile.read_text().replace("OPT_FLAGS   := -Os", "OPT_FLAGS   := -O0"))
    remade = subprocess.run(["make", "-j2"], cwd=project, capture_output=True, text=True, check=True).stdout
    assert remade.count("CC   ") == len(list((project / "build").rglob("*.o")))
    # Plain make keeps the .stack reserve linker.ld holds (only mlfbuild computes the stack bound).
    from mlfbuild.project import linked_stack_bytes

    fresh = build(EXAMPLE, "mps2-an386", tmp_path / "fresh",
                  options=ProjectOptions(optimize="-O0", werror=True, stack_bytes=linked_stack_bytes(project)))
    assert (project / "build" / "firmware.bin").read_bytes() == fresh.elf.with_suffix(".bin").read_bytes()


@pytest.mark.cross
def test_another_compiler_under_the_same_name_rebuilds_everything(tmp_path):
    """The compiler's identity is part of the build: a new version on PATH recompiles, and
    build.json names the compiler make really ran."""
    build(EXAMPLE, "mps2-an386", tmp_path / "o")
    real = subprocess.run(["which", "arm-none-eabi-gcc"], capture_output=True, text=True, check=True).stdout.strip()
    wrapper = tmp_path / "bin" / "arm-none-eabi-gcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "arm-none-eabi-gcc (patched) 99.1"; exit 0; }}\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{wrapper.parent}:{os.environ['PATH']}")
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "build", str(EXAMPLE), "-o", str(tmp_path / "o")],
                            capture_output=True, text=True, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert "nothing recompiled" not in result.stdout
    assert json.loads((tmp_path / "o" / "build.json").read_text())["toolchain"] == "arm-none-eabi-gcc (patched) 99.1"


@pytest.mark.cross
def test_build_log_and_warning_summary(tmp_path):
    """Every build keeps the compiler's whole output; the model code's warnings are summarised in
    one line; -v streams the compiler's lines; a failed build names the log."""
    from mlfwriter import TinyModel, tar_tree

    files = TinyModel().files()
    files["codegen/host/src/tiny_lib1.c"] += b"\nint tiny_unused_check(int status) { switch (!status) { case 0: return 1; case -1: return 2; } return 0; }\n"
    mlf = tar_tree(files, tmp_path / "warned.tar")
    result = cli("build", str(mlf), "-o", str(tmp_path / "o"))
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "o" / "build.log").read_text()
    assert "CC   model/codegen/host/src/tiny_lib1.c" in log and "-Wswitch-bool" in log
    summary = [line for line in result.stderr.splitlines() if "compiler warning(s) in the model's code" in line]
    assert len(summary) == 1 and "1x switch condition has boolean value [-Wswitch-bool]" in summary[0]
    assert "build.log" in summary[0]
    verbose = cli("build", str(mlf), "-v", "-o", str(tmp_path / "v"))
    assert "warning: switch condition has boolean value" in verbose.stderr
    files["codegen/host/src/tiny_lib1.c"] += b"\nthis is not C;\n"
    broken = cli("build", str(tar_tree(files, tmp_path / "broken.tar")), "-o", str(tmp_path / "o"))
    assert broken.returncode == 4 and f"full log: {tmp_path / 'o' / 'build.log'}" in broken.stderr
    assert "this is not C" in (tmp_path / "o" / "build.log").read_text()
    # The failed rebuild left nothing that describes the previous firmware as if it were this one.
    assert not (tmp_path / "o" / "build.json").exists() and not (tmp_path / "o" / "firmware.elf").exists()


@pytest.mark.cross
def test_our_code_is_warning_free(tmp_path):
    for board in ("mps2-an386", "mps2-an385", "host"):
        result = build(EXAMPLE, board, tmp_path / board, options=ProjectOptions(werror=True))
        assert "warning" not in result.make.log.lower(), result.make.log


@pytest.mark.cross
def test_graph_firmware_keeps_weights_in_flash(build_firmware, fixtures_dir):
    from elftools.elf.elffile import ELFFile

    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", "mps2-an386")
    image = (out / "firmware.elf").read_bytes()
    assert b"node_row_ptr" not in image and b"tvm_op" not in image  # no graph JSON on the device
    with open(out / "firmware.elf", "rb") as stream:
        elf = ELFFile(stream)
        ram = sum(s["sh_size"] for s in elf.iter_sections()
                  if s["sh_flags"] & 0x2 and s["sh_flags"] & 0x1 and s.name not in (".stack", ".heap"))
        symbols = {sym.name: sym for sym in elf.get_section_by_name(".symtab").iter_symbols()}
    params = sum(sym["st_size"] for name, sym in symbols.items() if name.startswith("mlf_default_param"))
    arena = symbols["mlf_default_arena"]["st_size"]
    assert params == 53_304  # every weight is a const array in flash ...
    # ... and RAM is one planned arena (activations and every operator's scratch, no separate pool)
    # + the console application's input and output buffers + a little runtime state.
    assert "mlf_workspace_pool" not in symbols
    io = sum(sym["st_size"] for name, sym in symbols.items() if re.fullmatch(r"mlf_default_(input|output)\d+_data", name))
    assert io == 490 + 12
    assert arena + io <= ram <= arena + io + 1024, (ram, arena, io)
    record = json.loads((out / "build.json").read_text())
    largest_op = max(op["workspace_size_bytes"] for op in record["library"]["modules"][0]["memory"]["operator_functions"])
    assert largest_op < arena == record["models"][0]["memory_plan"]["arena_bytes"]


def test_v5_defect_fails_before_linking(fixtures_dir, tmp_path):
    result = cli("build", str(fixtures_dir / "tvm-0.8" / "mlp_aot_c_unpacked_nolinkparams.tar"), "-o", str(tmp_path / "o"))
    assert result.returncode == 3
    assert "tvmgen_mlp_run_model" in result.stderr and "link-params" in result.stderr
    assert not (tmp_path / "o" / "project" / "build").exists()


def test_llvm_objects_that_do_not_match_the_board(fixtures_dir, tmp_path):
    mlf = fixtures_dir / "tvm-0.13" / "op_matmul_llvm_cm4.tar"
    with pytest.raises(InvalidInputError, match="FPU|cortex-m4"):
        build(mlf, "mps2-an385", tmp_path / "m3")  # Cortex-M3: no FPU, no DSP
    with pytest.raises(InvalidInputError, match="cannot run on the host"):
        build(mlf, "host", tmp_path / "host")
    result = cli("build", str(mlf), "--board", "mps2-an385", "-o", str(tmp_path / "cli"))
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("board", ["host", "mps2-an385"])
def test_dsp_intrinsics_are_refused_on_cores_without_dsp(board, fixtures_dir, tmp_path):
    """TVM's arm_cpu micro-kernels call ACLE DSP intrinsics: refused before compiling, exit 3."""
    result = cli("build", str(fixtures_dir / "tvm-0.18" / "kws_aot_c_cm4_usmp.tar"), "--board", board,
                  "-o", str(tmp_path / "o"))
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "DSP intrinsics" in result.stderr and "cortex-m4" in result.stderr
    assert not (tmp_path / "o" / "project" / "build").exists()


def test_llvm_micro_kernel_defect_is_explained(fixtures_dir, tmp_path):
    result = cli("build", str(fixtures_dir / "tvm-0.13" / "kws_aot_llvm_cm4_packed.tar"), "-o", str(tmp_path / "o"))
    assert result.returncode == 3 and "micro-kernels" in result.stderr


def test_missing_toolchain_exits_4(tmp_path):
    result = cli("build", str(EXAMPLE), "--toolchain-prefix", "no-such-arch-", "-o", str(tmp_path / "o"))
    assert result.returncode == 4
    assert "no-such-arch-gcc" in result.stderr and "not found" in result.stderr


@pytest.mark.cross
def test_compiler_error_is_one_readable_line(tmp_path):
    from mlfwriter import TinyModel, tar_tree

    files = TinyModel().files()
    files["codegen/host/src/tiny_lib1.c"] += b"\nthis is not C;\n"
    mlf = tar_tree(files, tmp_path / "broken.tar")
    result = cli("build", str(mlf), "-o", str(tmp_path / "o"))
    assert result.returncode == 4
    assert "compilation failed" in result.stderr and "tiny_lib1.c" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.cross
def test_model_too_big_for_the_board_exits_5(fixtures_dir, tmp_path):
    # kws's workspace pool (56,192 B at its floor) and io buffers (502 B) fit the small board cut to
    # 56 KiB of RAM, so the build compiles; the stack, the runtime and the rest do not.
    mlf = fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"
    board = tmp_path / "small56k.toml"
    board.write_text((REPO / "boards" / "lm3s6965evb.toml").read_text()
                     .replace('name = "lm3s6965evb"', 'name = "small56k"').replace('aliases = ["qemu_cortex_m3"]', "")
                     .replace("length = 0x10000", "length = 0xE000"))
    result = cli("build", str(mlf), "--board", "small56k", "--board-file", str(board), "-o", str(tmp_path / "cli"))
    assert result.returncode == 5
    first = next(line for line in result.stderr.splitlines() if line.startswith("mlfbuild: error:"))
    assert "refused before compiling" not in first and (tmp_path / "cli" / "build.log").is_file()
    # One number per region, the size report's (the linker counts its own way): the table's numbers.
    assert re.search(r"does not fit the board: ram [\d,]+ B > 57,344 B by ([\d,]+) B", first), first
    assert "overflowed" not in first
    # The linker's overflow comes with the size table: by how much, and what is biggest.
    assert "over by" in result.stderr and "global_workspace" in result.stderr


def _fully_connected(path: Path, depth: int, units: int) -> Path:
    """An int8 model of one fully connected layer: its weights (units x depth bytes) are its constants."""
    from tflitewriter import GraphBuilder, schema

    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, depth), scale=0.05, zero_point=0)
    weights = graph.add_constant("w", np.ones((units, depth), np.int8), scale=0.01, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, units), scale=0.5, zero_point=0)
    graph.add_operator("FULLY_CONNECTED", [x, weights, -1], [y], schema.FullyConnectedOptionsT(keepNumDims=False))
    graph.mark_output(y)
    return graph.write(path)


def _relu(path: Path, elements: int) -> Path:
    """An int8 RELU of `elements` bytes in and out: no constants, no workspace, only io buffers."""
    from tflitewriter import GraphBuilder

    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, elements), scale=0.05, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, elements), scale=0.05, zero_point=0)
    graph.add_operator("RELU", [x], [y])
    graph.mark_output(y)
    return graph.write(path)


def _imported(model: Path) -> Path:
    mlf = model.with_suffix(".tar")
    done = cli("import", str(model), "-o", str(mlf))
    assert done.returncode == 0, done.stderr
    return mlf


def _timed_build(mlf: Path, board: str, out: Path, capsys) -> tuple[int, float, str]:
    from mlfbuild import cli as mlfbuild_cli

    started = time.perf_counter()
    code = mlfbuild_cli.main(["build", str(mlf), "-b", board, "-o", str(out)])
    return code, time.perf_counter() - started, capsys.readouterr().err


def test_constants_beyond_the_flash_are_refused_before_compiling(tmp_path, capsys):
    """300 KiB of weights for lm3s6965evb's 256 KiB of flash: exit 5 at once, with the figures."""
    mlf = _imported(_fully_connected(tmp_path / "wide.tflite", depth=1024, units=300))
    code, seconds, err = _timed_build(mlf, "lm3s6965evb", tmp_path / "out", capsys)
    assert code == 5 and seconds < 1.0, (seconds, err)
    first = err.splitlines()[0]
    assert first == ("mlfbuild: error: the firmware does not fit the board: flash 307,200 B > 262,144 B by 45,056 B "
                     "(lm3s6965evb), refused before compiling: the constants alone need that much (largest: wide's "
                     "USMP constant pool global_const_workspace, 307,200 B)")
    assert "over by" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "project").exists() and not (tmp_path / "out" / "build.log").exists()


def test_megabytes_of_constants_are_refused_in_a_second(tmp_path, capsys):
    """mobilenet_v2's size of weights (3.7 MB, 15 MB of C) for the M55's 512 KiB: reading the MLF's
    code for its functions and includes took seconds before the refusal could be said."""
    mlf = _imported(_fully_connected(tmp_path / "big.tflite", depth=2048, units=1800))
    code, seconds, err = _timed_build(mlf, "mps3-an547", tmp_path / "out", capsys)
    assert code == 5 and seconds < 1.0, (seconds, err)
    assert "flash 3,686,400 B > 524,288 B" in err and "refused before compiling" in err


@pytest.mark.cross  # the plan reads Cortex-M code with the cross compiler's preprocessor
def test_planned_ram_beyond_the_board_is_refused_before_compiling(tmp_path, capsys):
    """Two 40,000-byte io buffers, each within lm3s6965evb's 64 KiB of RAM, together beyond it."""
    mlf = _imported(_relu(tmp_path / "wide_relu.tflite", 40_000))
    code, seconds, err = _timed_build(mlf, "lm3s6965evb", tmp_path / "out", capsys)
    assert code == 5 and seconds < 1.0, (seconds, err)
    assert err.startswith("mlfbuild: error: the firmware does not fit the board: ram 80,000 B > 65,536 B by "
                          "14,464 B (lm3s6965evb), refused before compiling: the planned workspace pools and io "
                          "buffers alone need that much"), err
    assert "input and output buffers" in err
    assert not (tmp_path / "out" / "build.log").exists() and not (tmp_path / "out" / "firmware.elf").exists()


@pytest.mark.cross
def test_a_model_whose_certain_bytes_fit_is_built(tmp_path):
    """Half the io of the refused RELU fits lm3s6965evb: nothing is refused that the linker would take.
    A model refused for its constants then leaves that build as it was."""
    out = tmp_path / "out"
    done = cli("build", str(_imported(_relu(tmp_path / "relu.tflite", 20_000))), "-b", "lm3s6965evb", "-o", str(out))
    assert done.returncode == 0, done.stderr
    kept = {name: (out / name).read_bytes() for name in ("firmware.elf", "build.json", "size.json")}
    wide = _imported(_fully_connected(tmp_path / "wide.tflite", depth=1024, units=300))
    refused = cli("build", str(wide), "-b", "lm3s6965evb", "-o", str(out))
    assert refused.returncode == 5 and "refused before compiling" in refused.stderr, refused.stderr
    assert {name: (out / name).read_bytes() for name in kept} == kept


def test_unknown_board_and_bad_board_file(tmp_path):
    result = cli("build", str(EXAMPLE), "--board", "no-such-board", "-o", str(tmp_path / "o"))
    assert result.returncode == 3 and "mps2-an386" in result.stderr
    bad = tmp_path / "mine.toml"
    bad.write_text('name = "mine"\nkind = "qemu"\n')
    result = cli("build", str(EXAMPLE), "--board", "mine", "--board-file", str(bad), "-o", str(tmp_path / "p"))
    assert result.returncode == 3 and "mine.toml" in result.stderr


@pytest.mark.cross
def test_nothing_written_outside_the_output_folder(tmp_path):
    out = tmp_path / "out"
    before = set(REPO.rglob("*"))
    assert cli("build", str(EXAMPLE), "-o", str(out)).returncode == 0
    assert {p for p in REPO.rglob("*") if "__pycache__" not in p.parts} <= before | {p for p in before}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.cross
@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2",
                                   "lm3s6965evb", "nucleo-f446re", "nucleo-f746zg", "nucleo-l4r5zi",
                                   "stm32f4-discovery"])
def test_example_builds_for_every_board(board, build_firmware):
    out = build_firmware(EXAMPLE, board)
    assert (out / "firmware.bin").stat().st_size > 0


def test_a_wrong_input_costs_the_user_nothing_of_the_last_build(tmp_path):
    """`mlfbuild build kws.npz` (the reference, not the MLF) into the last build's folder fails as bad
    input and leaves that build's firmware, record and size snapshot exactly as they were."""
    out = tmp_path / "out"
    done = cli("build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(out))
    assert done.returncode == 0, done.stderr
    kept = {name: (out / name).read_bytes() for name in ("firmware.elf", "build.json", "size.json")}
    unpacked = sorted(p.relative_to(out) for p in (out / "mlf").rglob("*"))
    wrong = tmp_path / "tiny_aot.npz"
    wrong.write_bytes((REPO / "examples" / "tiny_aot.npz").read_bytes())
    failed = cli("build", str(wrong), "-b", "host", "-o", str(out))
    assert failed.returncode == 3 and "Traceback" not in failed.stderr
    assert {name: (out / name).read_bytes() for name in kept} == kept
    assert sorted(p.relative_to(out) for p in (out / "mlf").rglob("*")) == unpacked
    assert not (out / ".mlf-staging").exists()


def test_a_folder_of_the_users_own_files_is_not_built_into(tmp_path):
    """`build -o` a folder holding the user's files mixed project/, mlf/ and firmware.* into it; it is
    refused as export refuses it (exit 2, one line), and left as it was."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    done = cli("build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(mine))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "is not an mlfbuild build folder" in done.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    again = tmp_path / "out"  # a previous build's folder is built into again
    assert cli("build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(again)).returncode == 0
    assert cli("build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(again)).returncode == 0


@pytest.mark.parametrize("jobs", ["0", "-3", "two"])
def test_a_number_of_jobs_that_runs_nothing_is_refused(jobs, tmp_path):
    done = cli("build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(tmp_path / "o"), "-j", jobs)
    assert done.returncode == 2 and "argument --jobs/-j" in done.stderr and not (tmp_path / "o").exists()


@pytest.mark.cross
def test_each_module_pool_has_a_section_of_its_own(tmp_path):
    """TVM names every model's pool .bss.noinit.tvm; the built copy names it after the module, so a
    linker script can place one model's pool apart from another's (ours takes both names)."""
    from elftools.elf.elffile import ELFFile

    out = build(REPO / "examples" / "tiny_aot.tar", "mps2-an386", tmp_path / "b").outdir
    objects = list((out / "project" / "build").rglob("tiny_lib0.o"))
    assert objects
    with objects[0].open("rb") as stream:
        names = {section.name for section in ELFFile(stream).iter_sections()}
    assert ".bss.noinit.tvm.tiny" in names and ".bss.noinit.tvm" not in names
    # the constants keep TVM's name: a rule `*(.rodata.tvm)`, without a wildcard, matches nothing else
    constants = list((out / "project" / "build").rglob("tiny_lib1.o"))
    with constants[0].open("rb") as stream:
        names = {section.name for section in ELFFile(stream).iter_sections()}
    assert ".rodata.tvm" in names and ".rodata.tvm.tiny" not in names
    with (out / "firmware.elf").open("rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        assert any(s.name == "global_workspace" and s["st_size"] > 0 for s in symbols.iter_symbols())
