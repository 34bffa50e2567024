"""Run firmware for real: QEMU (Cortex-M4F and others) and the host, outputs checked against TVM's
reference; hung, crashing, silent and garbled firmware; the MLPerf Tiny dialect byte for byte."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from xml.etree import ElementTree

from conftest import REPO, entry_id, fixture_boards, references_for
from mlfbuild.console.client import Client
from mlfbuild.errors import RunError
from mlfbuild.run import run_build
from mlfbuild.run.transports import QemuTransport
from mlfwriter import TinyModel, tar_tree

EXAMPLE = REPO / "examples" / "tiny_aot.tar"
EXAMPLE_REF = REPO / "examples" / "tiny_aot.npz"

RUNS = fixture_boards(("mps2-an386", "host"))


@pytest.mark.qemu
@pytest.mark.parametrize("item, board", RUNS, ids=[f"{entry_id(i)}-{b}" for i, b in RUNS])
def test_fixture_outputs_match_tvm(item, board, fixtures_dir, build_firmware):
    fixture_set, entry = item
    out = build_firmware(fixtures_dir / fixture_set / entry["file"], board)
    result = run_build(out, references=references_for(fixture_set, entry, fixtures_dir), timeout=60)
    assert result.status == "pass"
    for model in result.models:
        for comparison in model.comparisons:
            if np.dtype(next(o["dtype"] for o in entry["outputs"])).kind in "iu":
                assert comparison.max_abs_error == 0  # int8 models: bit-exact
            else:
                assert comparison.max_abs_error <= 1e-5
        assert model.ticks[0] > 0


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2",
                                   "lm3s6965evb"])
def test_example_runs_on_every_qemu_board(board, build_firmware):
    result = run_build(build_firmware(EXAMPLE, board), references=[str(EXAMPLE_REF)], timeout=30)
    assert result.status == "pass" and result.models[0].comparisons[0].max_abs_error == 0


@pytest.mark.qemu
def test_repeat_gives_identical_tick_counts(build_firmware, fixtures_dir):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar", "mps2-an386")
    result = run_build(out, repeat=10, timeout=60)
    ticks = result.models[0].ticks
    assert len(ticks) == 10 and len(set(ticks)) == 1 and ticks[0] > 1000


def test_mismatch_exits_7(build_firmware, tmp_path):
    wrong = tmp_path / "wrong.npz"
    data = dict(np.load(EXAMPLE_REF))
    data["output_0"] = data["output_0"] + 1
    np.savez(wrong, **data)
    out = build_firmware(EXAMPLE, "host")
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--reference", str(wrong),
                             "--json", "--junit", str(tmp_path / "j.xml")], capture_output=True, text=True)
    assert result.returncode == 7, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "mismatch" and report["models"][0]["outputs"][0]["mismatches"] == 4
    assert "<failure" in (tmp_path / "j.xml").read_text()


def test_nothing_unchecked_is_called_a_match(build_firmware, tmp_path):
    """Without a reference a run says which outputs it did not check, in every form, and never
    "match" or "pass"; a reference of the wrong shape or for another model is refused."""
    out = build_firmware(EXAMPLE, "host")
    junit = tmp_path / "j.xml"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--junit", str(junit)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "not checked (no reference for this model): output" in result.stdout
    assert "result: not checked" in result.stdout and "match" not in result.stdout and "pass" not in result.stdout
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("skipped") == "1" and suite.find("testcase/skipped").get("message") == "outputs not checked"
    report = json.loads(subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--json"],
                                       capture_output=True, text=True).stdout)
    assert report["status"] == "not checked" and report["unchecked"] == ["tiny/output"]
    assert report["models"][0]["status"] == "not checked"
    checked = run_build(out, references=[str(EXAMPLE_REF)], timeout=30)
    assert checked.status == "pass" and checked.unchecked == []
    reference = dict(np.load(EXAMPLE_REF))
    for name, change in (("short", {"output_0": reference["output_0"].reshape(-1)[:3]}),
                         ("extra", {"output_1": reference["output_0"]})):
        bad = tmp_path / f"{name}.npz"
        np.savez(bad, **{**reference, **change})
        refused = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--reference", str(bad)],
                                 capture_output=True, text=True)
        assert refused.returncode == 3 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "output_" in refused.stderr and "Traceback" not in refused.stderr
    # Refused before the firmware started, and no firmware outlives a run that stopped on bad input.
    wrong_input = tmp_path / "wrong_input.npy"
    np.save(wrong_input, np.zeros(3, dtype=np.int8))
    refused = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--input", str(wrong_input)],
                             capture_output=True, text=True)
    assert refused.returncode == 3, refused.stderr
    alive = subprocess.run(["pgrep", "-f", str(out / "firmware.elf")], capture_output=True, text=True).stdout
    assert alive == "", f"firmware processes left running: {alive}"


def _misbehaving(behaviour: str, tmp_path: Path, build_firmware, board: str) -> Path:
    mlf = tar_tree(TinyModel(behaviour=behaviour).files(), tmp_path / f"{behaviour}.tar")
    return build_firmware(mlf, board)


def _cli_run(out: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--timeout", str(timeout)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "host"])
def test_hung_firmware_times_out_with_exit_6(board, tmp_path, build_firmware):
    out = _misbehaving("hang", tmp_path, build_firmware, board)
    started = time.monotonic()
    result = _cli_run(out, 3)
    assert result.returncode == 6
    assert "no reply from the firmware within 3 s" in result.stderr
    assert time.monotonic() - started < 30
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(out) not in left, "the emulator or host program outlived the run"


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "host"])
def test_failing_model_reports_the_runtime_message_with_exit_6(board, tmp_path, build_firmware):
    out = _misbehaving("fail", tmp_path, build_firmware, board)
    result = _cli_run(out, 10)
    assert result.returncode == 6
    assert "returned status -1: Assert fail: tiny input check" in result.stderr


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "host"])
def test_crash_is_reported_with_exit_6(board, tmp_path, build_firmware):
    out = _misbehaving("crash", tmp_path, build_firmware, board)
    result = _cli_run(out, 10)
    assert result.returncode == 6
    assert "crashed" in result.stderr or "stopped" in result.stderr
    if board != "host":
        assert "FAULT" in result.stderr


def _build_for_board_variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """Build the example for a copy of the mps2-an386 board file named `name`, with `old` replaced by `new`."""
    board = (REPO / "boards" / "mps2-an386.toml").read_text()
    assert old in board
    board_file = tmp_path / f"{name}.toml"
    board_file.write_text(board.replace('name = "mps2-an386"', f'name = "{name}"').replace(old, new))
    build = subprocess.run([sys.executable, "-m", "mlfbuild", "build", str(EXAMPLE), "--board", name,
                            "--board-file", str(board_file), "-o", str(tmp_path / "b")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return tmp_path / "b"


@pytest.mark.qemu
def test_board_qemu_extra_args_reach_the_emulator(tmp_path):
    # A board file's [qemu] extra_args go on QEMU's command line; one QEMU refuses is reported in its words.
    out = _build_for_board_variant(tmp_path, "odd-cpu", 'machine = "mps2-an386"\n',
                                   'machine = "mps2-an386"\nextra_args = ["-cpu", "no-such-cpu"]\n')
    result = _cli_run(out, 10)
    assert result.returncode == 6
    assert "exited with status 1: qemu-system-arm: unable to find CPU model 'no-such-cpu'" in result.stderr


@pytest.mark.qemu
def test_dead_console_is_a_timeout(tmp_path):
    # A board file whose console UART is not the one QEMU connects: the firmware says nothing.
    out = _build_for_board_variant(tmp_path, "silent", "base = 0x40004000", "base = 0x40005000")
    started = time.monotonic()
    with pytest.raises(RunError, match="no reply"):
        run_build(out, timeout=2)
    assert time.monotonic() - started < 20


class _Garbling:
    """A port that flips one bit in the firmware's replies: in byte `after` only, or, with
    `every`, in every byte from there on."""

    def __init__(self, port, after: int, every: bool = False):
        self.port, self.after, self.every, self.seen = port, after, every, 0

    def read(self, size=1):
        data = bytearray(self.port.read(size))
        for i in range(len(data)):
            self.seen += 1
            if self.seen == self.after or (self.every and self.seen > self.after):
                data[i] ^= 0x10
        return bytes(data)

    def write(self, data):
        return self.port.write(data)

    def close(self):
        self.port.close()


class _GarblingQemu(QemuTransport):
    BANNER = len(b"m-timestamp-mode-performance\r\nm-init-done\r\nm-ready\r\n")

    def __init__(self, *args, every: bool = False):
        super().__init__(*args)
        self.every = every

    def start(self):
        super().start()
        self.port = _Garbling(self.port, after=self.BANNER + 8, every=self.every)


@pytest.mark.qemu
def test_a_damaged_reply_is_dropped_and_the_request_sent_again(build_firmware):
    out = build_firmware(EXAMPLE, "mps2-an386")
    result = run_build(out, transport=_GarblingQemu(out / "firmware.elf", "mps2-an386"), timeout=20,
                       references=[str(EXAMPLE_REF)])
    assert result.status == "pass" and result.damaged == 1 and result.resends == 1


@pytest.mark.qemu
def test_a_console_that_keeps_corrupting_ends_the_run_with_a_clear_error(build_firmware):
    out = build_firmware(EXAMPLE, "mps2-an386")
    started = time.monotonic()
    with pytest.raises(RunError, match=r"no reply from the firmware within 5 s .*failed their checksum"):
        run_build(out, transport=_GarblingQemu(out / "firmware.elf", "mps2-an386", every=True), timeout=5)
    assert time.monotonic() - started < 20


class _Dropping(_Garbling):
    """A port that loses the first byte of some frames the host sends (as QEMU's UART models do
    when the host is loaded) and the first byte of some replies."""

    def __init__(self, port, drop_every: int):
        super().__init__(port, after=0)
        self.drop_every, self.frames_out, self.frames_in = drop_every, 0, 0

    def write(self, data):
        self.frames_out += 1
        if self.frames_out % self.drop_every == 0:
            data = data[1:]
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        if data[:1] == b"\xa5":
            self.frames_in += 1
            if self.frames_in % self.drop_every == 1 and self.frames_in > 1:
                return data[1:]
        return data


class _DroppingQemu(QemuTransport):
    def start(self):
        super().start()
        self.port = _Dropping(self.port, drop_every=3)


@pytest.mark.qemu
def test_a_console_that_drops_bytes_still_gives_the_exact_outputs(build_firmware, fixtures_dir, monkeypatch):
    # A lost request is sent again after the client's attempt window: a shorter one here (the same
    # resends, sooner) keeps the test from spending most of its time waiting out the default 2 s.
    monkeypatch.setattr("mlfbuild.run.Client", functools.partial(Client, attempt_seconds=0.5))
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar", "mps2-an386")
    result = run_build(out, transport=_DroppingQemu(out / "firmware.elf", "mps2-an386"), timeout=60,
                       references=[str(fixtures_dir / "tvm-0.13" / "kws.npz")], repeat=2)
    assert result.status == "pass" and result.resends > 0
    assert len(set(result.models[0].ticks)) == 1


@pytest.mark.qemu
def test_firmware_resynchronises_after_garbage(build_firmware):
    from mlfbuild.console.frames import encode_frame

    out = build_firmware(EXAMPLE, "mps2-an386")
    transport = QemuTransport(out / "firmware.elf", "mps2-an386")
    transport.start()
    try:
        client = Client(transport.port, timeout=10)
        transport.port.write(b"\x00\xff garbage \xa5\x13")  # noise and a false frame start
        time.sleep(0.2)
        bad = bytearray(encode_frame("P", b"hello"))
        bad[-1] ^= 0xFF  # wrong checksum: refused with an error frame, not executed
        transport.port.write(bytes(bad))
        kind, payload = client.receive("the checksum error")
        while kind != "z":
            kind, payload = client.receive("the checksum error")
        assert payload[0] == 1
        assert client.ping(b"still alive") == b"still alive"
        assert client.hello().models == 1
        client.quit(0)
    finally:
        ending = transport.close(5)
    assert ending.exit_code == 0


def _read_until_ready(port, deadline: float) -> list[str]:
    lines, buffer = [], b""
    while time.monotonic() < deadline:
        buffer += port.read(256)
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            lines.append(line.decode().rstrip("\r"))
            if "m-ready" in lines[-1]:
                return lines
    raise AssertionError(f"no m-ready; got {lines} {buffer!r}")


@pytest.mark.qemu
def test_mlperf_tiny_runner_protocol(build_firmware, fixtures_dir):
    """The commands the official runner sends, byte for byte, and the replies it parses."""
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar", "mps2-an386")
    reference = np.load(fixtures_dir / "tvm-0.13" / "kws.npz")
    data = reference["input_1"].astype(np.int8).tobytes()
    transport = QemuTransport(out / "firmware.elf", "mps2-an386")
    transport.start()
    port = transport.port
    try:
        deadline = time.monotonic() + 30
        assert _read_until_ready(port, deadline) == ["m-timestamp-mode-performance", "m-init-done", "m-ready"]
        port.write(b"name%")
        lines = _read_until_ready(port, deadline)
        assert re.match(r"^m-(name)-dut-\[([^]]+)]$", lines[0]) and lines[-1] == "m-ready"
        port.write(b"profile%")
        assert _read_until_ready(port, deadline)[:2] == ["m-profile-[mlfbuild firmware 1]", "m-model-[kws01]"]
        port.write(f"db load {len(data)}%".encode())
        assert _read_until_ready(port, deadline)[0] == f"m-[Expecting {len(data)} bytes]"
        replies = []
        for start in range(0, len(data), 31):  # the runner's 31-byte chunks, lower-case hex
            port.write(b"db " + data[start:start + 31].hex().encode() + b"%")
            replies += _read_until_ready(port, deadline)
        assert "m-load-done" in replies and replies.count("m-ready") == -(-len(data) // 31)
        port.write(b"infer 3 1%")
        lines = _read_until_ready(port, deadline)
        assert lines[:3] == ["m-warmup-start-1", "m-warmup-done", "m-infer-start-3"]
        laps = [int(line[len("m-lap-us-"):]) for line in lines if line.startswith("m-lap-us-")]
        assert len(laps) == 2 and laps[1] > laps[0]
        results = next(line for line in lines if line.startswith("m-results-["))
        values = [float(v) for v in results[len("m-results-["):-1].split(",")]
        expected = (reference["output_0"].astype(np.int32).reshape(-1) + 128) / 255
        assert np.allclose(values, expected, atol=0.0015) and sum(values) > 0
        assert lines[-2:] == ["m-infer-done", "m-ready"] or lines[-1] == "m-ready"
        port.write(b"bogus%")
        assert _read_until_ready(port, deadline) == ["e-[Unknown command: bogus]", "m-ready"]
        port.write(b"db load 0%")
        assert _read_until_ready(port, deadline)[0] == "e-[Command 'db load' must be >0 bytes]"
    finally:
        transport.close(1)


@pytest.mark.qemu
def test_measured_peaks_reach_the_size_report(build_firmware, fixtures_dir):
    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_nousmp.tar", "mps2-an386")
    run = run_build(out, references=[f"default={fixtures_dir / 'tvm-0.13' / 'kws.npz'}"], timeout=60)
    workspace = run.models[0].workspace_peak
    record = json.loads((out / "build.json").read_text())
    assert 0 < workspace <= record["workspace_bytes"]
    assert 0 < run.models[0].stack_peak < record["board"]["memory"]["stack_bytes"]
    size = subprocess.run([sys.executable, "-m", "mlfbuild", "size", str(out), "--json"], capture_output=True, text=True)
    measured = {row["label"]: row["measured"] for row in json.loads(size.stdout)["measured"]}
    assert workspace in measured.values() and run.models[0].stack_peak in measured.values()


@pytest.mark.qemu
def test_run_over_a_serial_port_url(build_firmware, tmp_path):
    """`mlfbuild run --port` (the path for flashed boards) with a pyserial URL: here QEMU's TCP console
    stands in for the board's USB serial port, the firmware already running."""
    import socket

    out = build_firmware(EXAMPLE, "mps2-an386")
    with socket.socket() as listener:  # handed to QEMU, as QemuTransport does: no free-port race
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        qemu = subprocess.Popen(QemuTransport(out / "firmware.elf", "mps2-an386").command(listener.fileno()),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                pass_fds=(listener.fileno(),))
    try:
        time.sleep(0.5)
        result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(out), "--port", f"socket://127.0.0.1:{port}",
                                 "--reference", str(EXAMPLE_REF), "--timeout", "20"], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        assert "output: match" in result.stdout
        assert qemu.poll() is None  # a flashed board keeps running for the next run
    finally:
        if qemu.poll() is None:
            qemu.kill()


