"""What a matrix reads is untrusted — its cache entries, retry and jobs files, tolerances, time
limits, scheduler addresses, input paths and the project file — and none of it may make mlfbuild
run the wrong firmware, write outside its folders, hang, or answer with more than one line."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import cli
from mlfbuild.errors import InvalidInputError, UsageError
from mlfbuild.matrix import Job, Limits, cross, entries_from_file, html_grid, jobs_to_retry, junit_xml, summary_table
from mlfbuild.matrix.cache import BuildCache, DamagedEntry, digest
from mlfbuild.matrix.layout import is_plain_name, job_folder
from mlfbuild.matrix.report import job_result
from mlfbuild.matrix.stage import BUILD_FILES, run_task
from mlfbuild.projectfile import find_project_file
from mlfbuild.units import seconds, tolerance
from mlfbuild.untrusted import read_regular

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"
KEY = "k" * 64


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def built(build_firmware) -> dict:
    """A build stage's result of the example on the host, as the cache stores it."""
    out = build_firmware(EXAMPLE, "host")
    files = {name: (out / name).read_bytes() for name in BUILD_FILES if (out / name).is_file()}
    return {"status": "built", "exit_code": 0, "message": "", "flash": 100, "ram": 100, "runnable": True,
            "seconds": 1.0, "worker": None, "files": files}


def _entry(tmp_path: Path, built: dict) -> tuple[BuildCache, Path, str]:
    cache = BuildCache(tmp_path / "cache")
    cache.put(KEY, built)
    return cache, tmp_path / "cache" / KEY, digest(EXAMPLE.read_bytes())


# -- the build cache ----------------------------------------------------------------------------

def test_a_whole_cache_entry_is_used(tmp_path, built):
    cache, _, mlf_sha = _entry(tmp_path, built)
    hit = cache.get(KEY, mlf_sha, "host")
    assert hit["files"] == built["files"] and hit["status"] == "built"
    assert cache.get("0" * 64, mlf_sha, "host") is None


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _rewrite_result(entry: Path, change) -> None:
    result = json.loads((entry / "result.json").read_text())
    change(result)
    (entry / "result.json").write_text(json.dumps(result))


