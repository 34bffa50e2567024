"""After any `matrix` ends — success, failure, timeout or a signal — no process it started is alive
and no temporary folder of it remains; a damaged cache entry is said and built again, never run.

Every process a matrix starts (Dask workers, stages, compilers, firmware) inherits its environment,
so a marker variable finds them in /proc; its TMPDIR is a folder of the test's, so anything it
leaves there is seen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import as_from_a_terminal

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"
MARK = "MLFBUILD_TEST_MATRIX_MARK"


def _with_mark(mark: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            if f"{MARK}={mark}".encode() in environ.split(b"\0"):
                found.append(int(pid))
    return found


def _alive(mark: str, within: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within
    while (pids := _with_mark(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
            for pid in pids if Path(f"/proc/{pid}").exists()]


class Matrix:
    """`mlfbuild matrix ARGS` with its own TMPDIR and marker, in a session of its own (so a signal
    can go to its whole process group, as a terminal's Ctrl-C does)."""

    def __init__(self, tmp_path: Path, *args: str):
        self.mark, self.tmp = uuid.uuid4().hex, tmp_path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        env = {**os.environ, MARK: self.mark, "TMPDIR": str(self.tmp)}
        self.process = subprocess.Popen([sys.executable, "-m", "mlfbuild", "matrix", "--workers", "1", *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        start_new_session=True, preexec_fn=as_from_a_terminal)

    def wait(self, timeout: float = 300) -> tuple[int, str, str]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.returncode, out, err

    def left_behind(self) -> tuple[list[str], list[str]]:
        return _alive(self.mark), sorted(p.name for p in self.tmp.iterdir())


def test_success_then_a_damaged_cache_entry_rebuilt_and_nothing_left(tmp_path):
    out = tmp_path / "out"
    args = (str(EXAMPLE), "-b", "host")
    first = Matrix(tmp_path, *args, "-o", str(out), "--json")
    code, stdout, err = first.wait()
    assert code == 0 and "Traceback" not in err, err
    assert json.loads(stdout)["jobs"][0]["cache"] == "miss"
    assert first.left_behind() == ([], [])

    [entry] = (out / "cache").iterdir()
    elf = bytearray((entry / "firmware.elf").read_bytes())
    elf[len(elf) // 2] ^= 0x01
    (entry / "firmware.elf").write_bytes(bytes(elf))
    second = Matrix(tmp_path, *args, "-o", str(out), "--json")
    code, stdout, err = second.wait()
    [job] = json.loads(stdout)["jobs"]
    assert code == 0 and job["cache"] == "rebuilt" and job["status"] == "not checked", err
    assert f"warning: cache entry {entry} is damaged (firmware.elf is not the file its build.json records" in err
    assert "Traceback" not in err
    assert second.left_behind() == ([], [])
    assert (out / "jobs" / job["id"] / "firmware.elf").read_bytes() != bytes(elf)


def test_a_failed_and_timed_out_matrix_leaves_nothing(tmp_path):
    matrix = Matrix(tmp_path, str(EXAMPLE), str(tmp_path / "missing.tar"), "-b", "host", "-o", str(tmp_path / "out"),
                    "--no-cache", "--job-timeout", "0.5", "--json")
    code, stdout, err = matrix.wait()
    statuses = sorted(j["status"] for j in json.loads(stdout)["jobs"])
    assert code == 3 and statuses == ["build error", "invalid input"] and "Traceback" not in err, err
    assert matrix.left_behind() == ([], [])


@pytest.mark.parametrize("signum, group", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGTERM, True)],
                         ids=["ctrl-c", "sigterm", "sigterm-to-group"])
def test_a_stopped_matrix_says_one_line_and_leaves_nothing(tmp_path, signum, group):
    matrix = Matrix(tmp_path, str(EXAMPLE), "-b", "host", "-o", str(tmp_path / "out"), "--no-cache")
    deadline = time.monotonic() + 120
    while not any("mlfbuild.matrix.stage" in line for line in _alive(matrix.mark, within=0)):
        assert time.monotonic() < deadline and matrix.process.poll() is None, "no build started"
        time.sleep(0.2)
    if group:
        os.killpg(matrix.process.pid, signum)  # what a terminal's Ctrl-C or a CI cancel does
    else:
        matrix.process.send_signal(signum)
    code, _, err = matrix.wait(timeout=120)
    assert code == 128 + signum, err
    said = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
    lines = [line for line in err.strip().splitlines() if not line.startswith("starting a local Dask cluster")]
    assert lines[-1:] == [f"mlfbuild: {said}"] and "Traceback" not in err, err
    assert len(lines) == 1, err  # one line besides the start-up one
    assert matrix.left_behind() == ([], [])