def test_a_firmware_from_other_templates_gets_a_rebuild_hint_when_it_does_not_answer(build_firmware, tmp_path):
    import shutil

    out = tmp_path / "old"
    shutil.copytree(build_firmware(EXAMPLE, "host"), out)
    record = json.loads((out / "build.json").read_text())
    record["templates"] = "0000000000000000"
    (out / "build.json").write_text(json.dumps(record))
    (out / "firmware.elf").write_bytes(b"#!/bin/sh\nsleep 30\n")  # stands in for a firmware that never answers
    (out / "firmware.elf").chmod(0o755)
    with pytest.raises(RunError, match="rebuild it with mlfbuild build"):
        run_build(out, timeout=2)


@pytest.mark.parametrize("arrays, message", [
    ({"not_an_input": np.zeros((1, 16), np.int8)}, "no key names an input of the firmware (not_an_input); it takes input"),
    ({"input": np.full((1, 16), np.nan, np.float32)}, "input 'input' holds NaN or infinite values"),
    ({"input": np.full((1, 16), 1000, np.int64)}, "input 'input' holds values from 1000 to 1000, outside int8's -128..127"),
])
def test_inputs_that_would_be_ignored_or_changed_are_refused(build_firmware, tmp_path, arrays, message):
    """Keys that match no input ran random inputs and said "not checked", exit 0; NaN was quantized with
    numpy's warnings and an int64 1000 cast to int8 without a word. Each is bad input: exit 3, one line."""
    from conftest import REPO, cli

    out = build_firmware(REPO / "examples" / "tiny_aot.tar", "host")
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    done = cli("run", str(out), "--input", str(path))
    assert done.returncode == 3 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "RuntimeWarning" not in done.stderr
