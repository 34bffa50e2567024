"""Runs a matrix on Dask distributed: a local cluster of its own, or an existing one (`--scheduler`).

Every input travels by content: MLFs, references, board files and the CMSIS-NN tree become small
tasks keyed by their SHA-256 that return their bytes, so the scheduler holds them and any worker
(on any machine, or a replacement for a lost one) gets them from the cluster, never from the
submitter's file system. Builds are tasks keyed by the build cache key, so each firmware is built
once per matrix whatever the number of jobs that need it; each job is one task that runs on the
firmware. A worker lost mid-task makes the scheduler run the task again elsewhere; the job's
future completes once, so each job is reported once.
"""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..boards import load_board
from ..errors import EXIT_INFRASTRUCTURE, EXIT_INVALID_INPUT, InfrastructureError, InvalidInputError, UsageError
from ..project import ProjectOptions
from ..run.references import HOST
from ..toolchain import DEFAULT_BUILD_MEMORY, compiler_identity
from ..units import build_memory, seconds
from ..untrusted import MAX_INPUT_BYTES, read_regular
from .cache import BuildCache, DamagedEntry, build_key, digest
from .jobs import Job
from .report import job_result
from .stage import BUILT, INFRASTRUCTURE, INVALID_INPUT, build_task, run_task


@dataclass(frozen=True)
class BuildConfig:
    """What every build of the matrix shares (mlfbuild build's options)."""

    opt: str = "-Os"
    runtime: str = "builtin"
    board_files: tuple[Path, ...] = ()
    cmsis_nn: Path | None = None
    budget_flash: int | None = None
    budget_ram: int | None = None
    # A limit, not an input: the firmware it allows is the same, so the cache key leaves it out
    # (only builds that succeeded are cached).
    build_memory: int = DEFAULT_BUILD_MEMORY

    def __post_init__(self) -> None:  # the library's callers too, by the rule of --build-memory
        try:
            build_memory(self.build_memory)
        except ValueError as exc:
            raise UsageError(f"build_memory: {exc}") from None


@dataclass(frozen=True)
class Limits:
    build_only: bool = False
    job_timeout: float = 900.0  # seconds for the build, and again for the run, of one job
    reply_timeout: float = 60.0  # seconds to wait for any reply of the firmware

    def __post_init__(self) -> None:  # the library's callers too: a NaN limit would fail every job
        for name in ("job_timeout", "reply_timeout"):
            try:
                seconds(getattr(self, name))
            except ValueError as exc:
                raise UsageError(f"{name}: {exc}") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _content(data):
    """A task that returns its argument: puts bytes into the cluster under their content hash."""
    return data


class _Submission:
    """What a matrix put into the cluster, and what each future stands for."""

    def __init__(self, client, config: BuildConfig, limits: Limits, cache: BuildCache,
                 on_warning: Callable[[str], None]):
        self.client, self.config, self.limits, self.cache, self.on_warning = client, config, limits, cache, on_warning
        self.damaged: set[str] = set()  # build keys whose cache entry was damaged
        self.session = uuid.uuid4().hex[:8]  # task keys of this matrix, apart from other clients'
        self.contents: dict = {}  # sha256 → future of the bytes
        self.builds: dict = {}  # build key → future of the build stage's dict
        self.build_keys: dict = {}  # task key of a build → build key, for the cache
        self.jobs: dict = {}  # task key of a job → (job, cache state)
        self.labels: dict = {}  # task key → what it does, for progress
        self.board_files = [_read(p, "board file") for p in config.board_files]
        self.cmsis_nn = _tree_bytes(config.cmsis_nn) if config.cmsis_nn else None

    def content(self, data: bytes):
        sha = digest(data)
        if sha not in self.contents:
            self.contents[sha] = self.client.submit(_content, data, key=f"content-{sha}")
        return self.contents[sha]

    def submit(self, job: Job) -> None:
        """The job's task, after its build's (unless the build is under way already or cached)."""
        inputs = _job_inputs(job, self.config, self.board_files, self.cmsis_nn)
        key = inputs["key"]
        if key in self.builds:
            state = "reused"
        elif (hit := self._cached(key, inputs)) is not None:
            self.builds[key], state = self.client.submit(_content, hit, key=f"cached-{key[:16]}-{self.session}"), "hit"
        else:
            state = "rebuilt" if key in self.damaged else "miss"
            self.builds[key] = self._build(job, key, inputs["mlf"])
        references = [self.content(r) for r in inputs["references"]]
        future = self.client.submit(run_task, job.to_json(), self.builds[key], references, self.limits.reply_timeout,
                                    self.limits.job_timeout, self.limits.build_only,
                                    key=f"job-{job.id}-{self.session}")
        self.jobs[future.key] = (job, state, future)
        self.labels[future.key] = f"{job.model} on {job.board}"

    def _cached(self, key: str, inputs: dict) -> dict | None:
        """The cached build, or None; a damaged entry is said and removed, and the job built again."""
        try:
            return self.cache.get(key, digest(inputs["mlf"]), inputs["board"])
        except DamagedEntry as exc:
            self.on_warning(f"{exc}: building it again")
            self.damaged.add(key)
            self.cache.discard(key)
            return None

    def _build(self, job: Job, key: str, mlf: bytes):
        config = self.config
        spec = {"mlf_name": Path(job.mlf).name, "board": job.board, "opt": config.opt, "runtime": config.runtime,
                "board_file_names": [Path(p).name for p in config.board_files],
                "budget_flash": config.budget_flash, "budget_ram": config.budget_ram,
                "build_memory": config.build_memory, "timeout": self.limits.job_timeout}
        future = self.client.submit(build_task, spec, self.content(mlf), [self.content(b) for b in self.board_files],
                                    self.content(self.cmsis_nn) if self.cmsis_nn is not None else None,
                                    key=f"build-{key[:16]}-{self.session}")
        self.build_keys[future.key] = key
        self.labels[future.key] = f"build {job.model} for {job.board}"
        return future

    def futures(self) -> list:
        return [self.builds[key] for key in self.build_keys.values()] + [f for _, _, f in self.jobs.values()]


