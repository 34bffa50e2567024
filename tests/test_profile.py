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
