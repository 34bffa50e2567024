"""`mlfbuild.toml`: a project's defaults for build, run and size, read from the working folder.

    mlf = "kws.tar"                      # the MLF (TARGET of run when none is given)
    board = "mps2-an386"                 # a board name or alias
    opt = "-O2"                          # one of -Os -O2 -O3 -O1 -O0 -Og
    runtime = "builtin"                  # builtin | tvm
    references = ["kws=kws.npz"]         # [MODEL=]REF.npz or [MODEL=]MODEL.tflite, as --reference
    samples = 100                        # as --samples
    atol = 0.01                          # tolerances of run, as --atol/--rtol (finite, >= 0)
    rtol = 0.0
    app = "app"                          # your application's sources instead of mlfbuild's console (build --app)
    build_memory = "8G"                  # as --build-memory: address space of make and each compiler (64M..1024G)
    [budgets]
    flash = "256K"                       # bytes: 262144, 0x40000, 256K, 1M
    ram = "64K"

Every key is optional; a flag given on the command line wins over the file. Paths are relative to
the working folder (where the file is). Problems are one-line InvalidInputErrors naming the key
(exit 3); so is an mlfbuild.toml that is there but cannot be read as a file (a folder, a FIFO, a
device, a link to nowhere or to itself): it is never silently ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .errors import InvalidInputError
from .toolchain import OPT_LEVELS, RUNTIMES
from .suggest import did_you_mean
from .units import build_memory, parse_byte_count, tolerance
from .untrusted import read_regular

PROJECT_FILE = "mlfbuild.toml"
_KEYS = ("mlf", "board", "opt", "runtime", "references", "samples", "atol", "rtol", "budgets", "app", "build_memory")
_MAX_BYTES = 1 << 20
MAX_SAMPLES = 100_000
_BUDGET_KEYS = ("flash", "ram")


@dataclass(frozen=True)
class ProjectFile:
    path: Path
    mlf: Path | None = None
    board: str | None = None
    opt: str | None = None
    runtime: str | None = None
    references: tuple[str, ...] = ()
    samples: int | None = None
    atol: float | None = None
    rtol: float | None = None
    app: Path | None = None
    build_memory: int | None = None
    budget_flash: int | None = None
    budget_ram: int | None = None


def find_project_file(folder: Path = Path(".")) -> ProjectFile | None:
    """The project file of `folder`, or None when it has none (anything by that name, even a broken
    link, is the project file: read, or refused in one line)."""
    path = Path(folder) / PROJECT_FILE
    return load_project_file(path) if os.path.lexists(path) else None


def load_project_file(path: Path) -> ProjectFile:
    raw = read_regular(path, "project file", _MAX_BYTES)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise InvalidInputError(f"{path}: invalid TOML: nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{path}: invalid TOML: {str(exc).splitlines()[0]}") from None
    _no_unknown_keys(path, "", data, _KEYS)
    budgets = data.get("budgets", {})
    if not isinstance(budgets, dict):
        _fail(path, "budgets", "must be a table ([budgets] with flash and ram)")
    _no_unknown_keys(path, "budgets.", budgets, _BUDGET_KEYS)
    mlf = _string(path, data, "mlf")
    return ProjectFile(path=Path(path), mlf=Path(mlf) if mlf else None, board=_string(path, data, "board"),
                       opt=_string(path, data, "opt", OPT_LEVELS), runtime=_string(path, data, "runtime", RUNTIMES),
                       references=_strings(path, data, "references"), samples=_samples(path, data),
                       atol=_tolerance(path, data, "atol"), rtol=_tolerance(path, data, "rtol"),
                       app=Path(_string(path, data, "app")) if _string(path, data, "app") else None,
                       build_memory=_build_memory(path, data),
                       budget_flash=_byte_count(path, budgets, "budgets.flash", "flash"),
                       budget_ram=_byte_count(path, budgets, "budgets.ram", "ram"))


def _fail(path: Path, key: str, message: str) -> None:
    raise InvalidInputError(f"{path}: {key}: {message}")


def _no_unknown_keys(path: Path, prefix: str, data: dict, known: tuple[str, ...]) -> None:
    for key in data:
        if key not in known:
            _fail(path, prefix + key, f"unknown key{did_you_mean(key, known)}; known: {', '.join(known)}")


def _string(path: Path, data: dict, key: str, choices: tuple[str, ...] = ()) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        _fail(path, key, f"must be a non-empty string, got {value!r}")
    if choices and value not in choices:
        _fail(path, key, f"must be one of {', '.join(choices)}; got '{value}'")
    return value


def _strings(path: Path, data: dict, key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        _fail(path, key, f"must be a list of strings, got {value!r}")
    return tuple(value)


def _tolerance(path: Path, data: dict, key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        if isinstance(value, str):
            raise ValueError(f"a tolerance must be a number, got {value!r}")
        return tolerance(value)
    except ValueError as exc:
        _fail(path, key, str(exc))
    return None  # not reached


def _samples(path: Path, data: dict) -> int | None:
    value = data.get("samples")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAMPLES:
        _fail(path, "samples", f"must be a whole number from 1 to {MAX_SAMPLES:,}, got {value!r}")
    return value


def _build_memory(path: Path, data: dict) -> int | None:
    value = data.get("build_memory")
    if value is None:
        return None
    try:
        return build_memory(value)
    except ValueError as exc:
        _fail(path, "build_memory", str(exc))
    return None  # not reached


def _byte_count(path: Path, table: dict, key: str, name: str) -> int | None:
    value: Any = table.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            return parse_byte_count(value)
        except ValueError as exc:
            _fail(path, key, str(exc))
    _fail(path, key, f"must be a byte count (65536, \"64K\", \"1M\"), got {value!r}")
    return None  # not reached
