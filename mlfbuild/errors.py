"""One exception hierarchy; the CLI is the only place that maps it to exit codes.

Every message is written for the user: one line that says what is wrong and where.
"""

from __future__ import annotations

import errno
import os

EXIT_INTERNAL = 1  # an MlfError without a kind of its own
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3
EXIT_BUILD = 4
EXIT_OVER_BUDGET = 5
EXIT_RUN = 6
EXIT_MISMATCH = 7
EXIT_FLASH = 8
EXIT_INFRASTRUCTURE = 9


class MlfError(Exception):
    """Base of every error mlfbuild reports to a user."""

    exit_code = EXIT_INTERNAL


class UsageError(MlfError):
    exit_code = EXIT_USAGE


class InvalidInputError(MlfError):
    """An input file (MLF, params, graph, board file, tensor file) is unusable."""

    exit_code = EXIT_INVALID_INPUT


class ArchiveError(InvalidInputError):
    """The MLF tarball is hostile, broken or not a tar at all."""


class MetadataError(InvalidInputError):
    """metadata.json is missing, malformed or of an unsupported version."""


class ParamsError(InvalidInputError):
    """A .params file does not follow TVM's NDArray-list format."""


class GraphError(InvalidInputError):
    """An executor-config graph JSON is malformed or inconsistent."""


class GeneratedCodeError(InvalidInputError):
    """The MLF's generated C is not in a shape TVM emits, so a fact read from it cannot be trusted."""


class BoardError(InvalidInputError):
    """A board file is malformed or names something unsupported."""


class BuildError(MlfError):
    """Rendering or compiling the firmware failed (toolchain missing, compiler error)."""

    exit_code = EXIT_BUILD


class OverBudgetError(MlfError):
    """The firmware does not fit the board's flash or RAM (or a tighter budget)."""

    exit_code = EXIT_OVER_BUDGET

    def __init__(self, message: str, table: str = ""):
        super().__init__(message)
        self.table = table


class RunError(MlfError):
    """The firmware could not be run, crashed, hung or spoke garbage."""

    exit_code = EXIT_RUN


class MismatchError(MlfError):
    """The firmware ran but its outputs differ from the reference."""

    exit_code = EXIT_MISMATCH


class FlashError(MlfError):
    """Writing or verifying the image on a board failed."""

    exit_code = EXIT_FLASH


class InfrastructureError(MlfError):
    """The machinery around a build or run failed: a cluster scheduler out of reach, workers lost."""

    exit_code = EXIT_INFRASTRUCTURE


class StorageError(InfrastructureError):
    """A file could not be written for a reason that is the machine's, not the input's: disk full, quota,
    a read-only file system, an I/O error."""


# The one rule for a file that cannot be written: when the storage refuses it — full, over quota,
# beyond the file-size limit, a read-only file system, an I/O error — the machine failed (exit 9);
# when the path is wrong or its permissions forbid it, the caller chose it (exit 2).
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
# The same failures as another program (a compiler, an assembler) words them under LC_ALL=C; a
# process the file-size limit stopped is killed by SIGXFSZ ("File size limit exceeded").
STORAGE_TEXTS = tuple(os.strerror(code) for code in sorted(_NO_ROOM)) + ("File size limit exceeded",)


def storage_problem(exc: OSError) -> bool:
    """True when `exc` says the storage failed (disk full, read-only, I/O), not that a path is wrong."""
    return exc.errno in _NO_ROOM


def says_storage_failed(line: str) -> bool:
    """True when a program's message line reports one of the storage failures above."""
    return any(text in line for text in STORAGE_TEXTS)


def os_error(exc: OSError, doing: str) -> MlfError:
    """One line for an OSError met while `doing` (e.g. "cannot write out/size.json"): a storage
    failure is the machine's (exit 9); a path that cannot be used is the caller's (exit 2)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    message = f"{doing}: {reason}" if doing else reason
    return StorageError(message) if storage_problem(exc) else UsageError(message)


class StdoutError(OSError):
    """Writing to standard output failed (a closed pipe, a full disk, a closed descriptor)."""
