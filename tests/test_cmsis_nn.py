"""CMSIS-NN: what the generated code assumes of the library, how the library is compiled for it, every
refusal, and real runs of TVM's kws_aot_cmsisnn against real CMSIS-NN trees on three cores."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO, THIRD_PARTY_ENV, cli, required_folder
from mlfbuild.console.client import Client
from mlfbuild.boards import load_board
from mlfbuild.build import build
from mlfbuild.errors import EXIT_BUILD, EXIT_MISMATCH, EXIT_RUN, BuildError, GeneratedCodeError, InvalidInputError
from mlfbuild.mlf import csource
from mlfbuild.mlf.reader import describe, read_mlf
from mlfbuild.project import ProjectOptions, render_project
from mlfbuild.project.cmsis_nn import core_features, fix_status_checks, needed_sources
from mlfbuild.run import make_transport
from mlfwriter import TinyModel, tar_tree, with_cmsis_nn


def _mlf(tmp_path: Path, targets: list[str], scratch_bytes: list[int], name: str = "tiny") -> Path:
    return tar_tree(with_cmsis_nn(TinyModel(name), targets, scratch_bytes), tmp_path / f"{name}.tar")


def _render(mlf: Path, board: str, tmp_path: Path, tree: Path | None, core: Path | None = None):
    lib = read_mlf(mlf, tmp_path / "work")
    return render_project(lib, load_board(board), tmp_path / "project",
                          ProjectOptions(cmsis_nn=tree, cmsis_core=core))


def _make_variable(project: Path, name: str) -> str:
    for line in (project / "Makefile").read_text().splitlines():
        if line.startswith(f"{name} ") or line.startswith(f"{name}:"):
            return line.split(":=", 1)[1].strip()
    raise AssertionError(f"{name} not in the Makefile")


# --- what the generated code assumes (the reader) -------------------------------------------------

def test_scratch_buffer_sizes_are_read_as_tvm_writes_them():
    source = ("  cmsis_nn_context context= {NULL,0};\n"
              "  void* context_buffer_0_let = (&(global_workspace_3_var[16384]));\n"
              "  cmsis_nn_context context= {context_buffer_0_let,1152};\n"
              "  cmsis_nn_context ctx = { context_buffer_1 , 64 };\n")
    assert csource.cmsis_nn_scratch_sizes(source, "x.c") == [0, 1152, 64]
    with pytest.raises(GeneratedCodeError, match="x.c: cannot read the CMSIS-NN scratch buffer"):
        csource.cmsis_nn_scratch_sizes("cmsis_nn_context context= {buffer, SIZE};", "x.c")
    with pytest.raises(GeneratedCodeError):
        csource.cmsis_nn_scratch_sizes("cmsis_nn_context context= {" + "9" * 5000 + "};", "x.c")


_FRAGMENTS = st.sampled_from(["cmsis_nn_context", " context", "=", " {", "}", ",", ";", "\n", "NULL", "0",
                              "1152", "9" * 40, "context_buffer_0_let", "arm_fully_connected_s8(", "#include ",
                              "<arm_nnfunctions.h>", " ", "\t", "(void*)0", "\u0663", "\x00"])


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=400), st.lists(_FRAGMENTS, max_size=40).map("".join)))
def test_generated_code_readers_fail_only_with_invalid_input(text):
    for reader in (lambda: csource.cmsis_nn_scratch_sizes(text, "f.c"), lambda: csource.cmsis_nn_calls(text),
                   lambda: csource.includes(text, "arm_nnfunctions.h")):
        try:
            reader()
        except InvalidInputError:
            pass


@settings(max_examples=60, deadline=None)
@given(body=st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_a_module_with_arbitrary_cmsis_nn_code_reads_or_fails_as_invalid_input(tmp_path_factory, body):
    root = tmp_path_factory.mktemp("mlf")
    for rel, data in with_cmsis_nn(TinyModel(), ["c -mcpu=cortex-m55"], [0]).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "codegen/host/src/tiny_lib2.c").write_text("#include <arm_nnfunctions.h>\n" + body)
    try:
        describe(root)
    except InvalidInputError:
        pass


def test_assumptions_come_from_the_cmsis_nn_target_else_the_c_target(tmp_path):
    lib = read_mlf(_mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m55 -mattr=+nomve"], [0, 256]),
                   tmp_path / "a")
    assumptions = lib.modules[0].cmsis_nn
    assert (assumptions.mcpu, assumptions.mattr, assumptions.target_kind) == ("cortex-m55", "+nomve", "cmsis-nn")
    assert assumptions.scratch_bytes == (0, 256) and not assumptions.generic
    assert assumptions.functions == ("arm_fully_connected_s8",)
    assert assumptions.sources == ("codegen/host/src/tiny_lib2.c",)
    lib = read_mlf(_mlf(tmp_path, ["c -keys=arm_cpu,cpu -mcpu=cortex-m7"], [0, 0]), tmp_path / "b")
    assert (lib.modules[0].cmsis_nn.mcpu, lib.modules[0].cmsis_nn.target_kind) == ("cortex-m7", "c")
    assert lib.modules[0].cmsis_nn.generic
    assert read_mlf(tar_tree(TinyModel().files(), tmp_path / "plain.tar"), tmp_path / "c").modules[0].cmsis_nn is None


def test_inspect_shows_the_real_fixtures_assumptions(fixtures_dir):
    result = cli("inspect", str(fixtures_dir / "tvm-0.13" / "kws_aot_cmsisnn.tar"))
    assert result.returncode == 0, result.stderr
    assert "cmsis-nn core -mcpu=cortex-m55 (c target); no scratch buffers ({NULL,0} in 11 call(s))" in result.stdout
    assert "cmsis-nn paths the board's own (DSP, MVE where it has them)" in result.stdout
    result = cli("inspect", "--json", str(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar"))
    assumptions = json.loads(result.stdout)["modules"][0]["cmsis_nn"]
    assert assumptions["mcpu"] == "cortex-m4" and assumptions["target"] == "cmsis-nn"
    assert assumptions["scratch_bytes"] == [0] * 11 and assumptions["generic"]
    assert "arm_depthwise_conv_wrapper_s8" in assumptions["functions"]


# --- the library side ------------------------------------------------------------------------------

def test_core_features_follow_gcc():
    assert core_features("cortex-m3") == frozenset() and core_features(None) == frozenset()
    assert core_features("cortex-m4") == {"dsp"} and core_features("cortex-m33+nodsp") == frozenset()
    assert core_features("cortex-m55") == {"dsp", "mve"} and core_features("cortex-m55+nomve") == {"dsp"}
    assert core_features("cortex-m55", "+nomve") == {"dsp"}
    assert core_features("cortex-a53") is None


def test_status_check_fix_is_exact():
    code = b"switch (!status) {\n}\nswitch (!status) {}\nswitch (!state) {}\nswitch (! status) {}"
    fixed, count = fix_status_checks(code)
    fixed_check = b"switch (status) { default: return -1;"
    assert count == 2
    assert fixed == fixed_check + b"\n}\n" + fixed_check + b"}\nswitch (!state) {}\nswitch (! status) {}"


def test_every_cmsis_nn_error_fails_the_operator():
    """After the fix any non-zero status returns -1, also ARM_CMSIS_NN_FAILURE (-3), which TVM's cases
    do not list: compiled and run on the host with TVM's exact switch."""
    import tempfile

    tvm_check = (b"int check(int status) {\n  switch (!status) {\n  case 0: break;\n  case -1: return -1;\n"
                 b"  case -2: return -1;\n  }\n  return 0;\n}\n")
    fixed, count = fix_status_checks(tvm_check)
    program = fixed + b"int main(void) { return check(0) != 0 || check(-1) != -1 || check(-2) != -1 || check(-3) != -1; }\n"
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "check.c"
        source.write_bytes(program)
        subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(source.with_suffix("")), str(source)], check=True)
        assert count == 1 and subprocess.run([str(source.with_suffix(""))]).returncode == 0


