"""The `mlfbuild` program's entry point: everything before the command line is parsed.

It imports nothing heavy itself, so a Ctrl-C while the library loads (numpy, jinja2, pyelftools
take a noticeable moment) ends in one line rather than a traceback, and standard streams that the
caller closed are reopened on /dev/null so no file the program opens can land on descriptor 0-2.
"""

from __future__ import annotations

import os
import sys

from .errors import StdoutError


class _Stdout:
    """Standard output with its write errors marked as such (StdoutError), so the CLI can tell a
    closed pipe or a full disk on stdout from a file it could not write. A stdout the caller closed
    (`>&-`) fails on the first write, as writing to descriptor 1 would."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is None:
            raise StdoutError(9, "Bad file descriptor (standard output is closed)")
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _guard_standard_streams() -> None:
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # takes the lowest free descriptor: this one
    sys.stdout = _Stdout(sys.stdout)  # type: ignore[assignment]
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


def main() -> int:
    _guard_standard_streams()
    try:
        from .cli import main as run_command
    except KeyboardInterrupt:
        print("mlfbuild: interrupted", file=sys.stderr)
        return 130
    return run_command()


if __name__ == "__main__":
    sys.exit(main())
