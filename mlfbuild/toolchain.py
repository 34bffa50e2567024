"""Drive the compiler: a rendered project folder → firmware, or one readable error.

Knows nothing of models: it runs `make` in a folder and reports what the compiler said.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .errors import BuildError, OverBudgetError, StorageError, says_storage_failed
from .resources import setup_hint

# What a build can be asked for (the CLI's choices; kept here, beside the compiler, so that parsing
# the command line does not load the project renderer).
OPT_LEVELS = ("-Os", "-O2", "-O3", "-O1", "-O0", "-Og")
RUNTIMES = ("builtin", "tvm")  # mlfbuild's own crt/, or TVM's standalone CRT

DEFAULT_BUILD_TIMEOUT = 1800.0  # seconds for one make run; the largest real builds take a few minutes
# Bytes of address space for make and for each compiler, assembler and linker it starts (the
# largest real model's compiler needs well under 1 GiB): an `#include "/dev/zero"` ends here.
DEFAULT_BUILD_MEMORY = 4 << 30

_REGION_OVERFLOW = re.compile(r"region [`']?(\w+)'? overflowed by (\d+) bytes")
_NOT_FIT = re.compile(r"will not fit in region [`']?(\w+)'?")
_ASSERT = re.compile(r"ld: (?:.*?: )?(RAM overflow[^\n]*|[^\n]*no room for the stack[^\n]*)")
# gcc and ld say "error:", the assembler "Error:"; make's own "*** [...] Error 1" only echoes them.
_ERROR_LINE = re.compile(r"(?:^|[\s:])(?:fatal )?[Ee]rror:|undefined reference")
_MAKE_LINE = re.compile(r"^g?make(?:\[\d+\])?: ")
# ld's own words for a link that cannot be made, said before collect2's "error: ld returned 1".
_LINK_ERROR = re.compile(r"\bld: .*(?:cannot find |multiple definition of )")
# The Makefile's progress lines: a C or C++ source compiled, the image linked.
_COMPILE_LINES = ("CC   ", "CXX  ")
_LINK_LINE = "LD   "
# What gcc's parts say when their address space runs out (libiberty's xmalloc_failed; the driver).
_OUT_OF_MEMORY = re.compile(r"out of memory allocating \d+ bytes|virtual memory exhausted|Cannot allocate memory")


# gcc's diagnostic line: `path:line:col: warning: message [-Wflag]`.
_WARNING = re.compile(r"^(?P<path>[^:\s]+):\d+:(?:\d+:)? warning: (?P<message>.*?)(?: \[(?P<flag>-W[^\]]+)\])?$")
# Where the model's code lives in a rendered project: TVM's output and the libraries it calls.
_MODEL_CODE = ("model/", "lib/")


@dataclass(frozen=True)
class CompilerWarning:
    path: str
    message: str
    flag: str

    @property
    def in_model_code(self) -> bool:
        return self.path.startswith(_MODEL_CODE)


@dataclass
class MakeResult:
    compiled: list[str] = field(default_factory=list)  # sources the compiler actually ran on
    linked: bool = False
    log: str = ""
    warnings: list[CompilerWarning] = field(default_factory=list)

    def warning_summary(self) -> str | None:
        """One line on the model code's warnings: how many, and the first distinct kinds."""
        model = [w for w in self.warnings if w.in_model_code]
        if not model:
            return None
        kinds: dict[str, int] = {}
        for warning in model:
            key = f"{warning.message} [{warning.flag}]" if warning.flag else warning.message
            kinds[key] = kinds.get(key, 0) + 1
        shown = "; ".join(f"{count}x {kind}" for kind, count in list(kinds.items())[:3])
        more = f"; {len(kinds) - 3} more kind(s)" if len(kinds) > 3 else ""
        return f"{len(model)} compiler warning(s) in the model's code: {shown}{more}"