def test_only_the_sources_the_calls_reach_are_compiled():
    sources = {"a.c": "int arm_a(int x)\n{\n    return arm_b(x) + MACRO_C(x) + arm_inline_d(x);\n}\n",
               "b.c": "int arm_b(int x) { return table_b[x]; }\n",
               "tables.c": "const int table_b[4] = {1, 2, 3, 4};\n",
               "c.c": "int arm_c(int x) { return x; }\n",
               "e.c": "int arm_e(int x) { return x; }\n",
               "unused.c": "int arm_unused(void) { return arm_a(1); }\n"}
    headers = {"h.h": "#define MACRO_C(x) \\\n    arm_c(x)\n"
                      "__STATIC_FORCEINLINE int arm_inline_d(int x)\n{\n    if (x) { return arm_e(x); }\n    return 0;\n}\n"
                      "int arm_unused(void);\n"}
    assert needed_sources(sources, headers, {"arm_a"}) == ["a.c", "b.c", "c.c", "e.c", "tables.c"]
    assert needed_sources(sources, headers, {"arm_a", "arm_defined_elsewhere"}) == sorted(sources)


# --- refusals (rendering only: they come before anything is compiled) ------------------------------

@pytest.mark.cross
def test_the_library_is_required_and_must_be_a_cmsis_nn_tree(fixtures_dir, tmp_path):
    mlf = fixtures_dir / "tvm-0.13" / "kws_aot_cmsisnn.tar"
    result = cli("build", str(mlf), "--board", "mps3-an547", "-o", str(tmp_path / "a"))
    assert result.returncode == EXIT_BUILD and "--cmsis-nn" in result.stderr
    result = cli("build", str(mlf), "--board", "mps3-an547", "--cmsis-nn", str(tmp_path), "-o", str(tmp_path / "b"))
    assert result.returncode == 3 and "not a CMSIS-NN source tree" in result.stderr  # bad input, as other damaged trees


