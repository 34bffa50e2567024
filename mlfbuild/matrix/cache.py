"""A build cache keyed by content: the same MLF bytes, board, board files, options, compiler and
mlfbuild version give the same firmware, so such a build is done once and reused by every job (and by later
matrices pointed at the same cache folder).

The cache folder is shared and long-lived, so an entry is never trusted: before a build is taken
from ROOT/<key>/, the entry must satisfy every rule below, or it is damaged — said, removed and
built again, never run:

1. ROOT/<key> is a folder, not a symbolic link.
2. result.json is a regular file (not a link) of at most 1 MiB holding the build stage's result of a
   successful build: "status" "built", "exit_code" 0, "message" a string, "flash" and "ram" byte
   counts, "runnable" a boolean, "seconds" a number, "file_names" a list of plain names
   (matrix/layout.py) among the files a build keeps, with firmware.elf and build.json among them.
3. Each listed file is a regular file (not a link) in the entry, of bounded size.
4. build.json is the record of this very build: the job's MLF (by SHA-256) on the job's board, and
   every file it records a SHA-256 for (firmware.elf, the map, ...) has that SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .. import __version__
from ..checked import is_kind
from ..errors import InvalidInputError
from ..project import templates_hash
from ..record import BUILD_RECORD, ELF
from ..untrusted import MAX_INPUT_BYTES, read_regular
from .layout import file_in, is_plain_name
from .stage import BUILD_FILES, BUILT

RESULT = "result.json"
_MAX_RESULT_BYTES = 1 << 20


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_key(mlf_sha: str, board: dict, board_files: list[str], cmsis_nn_sha: str | None, options: dict,
              compiler: str) -> str:
    """The identity of a firmware: everything that goes into it, by content, and the compiler that
    makes it (toolchain.compiler_identity)."""
    facts = {"mlf": mlf_sha, "board": board, "board_files": board_files, "cmsis_nn": cmsis_nn_sha,
             "options": options, "compiler": compiler, "mlfbuild": __version__, "templates": templates_hash()}
    return digest(json.dumps(facts, sort_keys=True).encode())


class DamagedEntry(Exception):
    """A cache entry that breaks a rule of the module docstring; the message says which."""


class BuildCache:
    """Successful builds under ROOT/<key>/: result.json (the build stage's dict) and its files."""

    def __init__(self, root: Path | None):
        self.root = Path(root) if root else None

    def get(self, key: str, mlf_sha: str, board: str) -> dict | None:
        """The cached build of `key` (the job's MLF `mlf_sha` on `board`), or None when there is none;
        DamagedEntry when there is one that breaks the rules."""
        if self.root is None or not os.path.lexists(self.root / key):
            return None
        try:
            return _checked_entry(self.root / key, mlf_sha, board)
        except (InvalidInputError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise DamagedEntry(f"cache entry {self.root / key} is damaged ({_first_line(exc)})") from None

    def discard(self, key: str) -> None:
        """Remove an entry (a damaged one, before it is built again): a link is removed, not followed."""
        if self.root is None:
            return
        path = self.root / key
        if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
            path.unlink(missing_ok=True)
        elif path.is_dir():
            aside = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-damaged-", dir=self.root))
            os.rename(path, aside / key)  # out of the way at once; other matrices see no entry
            shutil.rmtree(aside, ignore_errors=True)

    def put(self, key: str, built: dict) -> None:
        if self.root is None or os.path.lexists(self.root / key):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=self.root))
        files = built.get("files", {})
        for name, content in files.items():
            file_in(staging, name).write_bytes(content)
        record = {k: v for k, v in built.items() if k != "files"}
        (staging / RESULT).write_text(json.dumps({**record, "file_names": sorted(files)}))
        try:
            os.rename(staging, self.root / key)  # atomic: readers see a whole entry or none
        except OSError:  # another matrix stored the same build first
            shutil.rmtree(staging, ignore_errors=True)


def _checked_entry(folder: Path, mlf_sha: str, board: str) -> dict:
    """The entry's build stage result with its files, after every rule of the module docstring."""
    if folder.is_symlink() or not folder.is_dir():
        raise ValueError("not a folder")
    result = json.loads(read_regular(folder / RESULT, "cache record", _MAX_RESULT_BYTES, follow_symlinks=False))
    _check_result(result)
    names = result.pop("file_names")
    files = {name: read_regular(file_in(folder, name), "cached file", MAX_INPUT_BYTES, follow_symlinks=False)
             for name in names}
    _check_record(json.loads(files[BUILD_RECORD]), files, mlf_sha, board)
    return {**result, "files": files}


def _check_result(result: object) -> None:
    if not isinstance(result, dict):
        raise ValueError(f"{RESULT} is not an object")
    kinds = {"status": str, "exit_code": int, "message": str, "flash": int, "ram": int, "runnable": bool,
             "seconds": (int, float), "file_names": list}
    for key, kind in kinds.items():
        if not is_kind(result.get(key), kind):
            raise ValueError(f"{RESULT}: \"{key}\" is missing or of the wrong kind")
    if result["status"] != BUILT or result["exit_code"] != 0:
        raise ValueError(f"{RESULT} is not a successful build")
    if result["flash"] < 0 or result["ram"] < 0 or not result["seconds"] >= 0:
        raise ValueError(f"{RESULT}: impossible sizes or time")
    names = result["file_names"]
    if not all(is_plain_name(n) and n in BUILD_FILES for n in names) or len(set(names)) != len(names):
        raise ValueError(f"{RESULT}: \"file_names\" must name files of a build ({', '.join(BUILD_FILES)})")
    if not {ELF, BUILD_RECORD} <= set(names):
        raise ValueError(f"{RESULT}: no {ELF} or {BUILD_RECORD}")
    if not isinstance(result.get("worker"), (str, type(None))):
        raise ValueError(f"{RESULT}: \"worker\" must be a string")


def _check_record(record: object, files: dict[str, bytes], mlf_sha: str, board: str) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("outputs"), dict):
        raise ValueError(f"{BUILD_RECORD} is not a build record")
    if record.get("mlf", {}).get("sha256") != mlf_sha or record.get("board", {}).get("name") != board:
        raise ValueError(f"{BUILD_RECORD} is the record of another build (another MLF or board)")
    if ELF not in record["outputs"]:
        raise ValueError(f"{BUILD_RECORD} records no SHA-256 of {ELF}")
    for name, content in files.items():
        recorded = record["outputs"].get(name)
        if recorded is not None and recorded != digest(content):
            raise ValueError(f"{name} is not the file its {BUILD_RECORD} records (SHA-256 differs)")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
