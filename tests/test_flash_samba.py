"""SAM-BA flashing (mlfbuild/flash/samba*.py) against a fake SAMD21/SAMD51 bootloader on a
pseudo-terminal (tests/fake_samba.py).

The fake is first proven against a client we did not write (Debian's bossac 1.9.1, run as the
Arduino IDE runs it), then `mlfbuild flash` writes images through it, clean and under injected
faults: every run ends with the image verified in the fake's flash, or with FlashError (exit 8)
naming the step; the bootloader region is never changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fake_samba import CHIPS, FakeSamba, Fault
from mlfbuild import cli
from mlfbuild.boards import load_board
from mlfbuild.errors import FlashError, UsageError
from mlfbuild.flash import FlashOptions, Progress, flash, load_job
from mlfbuild.flash.samba_link import SambaTimeouts, crc16
from conftest import REPO

BOSSAC = shutil.which("bossac") or ("/usr/bin/bossac" if Path("/usr/bin/bossac").exists() else None)
FAST = SambaTimeouts(answer=0.2, copy=1.0, nvm=0.5, resync=2.0, quiet=0.02)
APP = {"samd21": 0x2000, "samd51": 0x4000}
BOARD = {"samd21": "arduino-zero", "samd51": "metro-m4"}


pytestmark = pytest.mark.deadline(60)  # no test here may hang


def image_of(size: int, seed: int = 1) -> bytes:
    return hashlib.shake_256(f"samba-{seed}".encode()).digest(size)


def make_build(folder: Path, image: bytes, board: str) -> Path:
    """A build folder as `mlfbuild build` leaves it, as far as flashing cares."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "firmware.bin").write_bytes(image)
    record = {"board": load_board(board).to_json(), "outputs": {"firmware.bin": hashlib.sha256(image).hexdigest()}}
    (folder / "build.json").write_text(json.dumps(record))
    return folder


def options(port: str, **kw) -> FlashOptions:
    kw.setdefault("reset", "none")
    kw.setdefault("timeouts", FAST)
    return FlashOptions(port=port, **kw)


def bootloader_untouched(fake: FakeSamba) -> bool:
    size = fake.chip.bootloader_size
    return fake.flash_bytes(0, size) == FakeSamba(fake.chip).flash_bytes(0, size)


# -------------------------------------------------------------------------------------------------
# (a) the fake is faithful: bossac, a real third-party client, writes and verifies through it


def _need_bossac() -> str:
    if BOSSAC:
        return BOSSAC
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("bossac is not installed (apt-get install bossa-cli); CI must run this test")
    pytest.skip("bossac is not installed")