DAMAGES = {
    "a bit flipped in the firmware": lambda e: _flip(e / "firmware.elf"),
    "another firmware": lambda e: (e / "firmware.elf").write_bytes((e / "firmware.elf").read_bytes() + b"\0"),
    "build.log a link": lambda e: ((e / "build.log").unlink(), (e / "build.log").symlink_to(e / "outside")),
    "the firmware a link": lambda e: ((e / "firmware.elf").rename(e / "elsewhere"),
                                      (e / "firmware.elf").symlink_to(e / "elsewhere")),
    "a file name climbing out": lambda e: _rewrite_result(e, lambda r: r["file_names"].append("../../outside")),
    "an absolute file name": lambda e: _rewrite_result(e, lambda r: r["file_names"].append(str(e / "outside"))),
    "no status": lambda e: _rewrite_result(e, lambda r: r.pop("status")),
    "a failed build": lambda e: _rewrite_result(e, lambda r: r.update(status="build error", exit_code=4)),
    "flash a string": lambda e: _rewrite_result(e, lambda r: r.update(flash="1K")),
    "result.json a list": lambda e: (e / "result.json").write_text("[]"),
    "result.json nested deeply": lambda e: (e / "result.json").write_text("[" * 100_000 + "]" * 100_000),
    "result.json a FIFO": lambda e: ((e / "result.json").unlink(), os.mkfifo(e / "result.json")),
    "build.json missing": lambda e: (e / "build.json").unlink(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_cache_entry_is_never_used(tmp_path, built, damage):
    cache, entry, mlf_sha = _entry(tmp_path, built)
    (entry / "outside").write_text("secret")
    DAMAGES[damage](entry)
    with pytest.raises(DamagedEntry, match=f"cache entry {entry} is damaged"):
        cache.get(KEY, mlf_sha, "host")
    cache.discard(KEY)
    assert not entry.exists() and cache.get(KEY, mlf_sha, "host") is None
    cache.put(KEY, built)  # built again, stored again
    assert cache.get(KEY, mlf_sha, "host")["files"] == built["files"]


def test_an_entry_of_another_model_or_board_is_not_this_build(tmp_path, built):
    cache, _, mlf_sha = _entry(tmp_path, built)
    with pytest.raises(DamagedEntry, match="another MLF or board"):
        cache.get(KEY, digest(b"another model"), "host")
    with pytest.raises(DamagedEntry, match="another MLF or board"):
        cache.get(KEY, mlf_sha, "mps2-an386")


def test_a_linked_entry_is_removed_not_its_target(tmp_path, built):
    cache, entry, mlf_sha = _entry(tmp_path, built)
    target = tmp_path / "target"
    entry.rename(target)
    entry.symlink_to(target)
    with pytest.raises(DamagedEntry, match="not a folder"):
        cache.get(KEY, mlf_sha, "host")
    cache.discard(KEY)
    assert not os.path.lexists(entry) and (target / "firmware.elf").is_file()


# -- which paths a matrix writes -----------------------------------------------------------------

def test_job_ids_and_file_names_are_plain_names(tmp_path):
    assert all(is_plain_name(n) for n in ("000-kws-mps2-an386", "firmware.elf", "a+b"))
    assert not any(is_plain_name(n) for n in ("../x", "/tmp/x", "..", ".hidden", "a/b", "", "a\x1bb", None, 7))
    for bad in ("/tmp/x", "../../x", "..", "a/b"):
        with pytest.raises(InvalidInputError, match="not a plain name"):
            job_folder(tmp_path, bad)
    out = tmp_path / "out"
    outcome = {"status": "invalid input", "exit_code": 3, "message": "no", "files": {"../../escaped": b"x"}}
    with pytest.raises(InvalidInputError):
        job_result(Job(id="000-a-host", mlf="a.tar", board="host"), outcome, "none", out)
    with pytest.raises(InvalidInputError):
        job_result(Job(id="../../escaped-job", mlf="a.tar", board="host"), {**outcome, "files": {}}, "none", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_board_name_that_climbs_makes_a_plain_job_id_and_no_folder(tmp_path):
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([{"mlf": "a.tar", "boards": ["../../../x", "..", "a/b", "a_b", "a_b"]}]))
    jobs = cross(entries_from_file(jobs_file), [])
    assert all(is_plain_name(j.id) for j in jobs) and len({j.id for j in jobs}) == len(jobs)
    out = tmp_path / "deep" / "er" / "out"
    failed = {"status": "invalid input", "exit_code": 3, "message": "unknown board", "files": {}}
    for job in jobs:
        result = job_result(job, failed, "none", out)
        assert Path(result["folder"]).parent == out / "jobs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.json"]  # nothing made: no job had files


def _previous(tmp_path: Path, jobs: list) -> Path:
    path = tmp_path / "previous.json"
    path.write_text(json.dumps({"format": "mlfbuild-matrix", "version": 1, "jobs": [
        {"outcome": "error", "job": job} for job in jobs]}))
    return path


@pytest.mark.parametrize("job_id", ["/tmp/mlfbuild-retry-x", "../../x", "..", "a/b", "", 7, None])
def test_a_retry_file_job_id_is_never_a_path(tmp_path, job_id):
    previous = _previous(tmp_path, [{"id": job_id, "mlf": str(EXAMPLE), "board": "host"}])
    with pytest.raises(InvalidInputError, match="not a mlfbuild-matrix v1 result"):
        jobs_to_retry(previous)


def test_a_retry_file_climbing_out_is_refused_before_any_work(tmp_path):
    outside = tmp_path / "outside"
    previous = _previous(tmp_path, [{"id": f"../../{outside.name}", "mlf": str(EXAMPLE), "board": "host"}])
    result = cli("matrix", "--retry-failed", str(previous), "-o", str(tmp_path / "a" / "b"), timeout=120)
    assert result.returncode == 3 and "is not a plain name" in _one_line(result)
    assert not outside.exists() and not (tmp_path / "a").exists()


def test_retry_and_jobs_files_fail_in_one_line(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text(deep)
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        entries_from_file(tmp_path / "deep.json")
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        jobs_to_retry(tmp_path / "deep.json")
    twice = _previous(tmp_path, [{"id": "000-a-host", "mlf": "a.tar", "board": "host"}] * 2)
    with pytest.raises(InvalidInputError, match="there twice"):
        jobs_to_retry(twice)


# -- tolerances and time limits ------------------------------------------------------------------

@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), -1, -1e-9, "inf", "nan", True, None, [1]])
def test_a_tolerance_is_finite_and_not_negative(value):
    with pytest.raises(ValueError):
        tolerance(value)