@pytest.mark.qemu
def test_the_library_gets_every_feature_of_the_board(tmp_path, cmsis_nn):
    """Whatever core TVM's code was generated for, mlfbuild supplies the buffers: the library takes the
    board's own paths (generic on the M3, DSP on the M4F, DSP + MVE on the M55)."""
    for targets, scratch in ((["c -mcpu=cortex-m55"], [0, 0]), (["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 512])):
        mlf = _mlf(tmp_path, targets, scratch)
        for board, features, flags in (("mps2-an385", set(), "-U__ARM_FEATURE_DSP -U__ARM_FEATURE_MVE"),
                                       ("mps2-an386", {"dsp"}, "-U__ARM_FEATURE_MVE"),
                                       ("mps3-an547", {"dsp", "mve"}, "")):
            project = _render(mlf, board, tmp_path / f"{board}-{scratch[1]}", cmsis_nn("v6.0.0"))
            assert project.cmsis_nn.features == features
            assert _make_variable(project.path, "CMSIS_NN_FLAGS") == flags
            assert "-mcpu=" + load_board(board).cpu.core in _make_variable(project.path, "ARCH_FLAGS")
            assert project.cmsis_nn.scratch is not None and "get_buffer_size" in project.cmsis_nn.reason


def _scratch(project) -> dict:
    return project.cmsis_nn.to_json()["scratch"]


@pytest.mark.qemu
def test_each_call_gets_the_size_the_library_returns_for_its_core(tmp_path, cmsis_nn):
    """The tiny model's fully-connected calls (16 inputs, 4 outputs): CMSIS-NN's
    arm_fully_connected_s8_get_buffer_size is 0 except on MVE from v6, where the buffer holds the 4
    kernel sums (16 B); a buffer TVM passed is kept when the library's size confirms it."""
    mlf = _mlf(tmp_path, ["cmsis-nn -mcpu=cortex-m55"], [0, 64, 8])
    expected = {("v4.1.0", "mps3-an547"): 0, ("v6.0.0", "mps3-an547"): 16, ("v6.0.0", "mps2-an386"): 0,
                ("v6.0.0", "mps2-an385"): 0}
    for (version, board), size in expected.items():
        project = _render(mlf, board, tmp_path / f"{version}-{board}", cmsis_nn(version))
        scratch = _scratch(project)
        assert [c["library_bytes"] for c in scratch["calls"]] == [size] * 3
        assert [c["tvm_bytes"] for c in scratch["calls"]] == [0, 64, 8]
        buffers = [c["buffer"] for c in scratch["calls"]]
        assert buffers == (["mlfbuild", "tvm", "mlfbuild"] if size > 8 else ["none", "tvm", "tvm"])
        assert scratch["region_bytes"] == size
        assert scratch["kernel_sums"] == ("v6" if size else None)
        code = (project.path / "model" / "codegen" / "host" / "src" / "tiny_lib2.c").read_text()
        assert code.count("if (context.size < arm_fully_connected_s8_get_buffer_size(&filter_dims)) {") == 3
        assert code.count("cmsis_nn_context context= {mlf_cmsis_nn_scratch,MLF_CMSIS_NN_SCRATCH_BYTES}") == \
            buffers.count("mlfbuild")
        assert code.count("arm_vector_sum_s8((int32_t*)context.buf, (&filter_dims)->n, (&output_dims)->c, (filter_), "
                          "1, NULL)") == (3 if size else 0)
        header = (project.path / "src" / "mlf_cmsis_nn_scratch.h").read_text()
        assert f"#define MLF_CMSIS_NN_SCRATCH_BYTES {size}\n" in header


@pytest.mark.qemu
def test_kernel_sums_follow_the_trees_declaration(tmp_path, cmsis_nn):
    """v6.0.0 and v7.0.0 declare different arm_vector_sum_s8 contracts; any other is refused, naming them."""
    mlf = _mlf(tmp_path, ["cmsis-nn -mcpu=cortex-m55"], [0])
    tree = tmp_path / "cmsis-nn-edited"
    shutil.copytree(cmsis_nn("v6.0.0") / "Include", tree / "Include")
    shutil.copytree(cmsis_nn("v6.0.0") / "Source", tree / "Source")
    header = tree / "Include" / "arm_nnfunctions.h"
    v6 = header.read_text()
    v7 = v6.replace("const int32_t lhs_offset,\n                                      const int32_t *bias_data);",
                    "const int32_t lhs_offset,\n                                      const int32_t rhs_offset,\n"
                    "                                      const int32_t *bias_data);", 1)
    assert v7 != v6
    header.write_text(v7)
    source = tree / "Source" / "FullyConnectedFunctions" / "arm_vector_sum_s8.c"
    source.write_text(source.read_text().replace("const int32_t lhs_offset,", "const int32_t lhs_offset, "
                                                 "const int32_t rhs_offset,", 1).replace("{\n", "{\n    (void)rhs_offset;\n", 1))
    project = _render(mlf, "mps3-an547", tmp_path / "v7", tree)
    assert _scratch(project)["kernel_sums"] == "v7"
    code = (project.path / "model" / "codegen" / "host" / "src" / "tiny_lib2.c").read_text()
    assert ("arm_vector_sum_s8((int32_t*)context.buf, (&filter_dims)->n, (&output_dims)->c, (filter_), "
            "(&fc_params)->input_offset, (&fc_params)->filter_offset, (bias_))") in code
    # v5.0.0's arm_vector_sum_s8(buf, cols, rows, data): refused before anything is compiled.
    header.write_text(v6.replace("const int8_t *vector_data,\n                                      const int32_t lhs_offset,\n"
                                 "                                      const int32_t *bias_data);",
                                 "const int8_t *vector_data);", 1))
    with pytest.raises(BuildError, match=r"arm_vector_sum_s8\(vector_sum_buf, vector_cols, vector_rows, vector_data\)"
                                         r".*v6\.0\.0 and v7\.0\.0"):
        _render(mlf, "mps3-an547", tmp_path / "v5", tree)
    result = cli("build", str(mlf), "--board", "mps3-an547", "--cmsis-nn", str(tree), "-o", str(tmp_path / "o"))
    assert result.returncode == EXIT_BUILD and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "firmware.elf").exists()
    # Without MVE nothing reads kernel sums: the same tree serves the M4F.
    assert _scratch(_render(mlf, "mps2-an386", tmp_path / "m4", tree))["kernel_sums"] is None


def _copied_tree(cmsis_nn, root: Path) -> Path:
    for folder in ("Include", "Source"):
        shutil.copytree(cmsis_nn("v6.0.0") / folder, root / folder)
    return root


@pytest.mark.cross
@pytest.mark.deadline(60)
@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero", "dangling-link"])
def test_a_library_file_that_is_not_a_regular_file_is_refused(tmp_path, cmsis_nn, kind):
    # A FIFO among the headers hung the build; a link to /dev/zero read until MemoryError.
    import os

    tree = _copied_tree(cmsis_nn, tmp_path / "tree")
    odd = tree / "Include" / "odd.h"
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero" if kind == "link-to-dev-zero" else tmp_path / "nothing.h")
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 512])
    with pytest.raises(InvalidInputError, match=r"odd\.h: (this library file is (a FIFO|a character device), not a "
                                                r"regular file|cannot read this library file \(No such file)"):
        _render(mlf, "mps2-an386", tmp_path / "r", tree)


