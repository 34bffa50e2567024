"""`mlfbuild matrix`: the shared fixtures × two QEMU boards in parallel workers, with JUnit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import buildable, manifest_entries
from mlfbuild.matrix import run_job

BOARDS = ("mps2-an386", "mps2-an385")  # Cortex-M4F, and Cortex-M3 (no FPU, no DSP)


@pytest.mark.qemu
def test_matrix_of_fixtures_on_two_qemu_boards(fixtures_dir, tmp_path):
    jobs = []
    for fixture_set, entry in manifest_entries():
        folder = fixtures_dir / fixture_set
        jobs.append({"mlf": str(folder / entry["file"]),
                     "expect_pass": {board: buildable(entry, board) for board in BOARDS},
                     "references": [f"{m['mod_name']}={folder / m['reference_npz']}" for m in entry["modules"]]})
    job_file = tmp_path / "jobs.json"
    job_file.write_text(json.dumps(jobs))
    junit = tmp_path / "matrix.xml"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "matrix", "--jobs-file", str(job_file),
                             "--board", BOARDS[0], "--board", BOARDS[1], "-o", str(tmp_path / "builds"),
                             "--workers", "2", "--junit", str(junit), "--json"],
                            capture_output=True, text=True, timeout=900)
    results = json.loads(result.stdout)
    assert len(results) == 2 * len(jobs)
    expected = {j["mlf"]: j["expect_pass"] for j in jobs}
    for r in results:
        if expected[r["job"]["mlf"]][r["job"]["board"]] and not (r["job"]["board"] == "mps2-an385" and "llvm" in r["job"]["mlf"]):
            assert r["status"] == "pass", r
        else:
            assert r["status"] == "fail" and r["exit_code"] in (3, 4), r
    assert result.returncode in (3, 4)  # the known-bad fixtures fail the matrix, with their own exit code
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("tests") == str(len(results))
    assert int(suite.get("errors")) == sum(r["status"] == "fail" for r in results)
    assert len({case.get("name") for case in suite}) == len(jobs)


def test_worker_interface_is_plain_data(tmp_path):
    example = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"
    job = {"mlf": str(example), "board": "host", "outdir": str(tmp_path / "o"),
           "references": [str(example.with_suffix(".npz"))], "timeout": 30}
    result = run_job(json.loads(json.dumps(job)))
    assert json.loads(json.dumps(result)) == result
    assert result["status"] == "pass" and result["flash"] > 0 and result["ticks"]["tiny"] > 0
    bad = run_job({**job, "mlf": str(tmp_path / "missing.tar"), "outdir": str(tmp_path / "p")})
    assert bad["status"] == "fail" and bad["exit_code"] == 3


def test_a_job_without_reference_is_not_checked_not_passed(tmp_path):
    from mlfbuild.matrix import junit_xml, summary_table

    example = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"
    result = run_job({"mlf": str(example), "board": "host", "outdir": str(tmp_path / "o"), "references": [],
                      "timeout": 30})
    assert result["status"] == "not checked" and result["exit_code"] == 0
    assert "tiny/output" in result["message"]
    assert "0/1 passed (1 not checked)" in summary_table([result])
    suite = ElementTree.fromstring(junit_xml([result]))
    assert suite.get("skipped") == "1" and suite.find("testcase/skipped") is not None


def test_matrix_exit_code_precedence():
    from mlfbuild.matrix import matrix_exit_code

    def results(*codes):
        return [{"exit_code": code} for code in codes]

    assert matrix_exit_code(results(0, 0)) == 0
    assert matrix_exit_code(results(7, 0, 5)) == 5  # both failures: over budget before mismatch
    assert matrix_exit_code(results(7, 4, 6)) == 4  # an error outranks a failure
    assert matrix_exit_code(results(7, 4, 3)) == 3  # invalid input outranks everything
