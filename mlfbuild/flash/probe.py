"""Flashing through a board's debug probe (ST-LINK, CMSIS-DAP, J-Link) by handing the image to
pyOCD or OpenOCD, the way Zephyr's `west flash` runners do: build the tool's command line from the
board's data (flashing.pyocd_target, flashing.openocd_config), run it, and report its own words.

    pyocd load -W -e sector -a ADDR -t TARGET [-u PROBE] [--no-reset] firmware.bin
    pyocd cmd -W -t TARGET [-u PROBE] -c "savemem ADDR LEN readback.bin"      (verify: compared here)
    openocd -f CFG... [-c "adapter serial PROBE"] -c "program {firmware.bin} ADDR [verify] [reset] exit"

A missing tool is a BuildError (exit 4) with how to install it; a tool that fails (no probe, wrong
target, flash error) is a FlashError (exit 8) quoting the tool's own error line, led by "no debug probe
found" when the tool says it found none.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import BuildError, FlashError, UsageError
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")   # pyOCD colours its messages
TOOL_TIMEOUT = 300.0   # seconds for one tool run (a whole-chip erase + write of a few MiB fits)


@dataclass
class ProbeResult:
    address: int
    size: int
    verified: bool
    started: bool
    commands: list[list[str]]


# What the tools print when no probe answers: OpenOCD's ST-LINK (hla and dapdirect), CMSIS-DAP, J-Link
# and FTDI adapter drivers, and pyOCD.
NO_PROBE_TEXTS = ("Error: open failed", "unable to find a matching CMSIS-DAP device", "No J-Link device found",
                  "unable to open ftdi device", "No connected debug probe")
# libusb found the probe but may not open it: the USB device's permissions (udev rules).
NO_ACCESS_TEXT = "LIBUSB_ERROR_ACCESS"


def probe_problem(output: str, serial: str | None) -> str | None:
    """The user's words for a tool's failure to reach any probe (None when it failed for another reason)."""
    if NO_ACCESS_TEXT in output:
        return ("a debug probe was found but cannot be opened (permission denied): install the probe's "
                "udev rules (OpenOCD ships 60-openocd.rules) or add yourself to the group that owns it")
    if not any(text in output for text in NO_PROBE_TEXTS):
        return None
    if serial:
        return f"no debug probe with serial number {serial} found: check --probe (`mlfbuild ports` lists probes)"
    return "no debug probe found: connect the board's debug probe (a Nucleo's ST-LINK USB port) with a data cable"


def tool_error_line(output: str) -> str:
    """What went wrong, on one line: OpenOCD's first `Error:` line; else the tool's last lines
    (pyOCD prints the cause, e.g. "No connected debug probes", then its own error log line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    if errors:
        return errors[0]
    return "; ".join(lines[-3:]) if lines else "(no output)"


class _ProbeFlasher:
    method = ""
    tool = ""
    install_hint = ""

    def __init__(self, *, run: Callable = subprocess.run, which: Callable = shutil.which,
                 find_module: Callable = importlib.util.find_spec):
        self._run, self._which, self._find_module = run, which, find_module

    def flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None = None) -> ProbeResult:
        job.check()
        self.require_board_data(job)
        exe = self.executable()
        progress = progress or Progress(silent=True)
        return self.program(exe, job, options, progress)

    # -- for subclasses -------------------------------------------------------------------------
    def require_board_data(self, job: FlashJob) -> None:
        raise NotImplementedError

    def program(self, exe: list[str], job: FlashJob, options: FlashOptions, progress: Progress) -> ProbeResult:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def executable(self) -> list[str]:
        path = self._which(self.tool)
        if path is None:
            raise BuildError(f"{self.tool} not found: {self.install_hint}")
        return [path]

    def call(self, cmd: list[str], step: str, progress: Progress, probe: str | None = None) -> str:
        progress.note(f"{step}: {' '.join(cmd)}")
        try:
            result = self._run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise FlashError(f"{self.tool} did not finish {step} within {TOOL_TIMEOUT:.0f} s") from None
        except OSError as exc:
            raise BuildError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
        output = ANSI_COLOUR.sub("", (result.stdout or "") + (result.stderr or ""))
        if result.returncode != 0:
            failure = f"{self.tool} failed to {step} (exit {result.returncode}): {tool_error_line(output)}"
            problem = probe_problem(output, probe)
            raise FlashError(f"{problem} ({failure})" if problem else failure)
        return output


