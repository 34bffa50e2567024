"""`mlfbuild flash` against a fake STM32 bootloader on a pseudo-terminal (tests/fake_stm32_bootloader.py).

The fake is first proven against a client we did not write (Debian's stm32flash), then our flasher
writes real and random images through it, clean and under every injected fault: it must either
recover and verify, or fail with FlashError (exit 8) naming the step — never report success while
the fake's flash differs from the image.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_stm32_bootloader import FakeBootloader, Fault
from mlfbuild import cli
from mlfbuild.boards import load_board
from mlfbuild.errors import FlashError
from mlfbuild.flash import FlashOptions, Progress, load_job
from mlfbuild.flash import flash as flash_with
from mlfbuild.flash.reset import enter_bootloader, leave_bootloader
from mlfbuild.flash.an3155 import Timeouts
from conftest import REPO

FAKE = Path(__file__).resolve().parent / "fake_stm32_bootloader.py"
EXAMPLE = REPO / "examples" / "tiny_aot.tar"
BASE = 0x08000000
STM32FLASH = shutil.which("stm32flash") or ("/usr/bin/stm32flash" if Path("/usr/bin/stm32flash").exists() else None)

# Short timeouts keep the fault cases fast; the fake answers within microseconds.
FAST = Timeouts(answer=0.3, write_block=0.3, erase_min=0.3, sync=0.2, resync=2.0, quiet=0.03)


pytestmark = pytest.mark.deadline(45)  # no test here may hang


def _main(*args: str) -> int:
    """mlfbuild's real main(), where the flash and monitor commands are registered."""
    return cli.main(list(args))


def make_build(folder: Path, image: bytes, board: str = "nucleo-f446re", edit=None) -> Path:
    """A build folder as `mlfbuild build` leaves it, as far as flashing cares."""
    folder.mkdir(parents=True, exist_ok=True)
    board_json = load_board(board).to_json()
    if edit:
        edit(board_json)
    (folder / "firmware.bin").write_bytes(image)
    record = {"board": board_json, "outputs": {"firmware.bin": hashlib.sha256(image).hexdigest()}}
    (folder / "build.json").write_text(json.dumps(record))
    return folder


def f103_board(board: dict) -> None:
    """nucleo-f446re turned into a 128 KiB STM32F103 (1 KiB pages, legacy ERASE 0x43)."""
    board["memory"]["flash"]["length"] = 0x20000
    board["flashing"]["sectors"] = [{"count": 128, "size": 0x400}]
    board["flashing"]["chip_id"] = 0x410


def flash(job, options, progress=None):
    """The ROM bootloader's flasher, named: the boards here default to their on-board probe."""
    return flash_with(job, options, progress, method="stm32-uart")


def image_of(size: int, seed: int = 1) -> bytes:
    return hashlib.shake_256(f"image-{seed}".encode()).digest(size)


def options(port: str, **kw) -> FlashOptions:
    kw.setdefault("parity", "none")
    kw.setdefault("reset", "none")
    kw.setdefault("timeouts", FAST)
    return FlashOptions(port=port, **kw)


# -------------------------------------------------------------------------------------------------
# (a) the fake is faithful: stm32flash, a real third-party client, writes and verifies through it


def _need_stm32flash() -> str:
    if STM32FLASH:
        return STM32FLASH
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("stm32flash is not installed (apt-get install stm32flash); CI must run this test")
    pytest.skip("stm32flash is not installed")