def test_good_tolerances_and_time_limits():
    assert tolerance(0) == 0.0 and tolerance("1e-3") == 1e-3 and seconds("0.5") == 0.5
    for bad in (0, -1, "nan", "inf", float("nan"), "x"):
        with pytest.raises(ValueError):
            seconds(bad)
    for bad in (float("nan"), -1):  # the library's callers too, not only the flags
        with pytest.raises(UsageError, match="job_timeout: a time limit must be"):
            Limits(job_timeout=bad)


@pytest.mark.parametrize("value", ["1e999", "NaN", "-1", "Infinity", '"0.1"'])
def test_a_jobs_file_tolerance_that_passes_anything_is_refused(tmp_path, value):
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(f'[{{"mlf": "a.tar", "atol": 0.1, "rtol": {value}}}]')
    with pytest.raises(InvalidInputError, match="not a jobs file"):
        entries_from_file(jobs_file)
    previous = _previous(tmp_path, [{"id": "000-a-host", "mlf": "a.tar", "board": "host", "atol": json.loads(
        value.replace("1e999", "Infinity"))}])
    with pytest.raises(InvalidInputError):
        jobs_to_retry(previous)


@pytest.mark.parametrize("args", [("run", "x", "--atol=inf"), ("run", "x", "--rtol", "nan"), ("run", "x", "--atol", "-1"),
                                  ("run", "x", "--timeout", "nan"), ("run", "x", "--build-timeout", "-5"),
                                  ("matrix", "x", "--job-timeout", "nan"), ("matrix", "x", "--job-timeout", "-1"),
                                  ("matrix", "x", "--timeout", "inf"), ("matrix", "x", "--connect-timeout", "0"),
                                  ("run", "x", "--samples", "0"), ("reference", "m.tflite", "--samples", "-1")],
                         ids=" ".join)
def test_flags_refuse_infinite_negative_and_nan_values(tmp_path, args):
    result = cli(*args, cwd=tmp_path, timeout=60)
    line = _one_line(result)
    assert result.returncode == 2 and line.startswith(f"mlfbuild: error: {next(a for a in args if a.startswith('--')).split('=')[0]}: ")
    assert not list(tmp_path.iterdir())


# -- folders, scheduler addresses, input files ---------------------------------------------------

def test_a_cache_or_output_that_is_a_file_is_refused_before_any_work(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    result = cli("matrix", str(EXAMPLE), "-b", "host", "-o", str(tmp_path / "out"), "--cache", str(afile), timeout=120)
    assert result.returncode == 2 and "exists and is not a folder" in _one_line(result)
    assert not (tmp_path / "out" / "jobs").exists() and afile.read_text() == "mine"
    result = cli("matrix", str(EXAMPLE), "-b", "host", "-o", str(afile), timeout=120)
    assert result.returncode == 2 and "exists and is not a folder" in _one_line(result)


class _Listener:
    """A local TCP server on 127.0.0.1 that accepts and then says nothing, or answers like an HTTP
    server; subclasses say something else by overriding `_talk`."""

    def __init__(self, http: bool = False):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port, self.http, self.conns = self.server.getsockname()[1], http, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn):
        if self.http:
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello")

    def close(self):
        for conn in self.conns:
            conn.close()
        self.server.close()


def _matrix_on_scheduler(listener, tmp_path, connect_timeout: int):
    """`matrix` of the example against the local `listener` as its scheduler: the result and the time it
    took (the listener is closed after)."""
    try:
        started = time.monotonic()
        result = cli("matrix", str(EXAMPLE), "-b", "host", "-o", str(tmp_path / "out"), "--connect-timeout",
                     str(connect_timeout), "--scheduler", f"tcp://127.0.0.1:{listener.port}", timeout=90)
        return result, time.monotonic() - started
    finally:
        listener.close()


@pytest.mark.parametrize("http", [False, True], ids=["silent", "http"])
def test_a_listener_that_does_not_speak_dask_is_exit_9_in_time(tmp_path, http):
    listener = _Listener(http)
    result, elapsed = _matrix_on_scheduler(listener, tmp_path, connect_timeout=3)
    line = _one_line(result)
    assert result.returncode == 9 and f"127.0.0.1:{listener.port}" in line, line
    assert elapsed < 60