class PyocdFlasher(_ProbeFlasher):
    method = "pyocd"
    tool = "pyocd"
    install_hint = "install it with `pip install 'mlfbuild[flash]'` (or `pip install pyocd`)"

    def executable(self) -> list[str]:
        # The pyocd installed beside mlfbuild (the `flash` extra) even when its bin folder is not on PATH.
        if self._find_module("pyocd") is not None:
            return [sys.executable, "-m", "pyocd"]
        return super().executable()

    def require_board_data(self, job: FlashJob) -> None:
        if not job.flashing.pyocd_target:
            raise UsageError(f"{job.board or 'the board'} names no pyOCD target (flashing.pyocd_target)")

    def selection(self, job: FlashJob, options: FlashOptions) -> list[str]:
        return ["-W", "-t", str(job.flashing.pyocd_target)] + (["-u", options.probe] if options.probe else [])

    def load_command(self, exe: list[str], job: FlashJob, options: FlashOptions) -> list[str]:
        assert job.source is not None
        cmd = [*exe, "load", *self.selection(job, options), "-e", "sector", "-a", f"0x{job.address:08X}",
               "--format", "bin"]
        if not options.start:
            cmd.append("--no-reset")
        return cmd + [str(job.source)]

    def readback_command(self, exe: list[str], job: FlashJob, options: FlashOptions, path: Path) -> list[str]:
        return [*exe, "cmd", *self.selection(job, options), "-c",
                f"savemem 0x{job.address:08X} {len(job.image)} {path}"]

    def program(self, exe, job, options, progress) -> ProbeResult:
        commands = [self.load_command(exe, job, options)]
        self.call(commands[0], "write", progress, options.probe)
        if options.verify:
            with tempfile.TemporaryDirectory(prefix="mlfbuild-pyocd-") as tmp:
                readback = Path(tmp) / "readback.bin"
                commands.append(self.readback_command(exe, job, options, readback))
                self.call(commands[1], "read back", progress, options.probe)
                data = readback.read_bytes() if readback.is_file() else b""
            if data != job.image:
                raise FlashError(f"verify failed: the {len(data)} bytes read back from 0x{job.address:08X} differ "
                                 f"from the {len(job.image)}-byte image (first difference at offset "
                                 f"{_first_difference(data, job.image)})")
        return ProbeResult(job.address, len(job.image), options.verify, options.start, commands)


class OpenocdFlasher(_ProbeFlasher):
    method = "openocd"
    tool = "openocd"
    install_hint = "install the Debian package openocd (`apt-get install openocd`)"

    def require_board_data(self, job: FlashJob) -> None:
        if not job.flashing.openocd_config:
            raise UsageError(f"{job.board or 'the board'} names no OpenOCD configuration (flashing.openocd_config)")

    def command(self, exe: list[str], job: FlashJob, options: FlashOptions) -> list[str]:
        assert job.source is not None
        cmd = list(exe)
        for config in job.flashing.openocd_config:
            cmd += ["-f", config]
        if options.probe:
            cmd += ["-c", f"adapter serial {options.probe}"]
        # OpenOCD's program: halt, erase what the image covers, write, [read back and compare], [reset].
        steps = [f"program {{{job.source}}} 0x{job.address:08X}"]
        steps += ["verify"] if options.verify else []
        steps += ["reset"] if options.start else []
        return cmd + ["-c", " ".join(steps + ["exit"])]

    def program(self, exe, job, options, progress) -> ProbeResult:
        cmd = self.command(exe, job, options)
        self.call(cmd, "program", progress, options.probe)
        return ProbeResult(job.address, len(job.image), options.verify, options.start, [cmd])


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
