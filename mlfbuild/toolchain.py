"""Drive the compiler: a rendered project folder → firmware, or one readable error.

Knows nothing of models: it runs `make` in a folder and reports what the compiler said.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .errors import BuildError, OverBudgetError

_REGION_OVERFLOW = re.compile(r"region [`']?(\w+)'? overflowed by (\d+) bytes")
_NOT_FIT = re.compile(r"will not fit in region [`']?(\w+)'?")
_ASSERT = re.compile(r"ld: (?:.*?: )?(RAM overflow[^\n]*|[^\n]*no room for the stack[^\n]*)")


@dataclass
class MakeResult:
    compiled: list[str] = field(default_factory=list)  # sources the compiler actually ran on
    linked: bool = False
    log: str = ""


def find_compiler(cc: str) -> str:
    path = shutil.which(cc)
    if path is None:
        hint = ("install the Debian package gcc-arm-none-eabi (bash scripts/setup.sh does) or pass "
                "--toolchain-prefix" if "arm-none-eabi" in cc else "install gcc")
        raise BuildError(f"compiler '{cc}' not found on PATH; {hint}")
    return path


def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


def run_make(project: Path, *, jobs: int, progress: Callable[[str], None] | None = None,
             make: str = "make", targets: list[str] = ()) -> MakeResult:
    """Run make in `project`, streaming progress lines; raise BuildError (compiler) or
    OverBudgetError (the linker's region overflow) with the first meaningful lines."""
    if shutil.which(make) is None:
        raise BuildError(f"'{make}' not found on PATH; install the Debian package make (bash scripts/setup.sh does)")
    env = dict(os.environ, LC_ALL="C")
    result = MakeResult()
    lines: list[str] = []
    process = subprocess.Popen([make, f"-j{max(jobs, 1)}", "--no-print-directory", *targets], cwd=project, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        if line.startswith("CC   "):
            result.compiled.append(line[5:].strip())
        if line.startswith("LD   "):
            result.linked = True
        if progress and line[:5] in ("CC   ", "LD   ", "BIN  ", "HEX  "):
            progress(line)
    code = process.wait()
    result.log = "\n".join(lines)
    if code != 0:
        raise _failure(result.log, project)
    return result


def _failure(log: str, project: Path) -> Exception:
    overflow = _REGION_OVERFLOW.findall(log)
    if overflow:
        detail = ", ".join(f"{region} by {int(n)} bytes" for region, n in overflow)
        return OverBudgetError(f"the firmware does not fit the board: the linker overflowed {detail}",
                               table=_relevant(log, ("overflowed", "will not fit")))
    if _NOT_FIT.search(log) or _ASSERT.search(log):
        message = (_ASSERT.search(log) or _NOT_FIT.search(log)).group(0)
        return OverBudgetError(f"the firmware does not fit the board: {message.strip()}",
                               table=_relevant(log, ("will not fit", "overflow", "no room")))
    errors = [line for line in log.splitlines() if re.search(r"\berror\b|undefined reference", line)]
    first = errors[0] if errors else (log.strip().splitlines() or ["make failed"])[-1]
    where = re.match(r"([^:\s]+\.(?:c|cc|h|o|ld)):", first)
    location = f" (in {project / where.group(1)})" if where else ""
    more = f"; {len(errors) - 1} more error line(s) in the log" if len(errors) > 1 else ""
    return BuildError(f"compilation failed{location}: {first.strip()}{more}")


def _relevant(log: str, needles: tuple[str, ...]) -> str:
    return "\n".join(line for line in log.splitlines() if any(n in line for n in needles))
