"""`mlfbuild matrix` on its default local Dask cluster: honest JUnit, the build cache, --retry-failed,
the controls (filters, --build-only, per-job timeout, jobs files) and the exit code precedence."""

from __future__ import annotations

import os
import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from conftest import buildable, manifest_entries
from mlfbuild.matrix import Entry, Filters, apply_filters, cross, entries_from_file, matrix_exit_code
from mlfbuild.matrix.stage import build_task, run_task

BOARDS = ("mps2-an386", "mps2-an385")  # Cortex-M4F, and Cortex-M3 (no FPU, no DSP)
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"


def _matrix(*args, timeout=600):
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "matrix", "--workers", "2", *map(str, args)],
                            capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.qemu
@pytest.mark.cross
def test_local_matrix_junit_cache_and_retry_failed(fixtures_dir, tmp_path):
    mlf = fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar"
    right = fixtures_dir / "tvm-0.13" / "mlp.npz"
    reference = dict(np.load(right))
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, **{**reference, "output_0": reference["output_0"] + 1e-3})
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([
        {"mlf": str(mlf), "references": [str(right)]},
        {"mlf": str(mlf), "references": [str(wrong)]},
        {"mlf": str(mlf), "references": [str(wrong)], "atol": 1e-2, "boards": [BOARDS[0]]},  # within tolerance
        {"mlf": str(fixtures_dir / "tvm-0.8" / "mlp_graph_c.tar")},  # no reference
    ]))
    out, junit = tmp_path / "out", tmp_path / "matrix.xml"
    first = _matrix("--jobs-file", jobs_file, "--board", BOARDS[0], "--board", BOARDS[1], "-o", out,
                    "--junit", junit, "--json")
    report = json.loads(first.stdout)
    assert report["format"] == "mlfbuild-matrix" and report["version"] == 1
    status = {r["id"]: r["status"] for r in report["jobs"]}
    assert status == {f"000-mlp_graph_c-{BOARDS[0]}": "pass", f"000-mlp_graph_c-{BOARDS[1]}": "pass",
                      f"001-mlp_graph_c-{BOARDS[0]}": "mismatch", f"001-mlp_graph_c-{BOARDS[1]}": "mismatch",
                      f"002-mlp_graph_c-{BOARDS[0]}": "pass",
                      f"003-mlp_graph_c-{BOARDS[0]}": "not checked", f"003-mlp_graph_c-{BOARDS[1]}": "not checked"}
    assert first.returncode == 7 and report["exit_code"] == 7
    # One build per (MLF, board): the three entries of the same MLF share theirs.
    assert sorted(r["cache"] for r in report["jobs"]) == ["miss"] * 4 + ["reused"] * 3

    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("7", "2", "0", "2")
    assert suite.find(".//error") is None
    by_name = {(c.get("classname"), c.get("name")): c for c in suite}
    mismatch = by_name[(BOARDS[0], "tvm-0.13/mlp_graph_c #001")]
    assert mismatch.find("failure") is not None and "outputs differ" in mismatch.find("failure").get("message")
    unchecked = by_name[(BOARDS[1], "tvm-0.8/mlp_graph_c")]
    assert unchecked.find("skipped").get("message") == "outputs not checked"
    passed = by_name[(BOARDS[0], "tvm-0.13/mlp_graph_c #000")]
    properties = {p.get("name"): p.get("value") for p in passed.find("properties")}
    assert {"flash", "ram", "ms", "instructions", "ticks"} <= set(properties) and int(properties["flash"]) > 0
    assert properties["clock"] == "qemu-icount"           # the ms are QEMU's virtual time, not a chip's
    assert all(set(r["clock"].values()) == {"qemu-icount"} for r in report["jobs"] if r["ms"])
    grid = (out / "matrix.html").read_text()
    assert "instructions per inference (QEMU: " in grid and "ms of its -icount clock, not a chip's time" in grid
    assert grid.count('href="jobs/') == 7 and all((out / "jobs" / i / "size.html").is_file() for i in status)

    retried = _matrix("--retry-failed", out / "matrix.json", "-o", tmp_path / "again", "--cache", out / "cache",
                      "--json")
    again = json.loads(retried.stdout)["jobs"]
    # The retry runs the failed jobs only, and merges them into the grid: the earlier passes stay.
    retried_ids = {f"001-mlp_graph_c-{b}" for b in BOARDS}
    assert {r["id"]: r["status"] for r in again} == status
    assert all(r["cache"] == "hit" for r in again if r["id"] in retried_ids)
    assert json.loads((tmp_path / "again" / "matrix.json").read_text())["total"] == 7
    assert (tmp_path / "again" / "matrix.html").read_text().count('href="jobs/') >= 2
    assert retried.returncode == 7