def find_tools(tools: list[str], prefix: str | None) -> None:
    """Raise BuildError naming the first of `tools` (compiler, objcopy) missing from PATH, with how
    to get it: the Debian package for the default cross toolchain or the host's gcc, the prefix to
    check for any other (`prefix` is None for the host's own tools)."""
    for tool in tools:
        if shutil.which(tool) is None:
            raise BuildError(f"'{tool}' not found on PATH; {_install_hint(tool, prefix)}")


def symbol_renamer(objcopy: str, prefix: str | None) -> Callable[[Path, dict[str, str]], None]:
    """A function renaming symbols of an object file in place with `objcopy --redefine-syms`."""
    def redefine(obj: Path, mapping: dict[str, str]) -> None:
        find_tools([objcopy], prefix)
        with tempfile.NamedTemporaryFile("w", suffix=".syms", delete=False) as listing:
            listing.write("".join(f"{old} {new}\n" for old, new in sorted(mapping.items())))
        try:
            done = subprocess.run([objcopy, f"--redefine-syms={listing.name}", str(obj)], capture_output=True,
                                  text=True, errors="replace", timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"{obj.name}: {objcopy} could not rename its symbols ({exc})") from None
        finally:
            os.unlink(listing.name)
        if done.returncode:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise BuildError(f"{obj.name}: {objcopy} could not rename its symbols: {said}")
    return redefine


def _install_hint(tool: str, prefix: str | None) -> str:
    if prefix is None:
        return f"install the Debian packages {'g++' if tool == 'g++' else 'gcc and binutils'}{setup_hint()}"
    if prefix == "arm-none-eabi-":
        return f"install the Debian package gcc-arm-none-eabi{setup_hint()}, or pass --toolchain-prefix"
    return (f"it comes from --toolchain-prefix '{prefix}': install that toolchain and put its bin folder on "
            "PATH, or give the prefix it really uses")


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    """What `cc` on this PATH is: its path and the first line of its `--version` (the same line a
    build stamps as `toolchain`), or "absent". Part of every cache key, so a different compiler
    under the same name never reuses another's firmware."""
    path = shutil.which(cc)
    if path is None:
        return "absent"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return f"{os.path.realpath(path)}: unknown"
    return f"{os.path.realpath(path)}: {(out.splitlines() or ['unknown'])[0].strip()}"


def toolchain_used(project: Path) -> str:
    """The compiler make really ran: the first line of its `--version`, as the Makefile stamped it."""
    try:
        return (project / "build" / "toolchain.txt").read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def count_compiles(project: Path, make: str = "make", timeout: float = 60.0) -> int | None:
    """How many files the next `make` in `project` will compile: the compiler's version stamp is
    brought up to date, then a dry run lists the rest (see STAMP_CHECK in the Makefile). None when
    make cannot say (the build itself then reports the problem)."""
    try:
        for extra in (["build/toolchain.txt"], ["-n", "STAMP_CHECK="]):
            done = subprocess.run([make, "--no-print-directory", *extra], cwd=project, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, errors="replace", timeout=timeout,
                                  env=dict(os.environ, LC_ALL="C"))
            if done.returncode != 0:
                return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for line in done.stdout.splitlines() if line.startswith(tuple(f'echo "{c}' for c in _COMPILE_LINES)))


def numbered(progress: Callable[[str], None], total: int) -> Callable[[str], None]:
    """`progress` with `[n/total] ` before each compile line."""
    count = 0

    def show(line: str) -> None:
        nonlocal count
        if line.startswith(_COMPILE_LINES):
            count += 1
            line = f"[{count}/{max(total, count)}] {line}"
        progress(line)

    return show


def limit_memory(limit: int) -> Callable[[], None]:
    """A preexec_fn: the child, and everything it starts (which inherits the limit), may map at most
    `limit` bytes each."""
    def apply() -> None:  # the soft limit only, and never above a hard limit the machine already sets
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    return apply


