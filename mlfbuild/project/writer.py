"""Writing a rendered folder: a file is written only when its bytes change, so an unchanged rebuild
compiles nothing, and what an earlier render wrote and this one did not can be pruned."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


class Writer:
    """Writes files under the project root, only when their bytes differ (keeps make's mtimes)."""

    def __init__(self, root: Path):
        self.root = root
        self.written: set[str] = set()

    def write(self, relative: str, data: bytes | str) -> None:
        payload = data.encode() if isinstance(data, str) else data
        target = self.root / relative
        self.written.add(relative)
        if target.is_file() and target.read_bytes() == payload:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(payload)

    def copy(self, source: Path, relative: str) -> None:
        self.write(relative, source.read_bytes())

    def prune_owned(self, owned: Iterable[str]) -> None:
        """Remove the files of `owned` (what an earlier render recorded writing) that this render did
        not write, and the folders that leaves empty; nothing else in the folder is touched."""
        for relative in sorted(set(owned) - self.written):
            path = self.root / relative
            if path.is_file() or path.is_symlink():
                path.unlink()
            parent = path.parent
            while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent

    def prune(self, folder: str) -> None:
        """Remove files a previous render wrote under `folder` that this render did not."""
        base = self.root / folder
        if not base.is_dir():
            return
        for path in sorted(base.rglob("*"), reverse=True):
            relative = str(path.relative_to(self.root))
            if path.is_file() and relative not in self.written:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        if not any(base.iterdir()):
            base.rmdir()
