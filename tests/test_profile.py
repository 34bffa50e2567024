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
    assert json.loads(sized.stdout)["profiles"] == [{"model": "default", "instructions": json.loads(run.stdout)[
        "models"][0]["instructions"], "rows": rows}]
    page = report.read_text()
    assert "Per-operator profile: default" in page and rows[0]["function"] in page


def test_a_damaged_profile_in_run_json_is_shown_as_far_as_it_goes(tmp_path):
    from mlfbuild import record
    from mlfbuild.size.html import _profiles
    (tmp_path / "run.json").write_text(json.dumps({"models": [
        {"name": "m", "instructions": "many", "profile": [7, {"function": "<f>", "calls": "x", "share": None}]},
        {"name": "n", "profile": []}]}))
    profiles = record.measured_profiles(tmp_path)
    assert profiles == [{"model": "m", "instructions": "many", "rows": [{"function": "<f>", "calls": "x", "share": None}]}]
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


@pytest.mark.qemu
def test_functions_folded_by_the_compiler_are_named_as_folded_into_their_twin(build_firmware, fixtures_dir,
                                                                              third_party_dir, tmp_path):
    """gcc -Os folds kws's identical CMSIS-NN operators (-fipa-icf): main_3..main_8 become one branch
    to main_1 or main_2, which do their work; they are not shown as nearly free."""
    from conftest import THIRD_PARTY_ENV, required_folder

    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps2-an386", cmsis_nn=tree)
    result = cli("run", str(out), "--profile", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["function"]: row for row in json.loads(result.stdout)["models"][0]["profile"]}
    prefix = "tvmgen_kws_cmsis_nn_main_"
    for index in range(3, 9):
        assert rows[f"{prefix}{index}"]["folded_into"] == f"{prefix}{1 if index % 2 else 2}"
    assert rows[f"{prefix}1"]["folded"] == [f"{prefix}3", f"{prefix}5", f"{prefix}7"]
    assert rows[f"{prefix}1"]["calls"] == 4 and rows[f"{prefix}0"]["folded_into"] is None
    table = cli("run", str(out), "--profile").stdout
    assert f"{prefix}8: folded into {prefix}2 by the compiler" in table
    sized = cli("size", str(out), "--html", str(tmp_path / "size.html"))
    assert sized.returncode == 0 and f"{prefix}5: folded into {prefix}1" in (tmp_path / "size.html").read_text()