def _start_fake_process(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
    link, dump = tmp_path / "stm32-pty", tmp_path / "dump.bin"
    proc = subprocess.Popen([sys.executable, str(FAKE), "--pty-link", str(link), "--dump", str(dump), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("PTY /dev/"), (line, proc.stderr.read() if proc.poll() is not None else "")
    assert link.is_symlink()
    return proc, link, dump


def _stop_fake_process(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


@pytest.mark.parametrize("chip, size", [("f446", 40_001), ("f103", 9_998)])
def test_stm32flash_writes_and_verifies_through_the_fake(tmp_path, chip, size):
    tool = _need_stm32flash()
    image = image_of(size, seed=size)
    (tmp_path / "img.bin").write_bytes(image)
    proc, link, dump = _start_fake_process(tmp_path, "--chip", chip, "-v")
    try:
        result = subprocess.run([tool, "-m", "8n1", "-b", "115200", "-w", str(tmp_path / "img.bin"), "-v",
                                 "-S", "0x08000000", str(link)], capture_output=True, text=True, timeout=60)
    finally:
        log = _stop_fake_process(proc)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr + log[-3000:]
    assert "Device ID    : 0x0" in result.stdout
    assert "Done." in result.stdout and "(100.00%)" in result.stdout
    flash = dump.read_bytes()
    assert flash[:size] == image
    assert set(flash[size:]) <= {0xFF}
    erase = "EXTENDED ERASE" if chip == "f446" else "ERASE"
    assert f"fake-stm32: {erase} [" in log          # it erased by pages/sectors, as we do


def test_stm32flash_sees_an_injected_nack(tmp_path):
    """stm32flash is strict where we retry: a NACKed write fails it (so the fault really goes out)."""
    tool = _need_stm32flash()
    (tmp_path / "img.bin").write_bytes(image_of(3000))
    proc, link, _ = _start_fake_process(tmp_path, "--fault", "nack:write:2:data")
    try:
        result = subprocess.run([tool, "-m", "8n1", "-n", "0", "-w", str(tmp_path / "img.bin"), "-S", "0x08000000",
                                 str(link)], capture_output=True, text=True, timeout=60)
    finally:
        _stop_fake_process(proc)
    assert result.returncode != 0
    assert "Failed to write memory at address 0x08000100" in result.stderr


# -------------------------------------------------------------------------------------------------
# (b) our flasher writes a real firmware, byte for byte


@pytest.mark.cross
def test_flash_writes_a_built_firmware_byte_for_byte(build_firmware, capsys):
    out = build_firmware(EXAMPLE, "nucleo-f446re")
    firmware = (out / "firmware.bin").read_bytes()
    with FakeBootloader("f446") as fake:
        rc = _main("flash", "--method", "stm32-uart", str(out), "--port", fake.path, "--parity", "none", "--reset", "none")
        time.sleep(0.05)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert fake.flash_bytes(BASE, len(firmware)) == firmware
    assert set(fake.flash[len(firmware):]) == {0xFF}
    assert "verified" in captured.out and f"flashed {len(firmware)} bytes" in captured.out
    assert fake.go_address == BASE
    assert "EXTENDED ERASE [0]" in fake.log        # only the sector the image covers
    assert not fake.error


_APP_MARK = "flashed-app-1f0c"  # a string only the application's image holds


@pytest.mark.cross
def test_flash_writes_an_app_build_unchanged(build_firmware, tmp_path, capsys):
    """A `build --app` folder flashes as any build: its build.json (with "app") and its image."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.c").write_text(f"""#include <stdio.h>
#include "mlf_tiny.h"
static int8_t input[MLF_TINY_INPUT_0_BYTES], output[MLF_TINY_OUTPUT_0_BYTES];
int main(void) {{
  struct tvmgen_tiny_inputs inputs = {{.MLF_TINY_INPUT_0_C_NAME = input}};
  struct tvmgen_tiny_outputs outputs = {{.MLF_TINY_OUTPUT_0_C_NAME = output}};
  puts("{_APP_MARK}");
  return (int)tvmgen_tiny_run(&inputs, &outputs);
}}
""")
    out = build_firmware(EXAMPLE, "nucleo-f446re", app=app)
    assert set(json.loads((out / "build.json").read_text())["app"]["files"]) == {"app/main.c"}
    firmware = (out / "firmware.bin").read_bytes()
    assert _APP_MARK.encode() in firmware
    with FakeBootloader("f446") as fake:
        rc = _main("flash", "--method", "stm32-uart", str(out), "--port", fake.path, "--parity", "none", "--reset", "none")
        time.sleep(0.05)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert fake.flash_bytes(BASE, len(firmware)) == firmware and set(fake.flash[len(firmware):]) == {0xFF}
    assert "verified" in captured.out and fake.go_address == BASE and not fake.error


def test_flash_keeps_other_sectors_and_writes_at_an_offset(tmp_path, capsys):
    image = image_of(20_001)            # odd length: the last block is padded with 0xFF
    folder = make_build(tmp_path / "b", image)
    with FakeBootloader("f446") as fake:
        fake.load(0x08060000, b"\x5a" * 64)                          # data in sector 7
        fake.load(0x08004000, b"\x11" * 16)                          # stale data in sector 1
        rc = _main("flash", "--method", "stm32-uart", str(folder), "--port", fake.path, "--parity", "none", "--reset", "none",
                   "--address", "0x08004000", "--no-start")
    assert rc == 0, capsys.readouterr().err
    assert fake.flash_bytes(0x08004000, len(image)) == image
    assert fake.flash_bytes(0x08004000 + len(image), 7) == b"\xff" * 7
    assert fake.flash_bytes(0x08060000, 64) == b"\x5a" * 64
    assert fake.flash_bytes(BASE, 0x4000) == b"\xff" * 0x4000
    assert "EXTENDED ERASE [1, 2]" in fake.log
    assert fake.go_address is None


def test_flash_without_verify_does_not_read_back(tmp_path, capsys):
    image = image_of(5000)
    with FakeBootloader("f446") as fake:
        rc = _main("flash", "--method", "stm32-uart", str(make_build(tmp_path / "b", image)), "--port", fake.path, "--parity", "none",
                   "--reset", "none", "--no-verify")
    assert rc == 0
    assert "NOT verified" in capsys.readouterr().out
    assert fake.flash_bytes(BASE, len(image)) == image
    assert not any(line.startswith("READ") for line in fake.log)


@pytest.mark.parametrize("erase", ["sectors", "all"])
def test_legacy_erase_chip(tmp_path, erase):
    image = image_of(3_333)
    folder = make_build(tmp_path / "b", image, edit=f103_board)
    with FakeBootloader("f103") as fake:
        fake.load(0x0801F000, b"\x42" * 8)
        result = flash(load_job(folder), options(fake.path, erase=erase))
    assert result.verified and result.chip_id == 0x410
    assert fake.flash_bytes(BASE, len(image)) == image
    if erase == "sectors":
        assert "ERASE [0, 1, 2, 3]" in fake.log
        assert fake.flash_bytes(0x0801F000, 8) == b"\x42" * 8
    else:
        assert "ERASE (legacy) all" in fake.log
        assert fake.flash_bytes(0x0801F000, 8) == b"\xff" * 8


def test_mass_erase_with_extended_erase(tmp_path):
    image = image_of(1000)
    with FakeBootloader("f446") as fake:
        fake.load(0x08060000, b"\x5a" * 4)
        flash(load_job(make_build(tmp_path / "b", image)), options(fake.path, erase="all"))
    assert "EXTENDED ERASE mass" in fake.log
    assert fake.flash_bytes(0x08060000, 4) == b"\xff" * 4
    assert fake.flash_bytes(BASE, len(image)) == image


# -------------------------------------------------------------------------------------------------
# (c) faults: recover and verify, or exit 8 naming the step; never success on a wrong image

RECOVERS = [
    "nack:any:1",                   # NACK to the first command (GET)
    "nack:write:3",                 # NACK to WRITE MEMORY's command byte
    "nack:write:3:address",
    "nack:write:3:data",            # data refused: checked, rewritten
    "nack:read:2:length",
    "nack:erase:1",
    "nack:erase:1:data",
    "drop-rx:write:4:2",            # an address byte lost: the fake waits, we time out and resync
    "drop-rx:write:4:40",           # a data byte lost
    "drop-rx:read:3:6",
    "corrupt-rx:write:4:3",         # bad address checksum
    "corrupt-rx:write:4:40",        # bad data checksum
    "corrupt-rx:erase:1:4",
    "drop-tx:get:1:3",              # a GET reply byte lost
    "drop-tx:write:4:0",            # ACK to the command lost: the fake waits for an address
    "drop-tx:write:4:2",            # ACK after the data lost: it *was* written: read back, go on
    "corrupt-tx:write:4:2",
    "drop-tx:erase:1:0",            # ACK to ERASE lost: the fake waits for an erase body
    "corrupt-tx:erase:1:0",
    "drop-tx:read:3:1",             # READ's address ACK lost: it answers a 256-byte read to our resync
    "drop-tx:read:3:10",            # a read-back data byte lost
    "corrupt-tx:read:3:10",         # a read-back byte corrupted: the block is read again
    "stall:write:5:0.8",            # a write that takes longer than the timeout
    "stall:erase:1:0.8",
    "flash-corrupt:write:2:7",      # a block programmed wrong but ACKed: verify re-erases and rewrites
    "drop-tx:go:1:1",               # GO unconfirmed: a warning, the image is verified
]

FAILS = [
    (["nack:write:3+:data"], {}, "write at 0x08000200"),
    (["nack:read:1+"], {}, "verify at 0x08000000"),
    (["nack:erase:1+:data"], {}, "erase sector 0 at 0x08000000"),
    (["disconnect:write:5:100"], {}, "write at 0x08000400"),
    (["disconnect:read:2:4"], {}, "verify at 0x08000100"),
    ([], {"bad_cells": (0x08000123,)}, "verify at 0x08000123"),
    (["stall:write:3:6"], {}, "write at 0x08000200"),      # longer than timeout + resync budget
    (["flash-corrupt:write:2+:7"], {}, "verify at 0x08000"),     # every rewrite corrupted too: gives up
]


def _check_outcome(fake: FakeBootloader, image: bytes, run) -> tuple[object, str]:
    """Run; success must mean the fake holds the image; failure must be a FlashError."""
    stream = io.StringIO()
    try:
        result = run(Progress(stream=stream, tty=False))
    except FlashError as exc:
        return exc, stream.getvalue()
    assert fake.flash_bytes(BASE, len(image)) == image, "reported success on a wrong image"
    assert result.verified
    return result, stream.getvalue()


@pytest.mark.parametrize("fault", RECOVERS)
def test_flasher_recovers_from(fault, tmp_path):
    image = image_of(3000, seed=7)
    job = load_job(make_build(tmp_path / "b", image))
    with FakeBootloader("f446", faults=[Fault.parse(fault)]) as fake:
        outcome, log = _check_outcome(fake, image, lambda p: flash(job, options(fake.path), p))
    assert not isinstance(outcome, FlashError), f"{fault}: {outcome}\n{log}\n" + "\n".join(fake.log)
    assert any(f.fired for f in fake.faults), f"{fault} never fired"
    assert "FAULT" in " ".join(fake.log)
    assert not fake.error


@pytest.mark.parametrize("faults, extra, step", FAILS, ids=[f[2] + ":" + ",".join(f[0] or ["bad-cell"]) for f in FAILS])
def test_flasher_fails_cleanly_on(faults, extra, step, tmp_path):
    image = image_of(3000, seed=3)
    job = load_job(make_build(tmp_path / "b", image))
    with FakeBootloader("f446", faults=[Fault.parse(f) for f in faults], **extra) as fake:
        outcome, log = _check_outcome(fake, image, lambda p: flash(job, options(fake.path, attempts=3), p))
    assert isinstance(outcome, FlashError), f"{faults} did not fail:\n{log}"
    assert outcome.exit_code == 8
    assert str(outcome).startswith(step), str(outcome)


def test_fault_exit_code_through_the_cli(tmp_path, capsys):
    folder = make_build(tmp_path / "b", image_of(3000))
    with FakeBootloader("f446", faults=[Fault.parse("disconnect:write:2:50")]) as fake:
        rc = _main("flash", "--method", "stm32-uart", str(folder), "--port", fake.path, "--parity", "none", "--reset", "none")
    captured = capsys.readouterr()
    assert rc == 8
    assert "error: write at 0x08000100" in captured.err
    assert "flashed" not in captured.out


def test_read_protected_chip_fails_with_a_hint(tmp_path):
    job = load_job(make_build(tmp_path / "b", image_of(1000)))
    with FakeBootloader("f446", read_protected=True) as fake:
        with pytest.raises(FlashError, match=r"^erase sector 0 at 0x08000000 .*read-out protection"):
            flash(job, options(fake.path, attempts=2))


def test_wrong_chip_is_refused_unless_told(tmp_path):
    image = image_of(1000)
    job = load_job(make_build(tmp_path / "b", image))
    with FakeBootloader("f407") as fake:
        with pytest.raises(FlashError, match=r"connect: the chip answers 0x413 \(STM32F405/407/415/417\) but "
                                             r"nucleo-f446re is 0x421"):
            flash(job, options(fake.path))
        assert not any(line.startswith(("WRITE", "EXTENDED ERASE")) for line in fake.log)
        stream = io.StringIO()
        flash(job, options(fake.path, ignore_chip_id=True), Progress(stream=stream, tty=False))
        assert "warning: the chip answers 0x413" in stream.getvalue()
        assert fake.flash_bytes(BASE, len(image)) == image


def test_silent_port_fails_at_connect(tmp_path):
    """Nobody answers (bootloader not running): exit 8 naming connect, within the resync budget."""
    job = load_job(make_build(tmp_path / "b", image_of(100)))
    master, slave = os.openpty()
    try:
        started = time.monotonic()
        with pytest.raises(FlashError, match=r"^connect: no answer from the STM32 bootloader on /dev/"):
            flash(job, options(os.ttyname(slave), timeouts=Timeouts(sync=0.1, answer=0.2, resync=1.0)))
        assert time.monotonic() - started < 10
    finally:
        os.close(master)
        os.close(slave)


def test_bootloader_left_mid_command_is_resynced(tmp_path):
    """A previous session died after WRITE MEMORY's address: the fake waits for a data block."""
    image = image_of(2000)
    job = load_job(make_build(tmp_path / "b", image))
    import serial
    with FakeBootloader("f446") as fake:
        with serial.Serial(fake.path, timeout=0.5) as ser:
            ser.write(b"\x7f")
            assert ser.read(1) == b"\x79"
            ser.write(b"\x31\xce\x08\x00\x00\x00\x08")
            assert ser.read(2) == b"\x79\x79"
            ser.write(b"\xff\x01\x02")                     # 256 data bytes announced, 2 sent
        result = flash(job, options(fake.path))
    assert result.verified
    assert fake.flash_bytes(BASE, len(image)) == image


# -------------------------------------------------------------------------------------------------
# (d) refusals before any byte is sent


def test_oversized_image_is_refused_before_the_port_is_opened(tmp_path, monkeypatch, capsys):
    board = load_board("nucleo-f446re")
    folder = make_build(tmp_path / "b", image_of(board.memory.flash.length + 1))
    import mlfbuild.serialport as serialport

    def no_port(*a, **k):
        raise AssertionError("the port was opened")
    monkeypatch.setattr(serialport, "open_port", no_port)
    monkeypatch.setattr(serialport.serial.tools.list_ports, "comports", no_port)
    with FakeBootloader("f446") as fake:
        rc = _main("flash", "--method", "stm32-uart", str(folder), "--port", fake.path, "--parity", "none", "--reset", "none")
        time.sleep(0.1)
        assert fake.rx_bytes == 0
    err = capsys.readouterr().err
    assert rc == 8
    assert "524289 bytes but nucleo-f446re has only 524288 bytes of flash" in err


def test_image_too_big_for_the_flash_left_after_address(tmp_path):
    job = load_job(make_build(tmp_path / "b", image_of(0x10000)), address=0x08078000)
    with pytest.raises(FlashError, match="only 32768 bytes of flash from 0x08078000"):
        flash(job, options("/dev/does-not-exist"))


@pytest.mark.parametrize("address, message", [("0x08000002", "not 4-byte aligned"),
                                              ("0x20000000", "outside nucleo-f446re's flash")])
def test_bad_address_is_a_usage_error(tmp_path, capsys, address, message):
    rc = _main("flash", "--method", "stm32-uart", str(make_build(tmp_path / "b", b"1234")), "--port", "/dev/nonexistent", "--address", address)
    assert rc == 2
    assert message in capsys.readouterr().err


def test_targets_that_cannot_be_flashed(tmp_path, capsys):
    assert _main("flash", "--method", "stm32-uart", str(tmp_path / "nothing"), "--port", "x") == 3
    assert "no such build folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert _main("flash", "--method", "stm32-uart", str(tmp_path / "empty"), "--port", "x") == 3
    assert "not an mlfbuild build folder" in capsys.readouterr().err
    assert _main("flash", "--method", "stm32-uart", str(make_build(tmp_path / "q", b"1234", board="mps2-an386")), "--port", "x") == 3
    assert "only hardware boards can be flashed" in capsys.readouterr().err


def test_missing_port_is_a_flash_error_naming_the_on_board_probe(tmp_path, capsys):
    build = make_build(tmp_path / "b", b"1234")
    rc = _main("flash", "--method", "stm32-uart", str(build), "--port", str(tmp_path / "ttyNONE"))
    assert rc == 8
    err = capsys.readouterr().err
    assert "no such port" in err
    assert f"on-board debug probe, with no adapter or BOOT0 wiring: `mlfbuild flash {build} --method openocd`" in err
    # A board without probe data has no alternative to name.
    bare = make_build(tmp_path / "c", b"1234", edit=lambda b: [b["flashing"].pop("pyocd_target"),
                                                              b["flashing"].pop("openocd_config")])
    assert _main("flash", "--method", "stm32-uart", str(bare), "--port", str(tmp_path / "ttyNONE")) == 8
    assert "debug probe" not in capsys.readouterr().err


def test_even_parity_that_does_not_stick_is_reported(tmp_path):
    """A PTY drops PARENB silently (stm32flash refuses -m 8e1 on one); we flash and warn."""
    image = image_of(700)
    stream = io.StringIO()
    with FakeBootloader("f446") as fake:
        flash(load_job(make_build(tmp_path / "b", image)), options(fake.path, parity="even"),
              Progress(stream=stream, tty=False))
    assert "did not keep even parity" in stream.getvalue()
    assert fake.flash_bytes(BASE, len(image)) == image


def test_a_pty_cannot_drive_dtr_rts(tmp_path, capsys):
    with FakeBootloader("f446") as fake:
        rc = _main("flash", "--method", "stm32-uart", str(make_build(tmp_path / "b", b"1234")), "--port", fake.path, "--parity", "none",
                   "--reset", "dtr-rts")
        assert fake.rx_bytes == 0
    assert rc == 8
    assert "cannot drive DTR/RTS" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------------
# reset sequences and progress


class LineRecorder:
    def __init__(self):
        self.events: list[tuple[str, bool] | tuple[str, float]] = []
        self.port = "rec"

    def __setattr__(self, name, value):
        if name in ("dtr", "rts"):
            self.events.append((name, value))
        object.__setattr__(self, name, value)

    def reset_input_buffer(self):
        self.events.append(("flush", True))


def test_dtr_rts_sequences():
    ser = LineRecorder()
    sleep = lambda s: ser.events.append(("sleep", s))  # noqa: E731
    enter_bootloader(ser, "dtr-rts", sleep=sleep)
    assert ser.events == [("dtr", True), ("rts", True), ("sleep", 0.1), ("rts", False), ("sleep", 0.1),
                          ("dtr", False), ("flush", True)]
    ser.events.clear()
    assert leave_bootloader(ser, "dtr-rts", sleep=sleep)
    assert ser.events == [("dtr", False), ("rts", True), ("sleep", 0.1), ("rts", False)]
    ser.events.clear()
    enter_bootloader(ser, "none", sleep=sleep)
    asked = []
    enter_bootloader(ser, "manual", sleep=sleep, ask=asked.append)
    assert not leave_bootloader(ser, "manual", sleep=sleep)
    assert ser.events == [] and "BOOT0" in asked[0]


def test_progress_is_a_bar_on_a_terminal_and_lines_in_ci():
    quiet = io.StringIO()
    p = Progress(stream=quiet, tty=False)
    stage = p.stage("write", 1000)
    stage.advance(500)
    stage.advance(500)
    stage.finish("1000 bytes at 0x08000000")
    assert quiet.getvalue().startswith("  write   1000 bytes at 0x08000000 (")
    assert "\r" not in quiet.getvalue() and quiet.getvalue().count("\n") == 1
    term = io.StringIO()
    p = Progress(stream=term, tty=True)
    stage = p.stage("write", 1000)
    stage.advance(1000)
    stage.finish("done")
    assert "[##############################] 100.0%" in term.getvalue()
    assert term.getvalue().endswith(")\n")
