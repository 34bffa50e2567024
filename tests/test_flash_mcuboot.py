"""MCUboot serial recovery: firmware.bin signed by imgtool for the board's layout, uploaded with
smpclient to a fake MCUboot on a pseudo-terminal (tests/fake_smp_server.py); what the fake stored
must pass `imgtool verify` (MCUboot's own checker) and hold firmware.bin after the header."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("imgtool")
pytest.importorskip("smpclient")

from fake_smp_server import FakeMcuboot  # noqa: E402
from mlfbuild import cli  # noqa: E402
from mlfbuild.boards import BoardError, load_board, load_board_file  # noqa: E402
from mlfbuild.errors import FlashError, UsageError  # noqa: E402
from mlfbuild.flash import FlashOptions, flash, load_job  # noqa: E402
from mlfbuild.flash.mcuboot import McubootTimeouts, sign_command  # noqa: E402

BOARD = "nrf52840dk"
IMAGE = hashlib.shake_256(b"mcuboot").digest(9001)
FAST = McubootTimeouts(request=2.0, first_chunk=5.0)


pytestmark = pytest.mark.deadline(60)  # no test here may hang


def make_build(folder: Path, image: bytes = IMAGE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "firmware.bin").write_bytes(image)
    (folder / "build.json").write_text(json.dumps({"board": load_board(BOARD).to_json()}))
    return folder


def imgtool_verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "imgtool.main", "verify", str(path)], capture_output=True,
                          text=True, timeout=60)


def test_sign_command_takes_the_board_layout(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    cmd = sign_command(job, Path("in.bin"), Path("out.bin"))
    assert cmd[cmd.index("sign"):] == ["sign", "--header-size", "0x200", "--pad-header", "--slot-size", "0x77000",
                                       "--align", "4", "--version", "0.0.0", "in.bin", "out.bin"]
    assert sign_command(job, Path("a"), Path("b"), key="k.pem")[-4:] == ["--key", "k.pem", "a", "b"]


def test_upload_through_the_fake_passes_imgtool_verify(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    with FakeMcuboot() as fake:
        result = flash(job, FlashOptions(port=fake.port, timeouts=FAST), method="mcuboot-serial")
    stored = tmp_path / "slot0.bin"
    stored.write_bytes(fake.image)
    check = imgtool_verify(stored)
    assert check.returncode == 0 and "Image was correctly validated" in check.stdout, check.stdout + check.stderr
    assert result.digest in check.stdout and result.verified and result.started
    header = load_board(BOARD).flashing.mcuboot.header_size
    assert fake.image[header:header + len(IMAGE)] == IMAGE        # firmware.bin right after the header
    assert fake.resets == 1 and (1, 0) in fake.requests           # hash read back, then reset


def test_cli_flash_with_no_start_and_no_verify(tmp_path, capsys):
    build = make_build(tmp_path / "b", IMAGE[:3000])
    with FakeMcuboot() as fake:
        assert cli.main(["flash", str(build), "--port", fake.port, "--no-verify", "--no-start"]) == 0
    assert fake.resets == 0 and (1, 0) not in fake.requests
    assert "NOT verified" in capsys.readouterr().out
    stored = tmp_path / "s.bin"
    stored.write_bytes(fake.image)
    assert imgtool_verify(stored).returncode == 0


def test_a_corrupted_slot_fails_verify_with_exit_8(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    with FakeMcuboot(corrupt_at=5000) as fake:
        with pytest.raises(FlashError, match="verify failed: MCUboot reports image hash") as info:
            flash(job, FlashOptions(port=fake.port, timeouts=FAST), method="mcuboot-serial")
    assert info.value.exit_code == 8 and fake.resets == 0
    stored = tmp_path / "bad.bin"
    stored.write_bytes(fake.image)
    assert imgtool_verify(stored).returncode != 0                  # imgtool agrees the stored image is bad


def test_a_refused_upload_exits_8_naming_the_step(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    with FakeMcuboot(upload_rc=3) as fake:
        with pytest.raises(FlashError, match="failed to upload"):
            flash(job, FlashOptions(port=fake.port, timeouts=FAST), method="mcuboot-serial")


def test_a_silent_port_times_out_with_exit_8(tmp_path):
    import os
    import pty
    master, slave = pty.openpty()
    try:
        with pytest.raises(FlashError, match="failed to (connect|upload)"):
            flash(load_job(make_build(tmp_path / "b")),
                  FlashOptions(port=os.ttyname(slave), timeouts=McubootTimeouts(request=0.5, first_chunk=1.0)),
                  method="mcuboot-serial")
    finally:
        os.close(master)
        os.close(slave)


def test_a_missing_port_exits_8(tmp_path):
    assert cli.main(["flash", str(make_build(tmp_path / "b")), "--port", str(tmp_path / "no-such-tty")]) == 8


def test_boards_without_a_layout_refuse_the_method(tmp_path):
    build = tmp_path / "n"
    build.mkdir()
    (build / "firmware.bin").write_bytes(b"\0" * 64)
    (build / "build.json").write_text(json.dumps({"board": load_board("nucleo-f446re").to_json()}))
    with pytest.raises(UsageError, match=r"\[flashing.mcuboot\]"):
        flash(load_job(build), FlashOptions(port="/dev/null"), method="mcuboot-serial")


def test_layout_validation(tmp_path):
    text = (load_board(BOARD).source).read_text()
    bad = tmp_path / "nrf52840dk.toml"
    bad.write_text(text.replace('version = "0.0.0"', 'version = "one"'))
    with pytest.raises(BoardError, match="flashing.mcuboot.version"):
        load_board_file(bad)
    bad.write_text(text.replace("slot_size = 0x77000", "slot_size = 0x70000"))
    with pytest.raises(BoardError, match="flashing.mcuboot.slot_size"):
        load_board_file(bad)
