"""Reading a file named by a user or found on disk, which may be anything: only a regular file is
read, and never more than a stated number of bytes. A FIFO would block the reader forever and
/dev/zero would fill the memory, so both are refused before a byte is read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InvalidInputError

MAX_INPUT_BYTES = 512 * 1024 * 1024  # an MLF tarball or a reference; as much as an MLF may unpack to
MAX_TEXT_BYTES = 64 * 1024 * 1024  # a JSON or TOML file people write or mlfbuild wrote

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file `path`; InvalidInputError (one line naming `path` and `what`)
    for anything else: missing, unreadable, a folder, FIFO, device or socket, a symbolic link when
    `follow_symlinks` is false, or more than `max_bytes` bytes."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # a FIFO opens without a writer
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise InvalidInputError(f"{path}: this {what} is a symbolic link, not a regular file") from None
        raise InvalidInputError(f"{path}: cannot read this {what} ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(f"{path}: this {what} is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise InvalidInputError(f"{path}: this {what} is {info.st_size} bytes, over the limit of {max_bytes}")
        with os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(max_bytes + 1)  # a file that grows while read is still bounded
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read this {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InvalidInputError(f"{path}: this {what} is over the limit of {max_bytes} bytes")
    return data