def test_worker_stages_are_pure_functions_of_bytes(tmp_path):
    """The worker gets bytes and gives back plain data: no path of the submitter is needed."""
    spec = {"mlf_name": "model.tar", "board": "host", "board_file_names": [], "opt": "-Os", "runtime": "builtin", "budget_flash": None,
            "budget_ram": None, "build_memory": 4 << 30, "timeout": 300}
    built = build_task(spec, EXAMPLE.read_bytes(), [], None)
    assert built["status"] == "built" and built["runnable"] and built["flash"] > 0
    assert {"firmware.elf", "build.json", "size.html"} <= set(built["files"])
    job = {"id": "x", "mlf": "/nowhere/model.tar", "board": "host", "references": ["/nowhere/ref.npz"],
           "atol": None, "rtol": None}
    result = run_task(job, built, [EXAMPLE.with_suffix(".npz").read_bytes()], 30, 120, False)
    assert result["status"] == "pass" and result["ticks"]["tiny"] > 0 and "run.json" in result["files"]
    plain = {k: v for k, v in result.items() if k != "files"}
    assert json.loads(json.dumps(plain)) == plain
    assert all(isinstance(v, bytes) for v in result["files"].values())
    only_built = run_task(job, built, [], 30, 120, True)
    assert only_built["status"] == "not run" and "--build-only" in only_built["message"]


def test_build_only_budget_timeout_and_bad_input_on_the_local_cluster(tmp_path):
    from mlfwriter import TinyModel, tar_tree

    missing = tmp_path / "missing.tar"
    files = TinyModel().files()  # C that makes the compiler read /dev/zero until its memory limit stops it
    files["codegen/host/src/tiny_lib1.c"] = b'#include "/dev/zero"\n' + files["codegen/host/src/tiny_lib1.c"]
    greedy = tar_tree(files, tmp_path / "greedy.tar")
    result = _matrix(EXAMPLE, missing, greedy, "--board", "host", "-o", tmp_path / "a", "--build-only",
                     "--build-memory", "256M", "--json")
    jobs = {r["id"]: r for r in json.loads(result.stdout)["jobs"]}
    assert jobs["000-tiny_aot-host"]["status"] == "not run" and jobs["000-tiny_aot-host"]["outcome"] == "skipped"
    assert jobs["001-missing-host"]["status"] == "invalid input" and "cannot read this MLF" in jobs["001-missing-host"]["message"]
    assert jobs["002-greedy-host"]["status"] == "build error" \
        and "ran out of its 256 MiB of memory" in jobs["002-greedy-host"]["message"], jobs["002-greedy-host"]
    assert result.returncode == 3

    junit, board_file = tmp_path / "budget.xml", tmp_path / "my-host.toml"
    board_file.write_text((Path(__file__).resolve().parents[1] / "boards" / "host.toml").read_text()
                          .replace('name = "host"', 'name = "my-host"'))  # reaches the worker by content
    over = _matrix(EXAMPLE, "--board-file", board_file, "--board", "my-host", "-o", tmp_path / "c",
                   "--budget-flash", "1K", "--junit", junit, "--json")
    [job] = json.loads(over.stdout)["jobs"]
    assert job["status"] == "over budget" and job["outcome"] == "failure" and job["flash"] > 1024
    assert json.loads((Path(job["folder"]) / "build.json").read_text())["board"]["name"] == "my-host"
    case = ElementTree.parse(junit).getroot().find("testcase")
    assert case.find("failure").get("message").startswith("the firmware does not fit") and case.find("error") is None
    assert over.returncode == 5

    slow = _matrix(EXAMPLE, "--board", "host", "-o", tmp_path / "b", "--job-timeout", "0.2", "--no-cache", "--json")
    [job] = json.loads(slow.stdout)["jobs"]
    assert job["status"] == "build error" and "timed out after 0.2 s" in job["message"]
    assert slow.returncode == 4


def test_jobs_file_boards_tolerances_and_errors(tmp_path):
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([{"mlf": "a.tar", "references": ["m=r.npz"], "boards": ["host"], "atol": 0.5},
                                     {"mlf": "b.tar"}]))
    jobs = cross(entries_from_file(jobs_file), ["mps2-an386", "mps2-an385"])
    assert [(j.id, j.atol) for j in jobs] == [("000-a-host", 0.5), ("001-b-mps2-an386", None), ("001-b-mps2-an385", None)]
    assert jobs[0].references == (f"m={tmp_path / 'r.npz'}",)
    for bad in ('{"mlf": "a.tar"}', '[{"mlf": "a.tar", "atol": -1}]', '[{"mlf": "a.tar", "bords": ["x"]}]', "[{"):
        jobs_file.write_text(bad)
        result = _matrix("--jobs-file", jobs_file, "-o", tmp_path / "out")
        assert result.returncode == 3 and result.stderr.startswith(f"mlfbuild: error: {jobs_file}: not a jobs file")
        assert len(result.stderr.strip().splitlines()) == 1
    retry = tmp_path / "previous.json"
    retry.write_text('{"format": "something else"}')
    result = _matrix("--retry-failed", retry, "-o", tmp_path / "out")
    assert result.returncode == 3 and "not a mlfbuild-matrix v1 result" in result.stderr
    result = _matrix("--retry-failed", retry, EXAMPLE, "-o", tmp_path / "out")
    assert result.returncode == 2 and "give no MLFs or --jobs-file with it" in result.stderr


def test_samples_default_for_jobs_that_give_none(tmp_path):
    from mlfbuild.matrix import with_default_samples

    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([{"mlf": "a.tar", "samples": 5}, {"mlf": "b.tar"}]))
    jobs = cross(entries_from_file(jobs_file), ["host"])
    assert [j.samples for j in with_default_samples(jobs, 3)] == [5, 3]
    assert [j.samples for j in with_default_samples(jobs, None)] == [5, None]
    for bad in ("0", "100001", "many"):
        result = _matrix(EXAMPLE, "-b", "host", "-o", tmp_path / "out", "--samples", bad)
        assert result.returncode == 2 and result.stderr.startswith("mlfbuild: error: --samples: "), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()

    result = _matrix(EXAMPLE, "-b", "host", "-o", tmp_path / "ran", "--samples", "3", "--json")
    [job] = json.loads(result.stdout)["jobs"]
    assert job["job"]["samples"] == 3 and result.returncode == 0, result.stderr
    # the local cluster takes seconds to start: a line says so before the jobs' lines
    assert result.stderr.startswith("starting a local Dask cluster of 2 worker(s) for 1 job(s)..."), result.stderr
    assert json.loads((Path(job["folder"]) / "run.json").read_text())["models"][0]["samples"] == 3


def test_filters(fixtures_dir):
    folder = fixtures_dir / "tvm-0.8"
    entries = [Entry(str(folder / name)) for name in ("mlp_graph_c.tar", "mlp_aot_c_unpacked.tar", "op_vector_add_c.tar")]
    jobs = cross(entries, ["mps2-an386", "mps2-an385", "host"])
    ids = lambda **f: sorted(j.id for j in apply_filters(jobs, Filters(**f)))  # noqa: E731
    assert ids(boards=["mps2-*"], models=["*mlp_aot*"]) == ["001-mlp_aot_c_unpacked-mps2-an385",
                                                           "001-mlp_aot_c_unpacked-mps2-an386"]
    assert ids(executors=["graph"], boards=["host"]) == ["000-mlp_graph_c-host"]
    assert ids(executors=["operator"], boards=["host"]) == ["002-op_vector_add_c-host"]
    assert ids(interfaces=["c"], executors=["aot"], boards=["host"]) == ["001-mlp_aot_c_unpacked-host"]


def test_matrix_exit_code_precedence():
    def results(*codes):
        return [{"exit_code": code} for code in codes]

    assert matrix_exit_code(results(0, 0)) == 0
    assert matrix_exit_code(results(7, 0, 5)) == 5  # both failures: over budget before mismatch
    assert matrix_exit_code(results(7, 4, 6)) == 4  # an error outranks a failure
    assert matrix_exit_code(results(7, 9)) == 9  # a lost cluster is an error too
    assert matrix_exit_code(results(7, 4, 3)) == 3  # invalid input outranks everything


def _small_fixture(entry: dict) -> bool:
    """The fixtures of every set but its keyword-spotting models (each is run against its reference
    on the M4F and the host by test_run; the matrix's own run of them is exhaustive)."""
    return not entry.get("file", "").startswith(("kws", "multi_kws"))