@pytest.mark.cross
def test_a_library_header_that_includes_dev_zero_stops_at_the_compilers_memory_limit(tmp_path, cmsis_nn):
    # The preprocessor reading the calls and the compiler both read the header; /dev/zero never ends:
    # the reading stops at its own limit (the calls are then not certain), the build at the compiler's.
    tree = _copied_tree(cmsis_nn, tmp_path / "tree")
    header = tree / "Include" / "arm_nnfunctions.h"
    header.write_text('#include "/dev/zero"\n' + header.read_text())
    lib = read_mlf(_mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 512]), tmp_path / "work")
    with pytest.raises(BuildError, match=r"ran out of its 256 MiB of memory \(cc1: out of memory"):
        build(lib.root, "mps2-an386", tmp_path / "out", options=ProjectOptions(cmsis_nn=tree, build_memory=256 << 20))


@pytest.mark.cross
def test_code_not_in_tvms_shape_keeps_the_paths_its_buffers_were_sized_for(tmp_path, cmsis_nn):
    """When a call cannot be read with certainty, mlfbuild supplies nothing and falls back to the paths
    the code's own buffers were sized for, saying so; what those paths cannot run on is refused."""
    files = with_cmsis_nn(TinyModel(), ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 1152])
    files["codegen/host/src/tiny_lib2.c"] = files["codegen/host/src/tiny_lib2.c"].replace(
        b"arm_cmsis_nn_status status = arm_fully_connected_s8(", b"arm_cmsis_nn_status status; status = arm_fully_connected_s8(", 1)
    mlf = tar_tree(files, tmp_path / "odd.tar")
    project = _render(mlf, "mps3-an547", tmp_path / "m55", cmsis_nn("v6.0.0"))
    assert project.cmsis_nn.scratch is None and project.cmsis_nn.features == {"dsp"}
    assert "not all in the shape TVM writes" in project.cmsis_nn.reason
    with pytest.raises(BuildError, match="sized for .*-mcpu=cortex-m4.*no DSP"):
        _render(mlf, "mps2-an385", tmp_path / "m3", cmsis_nn("v4.1.0"))


def _tree_needing_cmsis_core(root: Path) -> Path:
    """A minimal CMSIS-NN tree whose math header includes CMSIS-Core, as v4.0.0 and older do."""
    (root / "Include").mkdir(parents=True)
    (root / "Source" / "FullyConnectedFunctions").mkdir(parents=True)
    (root / "Include" / "arm_nnfunctions.h").write_text('#include "arm_nn_math_types.h"\n')
    (root / "Include" / "arm_nn_math_types.h").write_text('#include "cmsis_compiler.h"\n')
    (root / "Source" / "FullyConnectedFunctions" / "arm_fully_connected_s8.c").write_text(
        "int arm_fully_connected_s8(void)\n{\n    return 0;\n}\n")
    return root


@pytest.mark.cross
def test_cmsis_core_is_found_beside_the_tree_or_given(tmp_path):
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m55"], [0])
    tree = _tree_needing_cmsis_core(tmp_path / "libs" / "CMSIS-NN")
    with pytest.raises(BuildError, match="cmsis_compiler.h .*pass --cmsis-core DIR"):
        _render(mlf, "mps2-an386", tmp_path / "none", tree)
    result = cli("build", str(mlf), "--cmsis-nn", str(tree), "-o", str(tmp_path / "cli"))
    assert result.returncode == EXIT_BUILD and len(result.stderr.strip().splitlines()) == 1
    assert "--cmsis-core" in result.stderr
    with pytest.raises(BuildError, match="--cmsis-core .*no cmsis_compiler.h"):
        _render(mlf, "mps2-an386", tmp_path / "bad", tree, core=tmp_path)

    given = tmp_path / "elsewhere" / "Include"
    given.mkdir(parents=True)
    (given / "cmsis_compiler.h").write_text("/* CMSIS-Core */\n")
    project = _render(mlf, "mps2-an386", tmp_path / "given", tree, core=given)
    assert project.cmsis_nn.core_include == given
    beside = tmp_path / "libs" / "CMSIS_5" / "CMSIS" / "Core" / "Include"
    beside.mkdir(parents=True)
    (beside / "cmsis_compiler.h").write_text("/* CMSIS_5 */\n")
    project = _render(mlf, "mps2-an386", tmp_path / "beside", tree)
    assert project.cmsis_nn.core_include == beside
    assert (project.path / "lib" / "cmsis-core" / "Include" / "cmsis_compiler.h").read_text() == "/* CMSIS_5 */\n"
    assert "-Ilib/cmsis-core/Include" in _make_variable(project.path, "INCLUDES")
    assert project.cmsis_nn.to_json()["cmsis_core"]["path"] == str(beside)


# --- real runs: every shared CMSIS-NN fixture against real CMSIS-NN trees, on several inputs ------

