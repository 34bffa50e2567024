"""A build cache keyed by content: the same MLF bytes, board, board files, options, compiler and
mlfbuild version give the same firmware, so such a build is done once and reused by every job (and by later
matrices pointed at the same cache folder)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import __version__
from ..project import templates_hash


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_key(mlf_sha: str, board: dict, board_files: list[str], cmsis_nn_sha: str | None, options: dict,
              compiler: str) -> str:
    """The identity of a firmware: everything that goes into it, by content, and the compiler that
    makes it (toolchain.compiler_identity)."""
    facts = {"mlf": mlf_sha, "board": board, "board_files": board_files, "cmsis_nn": cmsis_nn_sha,
             "options": options, "compiler": compiler, "mlfbuild": __version__, "templates": templates_hash()}
    return digest(json.dumps(facts, sort_keys=True).encode())


class BuildCache:
    """Successful builds under ROOT/<key>/: result.json (the build stage's dict) and its files."""

    def __init__(self, root: Path | None):
        self.root = Path(root) if root else None

    def get(self, key: str) -> dict | None:
        if self.root is None:
            return None
        folder = self.root / key
        try:
            result = json.loads((folder / "result.json").read_text())
            result["files"] = {name: (folder / name).read_bytes() for name in result.pop("file_names")}
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent or half-written: build again
        return result

    def put(self, key: str, built: dict) -> None:
        if self.root is None or (self.root / key).is_dir():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=self.root))
        files = built.get("files", {})
        for name, content in files.items():
            (staging / name).write_bytes(content)
        record = {k: v for k, v in built.items() if k != "files"}
        (staging / "result.json").write_text(json.dumps({**record, "file_names": sorted(files)}))
        try:
            os.rename(staging, self.root / key)  # atomic: readers see a whole entry or none
        except OSError:  # another matrix stored the same build first
            shutil.rmtree(staging, ignore_errors=True)