def run_matrix(jobs: list[Job], config: BuildConfig, limits: Limits, *, client, outroot: Path,
               cache: BuildCache, on_result: Callable[[dict], None] = lambda r: None,
               on_running: Callable[[list[str]], None] | None = None,
               on_warning: Callable[[str], None] = lambda w: None) -> list[dict]:
    """Every job's result (plain dicts, in job order); files of each job under OUTROOT/jobs/<id>/."""
    from distributed import as_completed

    submission = _Submission(client, config, limits, cache, on_warning)
    results: dict[str, dict] = {}

    def report(job: Job, outcome: dict, cache_state: str) -> None:
        if job.id in results:  # cannot happen: a future completes once; kept as a guard
            raise InfrastructureError(f"job {job.id} reported twice")
        results[job.id] = job_result(job, outcome, cache_state, outroot)
        on_result(results[job.id])

    for job in jobs:
        try:
            submission.submit(job)
        except InvalidInputError as exc:
            report(job, _failure(INVALID_INPUT, EXIT_INVALID_INPUT, _first_line(exc)), "none")
    pending = as_completed(submission.futures(), loop=client.loop)
    while not pending.is_empty():
        batch = pending.next_batch(block=False)
        for future in batch:
            if future.key in submission.build_keys:
                _keep_build(future, cache, submission.build_keys[future.key])
            else:
                job, state, _ = submission.jobs[future.key]
                report(job, _outcome(future), state)
        if not batch:
            if on_running:
                on_running(_running(client, submission.labels))
            time.sleep(0.25)
    return [results[job.id] for job in jobs]


def _job_inputs(job: Job, config: BuildConfig, board_files: list[bytes], cmsis_nn: bytes | None) -> dict:
    """The bytes a job needs and the cache key of its build; bad input is the job's invalid-input error."""
    mlf = _read(Path(job.mlf), "MLF")
    # The host twin's "reference" is the MLF itself: the worker builds it for the host beside the firmware.
    references = [mlf if r.rpartition("=")[2] == HOST else _read(Path(r.rpartition("=")[2]), "reference")
                  for r in job.references]
    board = load_board(job.board, list(config.board_files)).to_json()
    options = {"opt": config.opt, "runtime": config.runtime, "budget_flash": config.budget_flash,
               "budget_ram": config.budget_ram}
    cc = "gcc" if board["kind"] == "host" else f"{ProjectOptions().toolchain_prefix}gcc"
    key = build_key(digest(mlf), board, [digest(b) for b in board_files],
                    digest(cmsis_nn) if cmsis_nn is not None else None, options, compiler_identity(cc))
    return {"mlf": mlf, "references": references, "key": key, "board": board["name"]}


def _read(path: Path, what: str) -> bytes:
    return read_regular(Path(path), what, MAX_INPUT_BYTES)


def _tree_bytes(folder: Path) -> bytes:
    """A folder as a tar with sorted names and no owners or times: equal trees give equal bytes."""
    if not Path(folder).is_dir():
        raise InvalidInputError(f"{folder}: not a folder (--cmsis-nn takes a CMSIS-NN source tree)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(Path(folder).rglob("*")):
            relative = path.relative_to(folder)
            if ".git" in relative.parts or not path.is_file():
                continue
            info = tarfile.TarInfo(str(relative))
            info.size, info.mode = path.stat().st_size, 0o644
            with path.open("rb") as data:
                tar.addfile(info, data)
    return buffer.getvalue()


def _keep_build(future, cache: BuildCache, key: str) -> None:
    if future.status == "finished":
        built = future.result()
        if built["status"] == BUILT:
            cache.put(key, built)


def _outcome(future) -> dict:
    """A job task's result, or what became of it: lost workers (Dask gave up) or a cancelled task."""
    from distributed import KilledWorker

    if future.status == "finished":
        return future.result()
    if future.status == "cancelled":
        return _failure(INFRASTRUCTURE, EXIT_INFRASTRUCTURE, "the cluster cancelled this job")
    error = future.exception()
    if isinstance(error, KilledWorker):
        return _failure(INFRASTRUCTURE, EXIT_INFRASTRUCTURE,
                        f"workers were lost while running this job, too often to try again ({_first_line(error)})")
    return _failure(INFRASTRUCTURE, EXIT_INFRASTRUCTURE, f"the worker failed: {type(error).__name__}: "
                                                         f"{_first_line(error)}")


def _failure(status: str, exit_code: int, message: str) -> dict:
    return {"status": status, "exit_code": exit_code, "message": message, "files": {}}


def _running(client, labels: dict) -> list[str]:
    try:
        processing = client.processing()
    except Exception:  # progress is a nicety: a slow scheduler must not stop the matrix
        return []
    return [labels[key] for keys in processing.values() for key in keys if key in labels]