VERSIONS = ("v4.1.0", "v6.0.0")
ALL_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547")  # Cortex-M3, M4F, M7, M55
# Differences from TVM's reference measured with CMSIS-NN v4.1.0 and v6.0.0 on these cores (fixtures/README.md):
# 1 LSB on kws and vww.
TOLERANCE_LSB = {"kws": 1, "vww": 1}
# Against the plain-C export on seeded uniform inputs kws differs by up to 34 LSB (24 inputs measured, the
# same on every core, tree and path), top-1 agreeing: TVM's plain C takes its softmax in float (expf),
# arm_softmax_s8 in fixed point, and random inputs give flat, unsaturated softmax outputs.
PLAIN_C_TOLERANCE_LSB = {"kws": 34}
# Seeded inputs are also run through the same fixture's generic-path build (Cortex-M3, v4.1.0): the DSP
# and MVE paths with mlfbuild's buffers and kernel sums must give the same outputs.
GENERIC_BUILD = ("mps2-an385", "v4.1.0")
# kws and vww on every core with both trees; the other kws exports (same model, other TVM versions and
# memory plans) on their generic build and one fast one, together covering every core and both trees.
OTHER_FIXTURES = ("tvm-0.13/kws_aot_cmsisnn", "tvm-0.18/kws_aot_cmsisnn", "tvm-0.18/kws_aot_cmsisnn_nousmp")
VWW_BUILDS = (("mps2-an386", "v4.1.0"), ("mps2-an386", "v6.0.0"), ("mps3-an547", "v6.0.0"), GENERIC_BUILD)
MATRIX = ([("tvm-0.18/kws_aot_cmsisnn_m4", board, version) for board in ALL_BOARDS for version in VERSIONS]
          + [("tvm-0.18/vww_aot_cmsisnn_m4", *build) for build in VWW_BUILDS]
          + [(fixture, "mps2-an385", "v4.1.0") for fixture in OTHER_FIXTURES]
          + [("tvm-0.13/kws_aot_cmsisnn", "mps3-an547", "v6.0.0"), ("tvm-0.18/kws_aot_cmsisnn", "mps2-an500", "v6.0.0"),
             ("tvm-0.18/kws_aot_cmsisnn_nousmp", "mps2-an386", "v6.0.0")])
# vww on the M4F (DSP) and M55 (MVE) paths, and the generic build every case's seeded inputs are
# checked against; on the other cores (whose paths kws takes in CI) under -m exhaustive.
EXHAUSTIVE_MATRIX = [("tvm-0.18/vww_aot_cmsisnn_m4", board, version) for board in ALL_BOARDS for version in VERSIONS
                     if (board, version) not in VWW_BUILDS]
# The plain-C AOT export of the same model in the same TVM version: the reference for seeded inputs.
PLAIN_C_TWIN = {"kws": "kws_aot_c_unpacked_usmp"}
SEEDED_INPUTS = 4


