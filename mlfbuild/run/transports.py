"""Where firmware runs: QEMU (console over TCP), the host (a pipe) or a real board (serial port).

Each transport starts the firmware, hands out a byte port for the protocol client, and on close
reports how the firmware ended. Emulator and host processes get their own process group so a
timeout kills everything they started; a run never outlives its wall-clock limit.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunError
from ..resources import setup_hint

# Semihosting exit code the firmware's fault handler uses (crt/src/platform_cortexm.c).
FAULT_EXIT_CODE = 3


@dataclass
class Ending:
    exit_code: int | None  # None: still running when closed (killed) or unknown (real board)
    console: str  # what the emulator/process printed outside the protocol (stderr etc.)


class Transport:
    port = None
    boots_fresh = True  # the firmware starts with this transport (prints its banner to us)

    def start(self) -> None: ...

    def is_alive(self) -> bool:
        return True

    def close(self, timeout: float) -> Ending:
        return Ending(None, "")

    def describe(self) -> str:
        return type(self).__name__


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


class _PipePort:
    """pyserial-like read/write over a child's stdin/stdout (host firmware)."""

    def __init__(self, process: subprocess.Popen, timeout: float = 0.1):
        self.process = process
        self.timeout = timeout

    def read(self, size: int = 1) -> bytes:
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], self.timeout)
        return os.read(fd, size) if ready else b""

    def write(self, data: bytes) -> int:
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise RunError("the firmware closed its console (it exited or crashed)") from None
        return len(data)


class _ProcessTransport(Transport):
    """A firmware that runs as a local process (the host build, or QEMU) in its own process group."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile()

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _finish(self, timeout: float) -> tuple[int | None, str]:
        """Wait for the exit status (killing the whole group after `timeout`); (status, stderr)."""
        code = None
        if self.process is not None:
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(self.process)
        if self.port is not None and hasattr(self.port, "close"):
            self.port.close()
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace")
        self._stderr.close()
        return code, text


class HostTransport(_ProcessTransport):
    def __init__(self, executable: Path):
        super().__init__()
        self.executable = executable

    def start(self) -> None:
        self.process = subprocess.Popen([str(self.executable)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._stderr, start_new_session=True)
        self.port = _PipePort(self.process)

    def close(self, timeout: float) -> Ending:
        code, text = self._finish(timeout)
        # A signal (segfault) shows as a negative code; report it like a fault.
        return Ending(FAULT_EXIT_CODE if code is not None and code < 0 else code, text)

    def describe(self) -> str:
        return f"host executable {self.executable.name}"


class QemuTransport(_ProcessTransport):
    """qemu-system-arm with the console on a TCP server socket (pyserial socket://), deterministic
    instruction-count timing (-icount) and semihosting for the exit code.

    We open the listening socket, connect to it, and only then start QEMU with it (chardev fd=).
    Letting QEMU bind a port number we picked races with every other run on the machine, and
    connecting after QEMU starts races with pyserial's open(), which drops early banner bytes."""

    def __init__(self, elf: Path, machine: str, *, icount_shift: int = 0, qemu: str = "qemu-system-arm",
                 extra_args: tuple[str, ...] = ()):
        super().__init__()
        self.extra_args = tuple(extra_args)  # the board file's [qemu] extra_args
        self.elf = elf
        self.machine = machine
        self.icount_shift = icount_shift
        self.qemu = qemu

    def command(self, listen_fd: int) -> list[str]:
        return [self.qemu, "-M", self.machine, "-display", "none", "-monitor", "none",
                "-chardev", f"socket,id=console,fd={listen_fd},server=on,wait=on,nodelay=on",
                "-serial", "chardev:console",
                "-icount", f"shift={self.icount_shift}",
                "-semihosting-config", "enable=on,target=native", *self.extra_args, "-kernel", str(self.elf)]

    def start(self) -> None:
        import serial

        if shutil.which(self.qemu) is None:
            raise RunError(f"'{self.qemu}' not found; install the Debian package qemu-system-arm{setup_hint()}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            # Connect before QEMU exists: the connection waits in the listen queue, and pyserial's
            # open() (which discards whatever has already arrived) is over before the guest can
            # print its banner. QEMU accepts it on start-up (wait=on) and only then runs the guest.
            try:
                self.port = serial.serial_for_url(f"socket://127.0.0.1:{listener.getsockname()[1]}", timeout=0.1)
            except (serial.SerialException, OSError) as error:
                raise RunError(f"could not open a console socket for QEMU: {error}") from None
            self.process = subprocess.Popen(self.command(listener.fileno()), stdin=subprocess.DEVNULL,
                                            stdout=self._stderr, stderr=self._stderr, start_new_session=True,
                                            pass_fds=(listener.fileno(),))

    def close(self, timeout: float) -> Ending:
        code, text = self._finish(timeout)
        # QEMU's mps2 machines warn about their unused timers; that is not the firmware's story.
        return Ending(code, "\n".join(line for line in text.splitlines() if "Timer with period zero" not in line))

    def describe(self) -> str:
        return f"QEMU {self.machine}"


class SerialTransport(Transport):
    """A flashed real board: the firmware is already running; we only talk to it."""

    boots_fresh = False

    def __init__(self, port: str, baud: int):
        self.device = port
        self.baud = baud

    def start(self) -> None:
        from ..serialport import open_port

        # DTR/RTS low: a board wired for bootloader entry (DTR→BOOT0, RTS→NRST) keeps running.
        self.port = open_port(self.device, baudrate=self.baud, timeout=0.1, dtr=False, rts=False)

    def close(self, timeout: float) -> Ending:
        if self.port is not None:
            self.port.close()
        return Ending(None, "")

    def describe(self) -> str:
        return f"serial port {self.device}"
