"""Progress for long flash stages: a bar on a terminal, one quiet line per stage elsewhere (CI logs)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _size(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{int(n)} B"


class Stage:
    def __init__(self, progress: "Progress", name: str, total: int, unit: str):
        self.progress, self.name, self.total, self.unit = progress, name, max(total, 0), unit
        self.done_units = 0
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._draw(force=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def advance(self, n: int) -> None:
        self.done_units = min(self.total, self.done_units + n) if self.total else self.done_units + n
        self._draw()

    def _draw(self, force: bool = False) -> None:
        p = self.progress
        if not p.tty or p.silent:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1 and self.done_units < self.total:
            return
        self._last_draw = now
        width = 30
        frac = self.done_units / self.total if self.total else 0.0
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        amount = (f"{_size(self.done_units)}/{_size(self.total)}" if self.unit == "bytes"
                  else f"{self.done_units}/{self.total} {self.unit}")
        p.stream.write(f"\r  {self.name:<7} [{bar}] {frac * 100:5.1f}%  {amount}\x1b[K")
        p.stream.flush()
        p._bar_open = True

    def finish(self, summary: str) -> None:
        """End the stage with one line: `  write   9284 bytes at 0x08000000 in 0.9 s`."""
        p = self.progress
        if p.silent:
            return
        p._clear_bar()
        p.stream.write(f"  {self.name:<7} {summary} ({self.elapsed:.1f} s)\n")
        p.stream.flush()


class Progress:
    """`stage(name, total)` → Stage with advance()/finish(); `note(text)` for retries and warnings."""

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None, silent: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self.silent = silent
        self._bar_open = False
        self.notes: list[str] = []

    def _clear_bar(self) -> None:
        if self._bar_open:
            self.stream.write("\r\x1b[K")
            self._bar_open = False

    def stage(self, name: str, total: int, unit: str = "bytes") -> Stage:
        return Stage(self, name, total, unit)

    def note(self, text: str) -> None:
        self.notes.append(text)
        if self.silent:
            return
        self._clear_bar()
        self.stream.write(f"  {text}\n")
        self.stream.flush()