def _infer(build: Path, inputs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Every input through model 0 in one firmware session (one emulator start for all of them)."""
    record = json.loads((build / "build.json").read_text())
    model = record["models"][0]
    transport = make_transport(build, record)
    transport.start()
    client = Client(transport.port, timeout=60, is_alive=transport.is_alive)
    results = []
    try:
        if transport.boots_fresh:
            client.wait_for_banner()
        client.hello()
        for value in inputs:
            client.write_input(0, 0, value.astype(model["inputs"][0]["dtype"]).tobytes())
            reply = client.run(0)
            assert reply.status == 0, reply.message
            results.append([np.frombuffer(client.read_output(0, i, spec["size_bytes"]), dtype=spec["dtype"])
                            .reshape(spec["shape"]) for i, spec in enumerate(model["outputs"])])
        client.quit(0)
    finally:
        transport.close(timeout=5)
    return results


def _manifest_entry(fixtures_dir: Path, fixture: str) -> dict:
    folder, name = fixture.split("/")
    entries = json.loads((fixtures_dir / folder / "manifest.json").read_text())["fixtures"]
    return next(e for e in entries if e["file"] == f"{name}.tar")


@pytest.fixture(scope="session")
def plain_c_outputs(fixtures_dir, build_firmware):
    """plain_c_outputs("tvm-0.18", "kws", inputs) → the plain-C AOT build's outputs, run natively on the host."""
    cache = {}

    def get(folder: str, model: str, inputs: list[np.ndarray]):
        if (folder, model) not in cache:
            build = build_firmware(fixtures_dir / folder / f"{PLAIN_C_TWIN[model]}.tar", "host")
            cache[(folder, model)] = _infer(build, inputs)
        return cache[(folder, model)]

    return get


def _seeded_inputs(spec: dict) -> list[np.ndarray]:
    rng = np.random.default_rng(22)
    return [rng.integers(-128, 128, size=spec["shape"]).astype(spec["dtype"]) for _ in range(SEEDED_INPUTS)]


@pytest.fixture(scope="session")
def fixture_outputs(fixtures_dir, build_firmware, cmsis_nn):
    """fixture_outputs(fixture, board, version) → (build folder, outputs of the fixture's own input then
    the seeded inputs), one firmware session per build: the generic build's run serves both its own
    case and, as the reference for seeded inputs, every other case of the fixture."""
    cache = {}

    def get(fixture: str, board: str, version: str):
        if (fixture, board, version) not in cache:
            entry = _manifest_entry(fixtures_dir, fixture)
            spec = entry["inputs"][0]
            reference = np.load(fixtures_dir / fixture.split("/")[0] / entry["reference_npz"])
            out = build_firmware(fixtures_dir / f"{fixture}.tar", board, cmsis_nn=cmsis_nn(version))
            cache[(fixture, board, version)] = out, _infer(out, [reference[spec["name"]], *_seeded_inputs(spec)])
        return cache[(fixture, board, version)]

    return get


def _max_diff(got: np.ndarray, wanted: np.ndarray) -> int:
    return int(np.abs(got.astype(np.int32) - wanted.astype(np.int32)).max())


@pytest.mark.qemu
@pytest.mark.parametrize("fixture, board, version",
                         MATRIX + [pytest.param(*case, marks=pytest.mark.exhaustive) for case in EXHAUSTIVE_MATRIX],
                         ids=["-".join(case) for case in MATRIX + EXHAUSTIVE_MATRIX])
def test_cmsis_nn_fixture_matches_tvm_on_several_inputs(fixture, board, version, fixtures_dir, cmsis_nn,
                                                         plain_c_outputs, fixture_outputs):
    """The fixture's own input against TVM's reference; seeded inputs against the plain-C export of the
    same model (same TVM version, same model and quantisation in the manifest) run natively, and against
    the generic-path build of the same fixture. One firmware session runs all the inputs."""
    folder = fixture.split("/")[0]
    entry = _manifest_entry(fixtures_dir, fixture)
    model = entry["model"]
    out, outputs = fixture_outputs(fixture, board, version)
    record = json.loads((out / "build.json").read_text())["cmsis_nn"]
    assert record["path"] == str(cmsis_nn(version).resolve()) and len(record["sha256"]) == 64
    assert record["features"] == sorted(core_features(load_board(board).cpu.core))
    assert record["scratch"]["calls"] and all(c["size_function"] for c in record["scratch"]["calls"])

    reference = np.load(fixtures_dir / folder / entry["reference_npz"])
    seeded = _seeded_inputs(entry["inputs"][0])
    fixture_output = outputs[0][0]
    assert _max_diff(fixture_output, reference["output_0"]) <= TOLERANCE_LSB[model]
    assert fixture_output.argmax() == reference["output_0"].argmax()
    for got, wanted in zip(outputs[1:], fixture_outputs(fixture, *GENERIC_BUILD)[1][1:]):
        assert _max_diff(got[0], wanted[0]) == 0
    twin = PLAIN_C_TWIN.get(model)
    if twin:
        twin_entry = _manifest_entry(fixtures_dir, f"{folder}/{twin}")
        assert (twin_entry["model"], twin_entry["reference_npz"], twin_entry["inputs"], twin_entry["outputs"]) == \
            (model, entry["reference_npz"], entry["inputs"], entry["outputs"])
        for got, wanted in zip(outputs[1:], plain_c_outputs(folder, model, seeded)):
            assert _max_diff(got[0], wanted[0]) <= PLAIN_C_TOLERANCE_LSB[model]
            assert got[0].argmax() == wanted[0].argmax()


def _rebuild(build: Path) -> Path:
    """Remake `build`'s project after an edit of kws's operators and take its firmware. Make's own
    dependencies recompile the edited file alone (the copy keeps every other file's time), which the
    output must show; the library objects stay as compiled."""
    made = subprocess.run(["make", "-j2"], cwd=build / "project", check=True, capture_output=True, text=True).stdout
    assert [line.split()[-1] for line in made.splitlines() if line.startswith("CC ")] == \
        ["model/codegen/host/src/kws_lib2.c"], made
    shutil.copyfile(build / "project" / "build" / "firmware.elf", build / "firmware.elf")
    return build


@pytest.mark.qemu
def test_a_scratch_region_smaller_than_the_library_asks_fails_the_run_naming_the_call(fixtures_dir, cmsis_nn,
                                                                                       build_firmware, tmp_path):
    """On the M4F, kws's average pooling takes the DSP path, whose buffer (256 B) mlfbuild supplies.
    A region shrunk below that (a user editing the project, or a library whose size differs on the real
    core from the host's answer) makes the call fail before the kernel writes past it: exit 6, named."""
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps2-an386", cmsis_nn=cmsis_nn("v4.1.0"))
    scratch = json.loads((out / "build.json").read_text())["cmsis_nn"]["scratch"]
    pooling = next(c for c in scratch["calls"] if c["kernel"] == "arm_avgpool_s8")
    assert pooling["library_bytes"] == 256 and pooling["buffer"] == "mlfbuild"
    # Its buffer is a region of kws's re-planned workspace pool, live during the call; so is the one of
    # the first layer's convolution (TVM's depthwise call, replaced).
    convolution = next(c for c in scratch["calls"] if c["tvm_kernel"] == "arm_depthwise_conv_wrapper_s8"
                       and c["kernel"] == "arm_convolve_wrapper_s8")
    assert scratch["in_workspace_pool"] == sorted([convolution["function"], pooling["function"]])
    assert scratch["region_bytes"] == 0
    shrunk = shutil.copytree(out, tmp_path / "shrunk")
    model = shrunk / "project" / "model" / "codegen" / "host" / "src" / "kws_lib2.c"
    code, count = re.subn(r"(cmsis_nn_context context= \{\(void\*\)\(&\(global_workspace_\d+_var\[\d+\]\)\)),256\}",
                          r"\1,16}", model.read_text())
    assert count == 1
    model.write_text(code)
    result = cli("run", str(_rebuild(shrunk)), "--reference", str(fixtures_dir / "tvm-0.18" / "kws.npz"))
    assert result.returncode == EXIT_RUN, result.stdout + result.stderr
    assert (f"model kws returned status -1: {pooling['function']}: arm_avgpool_s8 scratch buffer too small"
            in result.stderr)


@pytest.mark.qemu
def test_a_failing_kernel_fails_the_run(fixtures_dir, cmsis_nn, build_firmware, tmp_path):
    """Without its buffer (and without mlfbuild's check) the DSP average pooling returns an error. TVM's
    `switch (!status)` hid it (wrong outputs); with the fix the operator fails and so does the run."""
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps2-an386", cmsis_nn=cmsis_nn("v4.1.0"))
    reference = str(fixtures_dir / "tvm-0.18" / "kws.npz")
    notes = " ".join(json.loads((out / "build.json").read_text())["notes"])
    assert "patched TVM's inverted CMSIS-NN status check (switch (!status)) in 11 places" in notes

    def without_buffers(folder: Path, status_check: str) -> Path:
        model = folder / "project" / "model" / "codegen" / "host" / "src" / "kws_lib2.c"
        model.write_text(re.sub(r"cmsis_nn_context context= \{[^;]*\};", "cmsis_nn_context context= {NULL,0};",
                                model.read_text())
                         .replace("if (context.size < ", "if (0 && context.size < ")
                         .replace("switch (status) { default: return -1;", status_check))
        return _rebuild(folder)

    result = cli("run", str(without_buffers(shutil.copytree(out, tmp_path / "fixed"),
                                            "switch (status) { default: return -1;")), "--reference", reference)
    assert result.returncode == EXIT_RUN, result.stdout + result.stderr
    assert "model kws returned status -1" in result.stderr
    result = cli("run", str(without_buffers(shutil.copytree(out, tmp_path / "unfixed"), "switch (!status) {")),
                 "--reference", reference, "--atol", "1")
    assert result.returncode == EXIT_MISMATCH, result.stdout + result.stderr  # silently wrong without the fix


@pytest.mark.qemu
def test_mve_fully_connected_without_its_kernel_sums_fails(fixtures_dir, cmsis_nn, build_firmware, tmp_path):
    """The kernel sums are what makes MVE right with v6.0.0: the same firmware with the sums mlfbuild
    computed at build time zeroed gives wrong answers, which the fixture's input shows (a tree whose
    contract mlfbuild does not know is refused: test_kernel_sums_follow_the_trees_declaration)."""
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps3-an547", cmsis_nn=cmsis_nn("v6.0.0"))
    scratch = json.loads((out / "build.json").read_text())["cmsis_nn"]["scratch"]
    assert [c["kernel_sums"] for c in scratch["calls"] if c["kernel"] == "arm_fully_connected_s8"] == ["build time"]
    stripped = shutil.copytree(out, tmp_path / "no-sums")
    model = stripped / "project" / "model" / "codegen" / "host" / "src" / "kws_lib2.c"
    code, count = re.subn(r"(_kernel_sums\[\d+\][^=]*= )\{[^}]*\}", r"\1{0}", model.read_text())
    assert count == 1
    model.write_text(code)
    result = cli("run", str(_rebuild(stripped)), "--reference", str(fixtures_dir / "tvm-0.18" / "kws.npz"),
                 "--atol", "1")
    assert result.returncode == EXIT_MISMATCH, result.stdout + result.stderr


@pytest.mark.cross
def test_builds_without_cmsis_nn_record_none(build_firmware):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", "mps2-an386")
    assert "cmsis_nn" not in json.loads((out / "build.json").read_text())


@pytest.mark.qemu
@pytest.mark.deadline(90)
@pytest.mark.parametrize("trap", ["for (;;) {}", "fork(); for (;;) {}", "char c; read(0, &c, 1); for (;;) {}"])
def test_a_size_function_that_never_returns_is_stopped_whole(tmp_path, cmsis_nn, monkeypatch, trap):
    """The size probe runs the user's library: a get_buffer_size that loops, forks or reads stdin was a
    traceback after 60 s (and an orphan process). It is stopped whole, in one line."""
    from mlfbuild.project import cmsis_nn_probe

    monkeypatch.setattr(cmsis_nn_probe, "PROBE_SECONDS", 3)
    tree = _copied_tree(cmsis_nn, tmp_path / "tree")
    source = tree / "Source" / "FullyConnectedFunctions" / "arm_fully_connected_get_buffer_sizes_s8.c"
    text = source.read_text().replace("#include", "#include <unistd.h>\n#include", 1)
    source.write_text(text.replace("_dsp(const cmsis_nn_dims *filter_dims)\n{", "_dsp(const cmsis_nn_dims *filter_dims)\n{\n"
                                   f"    {trap}", 1))
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 512])
    with pytest.raises(InvalidInputError, match="probe .* did not finish within 3 s and was stopped"):
        _render(mlf, "mps2-an386", tmp_path / "r", tree)
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert left == []


def _tree_with_size_function_prelude(cmsis_nn, root: Path, prelude: str, variant: str = "") -> Path:
    """The v6.0.0 tree with `prelude` at the start of arm_fully_connected_s8_get_buffer_size{variant}."""
    tree = _copied_tree(cmsis_nn, root)
    source = tree / "Source" / "FullyConnectedFunctions" / "arm_fully_connected_get_buffer_sizes_s8.c"
    head = f"int32_t arm_fully_connected_s8_get_buffer_size{variant}(const cmsis_nn_dims *filter_dims)\n{{"
    text = source.read_text()
    assert head in text
    source.write_text("#include <unistd.h>\n" + text.replace(head, f"{head}\n    {prelude}", 1))
    return tree


def _left_behind(marker: Path) -> list[str]:
    """Processes whose command line names `marker` (the probe and any fork of it)."""
    return subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()


# A size function that forks a child leaving its session (setsid) and sleeping: the process group
# kill could not reach it, and the probe's output pipe stayed open until it woke.
_ESCAPING_CHILD = "if (fork() == 0) { setsid(); sleep(60); _exit(0); }"


@pytest.mark.deadline(60)
def test_a_size_function_whose_child_leaves_the_session_ends_with_the_probe_on_the_host(tmp_path, cmsis_nn):
    """On the host board the probe runs natively in a PID namespace of its own, waited on by its exit
    status: the build goes on at once with the library's size, and the escaped child is gone."""
    import time

    tree = _tree_with_size_function_prelude(cmsis_nn, tmp_path / "tree", _ESCAPING_CHILD)
    mlf = _mlf(tmp_path, ["c", "cmsis-nn"], [0, 64])
    started = time.monotonic()
    project = _render(mlf, "host", tmp_path / "r", tree)
    assert time.monotonic() - started < 15
    assert [c["library_bytes"] for c in _scratch(project)["calls"]] == [0, 0]
    assert _scratch(project)["probed"] == "on this machine, in a PID namespace of its own"
    assert _left_behind(tmp_path) == []


