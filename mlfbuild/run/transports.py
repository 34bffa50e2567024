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
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError, RunError
from ..project.runtime import fault_exit_code
from ..resources import setup_hint


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


# What a firmware process printed (QEMU's stderr and the semihosting console, a host build's
# stderr): the tail only, so a flood cannot grow mlfbuild's memory or fill a disk.
OUTPUT_TAIL_BYTES = 64 * 1024
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_QEMU_NOISE = ("Timer with period zero", "waiting for connection")


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL when mlfbuild dies, however it dies (even by
    SIGKILL, where no handler of ours runs)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the firmware's whole process group: the leader and anything it started, even after
    the leader itself has exited."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


class _OutputTail:
    """Reads a child's output pipe on a thread and keeps the last OUTPUT_TAIL_BYTES."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._drain, daemon=True)

    def start(self) -> None:
        os.close(self.write_fd)  # the child holds its own copy
        self.write_fd = -1
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self._tail += chunk
            if len(self._tail) > 2 * OUTPUT_TAIL_BYTES:
                del self._tail[:-OUTPUT_TAIL_BYTES]

    def text(self, wait: float = 1.0) -> str:
        if self._thread.is_alive():
            self._thread.join(wait)
        return bytes(self._tail[-OUTPUT_TAIL_BYTES:]).decode(errors="replace")

    def close(self) -> None:
        for fd in (self.write_fd, self.read_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.write_fd = self.read_fd = -1


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
        self._output = _OutputTail()

    def _spawn(self, command: list[str], **kwargs) -> subprocess.Popen:
        """Start the firmware in a session of its own (so its group can be killed) that dies with us."""
        try:
            process = subprocess.Popen(command, stderr=self._output.write_fd, start_new_session=True,
                                       preexec_fn=_die_with_parent, **kwargs)
        except OSError as exc:
            self._output.close()
            raise RunError(f"could not start {command[0]}: {exc.strerror or exc}") from None
        self._output.start()
        return process

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _finish(self, timeout: float) -> tuple[int | None, str]:
        """Wait for the exit status (killing the whole group after `timeout`); (status, stderr)."""
        code = None
        if self.process is not None:
            try:
                code = self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(self.process)  # also what the firmware left behind after its own exit
        if self.port is not None and hasattr(self.port, "close"):
            self.port.close()
        text = self._output.text()
        self._output.close()
        return code, text


class HostTransport(_ProcessTransport):
    def __init__(self, executable: Path):
        super().__init__()
        self.executable = executable

    def start(self) -> None:
        self.process = self._spawn([str(self.executable)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.port = _PipePort(self.process)

    def close(self, timeout: float) -> Ending:
        code, text = self._finish(timeout)
        # A signal (segfault) shows as a negative code; report it like a fault.
        return Ending(fault_exit_code() if code is not None and code < 0 else code, text)

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
            self.process = self._spawn(self.command(listener.fileno()), stdin=subprocess.DEVNULL,
                                       stdout=self._output.write_fd, pass_fds=(listener.fileno(),))

    def close(self, timeout: float) -> Ending:
        code, text = self._finish(timeout)
        # QEMU's own chatter (mps2 machines warn about unused timers; the console socket's
        # "waiting for connection" notice) is not the firmware's story.
        return Ending(code, "\n".join(line for line in text.splitlines()
                                      if not any(noise in line for noise in _QEMU_NOISE)))

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


def make_transport(build_dir: Path, record: dict, *, port: str | None = None, baud: int = 115200,
                   icount_shift: int = 0) -> Transport:
    board = record["board"]
    elf = build_dir / "firmware.elf"
    if port:
        return SerialTransport(port, baud)
    if board["kind"] == "host":
        return HostTransport(elf)
    if board.get("qemu"):
        return QemuTransport(elf, board["qemu"]["machine"], icount_shift=icount_shift,
                             extra_args=tuple(board["qemu"].get("extra_args", ())))
    raise InvalidInputError(f"board {board['name']} is real hardware: flash it (mlfbuild flash) and run with --port")
