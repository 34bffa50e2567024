"""The bundled example (a small int8 AOT model and its reference outputs), written where a user
wants it, so the quick start works from an installed wheel alone."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UsageError, os_error
from .resources import data_dir

MLF, REFERENCE = "tiny_aot.tar", "tiny_aot.npz"


def write_example(folder: Path) -> tuple[Path, Path]:
    """Write the example's MLF and reference into `folder` (made if needed); refuses to replace a
    different file of the same name. Returns their paths."""
    source = data_dir("examples")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: exists and is not a folder")
    contents = {name: (source / name).read_bytes() for name in (MLF, REFERENCE)}
    for name, data in contents.items():
        target = folder / name
        if target.is_symlink():  # dangling or not: writing through it would write outside the folder
            raise UsageError(f"{target}: is a symbolic link; choose another folder")
        if target.exists() and (not target.is_file() or target.read_bytes() != data):
            raise UsageError(f"{target}: exists and is not the example's {name}; choose another folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            _write_here(folder / name, data)
    except OSError as exc:
        raise os_error(exc, f"{folder}: cannot write the example") from None
    return folder / MLF, folder / REFERENCE


def _write_here(path: Path, data: bytes) -> None:
    """Write `path` itself: a symbolic link put there meanwhile is an error (ELOOP), never followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as stream:
        stream.write(data)
