"""Our C runtime (crt/) as project files: the one list of what goes into the firmware's runtime.

TVM's standalone CRT, the alternative (`--runtime tvm`), is tvm_runtime.py."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..boards import Board
from ..resources import data_dir

# Sources of crt/src that belong to one platform only; every other file is portable.
_PLATFORM_ONLY = {"host": ("platform_host.c",), "mcu": ("platform_cortexm.c", "startup_cortexm.c", "newlib_syscalls.c")}


@functools.cache
def crt_setting(name: str) -> int:
    """A numeric option's default in crt/include/mlfrt_config.h, the one place it is stated."""
    config = (data_dir("crt") / "include" / "mlfrt_config.h").read_text()
    match = re.search(rf"^#define {name} (\d+)u?$", config, re.M)
    if match is None:
        raise LookupError(f"mlfrt_config.h has no numeric default for {name}")
    return int(match.group(1))


def fault_exit_code() -> int:
    """What the firmware exits with after reporting a fault (MLFRT_FAULT_EXIT_CODE)."""
    return crt_setting("MLFRT_FAULT_EXIT_CODE")


@dataclass(frozen=True)
class RuntimeChoice:
    name: str  # builtin | tvm
    crt_dir: Path | None = None


@dataclass
class RuntimeFiles:
    sources: list[str]
    includes: list[str]
    defines: list[str]
    notes: list[str] = field(default_factory=list)
    # Third-party runtime C (TVM's CRT with --runtime tvm): compiled like model code, with these flags.
    library_sources: list[str] = field(default_factory=list)
    library_flags: list[str] = field(default_factory=list)


def builtin_runtime_files(board: Board, writer) -> RuntimeFiles:
    """Our crt/: its headers, and every source of crt/src except those of the other platform."""
    crt = data_dir("crt")
    platform = "host" if board.is_host else "mcu"
    excluded = {name for kind, names in _PLATFORM_ONLY.items() if kind != platform for name in names}
    for path in sorted((crt / "include").rglob("*.h")):
        writer.copy(path, f"crt/include/{path.relative_to(crt / 'include')}")
    sources = []
    for path in sorted((crt / "src").glob("*.c")):
        if path.name not in excluded:
            writer.copy(path, f"crt/src/{path.name}")
            sources.append(f"crt/src/{path.name}")
    for path in sorted((crt / "src").glob("*.h")):
        writer.copy(path, f"crt/src/{path.name}")
    return RuntimeFiles(sources=sources, includes=["crt/include"], defines=board.c_defines())
