"""Which paths a matrix may write — the one rule, for every name that comes from outside.

A matrix writes only under its output folder (-o) and its cache folder:

    OUT/matrix.json, OUT/matrix.html                  the reports
    OUT/jobs/<job id>/<file name>                     each job's files
    CACHE/<build key>/<file name>                     each cached build (matrix/cache.py)

(and the --junit file the user names). Job ids come from a jobs file's board names or from an
earlier result (--retry-failed); file names from a cache entry's result.json; all of them are
untrusted. Each must be a plain name: one path component of letters, digits, '.', '_', '-' and
'+', not starting with '.', so no name can reach a parent folder, an absolute path or a hidden file.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InvalidInputError

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,199}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def is_plain_name(name: object) -> bool:
    return isinstance(name, str) and _PLAIN_NAME.fullmatch(name) is not None


def plain_name(text: str) -> str:
    """`text` made a plain name (for ids built from board names): unsafe characters become '_'."""
    return _UNSAFE.sub("_", text).lstrip(".")[:160] or "_"


def job_folder(outroot: Path, job_id: str) -> Path:
    """OUT/jobs/<job id>; an id that is not a plain name is refused, never used as a path."""
    if not is_plain_name(job_id):
        raise InvalidInputError(f"job id {job_id!r} is not a plain name (letters, digits, '.', '_', '-', '+')")
    return Path(outroot) / "jobs" / job_id


def file_in(folder: Path, name: str) -> Path:
    """FOLDER/<name> for a file a matrix writes or reads back; anything but a plain name is refused."""
    if not is_plain_name(name):
        raise InvalidInputError(f"file name {name!r} is not a plain name")
    return Path(folder) / name