def run_compiler(command: list[str], *, memory: int = DEFAULT_BUILD_MEMORY,
                 timeout: float = DEFAULT_BUILD_TIMEOUT, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """One compiler command outside make, under make's limits: stdin closed, `memory` bytes of address
    space per process, and its whole process group stopped after `timeout` (BuildError)."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace", start_new_session=True, preexec_fn=limit_memory(memory),
                               cwd=cwd)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise BuildError(f"{Path(command[0]).name} did not finish within {timeout:g} s and was stopped") from None
    except BaseException:  # Ctrl-C: no compiler outlives us
        _kill_group(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def first_error(output: str, memory: int = DEFAULT_BUILD_MEMORY) -> str:
    """The compiler's first error line; running out of its memory limit is said as such."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    exhausted = next((line for line in lines if _OUT_OF_MEMORY.search(line)), None)
    if exhausted:
        return _ran_out(exhausted, memory)
    return next((line for line in lines if _ERROR_LINE.search(line)), lines[0] if lines else "no message")[:300]


def run_make(project: Path, *, jobs: int, log: Path, progress: Callable[[str], None] | None = None,
             verbose: bool = False, make: str = "make", targets: list[str] = (), append: bool = False,
             timeout: float = DEFAULT_BUILD_TIMEOUT, memory: int = DEFAULT_BUILD_MEMORY) -> MakeResult:
    """Run make in `project`, streaming progress lines (every line when `verbose`) and keeping the
    whole output in `log`; raise BuildError (compiler, or no end within `timeout` seconds) or
    OverBudgetError (the linker's region overflow) with the first meaningful lines and the log's name.

    The MLF's code is compiled here, so make runs with stdin closed (an `#include "/dev/stdin"` reads
    nothing instead of waiting) in a process group of its own that is killed whole on a timeout or
    any other way out (Ctrl-C included), so that no compiler outlives the build; each of its
    processes may use `memory` bytes of address space."""
    if shutil.which(make) is None:
        raise BuildError(f"'{make}' not found on PATH; install the Debian package make{setup_hint()}")
    env = dict(os.environ, LC_ALL="C")
    result = MakeResult()
    lines: list[str] = []
    process = subprocess.Popen([make, f"-j{max(jobs, 1)}", "--no-print-directory", *targets], cwd=project, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=limit_memory(memory))
    deadline = time.monotonic() + timeout
    finished = False
    try:
        with open(log, "a" if append else "w", encoding="utf-8") as kept:
            for line in _lines_until(process, deadline):
                kept.write(line)
                line = line.rstrip("\n")
                lines.append(line)
                _note(result, line)
                if progress and (verbose or line[:5] in (*_COMPILE_LINES, _LINK_LINE, "BIN  ", "HEX  ")):
                    progress(line)
            code = process.wait(timeout=max(deadline - time.monotonic(), 0))
            finished = True
    except subprocess.TimeoutExpired:
        pass
    finally:
        if not finished:  # not reaped yet, so the group id is still make's own
            _kill_group(process)
        process.stdout.close()
    result.log = "\n".join(lines)
    if not finished:
        raise BuildError(f"the build did not finish within {timeout:g} s; make and the compiler were stopped "
                         f"(raise the limit with --build-timeout; full log: {log})")
    if code != 0:
        raise _failure(result.log, project, f" (full log: {log})", memory)
    return result


def _note(result: MakeResult, line: str) -> None:
    if line.startswith(_COMPILE_LINES):
        result.compiled.append(line[5:].strip())
    if line.startswith(_LINK_LINE):
        result.linked = True
    warning = _WARNING.match(line)
    if warning:
        result.warnings.append(CompilerWarning(warning["path"], warning["message"], warning["flag"] or ""))


def _lines_until(process: subprocess.Popen, deadline: float) -> Iterator[str]:
    """make's output, line by line (undecodable bytes replaced), until it ends; TimeoutExpired when
    `deadline` (time.monotonic) passes first."""
    assert process.stdout is not None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise subprocess.TimeoutExpired(process.args, 0)
            chunk = os.read(process.stdout.fileno(), 65536)
            pending += decoder.decode(chunk, final=not chunk)
            *complete, pending = pending.split("\n")
            yield from (line + "\n" for line in complete)
            if not chunk:
                break
    if pending:
        yield pending


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _failure(log: str, project: Path, where_logged: str, memory: int = DEFAULT_BUILD_MEMORY) -> Exception:
    overflow = _REGION_OVERFLOW.findall(log)
    if overflow:
        detail = ", ".join(f"{region} by {int(n)} bytes" for region, n in overflow)
        return OverBudgetError(f"the firmware does not fit the board: the linker overflowed {detail}{where_logged}",
                               table=_relevant(log, ("overflowed", "will not fit")))
    if _NOT_FIT.search(log) or _ASSERT.search(log):
        message = (_ASSERT.search(log) or _NOT_FIT.search(log)).group(0)
        return OverBudgetError(f"the firmware does not fit the board: {message.strip()}{where_logged}",
                               table=_relevant(log, ("will not fit", "overflow", "no room")))
    lines = log.splitlines()
    errors = [i for i, line in enumerate(lines)
              if (_ERROR_LINE.search(line) or _LINK_ERROR.search(line)) and not _MAKE_LINE.match(line)]
    first = lines[errors[0]] if errors else (log.strip().splitlines() or ["make failed"])[-1]
    source = _source_of_error(lines, errors[0]) if errors else None
    location = f" (in {project / source})" if source else ""
    more = f"; {len(errors) - 1} more error line(s) in the log" if len(errors) > 1 else ""
    full = next((i for i, line in enumerate(lines) if says_storage_failed(line) and not _MAKE_LINE.match(line)), None)
    if full is not None:  # the machine's storage, not the model's code
        source = _source_of_error(lines, full)
        doing = f" while compiling {project / source}" if source and source.endswith((".c", ".s", ".S")) else ""
        return StorageError(f"the disk refused a file{doing}: {lines[full].strip()} (the build writes into "
                            f"{project / 'build'}, the compiler's temporary files go to {tempfile.gettempdir()})"
                            f"{where_logged}")
    exhausted = next((i for i, line in enumerate(lines) if _OUT_OF_MEMORY.search(line)), None)
    if exhausted is not None:
        source = _source_of_error(lines, exhausted)
        location = f" (in {project / source})" if source else ""
        return BuildError(f"compilation failed{location}: {_ran_out(lines[exhausted].strip(), memory)}{where_logged}")
    return BuildError(f"compilation failed{location}: {first.strip()}{more}{where_logged}")


def _ran_out(line: str, memory: int) -> str:
    return f"the compiler ran out of its {memory >> 20:,} MiB of memory ({line}; raise the limit with --build-memory)"


def _source_of_error(lines: list[str], index: int) -> str | None:
    """The project file an error line is about: named on the line itself (gcc, ld), or, for the
    assembler's lines about gcc's temporary .s file, the file the last `CC`/`CXX` progress line
    compiled; none once the link began (ld and collect2 speak of the whole image)."""
    named = re.match(r"([^:\s]+\.(?:c|cc|cpp|cxx|h|hh|hpp|inc|o|ld|s|S)):", lines[index])
    if named and not named.group(1).startswith(("/tmp/", "{")):
        return named.group(1)
    steps = [line for line in lines[:index] if line.startswith((*_COMPILE_LINES, _LINK_LINE))]
    return steps[-1][5:].strip() if steps and not steps[-1].startswith(_LINK_LINE) else None


def _relevant(log: str, needles: tuple[str, ...]) -> str:
    return "\n".join(line for line in log.splitlines() if any(n in line for n in needles))