@pytest.mark.qemu
@pytest.mark.deadline(60)
def test_a_size_function_that_calls_the_operating_system_cannot_on_the_boards_core(tmp_path, cmsis_nn):
    """On a Cortex-M board the probe is bare-metal firmware in QEMU: there is no fork or setsid to call,
    so the probe (like the firmware) cannot be linked, said in one line, at once, and nothing runs here."""
    import time

    tree = _tree_with_size_function_prelude(cmsis_nn, tmp_path / "tree", _ESCAPING_CHILD)
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0, 64])
    started = time.monotonic()
    with pytest.raises(BuildError, match=r"could not build the CMSIS-NN buffer-size probe with arm-none-eabi-gcc: "
                                         r".*undefined reference to `(setsid|sleep)'"):
        _render(mlf, "mps2-an386", tmp_path / "r", tree)
    assert time.monotonic() - started < 15
    result = cli("build", str(mlf), "--board", "mps2-an386", "--cmsis-nn", str(tree), "-o", str(tmp_path / "o"))
    assert result.returncode == EXIT_BUILD and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert _left_behind(tmp_path) == []


@pytest.mark.qemu
def test_a_size_function_that_faults_the_core_is_said_in_one_line(tmp_path, cmsis_nn):
    tree = _tree_with_size_function_prelude(cmsis_nn, tmp_path / "tree",
                                            "return *(volatile int32_t *)0xF0000000u;", "_dsp")
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0])
    result = cli("build", str(mlf), "--board", "mps2-an386", "--cmsis-nn", str(tree), "-o", str(tmp_path / "o"))
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "probe (the tree's get_buffer_size functions, run on a cortex-m4 in QEMU mps2-an386) faulted" in result.stderr


def test_the_probe_runs_on_the_boards_core_in_qemu_where_it_can(monkeypatch):
    """A QEMU board's own machine; a hardware board's core on the QEMU board with that core; the host
    board, a core QEMU has no board for here, or a machine without QEMU: natively, contained."""
    from mlfbuild.project import cmsis_nn_probe

    installed = {"qemu-system-arm", "arm-none-eabi-gcc"}
    monkeypatch.setattr(cmsis_nn_probe.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool in installed else None)

    def runner(board: str) -> str | None:
        target = cmsis_nn_probe.probe_target(load_board(board), "arm-none-eabi-gcc", ["-mcpu=x"])
        return target.board.name if target.emulated else None

    assert [runner(b) for b in ("mps3-an547", "nucleo-f746zg", "nucleo-f446re", "host", "arduino-zero")] == \
        ["mps3-an547", "mps2-an500", "mps2-an386", None, None]
    installed.discard("qemu-system-arm")
    assert runner("mps2-an386") is None


@pytest.mark.qemu
def test_the_sizes_are_the_cores_own(tmp_path, cmsis_nn):
    """The probe runs the library where the firmware will: on the M4F's own core, where a `long` is 32
    bits and the plain size function takes the DSP path (natively on this machine it was 64 bits)."""
    tree = _tree_with_size_function_prelude(cmsis_nn, tmp_path / "tree",
                                            "(void)filter_dims;\n    return (int32_t)(sizeof(long) * 8);", "_dsp")
    mlf = _mlf(tmp_path, ["c -mcpu=cortex-m4", "cmsis-nn -mcpu=cortex-m4"], [0])
    project = _render(mlf, "mps2-an386", tmp_path / "r", tree)
    assert [c["library_bytes"] for c in _scratch(project)["calls"]] == [32]
    assert project.cmsis_nn.features == {"dsp"}
    assert _scratch(project)["probed"] == "on a cortex-m4 in QEMU mps2-an386"


@pytest.mark.qemu
def test_a_near_miss_against_tvms_reference_says_why_and_what_to_pass(fixtures_dir, third_party_dir, build_firmware):
    """CMSIS-NN kws against TVM's kws.npz at the default (exact) rule misses by 1 LSB: the run says it is
    CMSIS-NN's rounding and what to pass, instead of a bare mismatch."""
    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps2-an386", cmsis_nn=tree)
    done = cli("run", str(out), "--reference", str(fixtures_dir / "tvm-0.18" / "kws.npz"))
    assert done.returncode == EXIT_MISMATCH
    assert "calls CMSIS-NN, whose kernels round some requantisations differently" in done.stderr
    assert "pass --atol 2" in done.stderr and "--reference host" in done.stderr
