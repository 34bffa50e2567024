"""An output folder made ready for one writer: created, checked writable, and locked.

Two builds into one folder would overwrite each other's files half-way; the lock turns the second
into a clear "in use" error. The lock is an advisory `flock` on a file inside the folder, so the
kernel drops it when its holder exits, however it exits — no stale lock survives a crash.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterator

from .errors import UsageError, os_error

LOCK_FILE = ".mlfbuild.lock"


def prepare(folder: Path, flag: str = "-o") -> Path:
    """Create `folder` (and its parents) unless it exists; it must be a folder we can write into."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: exists and is not a folder (give {flag} a folder path)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"{folder}: a part of this path is a file, not a folder") from None
    except OSError as exc:
        raise os_error(exc, f"cannot create the output folder {folder}") from None
    if not os.access(folder, os.W_OK | os.X_OK):  # said by the one rule (errors.os_error): 9 or 2
        read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
        code = errno.EROFS if read_only else errno.EACCES
        raise os_error(OSError(code, os.strerror(code)), f"{folder}: the output folder is not writable")
    return folder


@contextlib.contextmanager
def locked(folder: Path, *, remove: bool = False) -> Iterator[None]:
    """Hold the folder's lock for the block; a folder another mlfbuild holds is refused (exit 2).
    `remove`: delete the lock file when done (an export leaves none among the user's files); a writer
    that locked a lock file deleted meanwhile takes the lock again on the file now there."""
    path = Path(folder) / LOCK_FILE
    while True:
        fd = _lock(path, folder)
        if _same_file(fd, path):
            break
        os.close(fd)
    try:
        _write_pid(fd)
        yield
    finally:
        if remove:
            with contextlib.suppress(OSError):
                path.unlink()
        os.close(fd)  # releases the lock


def _lock(path: Path, folder: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise os_error(exc, f"cannot lock the output folder {folder}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise os_error(exc, f"cannot lock the output folder {folder}") from None
        raise UsageError(f"{folder}: the output folder is in use by another mlfbuild{holder}; "
                         "wait for it or choose another -o") from None
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _write_pid(fd: int) -> None:
    with contextlib.suppress(OSError):  # the pid is only a courtesy for the message above
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return f" (pid {int(os.pread(fd, 32, 0).decode().strip())})"
    return ""


def write_file(path: Path, data: str | bytes) -> None:
    """Write a report or record file, creating its folder; failures are one line (exit 2 for a path
    that cannot be used, 9 for a full or read-only disk)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_bytes(data)
    except OSError as exc:
        raise os_error(exc, f"cannot write {path}") from None