class _HandshakeListener(_Listener):
    """Sends Dask's handshake (the framing of distributed/comm/tcp.py, a msgpack'd dict as
    distributed/comm/core.py sends), answers the client's first message with a message no scheduler
    sends, then closes."""

    @staticmethod
    def _message(value) -> bytes:
        import msgpack

        frame = msgpack.dumps(value)
        body = struct.pack("<QQ", 1, len(frame)) + frame
        return struct.pack("<Q", len(body)) + body

    def _talk(self, conn):
        with conn, contextlib.suppress(OSError):
            conn.sendall(self._message({"op": "handshake", "compression": None, "python": (3, 11, 0),
                                        "pickle-protocol": 5}))
            conn.recv(65536)
            conn.sendall(self._message({"op": "no-such-reply"}))
            time.sleep(0.2)


def test_a_listener_that_speaks_dasks_handshake_and_then_nonsense_is_one_prompt_line(tmp_path):
    listener = _HandshakeListener()
    result, elapsed = _matrix_on_scheduler(listener, tmp_path, connect_timeout=8)
    line = _one_line(result)
    assert result.returncode == 9 and line.startswith(f"mlfbuild: error: cannot reach the Dask scheduler at "
                                                      f"tcp://127.0.0.1:{listener.port}: it spoke Dask's handshake"), line
    assert "Traceback" not in result.stderr
    assert elapsed < 8  # not the Client's close timeout (twice --connect-timeout) on top


@pytest.mark.parametrize("address", ["ucx://127.0.0.1:8786", "tcp://", "tcp://host:port", "tcp://h:99999",
                                     "inproc://x", "http://127.0.0.1:80/", "tcp://a b:1"])
def test_an_address_that_is_not_a_scheduler_s_is_one_line_at_once(tmp_path, address):
    result = cli("matrix", str(EXAMPLE), "-b", "host", "-o", str(tmp_path / "out"), "--scheduler", address,
                 timeout=15)
    assert result.returncode == 2 and "not a Dask scheduler address" in _one_line(result)


