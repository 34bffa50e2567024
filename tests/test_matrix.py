"""`mlfbuild matrix`: the shared fixtures × two QEMU boards in parallel workers, with JUnit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import buildable
from mlfbuild.matrix import run_job

BOARDS = ("mps2-an386", "mps2-an385")  # Cortex-M4F, and Cortex-M3 (no FPU, no DSP)


@pytest.mark.qemu
def test_matrix_of_fixtures_on_two_qemu_boards(fixtures_dir, tmp_path):
    jobs = []
    for manifest in sorted(fixtures_dir.glob("*/manifest.json")):
        for entry in json.loads(manifest.read_text())["fixtures"]:
            jobs.append({"mlf": str(manifest.parent / entry["file"]),
                         "expect_pass": {board: buildable(entry, board) for board in BOARDS},
                         "references": [f"{m['mod_name']}={manifest.parent / m['reference_npz']}"
                                        for m in entry["modules"]]})
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
        board = r["job"]["board"]
        if expected[r["job"]["mlf"]][board] and not (board == "mps2-an385" and "llvm" in r["job"]["mlf"]):
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
