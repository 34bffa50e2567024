"""Probe runners: the exact pyOCD and OpenOCD command lines, verify by read-back, and the errors —
a missing tool exits 4 with how to install it, a tool that finds no probe exits 8 with the tool's
own message (the real pyocd and openocd, run here without any probe attached)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlfbuild import cli
from mlfbuild.boards import load_board
from mlfbuild.errors import BuildError, FlashError, UsageError
from mlfbuild.flash import FlashOptions, flash, load_job
from mlfbuild.flash.probe import tool_error_line

IMAGE = hashlib.shake_256(b"probe").digest(5000)


def make_build(folder: Path, board: str = "nucleo-f446re", edit=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = load_board(board).to_json()
    if edit:
        edit(data)
    (folder / "firmware.bin").write_bytes(IMAGE)
    (folder / "build.json").write_text(json.dumps({"board": data}))
    return folder


class Recorder:
    """Stands in for subprocess.run: records each command; `savemem` writes `readback`."""

    def __init__(self, readback: bytes = IMAGE, returncode: int = 0, stderr: str = ""):
        self.calls, self.readback, self.returncode, self.stderr = [], readback, returncode, stderr

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        assert kwargs["timeout"] > 0 and kwargs["capture_output"]
        if "-c" in cmd and cmd[cmd.index("-c") + 1].startswith("savemem"):
            Path(cmd[cmd.index("-c") + 1].split()[3]).write_bytes(self.readback)
        return subprocess.CompletedProcess(cmd, self.returncode, "", self.stderr)


def no_pyocd_module(name):
    return None


def test_pyocd_command_lines(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    run = Recorder()
    result = flash(job, FlashOptions(port=""), method="pyocd", run=run, find_module=no_pyocd_module,
                   which=lambda tool: f"/opt/bin/{tool}")
    firmware = str(tmp_path / "b" / "firmware.bin")
    assert run.calls[0] == ["/opt/bin/pyocd", "load", "-W", "-t", "stm32f446retx", "-e", "sector",
                            "-a", "0x08000000", "--format", "bin", firmware]
    assert run.calls[1][:7] == ["/opt/bin/pyocd", "cmd", "-W", "-t", "stm32f446retx", "-c",
                                run.calls[1][6]]
    assert run.calls[1][6].startswith(f"savemem 0x08000000 {len(IMAGE)} ")
    assert result.verified and result.started and len(result.commands) == 2


def test_pyocd_options_probe_no_verify_no_start(tmp_path):
    job = load_job(make_build(tmp_path / "b"), address=0x08004000)
    run = Recorder()
    flash(job, FlashOptions(port="", probe="0669FF", verify=False, start=False), method="pyocd", run=run,
          find_module=lambda name: object())          # pyocd importable: run beside mlfbuild's Python
    assert run.calls == [[sys.executable, "-m", "pyocd", "load", "-W", "-t", "stm32f446retx", "-u", "0669FF",
                          "-e", "sector", "-a", "0x08004000", "--format", "bin", "--no-reset",
                          str(tmp_path / "b" / "firmware.bin")]]


def test_pyocd_verify_catches_a_wrong_readback(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    bad = bytearray(IMAGE)
    bad[1234] ^= 1
    with pytest.raises(FlashError, match="verify failed.*offset 1234"):
        flash(job, FlashOptions(port=""), method="pyocd", run=Recorder(readback=bytes(bad)),
              find_module=no_pyocd_module, which=lambda tool: tool)


def test_openocd_command_lines(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    run = Recorder()
    result = flash(job, FlashOptions(port=""), method="openocd", run=run, which=lambda tool: "/usr/bin/openocd")
    firmware = tmp_path / "b" / "firmware.bin"
    assert run.calls == [["/usr/bin/openocd", "-f", "board/st_nucleo_f4.cfg",
                          "-c", f"program {{{firmware}}} 0x08000000 verify reset exit"]]
    assert result.verified and result.started
    run = Recorder()
    flash(job, FlashOptions(port="", probe="066CFF", verify=False, start=False), method="openocd", run=run,
          which=lambda tool: "openocd")
    assert run.calls == [["openocd", "-f", "board/st_nucleo_f4.cfg", "-c", "adapter serial 066CFF",
                          "-c", f"program {{{firmware}}} 0x08000000 exit"]]


@pytest.mark.parametrize("method, hint", [("pyocd", "pip install"), ("openocd", "apt-get install openocd")])
def test_a_missing_tool_exits_4_with_the_install_hint(tmp_path, method, hint):
    job = load_job(make_build(tmp_path / "b"))
    with pytest.raises(BuildError, match=f"{method} not found: .*{hint}") as info:
        flash(job, FlashOptions(port=""), method=method, run=Recorder(), which=lambda tool: None,
              find_module=no_pyocd_module)
    assert info.value.exit_code == 4


def test_a_failing_tool_exits_8_quoting_it(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    run = Recorder(returncode=1, stderr="Open On-Chip Debugger 0.12.0\nInfo : clock speed 2000 kHz\n"
                                        "Error: open failed\nin procedure 'program'\n")
    with pytest.raises(FlashError, match=r"^no debug probe found: .*\(openocd failed to program \(exit 1\): "
                                         r"Error: open failed\)$"):
        flash(job, FlashOptions(port=""), method="openocd", run=run, which=lambda tool: "openocd")
    run = Recorder(returncode=1, stderr="Info : STLINK V2J37M26\nError: init mode failed (unable to connect "
                                        "to the target)\n")
    with pytest.raises(FlashError, match=r"^openocd failed to program \(exit 1\): Error: init mode failed"):
        flash(job, FlashOptions(port=""), method="openocd", run=run, which=lambda tool: "openocd")
    assert tool_error_line("No connected debug probes\n0000544 E No target device available [load_cmd]\n") == \
        "No connected debug probes; 0000544 E No target device available [load_cmd]"
    assert tool_error_line("") == "(no output)"


@pytest.mark.parametrize("method, output", [
    ("openocd", "Info : auto-selecting first available session transport \"swd\".\n"
                "Error: unable to find a matching CMSIS-DAP device\n** OpenOCD init failed **\n"),
    ("openocd", "swd\nError: No J-Link device found\n** OpenOCD init failed **\n"),
    ("pyocd", "\x1b[31mNo connected debug probes\x1b[0m\n0000672 E No target device available [load_cmd]\n"),
])
def test_a_tool_that_finds_no_probe_says_so(tmp_path, method, output):
    job = load_job(make_build(tmp_path / "b"))
    with pytest.raises(FlashError, match=f"^no debug probe found: .*\\({method} failed to ") as info:
        flash(job, FlashOptions(port=""), method=method, run=Recorder(returncode=1, stderr=output),
              which=lambda tool: tool, find_module=no_pyocd_module)
    assert info.value.exit_code == 8


def test_no_probe_with_the_serial_asked_for_and_a_probe_without_permission(tmp_path):
    job = load_job(make_build(tmp_path / "b"))
    missing = Recorder(returncode=1, stderr="No connected debug probe matches unique ID '0669FF'\n")
    with pytest.raises(FlashError, match="^no debug probe with serial number 0669FF found: check --probe"):
        flash(job, FlashOptions(port="", probe="0669FF"), method="pyocd", run=missing, which=lambda tool: tool,
              find_module=no_pyocd_module)
    denied = Recorder(returncode=1, stderr="Error: libusb_open() failed with LIBUSB_ERROR_ACCESS\n"
                                           "Error: open failed\n")
    with pytest.raises(FlashError, match="^a debug probe was found but cannot be opened .*udev"):
        flash(job, FlashOptions(port=""), method="openocd", run=denied, which=lambda tool: tool)


def fake_tool(folder: Path, name: str, marker: Path) -> None:
    """An executable `name` in `folder` that only leaves `marker` behind: proof that it ran."""
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\n: > '{marker}'\nexit 1\n")
    tool.chmod(0o755)


@pytest.mark.parametrize("argv, words", [
    (["--port", "/dev/ttyACM0"], ["--port does not apply to --method openocd", "debug probe",
                                  "--port is for stm32-uart, samba, mcuboot-serial", "use --method stm32-uart"]),
    (["--method", "pyocd", "--port", "/dev/ttyACM0"], ["--port does not apply to --method pyocd"]),
    (["--method", "stm32-uart", "--probe", "0669FF"], ["--probe does not apply to --method stm32-uart",
                                                       "use --method openocd", "or --method pyocd"]),
    (["--drive", "/media/NRF52BOOT"], ["--drive does not apply to --method openocd", "--drive is for uf2",
                                       "(nucleo-f446re has none of them)"]),
])
def test_an_option_the_method_would_ignore_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys,
                                                                           argv, words):
    marker = tmp_path / "ran"
    for tool in ("openocd", "pyocd"):
        fake_tool(tmp_path / "bin", tool, marker)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setitem(sys.modules, "pyocd", None)          # no pyocd module beside mlfbuild either
    assert cli.main(["flash", str(make_build(tmp_path / "b")), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("mlfbuild: error: ")
    assert all(word in err for word in words), err
    assert not marker.exists(), "a flashing tool ran"
    assert cli.main(["flash", str(make_build(tmp_path / "c"))]) == 8 and marker.exists()   # the fake does run


def test_port_goes_to_the_methods_that_use_a_serial_port(tmp_path, capsys):
    from mlfbuild.flash_methods import FLASHERS, LINKS

    assert set(LINKS) == set(FLASHERS)
    board = make_build(tmp_path / "b", board="feather-nrf52840-express")
    assert cli.main(["flash", str(board), "--port", "/dev/ttyACM0"]) == 2
    assert "feather-nrf52840-express has none of them" in capsys.readouterr().err


def test_boards_without_probe_data_refuse(tmp_path):
    job = load_job(make_build(tmp_path / "b", edit=lambda b: [b["flashing"].pop("pyocd_target"),
                                                              b["flashing"].pop("openocd_config")]))
    for method, key in (("pyocd", "pyocd_target"), ("openocd", "openocd_config")):
        with pytest.raises(UsageError, match=key):
            flash(job, FlashOptions(port=""), method=method, run=Recorder(), which=lambda tool: tool)


def test_real_openocd_without_a_probe_exits_8_with_its_message(tmp_path, capsys):
    if shutil.which("openocd") is None:
        pytest.skip("openocd is not installed (docker/apt-packages-test.txt lists it)") if not _ci() else \
            pytest.fail("openocd is not installed (required when CI=true)")
    assert cli.main(["flash", str(make_build(tmp_path / "b")), "--method", "openocd"]) == 8
    err = capsys.readouterr().err
    assert "mlfbuild: error: no debug probe found: " in err
    assert "(openocd failed to program (exit 1): Error: open failed)" in err


ST_LINK_BOARDS = ["nucleo-f446re", "nucleo-f746zg", "nucleo-l4r5zi", "stm32f4-discovery"]


@pytest.mark.parametrize("board", ST_LINK_BOARDS)
def test_boards_with_an_st_link_flash_through_it_by_default(tmp_path, board):
    """The on-board probe needs no adapter wired to BOOT0/NRST; the ROM bootloader stays a --method away."""
    flashing = load_board(board).flashing
    assert flashing.method == "openocd" and flashing.openocd_config and flashing.pyocd_target
    assert flashing.sectors and flashing.chip_id is not None      # what --method stm32-uart needs
    run = Recorder()
    result = flash(load_job(make_build(tmp_path / "b", board=board)), FlashOptions(port=""), run=run,
                   which=lambda tool: "openocd")
    assert run.calls[0][:3] == ["openocd", "-f", flashing.openocd_config[0]] and result.verified


def test_real_openocd_is_the_default_for_a_nucleo(tmp_path, capsys):
    if shutil.which("openocd") is None:
        pytest.skip("openocd is not installed (docker/apt-packages-test.txt lists it)") if not _ci() else \
            pytest.fail("openocd is not installed (required when CI=true)")
    assert cli.main(["flash", str(make_build(tmp_path / "b"))]) == 8    # no port looked for, no --method
    err = capsys.readouterr().err
    assert "(openocd)" in err and "no debug probe found" in err and "Error: open failed" in err


def test_real_pyocd_without_a_probe_exits_8_with_its_message(tmp_path, capsys):
    pytest.importorskip("pyocd") if not _ci() else __import__("pyocd")
    # A target pyOCD knows without a pack.
    build = make_build(tmp_path / "b", edit=lambda b: b["flashing"].update(pyocd_target="stm32f439xi"))
    assert cli.main(["flash", str(build), "--method", "pyocd"]) == 8
    err = capsys.readouterr().err
    assert "mlfbuild: error: no debug probe found: " in err
    assert "(pyocd failed to write (exit 1): No connected debug probes" in err
    # The probe is looked for before the target's pack: the answer is the same for a pack target.
    assert cli.main(["flash", str(make_build(tmp_path / "c")), "--method", "pyocd"]) == 8
    assert "No connected debug probes" in capsys.readouterr().err


def _ci() -> bool:
    import os
    return os.environ.get("CI", "").lower() == "true"
