"""`mlfbuild run --profile`: per-operator instructions from a QEMU TCG plugin, in JSON and as a table."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, cli





@pytest.mark.qemu
@pytest.mark.parametrize("fixture", ["tvm-0.13/kws_graph_c.tar", "tvm-0.13/multi_kws_ad_aot_c_usmp.tar",
                                     "tvm-0.8/kws_aot_packed.tar"])
def test_operator_instructions_add_up_to_the_inference(build_firmware, fixtures_dir, fixture):
    out = build_firmware(fixtures_dir / fixture, "mps2-an386")
    result = cli("run", str(out), "--profile", "--json", "--repeat", "2")
    assert result.returncode == 0, result.stderr
    models = json.loads(result.stdout)["models"]
    for model in models:
        rows = model["profile"]
        assert model["instructions"] > 100_000 and rows
        covered = sum(row["instructions"] for row in rows)
        assert 0.95 * model["instructions"] <= covered <= model["instructions"], (model["name"], covered)
        assert all(row["calls"] >= 1 and row["function"].startswith("tvmgen_") for row in rows)
        assert abs(sum(row["share"] for row in rows) - covered / model["instructions"]) < 1e-3


@pytest.mark.qemu
def test_profile_table_in_call_order(build_firmware, fixtures_dir):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", "mps2-an386")
    result = cli("run", str(out), "--profile")
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("profile of default:")[1].splitlines()
    functions = [line.split()[-1] for line in table[2:] if line.strip().startswith(tuple("0123456789"))]
    # The graph's first operator is the input cast; the depthwise conv runs four times per inference.
    assert functions[0] == "tvmgen_default_fused_cast_subtract"
    conv = next(line for line in table if line.rstrip().endswith("cast_cast_subtract_1"))
    assert conv.split()[0] == "4"


@pytest.mark.cross
@pytest.mark.parametrize("broken", ['exec GCC -include /nonexistent/broken.h "$@"', "exit 1"],
                         ids=["compile-error", "silent"])
def test_a_broken_host_gcc_is_named_with_its_first_error(build_firmware, tmp_path, broken):
    import os
    import shutil

    out = shutil.copytree(build_firmware(REPO / "examples" / "tiny_aot.tar", "mps2-an386"), tmp_path / "build")
    shutil.rmtree(out / "profile", ignore_errors=True)
    tools = tmp_path / "bin"
    tools.mkdir()
    real = shutil.which("gcc")
    (tools / "gcc").write_text(f"#!/bin/sh\n{broken.replace('GCC', real)}\n")  # the real gcc, made to fail
    (tools / "gcc").chmod(0o755)
    result = cli("run", str(out), "--profile", env={**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 6, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "could not compile the profiling plugin" in line, line
    if "exit 1" in broken:
        assert line.endswith("gcc exited with status 1 and said nothing"), line
    else:
        assert "/nonexistent/broken.h: No such file or directory" in line and "[" not in line.split(": ", 2)[-1], line


def test_host_run_says_profile_is_not_available(build_firmware):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", "host")
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "not available on host" in data["profile_note"]
    assert all(m["instructions"] is None and m["profile"] == [] for m in data["models"])


@pytest.mark.qemu
def test_the_size_report_shows_the_last_runs_profile(build_firmware, fixtures_dir, tmp_path):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", "mps2-an386")
    run = cli("run", str(out), "--profile", "--json")
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)["models"][0]["profile"]
    report = tmp_path / "size.html"
    sized = cli("size", str(out), "--json", "--html", str(report))
    assert sized.returncode == 0, sized.stderr
    measured = json.loads(run.stdout)["models"][0]
    assert json.loads(sized.stdout)["profiles"] == [{"model": "default", "instructions": measured["instructions"],
                                                     "cycles": measured["cycles"], "cycle_model": measured["cycle_model"],
                                                     "rows": rows}]
    page = report.read_text()
    assert "Per-operator profile: default" in page and rows[0]["function"] in page
    assert f"{measured['cycles']:,} cycles (estimate: Cortex-M4 TRM timings)" in page and "cycles (est.)" in page


def test_a_damaged_profile_in_run_json_is_shown_as_far_as_it_goes(tmp_path):
    from mlfbuild import record
    from mlfbuild.size.html import _profiles
    (tmp_path / "run.json").write_text(json.dumps({"models": [
        {"name": "m", "instructions": "many", "profile": [7, {"function": "<f>", "calls": "x", "share": None}]},
        {"name": "n", "profile": []}]}))
    profiles = record.measured_profiles(tmp_path)
    assert profiles == [{"model": "m", "instructions": "many", "cycles": None, "cycle_model": None,
                         "rows": [{"function": "<f>", "calls": "x", "share": None}]}]
    html = "".join(_profiles(profiles))
    assert "&lt;f&gt;" in html and "<f>" not in html and "—" in html


def test_thumb_branches_are_decoded_both_ways():
    from mlfbuild.run.profile import thumb_branch_target

    # From kws_aot_cmsisnn_m4 at -Os: `b.w 11c8` at 0x1300 (backwards), and forward/16-bit forms.
    assert thumb_branch_target(bytes.fromhex("fff762bf"), 0x1300) == 0x11C8
    assert thumb_branch_target(bytes.fromhex("00f000b8"), 0x1000) == 0x1004
    assert thumb_branch_target(bytes.fromhex("fee7"), 0x2000) == 0x2000  # b . (T2)
    assert thumb_branch_target(bytes.fromhex("00bf"), 0x2000) is None  # nop
    assert thumb_branch_target(bytes.fromhex("fff762ff"), 0x1300) is None  # bl: a call, not a fold


# Two identical global operators calling a kernel with constant structs, as TVM's CMSIS-NN operators
# do: gcc's identical-code folding (-fipa-icf at -Os) keeps one body and turns the other into one
# branch to it (their addresses stay distinct), as it did with kws's repeated CMSIS-NN operators.
TWINS = """
typedef struct { int32_t n, h, w, c; } tiny_dims_t;
__attribute__((noinline)) int32_t tiny_twin_kernel(const tiny_dims_t* in, const int8_t* p, const tiny_dims_t* out) {
  int32_t sum = 0;
  for (int32_t i = 0; i < in->h * in->w; ++i) sum += p[i & 15] * out->h;
  return sum;
}
int32_t tiny_twin_op_a(const int8_t* p) {
  tiny_dims_t in = {1, 4, 4, 1};
  tiny_dims_t out = {1, 2, 2, 1};
  return tiny_twin_kernel(&in, p, &out) == 123456 ? -1 : 0;
}
int32_t tiny_twin_op_b(const int8_t* p) {
  tiny_dims_t in = {1, 4, 4, 1};
  tiny_dims_t out = {1, 2, 2, 1};
  return tiny_twin_kernel(&in, p, &out) == 123456 ? -1 : 0;
}
"""


@pytest.mark.qemu
def test_functions_folded_by_the_compiler_are_named_as_folded_into_their_twin(build_firmware, tmp_path):
    """A folded function runs one branch and its twin does its work: it is named as folded into the
    twin (which counts its calls and instructions), not shown as nearly free."""
    from mlfwriter import TinyModel, tar_tree

    model = TinyModel()
    model.behaviour = ("  { volatile int32_t sink = tiny_twin_op_a(input_buffer_var) + tiny_twin_op_b(input_buffer_var);"
                       " (void)sink; }\n")
    files = model.files()
    # The twins in one file and their caller in another, as TVM splits operators from the AOT main.
    lib0, lib1 = (f"codegen/host/src/{model.name}_lib{n}.c" for n in (0, 1))
    files[lib0] = files[lib0] + b"\n#include <stdint.h>\n" + TWINS.encode()
    files[lib1] = files[lib1].replace(b"#include <stdbool.h>\n", b"#include <stdbool.h>\n"
                                      b"int32_t tiny_twin_op_a(const int8_t* p);\nint32_t tiny_twin_op_b(const int8_t* p);\n")
    out = build_firmware(tar_tree(files, tmp_path / "twins.tar"), "mps2-an386")
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["function"]: row for row in json.loads(result.stdout)["models"][0]["profile"]}
    assert rows["tiny_twin_op_b"]["folded_into"] == "tiny_twin_op_a" and rows["tiny_twin_op_b"]["instructions"] <= 2
    assert rows["tiny_twin_op_a"]["folded"] == ["tiny_twin_op_b"] and rows["tiny_twin_op_a"]["calls"] == 2
    assert rows["tiny_twin_op_a"]["folded_into"] is None
    table = cli("run", str(out), "--profile").stdout
    assert "tiny_twin_op_b: folded into tiny_twin_op_a by the compiler" in table
    assert "tiny_twin_op_a  (with tiny_twin_op_b: identical code folded into this one)" in table
    sized = cli("size", str(out), "--html", str(tmp_path / "size.html"))
    assert sized.returncode == 0 and "tiny_twin_op_b: folded into tiny_twin_op_a" in (tmp_path / "size.html").read_text()


@pytest.mark.qemu
def test_functions_folded_onto_one_address_are_named_on_the_row_that_ran(build_firmware, tmp_path):
    """Static twins gcc folds onto one address run under one name; the row names the other as folded
    into it (test_stack_bound's model: tiny_twin_a and tiny_twin_b share a body)."""
    from test_stack_bound import _folded_model

    out = build_firmware(_folded_model(tmp_path), "mps2-an386")
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["function"]: row for row in json.loads(result.stdout)["models"][0]["profile"]}
    twins = {"tiny_twin_a", "tiny_twin_b"}
    ran = (twins & set(rows)).pop()
    assert rows[ran]["folded"] == sorted(twins - {ran}) and rows[ran]["calls"] == 2