def _bossac(tool: str, port: str, offset: int, path: Path, *extra: str) -> subprocess.CompletedProcess:
    # bossac 1.9.1 never returns once its port is gone: always under a timeout.
    return subprocess.run([tool, "-U", "-p", port, f"--offset=0x{offset:x}", *extra, str(path)],
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("chip,size", [("samd21", 10_000), ("samd21", 64 * 1024 + 3), ("samd51", 20_000)])
def test_bossac_writes_and_verifies_through_the_fake(tmp_path, chip, size):
    """The Arduino IDE's own call: bossac -U --offset=APP -e -w -v -R."""
    tool = _need_bossac()
    image = image_of(size)
    (tmp_path / "img.bin").write_bytes(image)
    with FakeSamba(chip) as fake:
        result = _bossac(tool, fake.path, APP[chip], tmp_path / "img.bin", "-e", "-w", "-v", "-R")
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr
        assert "Verify successful" in result.stdout
        assert fake.flash_bytes(APP[chip], size) == image
        assert fake.resets == 1 and fake.error is None
        assert bootloader_untouched(fake)
        # bossac drove it the way the real bootloader is driven: X erase, S+Y writes, Z and R verify
        assert {"X", "Y", "Z", "R", "S"} <= set(fake.counts)


def test_bossac_sees_a_flash_that_does_not_hold_the_image(tmp_path):
    """A cell that flips after programming fails bossac's own verify: the fake's Z and R report the
    flash as it is, not the data that was sent."""
    tool = _need_bossac()
    (tmp_path / "img.bin").write_bytes(image_of(4096))
    with FakeSamba("samd21", [Fault.parse("flash-corrupt:Y:2:100")]) as fake:
        result = _bossac(tool, fake.path, 0x2000, tmp_path / "img.bin", "-e", "-w", "-v")
    assert result.returncode != 0 and "Verify failed" in result.stdout + result.stderr


def test_bossac_cannot_overwrite_the_protected_bootloader(tmp_path):
    tool = _need_bossac()
    (tmp_path / "img.bin").write_bytes(image_of(1024))
    with FakeSamba("samd21") as fake:
        result = _bossac(tool, fake.path, 0x0, tmp_path / "img.bin", "-e", "-w", "-v")
        assert result.returncode != 0
        assert bootloader_untouched(fake)
        assert any("BOOTPROT" in line for line in fake.log)


# -------------------------------------------------------------------------------------------------
# (b) mlfbuild flash through the fake


@pytest.mark.parametrize("chip", ["samd21", "samd51"])
def test_flash_writes_an_image_and_resets(tmp_path, chip):
    image = image_of(30_001)
    job = load_job(make_build(tmp_path / "b", image, BOARD[chip]))
    with FakeSamba(chip) as fake:
        result = flash(job, options(fake.path), Progress(silent=True))
        assert fake.flash_bytes(APP[chip], len(image)) == image
        assert result.verified and result.started and fake.resets == 1
        assert bootloader_untouched(fake)
        assert fake.flash_bytes(APP[chip] + len(image), 16) == b"\xff" * 16


RAM_END = {"samd21": 0x20008000, "samd51": 0x20030000}
FLASH_END = {"samd21": 0x40000, "samd51": 0x80000}


@pytest.mark.cross
@pytest.mark.parametrize("chip", ["samd21", "samd51"])
def test_flash_writes_a_built_firmware_through_the_cli(build_firmware, capsys, chip):
    out = build_firmware(REPO / "examples" / "tiny_aot.tar", BOARD[chip])
    firmware = (out / "firmware.bin").read_bytes()
    with FakeSamba(chip) as fake:
        code = cli.main(["flash", str(out), "--port", fake.path, "--reset", "none"])
        assert code == 0, capsys.readouterr().err
        assert fake.flash_bytes(APP[chip], len(firmware)) == firmware
        # the vector table the bootloader jumps to: initial SP in RAM, a Thumb reset handler in the app
        table = fake.flash[APP[chip]:APP[chip] + 8]
        sp, reset = int.from_bytes(table[:4], "little"), int.from_bytes(table[4:], "little")
        assert 0x20000000 < sp <= RAM_END[chip] and reset & 1 and APP[chip] < reset < FLASH_END[chip]
    assert "verified" in capsys.readouterr().out


def test_arduino_zero_build_folder_through_the_cli(tmp_path, capsys):
    image = image_of(12_345, seed=7)
    folder = make_build(tmp_path / "zero", image, "arduino-zero")
    with FakeSamba("samd21") as fake:
        assert cli.main(["flash", str(folder), "--port", fake.path, "--reset", "none"]) == 0
        assert fake.flash_bytes(0x2000, len(image)) == image
    out = capsys.readouterr()
    assert "flashed 12345 bytes to arduino-zero at 0x00002000: verified" in out.out


def test_touch_1200_finds_the_bootloader_on_its_new_port(tmp_path):
    """The sketch's port at 1200 baud resets the board; the bootloader comes back on another port."""
    image = image_of(5000)
    job = load_job(make_build(tmp_path / "b", image, "arduino-zero"))
    with FakeSamba("samd21", app=True) as fake:
        app_port = fake.path
        assert fake.comports()[0].pid == CHIPS["samd21"].usb_ids[1]
        result = flash(job, options(app_port, reset="touch-1200"), Progress(silent=True), comports=fake.comports)
        assert fake.mode == "bootloader" and any("1200-baud touch" in line for line in fake.log)
        assert result.port == fake.path
        assert fake.flash_bytes(0x2000, len(image)) == image


def test_touch_without_a_port_coming_back_is_exit_8(tmp_path):
    job = load_job(make_build(tmp_path / "b", image_of(100), "arduino-zero"))
    fake = FakeSamba("samd21", app=True, reenumerate_delay=30).start()
    try:
        with pytest.raises(FlashError, match="touch: .* no serial port came back"):
            flash(job, options(fake.path, reset="touch-1200"), comports=fake.comports,
                  touch_timeout=1.0)
    finally:
        fake._stop.set()
        fake.stop()


def test_flash_without_y_uses_page_buffer_writes(tmp_path):
    """A monitor without the Arduino extensions: pages go through the NVM page buffer (PBC, words,
    WP with the address register checked)."""
    from dataclasses import replace

    chip = replace(CHIPS["samd21"], version="v1.1 Nov 10 2016 10:00:00")
    image = image_of(3000)
    job = load_job(make_build(tmp_path / "b", image, "arduino-zero"))
    with FakeSamba(chip) as fake:
        flash(job, options(fake.path), Progress(silent=True))
        assert fake.flash_bytes(0x2000, len(image)) == image
        assert "Y" not in fake.counts and "Z" not in fake.counts


def test_wrong_chip_is_refused(tmp_path):
    job = load_job(make_build(tmp_path / "b", image_of(100), "arduino-zero"))
    with FakeSamba("samd51") as fake:
        with pytest.raises(FlashError, match="connect: the chip answers 0x60060305 \\(ATSAMD51J19A\\) but arduino-zero"):
            flash(job, options(fake.path))
        assert "S" not in fake.counts


def test_an_address_that_is_not_a_row_start_is_refused_before_the_port_opens(tmp_path):
    job = load_job(make_build(tmp_path / "b", image_of(100), "arduino-zero"), address=0x2040)
    with pytest.raises(UsageError, match="not the start of an erase unit"):
        flash(job, options("/nonexistent/port"))


def test_the_bootloader_region_is_outside_the_flashable_region(tmp_path, capsys):
    folder = make_build(tmp_path / "b", image_of(100), "arduino-zero")
    assert cli.main(["flash", str(folder), "--port", "/nonexistent", "--address", "0x1000"]) == 2
    assert "outside arduino-zero's flash 0x00002000-0x0003FFFF" in capsys.readouterr().err


def test_locked_rows_fail_with_the_controllers_reason(tmp_path):
    """A bootloader bigger than the board file says (BOOTPROT covers 0x2000): LOCKE, exit 8."""
    from dataclasses import replace

    chip = replace(CHIPS["samd21"], bootloader_size=0x4000)
    job = load_job(make_build(tmp_path / "b", image_of(100), "arduino-zero"))
    with FakeSamba(chip) as fake:
        with pytest.raises(FlashError, match="erase at 0x00002000 failed .*LOCKE"):
            flash(job, options(fake.path, attempts=2))


# -------------------------------------------------------------------------------------------------
# (c) faults: recover and verify, or exit 8 naming the step


RECOVERED = [
    "drop-rx:S:2:300",          # a data byte lost: the buffer CRC catches it, resync, send again
    "corrupt-rx:S:2:1000",      # a data byte changed on the way
    "corrupt-rx:S:2:5",         # the S address garbled: the data lands as commands, resync
    "drop-rx:W:7:14",           # a digit of the second row's address lost: ADDR reads back wrong
    "corrupt-rx:W:3:15",        # the first row's address garbled: ADDR keeps its old value
    "drop-tx:w:5:2",            # a byte of a register read lost
    "corrupt-tx:w:8:1",         # the address register's read-back garbled
    "corrupt-tx:Z:2:3",         # a CRC answer garbled
    "drop-tx:R:40:10",          # a read-back byte lost
    "corrupt-tx:R:17:20",       # a read-back byte garbled (read again)
    "stall:Y:4:1.5",            # a copy answered after the timeout
    "stall:R:30:0.5",           # a read answered late
    "flash-corrupt:Y:2:100",    # a cell that did not take the data: erase and write again
    "drop-tx:V:1:3",            # a byte of the version line lost
]


@pytest.mark.parametrize("spec", RECOVERED)
def test_flasher_recovers_from(spec, tmp_path):
    image = image_of(9000, seed=3)
    job = load_job(make_build(tmp_path / "b", image, "arduino-zero"))
    fault = Fault.parse(spec)
    with FakeSamba("samd21", [fault]) as fake:
        result = flash(job, options(fake.path), Progress(silent=True))
        assert fault.fired, f"the fault {spec} never fired: the test proves nothing"
        assert fake.flash_bytes(0x2000, len(image)) == image
        assert result.verified and result.retries + result.repairs >= 1
        assert bootloader_untouched(fake) and fake.error is None


FAILED = [
    ("disconnect:S:2:200", "write at 0x00003000: serial port failed"),
    ("disconnect:R:20:5", "verify at 0x0000"),
    ("disconnect:W:3:4", "erase at 0x00002"),
    ("drop-tx:Z:2+:0", "write .*failed after 5 attempts"),
    ("flash-corrupt:Y:2+:100", "still wrong after 2 re-erase"),
    ("corrupt-rx:W:4:0", "lost contact with the bootloader|serial port failed"),   # W turned into G: the chip runs off
]


@pytest.mark.parametrize("spec,step", FAILED)
def test_flasher_fails_cleanly_on(spec, step, tmp_path):
    image = image_of(9000, seed=4)
    job = load_job(make_build(tmp_path / "b", image, "arduino-zero"))
    with FakeSamba("samd21", [Fault.parse(spec)]) as fake:
        with pytest.raises(FlashError, match=step):
            flash(job, options(fake.path), Progress(silent=True))
        assert bootloader_untouched(fake)


@pytest.mark.parametrize("seed", range(12))
def test_random_faults_end_verified_or_in_exit_8(seed, tmp_path):
    """Whatever goes wrong, success is claimed only for an image the flash really holds."""
    import random

    rng = random.Random(seed)
    image = image_of(rng.randrange(1, 12_000), seed=seed)
    letters = "SWwYZR"
    faults = [Fault.parse(f"{rng.choice(['drop-rx', 'corrupt-rx', 'drop-tx', 'corrupt-tx', 'flash-corrupt'])}:"
                          f"{rng.choice(letters)}:{rng.randrange(1, 6)}:{rng.randrange(0, 30)}")
              for _ in range(3)]
    job = load_job(make_build(tmp_path / "b", image, "arduino-zero"))
    with FakeSamba("samd21", faults) as fake:
        try:
            result = flash(job, options(fake.path), Progress(silent=True))
        except FlashError:
            return
        assert result.verified and fake.flash_bytes(0x2000, len(image)) == image
        assert bootloader_untouched(fake)


def test_fault_exit_code_through_the_cli(tmp_path, capsys):
    folder = make_build(tmp_path / "b", image_of(5000), "arduino-zero")
    with FakeSamba("samd21", [Fault.parse("disconnect:S:1:50")]) as fake:
        assert cli.main(["flash", str(folder), "--port", fake.path, "--reset", "none"]) == 8
    err = capsys.readouterr().err
    assert "mlfbuild: error: write at 0x00002000:" in err and "Traceback" not in err


def test_crc16_is_the_monitors():
    """CRC-16/XMODEM check value, and the fake's Z agrees with it."""
    assert crc16(b"123456789") == 0x31C3
