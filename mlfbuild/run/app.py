"""Running a build whose application is the user's (`build --app`): no console protocol to speak, so
its console is streamed as it comes and its exit status (semihosting exit() under QEMU, the process's
status on the host) is the verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ..errors import RunError
from .transports import Transport

_TAIL_BYTES = 64 * 1024  # console kept for the result; everything is streamed to `echo` as it comes


@dataclass
class AppRun:
    target: str
    board: str
    exit_code: int
    seconds: float
    console: str  # the last 64 KiB of what the application printed

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict:
        return {"target": self.target, "board": self.board, "app": True, "exit_code": self.exit_code,
                "status": "pass" if self.passed else "fail", "seconds": round(self.seconds, 3),
                "console": self.console}


def run_app(transport: Transport, *, target: str, board: str, timeout: float,
            echo: Callable[[bytes], None] | None = None) -> AppRun:
    """Start the application and wait at most `timeout` seconds for it to exit."""
    started = time.monotonic()
    tail = bytearray()
    transport.start()
    try:
        while time.monotonic() - started < timeout:
            try:
                # One byte at a time: pyserial's socket port drops what one read() got when the
                # connection ends within it, and the end is when an application has said its last.
                data = transport.port.read(1)
            except OSError:  # the console closed: the application has exited
                break
            _take(data, tail, echo)
            if not data and not transport.is_alive():
                break
    except BaseException:
        transport.close(timeout=2.0)
        raise
    ending = transport.close(timeout=max(timeout - (time.monotonic() - started), 1.0))
    if ending.exit_code is None:
        if time.monotonic() - started >= timeout:
            raise RunError(f"the application did not exit within {timeout:g} s on {transport.describe()} "
                           "(end it with exit(status) or by returning from main)")
        raise RunError(f"the application's exit status is unknown on {transport.describe()}"
                       + (f": {ending.text.strip().splitlines()[-1]}" if ending.text.strip() else ""))
    return AppRun(target=target, board=board, exit_code=ending.exit_code, seconds=time.monotonic() - started,
                  console=tail.decode("utf-8", errors="replace"))


def _take(data: bytes, tail: bytearray, echo: Callable[[bytes], None] | None) -> None:
    if not data:
        return
    if echo:
        echo(data)
    tail += data
    del tail[:-_TAIL_BYTES]