def test_only_regular_files_are_read_and_never_too_much(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.npz"
    zero.symlink_to("/dev/zero")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for path, why in ((fifo, "is a FIFO"), (zero, "is a character device"), (tmp_path, "is a folder"),
                      (loop, "cannot read"), (tmp_path / "none", "cannot read")):
        with pytest.raises(InvalidInputError, match=why):
            read_regular(path, "reference")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(InvalidInputError, match="over the limit of 99"):
        read_regular(big, "MLF", 99)
    assert read_regular(big, "MLF", 100) == b"x" * 100


def test_bad_input_paths_and_names_make_invalid_jobs_valid_junit_and_plain_lines(tmp_path):
    fifo, zero = tmp_path / "model.tar", tmp_path / "zero.npz"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([{"mlf": str(fifo)},
                                     {"mlf": str(EXAMPLE), "references": [str(zero)]},
                                     {"mlf": str(EXAMPLE), "boards": ["../../../escaped"]},
                                     {"mlf": "\x1b[31mred\x07.tar"}]))
    out, junit = tmp_path / "out", tmp_path / "matrix.xml"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "matrix", "--jobs-file", str(jobs_file), "-b", "host",
                             "--workers", "1", "--build-only", "-o", str(out), "--junit", str(junit), "--json"],
                            capture_output=True, text=True, timeout=150)
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert [j["status"] for j in jobs] == ["invalid input"] * 4
    assert "is a FIFO" in jobs[0]["message"] and "is a character device" in jobs[1]["message"]
    assert "unknown board" in jobs[2]["message"]
    assert {p.name for p in out.iterdir()} <= {"jobs", "matrix.json", "matrix.html", "cache"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.json", "matrix.xml", "model.tar", "out", "zero.npz"]
    cases = ElementTree.parse(junit).getroot().findall("testcase")  # valid XML
    assert any("\\x1b[31mred\\x07" in c.get("name") for c in cases)


def test_control_characters_become_escapes_in_junit():
    result = {"id": "000-a-host", "model": "x/\x1b[2Jbad\x00", "board": "host", "status": "invalid input",
              "outcome": "error", "exit_code": 3, "message": "\x1b]0;title\x07", "flash": None, "ram": None,
              "ms": None, "ticks": None, "instructions": None, "seconds": 0.0, "cache": "none", "folder": "f\x08",
              "files": []}
    suite = ElementTree.fromstring(junit_xml([result]))
    case = suite.find("testcase")
    assert case.get("name") == "x/\\x1b[2Jbad\\x00" and case.find("error").get("message") == "\\x1b]0;title\\x07"
    assert "\x1b" not in summary_table([result]) and "x/\\x1b[2Jbad\\x00" in summary_table([result])
    assert "\x1b" not in html_grid([result])


def test_a_reference_error_names_the_user_s_file(tmp_path, built):
    job = {"id": "x", "mlf": "/nowhere/model.tar", "board": "host", "references": ["/my/refs/expected.npz"],
           "atol": None, "rtol": None}
    result = run_task(job, built, [b"not an npz at all"], 30, 120, False)
    assert result["status"] == "invalid input", result
    assert "/my/refs/expected.npz" in result["message"] and "mlfbuild-run-" not in result["message"]


# -- the project file ------------------------------------------------------------------------------

def _unusable(kind: str, path: Path) -> None:
    if kind == "folder":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "symlink loop":
        path.symlink_to(path.name)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling link":
        path.symlink_to("nowhere.toml")
    elif kind == "nested deeply":
        path.write_text("a = " + "[" * 100_000 + "]" * 100_000)
    elif kind == "infinite atol":
        path.write_text("atol = inf\n")
    elif kind == "negative rtol":
        path.write_text("rtol = -0.5\n")


@pytest.mark.parametrize("kind", ["folder", "FIFO", "symlink loop", "link to /dev/zero", "dangling link",
                                  "nested deeply", "infinite atol", "negative rtol"])
def test_an_unusable_project_file_is_said_not_ignored(tmp_path, kind):
    _unusable(kind, tmp_path / "mlfbuild.toml")
    why = {"folder": "is a folder", "FIFO": "is a FIFO", "symlink loop": "symbolic links",
           "link to /dev/zero": "character device", "dangling link": "No such file", "nested deeply": "nested too deeply",
           "infinite atol": "atol: a tolerance must be a finite number", "negative rtol": "rtol: a tolerance must be"}[kind]
    with pytest.raises(InvalidInputError, match="mlfbuild.toml"):
        find_project_file(tmp_path)
    result = cli("size", cwd=tmp_path, timeout=60)
    line = _one_line(result)
    assert result.returncode == 3 and line.startswith("mlfbuild: error: mlfbuild.toml: ") and why in line, line


def test_project_file_tolerances_are_run_s_defaults(tmp_path):
    (tmp_path / "mlfbuild.toml").write_text("atol = 0.25\nrtol = 0\n")
    project = find_project_file(tmp_path)
    assert (project.atol, project.rtol) == (0.25, 0.0)


def test_jobs_file_paths_are_kept_as_the_user_wrote_them(tmp_path):
    """Paths went through symbolic links (matrix.json named files the user never typed, and a test
    failed where ../shared is a link); they are made absolute, nothing more. `host` stays a word."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "m.tar").write_bytes(b"")
    (real / "r.npz").write_bytes(b"")
    (tmp_path / "linked").symlink_to(real, target_is_directory=True)
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"mlf": "linked/m.tar", "references": ["linked/r.npz", "m=host"]}]))
    (entry,) = entries_from_file(jobs)
    assert entry.mlf == str(tmp_path / "linked" / "m.tar")
    assert entry.references == (str(tmp_path / "linked" / "r.npz"), "m=host")


def test_the_summary_table_writes_bytes_as_the_html_grid_does():
    result = {"id": "000-kws-mps2-an386", "model": "kws", "board": "mps2-an386", "status": "pass",
              "outcome": "passed", "exit_code": 0, "message": "", "flash": 66_444, "ram": 20_000, "ms": None,
              "ticks": None, "instructions": None, "seconds": 0.0, "cache": "miss", "folder": "f", "files": []}
    assert "pass 66,444 B" in summary_table([result]) and "64.9K" not in summary_table([result])
    assert "flash 66,444 B" in html_grid([result])
