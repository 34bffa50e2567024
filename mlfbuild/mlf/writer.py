"""Writing an MLF tarball the way TVM writes one: '.' first, './'-prefixed names, sorted, owned by
root, one fixed mtime — so the same files always give the same bytes (and the same SHA-256)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

FIXED_MTIME = 1767225600  # 2026-01-01: reproducible archives carry no build time


def tar_bytes(files: dict[str, bytes], *, compress: bool = False, prefix: str = "./") -> bytes:
    """The archive of `files` (relative path → bytes), with every parent folder as an entry."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = {"."} | {str(Path(p).parents[i]) for p in files for i in range(len(Path(p).parents) - 1)}
        entries = sorted((d, None) for d in dirs) + sorted(files.items())
        for name, data in sorted(entries, key=lambda e: (e[0] != ".", e[0])):
            info = tarfile.TarInfo(prefix + name if name != "." else ".")
            info.mtime = FIXED_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw
