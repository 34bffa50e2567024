"""`mlfbuild matrix --scheduler`: a real `dask scheduler` and two `dask worker` processes on loopback,
one of them killed while it runs a job. Every job must still be reported once, with its right status."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import buildable, manifest_entries

DASK = str(Path(sys.executable).parent / "dask")
BOARDS = ("mps2-an386", "mps2-an385")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _kill_tree(pid: int) -> None:
    """Kill a process and everything it started (a worker's stage process, its compiler or QEMU)."""
    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


@pytest.fixture
def dask_cluster(tmp_path):
    """tcp://127.0.0.1:PORT of a scheduler with two single-thread workers, and the workers' pids by address."""
    from distributed import Client

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=(tmp_path / "scheduler.log").open("w"),
                                  start_new_session=True)]
    try:
        pids = {}
        for name in ("w1", "w2"):
            processes.append(subprocess.Popen(
                [DASK, "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--name", name,
                 "--no-dashboard", "--local-directory", str(tmp_path / name)],
                stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{name}.log").open("w"), start_new_session=True))
            pids[name] = processes[-1].pid  # --no-nanny: this process is the worker
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            workers = {addr: pids[info["name"]] for addr, info in client.scheduler_info()["workers"].items()}
        yield address, workers
    finally:
        for process in processes:
            _kill_tree(process.pid)


def _jobs(fixtures_dir: Path) -> list[dict]:
    """The small (mlp) shared fixtures with their references; the known-bad one included."""
    jobs = []
    for fixture_set, entry in manifest_entries():
        if entry["file"].startswith("mlp"):
            folder = fixtures_dir / fixture_set
            jobs.append({"mlf": str(folder / entry["file"]),
                         "references": [f"{m['mod_name']}={folder / m['reference_npz']}" for m in entry["modules"]]})
    return jobs


@pytest.mark.qemu
@pytest.mark.cross
def test_worker_killed_mid_run_every_job_reported_once(dask_cluster, fixtures_dir, tmp_path):
    from distributed import Client

    address, workers = dask_cluster
    jobs = _jobs(fixtures_dir)
    expected = {(Path(e["file"]).name, fs): all(buildable(e, b) for b in BOARDS)
                for fs, e in manifest_entries() if e["file"].startswith("mlp")}
    job_file = tmp_path / "jobs.json"
    job_file.write_text(json.dumps(jobs))
    matrix = subprocess.Popen([sys.executable, "-m", "mlfbuild", "matrix", "--jobs-file", str(job_file),
                               "--board", BOARDS[0], "--board", BOARDS[1], "-o", str(tmp_path / "out"),
                               "--scheduler", address, "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim, in_flight = None, []
    try:
        with Client(address, timeout="30s") as client:
            deadline = time.monotonic() + 120
            while victim is None and time.monotonic() < deadline:
                for worker, keys in client.processing().items():
                    job_keys = [k for k in keys if str(k).startswith("job-")]
                    if job_keys:  # a job is running there right now: lose that worker
                        victim, in_flight = worker, job_keys
                        started = psutil.Process(workers[worker]).children(recursive=True)
                        os.kill(workers[worker], signal.SIGKILL)  # the worker alone, as a crash would
                        break
                time.sleep(0.1)
        out, err = matrix.communicate(timeout=600)
    finally:
        if matrix.poll() is None:
            _kill_tree(matrix.pid)
    assert victim is not None, "no job was seen running"
    _, alive = psutil.wait_procs(started, timeout=10)
    assert not alive, f"the lost worker left {[p.name() for p in alive]} running"
    report = json.loads(out)
    results = report["jobs"]
    assert len(results) == len(jobs) * len(BOARDS) == report["total"]
    assert len({r["id"] for r in results}) == len(results)  # each job reported once
    assert sum(line.startswith("[") for line in err.splitlines()) == len(results), err  # one progress line each
    for r in results:
        fixture = (Path(r["job"]["mlf"]).name, Path(r["job"]["mlf"]).parent.name)
        if expected[fixture]:
            assert r["status"] == "pass" and r["outcome"] == "passed", r
            assert r["instructions"] and r["flash"] > 0
        else:
            assert r["status"] in ("invalid input", "build error") and r["outcome"] == "error", r
    lost = [r for r in results if f"job-{r['id']}" in {"-".join(str(k).split("-")[:-1]) for k in in_flight}]
    assert lost, (in_flight, [r["id"] for r in results])
    survivor = next(w for w in workers if w != victim)
    assert all(r["worker"] == survivor for r in lost)  # ran again elsewhere
    assert matrix.returncode == 3  # the known-bad MLF: invalid input outranks everything else


def test_unreachable_scheduler_is_one_line_exit_9(tmp_path):
    example = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "matrix", str(example), "--board", "host",
                             "-o", str(tmp_path / "out"), "--scheduler", f"tcp://127.0.0.1:{_free_port()}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 9, result.stderr
    assert result.stderr.startswith("mlfbuild: error: cannot reach the Dask scheduler at tcp://127.0.0.1:")
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_dask_s_version_table_becomes_one_warning_line():
    """A worker image's Python is another release than the user's (Debian's 3.11.2 in docker/Dockerfile):
    Dask's table of differences, made by Dask itself here, reaches the user as one line."""
    import warnings

    from distributed.versions import VersionMismatchWarning, error_message

    from mlfbuild.matrix.cluster import _version_warnings_in_one_line, versions_line

    packages = {"python": "3.11.7.final.0", "dask": "2026.8.0"}
    message = error_message(scheduler={"packages": packages}, workers={"w1": {"packages": {**packages,
                                                                                          "python": "3.11.2.final.0"}}},
                            source={"packages": packages})["warning"]
    assert "Mismatched versions" in message and "\n" in message
    line = versions_line(message)
    assert "\n" not in line and "python 3.11.7 here, 3.11.7 on the scheduler, 3.11.2 on the workers" in line
    heard: list[str] = []
    with warnings.catch_warnings(record=True) as others:
        warnings.simplefilter("always")
        with _version_warnings_in_one_line(heard.append):
            warnings.warn(message, VersionMismatchWarning)
            warnings.warn("something else", UserWarning)
    assert heard == [line]
    assert [str(w.message) for w in others] == ["something else"]  # other warnings pass on as they were