@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("which", ["small", pytest.param("all", marks=pytest.mark.exhaustive)])
def test_matrix_of_the_fixtures_on_two_qemu_boards(which, fixtures_dir, tmp_path):
    jobs = []
    for fixture_set, entry in manifest_entries():
        if which == "small" and not _small_fixture(entry):
            continue
        folder = fixtures_dir / fixture_set
        jobs.append({"mlf": str(folder / entry["file"]),
                     "expect_pass": {board: buildable(entry, board) for board in BOARDS},
                     "references": [f"{m['mod_name']}={folder / m['reference_npz']}" for m in entry["modules"]]})
    job_file = tmp_path / "jobs.json"
    job_file.write_text(json.dumps([{k: v for k, v in j.items() if k != "expect_pass"} for j in jobs]))
    result = _matrix("--jobs-file", job_file, "--board", BOARDS[0], "--board", BOARDS[1], "-o", tmp_path / "out",
                     "--json", timeout=1800)
    results = json.loads(result.stdout)["jobs"]
    assert len(results) == 2 * len(jobs)
    expected = {j["mlf"]: j["expect_pass"] for j in jobs}
    for r in results:
        llvm_m4_on_m3 = r["board"] == "mps2-an385" and "llvm" in r["job"]["mlf"]  # refused: Cortex-M4 objects
        if expected[r["job"]["mlf"]][r["board"]] and not llvm_m4_on_m3:
            assert r["status"] == "pass", r
        else:
            assert r["outcome"] == "error" and r["exit_code"] in (3, 4), r
    assert result.returncode in (3, 4)  # the known-bad fixtures fail the matrix, with their own exit code


def test_a_stage_ends_with_its_worker():
    """A stage (and what it started) whose worker process died is gone at once, not left running."""
    import psutil

    stage = ("import subprocess, time\nfrom mlfbuild.matrix.stage import _end_with_parent\n_end_with_parent()\n"
             "print(subprocess.Popen(['sleep', '60']).pid, flush=True)\ntime.sleep(60)\n")
    worker = ("import subprocess, sys\n"
              f"p = subprocess.Popen([sys.executable, '-c', {stage!r}], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, "
              "start_new_session=True)\n"
              "print(p.pid, p.stdout.readline().decode().strip(), flush=True)\n")  # then this 'worker' dies
    pids = subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, timeout=30).stdout.split()
    processes = [psutil.Process(int(pid)) for pid in pids if psutil.pid_exists(int(pid))]
    _, alive = psutil.wait_procs(processes, timeout=5)
    for process in alive:
        process.kill()
    assert len(pids) == 2 and not alive


def test_cache_key_names_the_compiler(tmp_path, monkeypatch):
    """A different compiler under the same name must not reuse a cached firmware."""
    from mlfbuild.matrix.cache import build_key
    from mlfbuild.toolchain import compiler_identity

    fake = tmp_path / "bin" / "gcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'gcc (Other) 99.1'\n")
    fake.chmod(0o755)
    real = compiler_identity("gcc")
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    compiler_identity.cache_clear()
    other = compiler_identity("gcc")
    compiler_identity.cache_clear()
    assert "99.1" in other and other != real
    args = ("0" * 64, {"name": "host", "kind": "host"}, [], None, {"opt": "-Os"})
    assert build_key(*args, real) != build_key(*args, other)


def test_a_reference_whose_header_declares_2_to_the_40_elements_is_invalid_input_in_a_worker():
    import io
    import zipfile

    import numpy as np

    spec = {"mlf_name": "model.tar", "board": "host", "board_file_names": [], "opt": "-Os", "runtime": "builtin",
            "budget_flash": None, "budget_ram": None, "build_memory": 4 << 30, "timeout": 300}
    built = build_task(spec, EXAMPLE.read_bytes(), [], None)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|i1", "fortran_order": False, "shape": (1 << 40,)})
    reference = io.BytesIO()
    with zipfile.ZipFile(reference, "w") as archive:
        archive.writestr("input.npy", header.getvalue() + bytes(16))
        archive.writestr("output_0.npy", header.getvalue() + bytes(16))
    job = {"id": "x", "mlf": "model.tar", "board": "host", "references": ["/home/me/huge.npz"], "atol": None, "rtol": None}
    result = run_task(job, built, [reference.getvalue()], 30, 120, False)
    assert result["status"] == "invalid input" and result["exit_code"] == 3, result
    assert result["message"].startswith("/home/me/huge.npz: input.npy: its header declares 1,099,511,627,776"), result


@pytest.mark.qemu
@pytest.mark.cross
def test_a_matrix_checks_each_firmware_against_its_host_twin(tmp_path):
    """`"references": ["host"]`: each worker builds the job's MLF for the host beside the firmware and
    holds the firmware to it exactly — no reference file, no TVM, no LiteRT."""
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([{"mlf": str(EXAMPLE), "references": ["host"], "samples": 20}]))
    done = _matrix("--jobs-file", jobs_file, "--board", BOARDS[0], "-o", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    (job,) = json.loads(done.stdout)["jobs"]
    assert job["status"] == "pass" and job["job"]["references"] == ["host"]
