"""Run faults: a firmware that talks without end, answers with short frames, floods its output,
exits early or is interrupted must end the run on time, with one line, and leave no process
behind — whatever ends the run (success, failure, timeout or a signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import as_from_a_terminal
from mlfbuild.errors import RunError
from mlfbuild.run import _explain_end
from mlfbuild.run.transports import Ending, QemuTransport
from mlfwriter import TinyModel, tar_tree


def test_the_end_of_a_run_says_what_happened():
    qemu = QemuTransport(Path("firmware.elf"), "mps2-an386")
    waited = RunError("no reply from the firmware within 5 s while waiting for the hello")
    aborted = _explain_end(waited, qemu, Ending(-6, "FPSCR: 00000000\nsomething else"), b"")
    assert "killed by SIGABRT" in str(aborted) and "emulator itself" in str(aborted)
    early = _explain_end(waited, qemu, Ending(7, ""), b"")
    assert "exited with status 7" in str(early) and "before the run was over" in str(early)
    fatal = "qemu: fatal: Lockup: can't escalate 3 to HardFault (current priority -1)"
    locked = _explain_end(waited, qemu, Ending(-6, f"{fatal}\nR00=00000000 R01=00000000\nFPSCR: 00000000"), b"")
    assert "firmware locked up" in str(locked) and fatal in str(locked) and "emulator itself" not in str(locked)


@pytest.mark.qemu
def test_a_firmware_lockup_is_the_firmwares_fault(tmp_path, build_firmware):
    out = _firmware("lockup", "mps2-an386", tmp_path, build_firmware)
    result = subprocess.run(_cli(out, "--timeout", "10"), capture_output=True, text=True, timeout=90)
    assert result.returncode == 6, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "firmware locked up" in result.stderr and "Lockup: can't escalate" in result.stderr, result.stderr
    assert "emulator itself" not in result.stderr


# -- real firmware ---------------------------------------------------------------------------

def _firmware(behaviour: str, board: str, tmp_path: Path, build_firmware) -> Path:
    return build_firmware(tar_tree(TinyModel(behaviour=behaviour).files(), tmp_path / f"{behaviour}.tar"), board)


def _started_by(out: Path) -> list[str]:
    """Processes whose command line names this build: the emulator or the host firmware (and any
    child a host firmware forked, which shares its command line)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(out) in cmdline and "mlfbuild" not in cmdline.split(" ")[0]:
                if " -m mlfbuild " not in cmdline:
                    found.append(f"{pid}: {cmdline[:160]}")
    return found


def _none_left(out: Path, within: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := _started_by(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _cli(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "mlfbuild", "run", str(out), *args]


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "host"])
def test_a_chatty_firmware_times_out_on_time(board, tmp_path, build_firmware):
    out = _firmware("chatty", board, tmp_path, build_firmware)
    started = time.monotonic()
    result = subprocess.run(_cli(out, "--timeout", "3"), capture_output=True, text=True, timeout=90)
    assert result.returncode == 6, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 45
    assert _none_left(out) == []


def test_a_firmware_that_prints_a_mebibyte_then_answers_passes(tmp_path, build_firmware):
    model = TinyModel(behaviour="flood")
    out = _firmware("flood", "host", tmp_path, build_firmware)
    import numpy as np

    reference = tmp_path / "ref.npz"
    np.savez(reference, input=model.input, output_0=model.reference(model.input))
    result = subprocess.run(_cli(out, "--timeout", "20", "--reference", str(reference)),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "result: pass" in result.stdout


@pytest.mark.qemu
def test_an_early_exit_under_qemu_says_so(tmp_path, build_firmware):
    out = _firmware("exit7", "mps2-an386", tmp_path, build_firmware)
    result = subprocess.run(_cli(out, "--timeout", "10"), capture_output=True, text=True, timeout=90)
    assert result.returncode == 6
    assert "exited with status 7" in result.stderr and "waiting for connection" not in result.stderr


@pytest.mark.qemu
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("board, behaviour", [("mps2-an386", "hang"), ("host", "fork_hang")])
def test_a_signal_to_the_run_ends_everything_it_started(board, behaviour, signum, tmp_path, build_firmware):
    out = _firmware(behaviour, board, tmp_path, build_firmware)
    run = subprocess.Popen(_cli(out, "--timeout", "120"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 30
        expected = 2 if behaviour == "fork_hang" else 1
        while len(_started_by(out)) < expected and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_started_by(out)) >= expected, "the firmware never started"
        time.sleep(0.5)
        run.send_signal(signum)
        _, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode in (130, 128 + signum), err
    assert "Traceback" not in err
    assert _none_left(out) == [], "a process the run started outlived it"


@pytest.mark.qemu
@pytest.mark.parametrize("behaviour, code", [("ok", 0), ("fail", 6), ("hang", 6), ("crash", 6)])
def test_no_process_outlives_a_run_however_it_ends(behaviour, code, tmp_path, build_firmware):
    for board in ("mps2-an386", "host"):
        (tmp_path / board).mkdir()
        out = _firmware(behaviour, board, tmp_path / board, build_firmware)
        result = subprocess.run(_cli(out, "--timeout", "3"), capture_output=True, text=True, timeout=90)
        assert result.returncode == code, result.stderr
        assert _none_left(out) == []
