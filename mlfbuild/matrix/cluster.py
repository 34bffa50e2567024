"""The Dask client a matrix runs on, and everything around it that must not outlive the matrix.

A local cluster gets a scratch folder of its own: Dask's local directory (its scheduler's and
workers' dask-scratch-space) and the workers' TMPDIR (where the stages unpack and build) point into it, and it is removed when the matrix ends —
however it ends. Every process the cluster started is ended before that.

A remote scheduler (`--scheduler tcp://HOST:PORT`) is untrusted until it has spoken Dask: the address
is checked first, then a Dask scheduler is expected to send its handshake as soon as it accepts a
connection (distributed/comm/core.py: both ends write their handshake, then read the other's; a
message is a u64 count of the bytes read at once, then a u64 frame count, a u64 length per frame
and the frames — distributed/comm/tcp.py and protocol/utils.py; x86 and Arm: little-endian). A listener that says nothing within the
connect timeout, or says something else (an HTTP or SSH server), is not a scheduler: exit 9, one line;
so is one whose handshake is Dask's but whose next words are not a scheduler's (`_connected_client`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ..errors import InfrastructureError, UsageError

CONNECT_TIMEOUT = 10.0  # seconds for a scheduler to accept and answer (--connect-timeout)
WORKERS_TIMEOUT = 60.0  # seconds for a scheduler to have a worker
_MAX_HANDSHAKE_BYTES = 64 * 1024  # a Dask handshake is a small dict (~100 bytes)
_MAX_FRAMES = 64


@contextmanager
def dask_client(scheduler: str | None, workers: int, connect_timeout: float = CONNECT_TIMEOUT,
                on_warning: Callable[[str], None] | None = None) -> Iterator:
    """A Dask client: of the cluster at `scheduler`, or of a local cluster of `workers` processes.
    `on_warning` hears, in one line, that a remote cluster runs other versions than this client."""
    if scheduler:
        with _remote_client(scheduler, connect_timeout, on_warning) as client:
            yield client
    else:
        with _local_client(workers) as client:
            yield client


@contextmanager
def _local_client(workers: int) -> Iterator:
    import dask
    from distributed import Client, LocalCluster

    scratch = Path(tempfile.mkdtemp(prefix="mlfbuild-matrix-"))
    started: list = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(dask.config.set({"temporary-directory": str(scratch)}))
            with _stop_signals_held():
                cluster = stack.enter_context(LocalCluster(
                    n_workers=max(workers, 1), threads_per_worker=1, processes=True, host="127.0.0.1",
                    # CRITICAL: a worker's heartbeat racing the cluster's shutdown logs an ERROR with a
                    # traceback on a loaded machine; job failures reach us through their futures.
                    dashboard_address=None, silence_logs=logging.CRITICAL, local_directory=str(scratch),
                    # the scheduler serves HTTP even without a dashboard: on a free local port, not on
                    # 8787, which another matrix may hold (Dask would warn and take another)
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    env={"TMPDIR": str(scratch)}, preload=[__name__]))
                client = stack.enter_context(Client(cluster, set_as_default=False))
            try:
                yield client
            finally:
                started = _descendants()  # the workers and the stages under way, before they are stopped
    finally:
        _end_all(started)
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _stop_signals_held() -> Iterator[None]:
    """While the local cluster starts, a SIGTERM waits until it is whole (a cluster stopped half-way
    cannot be closed cleanly), and Ctrl-C is ignored: the worker processes started now inherit the
    ignoring (it survives exec, and Python keeps it), so the Ctrl-C a terminal sends to the whole
    process group later reaches mlfbuild alone, which closes the cluster once, quietly. Workers
    started later (a lost one replaced) ignore it from their preload (dask_setup below)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    terminated: list[int] = []
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: terminated.append(signum))
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
        if terminated:
            signal.raise_signal(signal.SIGTERM)


def dask_setup(worker) -> None:
    """Dask runs this in each worker process of a local cluster (its preload): Ctrl-C is mlfbuild's."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _descendants() -> list:
    """This process's children, but multiprocessing's resource tracker: that helper ends with this
    process (it would otherwise be waited for in vain, then killed)."""
    import psutil
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    with contextlib.suppress(psutil.Error):
        return [p for p in psutil.Process().children(recursive=True) if p.pid != tracker]
    return []


def _end_all(processes: list, grace: float = 5.0) -> None:
    """Processes the cluster started that are still alive after it closed are killed (a stage whose
    worker died ends itself within a second; this does not wait on it for longer than `grace`)."""
    import psutil

    _, alive = psutil.wait_procs(processes, timeout=grace if processes else 0)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace)


@contextmanager
def _remote_client(scheduler: str, connect_timeout: float, on_warning: Callable[[str], None] | None) -> Iterator:
    host, port = scheduler_address(scheduler)
    _expect_dask(scheduler, host, port, connect_timeout)
    with _version_warnings_in_one_line(on_warning):
        client = _connected_client(scheduler, f"tcp://{_joined(host, port)}", connect_timeout)
    with client:
        try:
            with _version_warnings_in_one_line(on_warning):
                client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
        except TimeoutError:
            raise InfrastructureError(f"the Dask scheduler at {scheduler} has no workers (start some with "
                                      f"`dask worker {scheduler}`)") from None
        yield client


@contextmanager
def _version_warnings_in_one_line(on_warning: Callable[[str], None] | None) -> Iterator[None]:
    """Dask warns of version differences between client, scheduler and workers with a table (a worker
    image's Python is often another micro release than the user's); `on_warning` hears it in one line."""
    if on_warning is None:
        yield
        return
    from distributed.versions import VersionMismatchWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for item in caught:
        if issubclass(item.category, VersionMismatchWarning):
            on_warning(versions_line(str(item.message)))
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


_TABLE_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*$", re.M)


def versions_line(message: str) -> str:
    """Dask's version-mismatch table (package, client, scheduler, workers) as one line."""
    rows = [row for row in _TABLE_ROW.findall(message) if row[0] != "Package"]
    if not rows:
        return f"the Dask cluster's versions differ from this client's: {' '.join(message.split())[:300]}"

    def short(version: str) -> str:
        return version.removesuffix(".final.0")

    differences = "; ".join(f"{package} {short(client)} here, {short(scheduler)} on the scheduler, "
                            f"{short(workers)} on the workers" for package, client, scheduler, workers in rows)
    return f"the Dask cluster runs other versions than this client (Dask asks for the same everywhere): {differences}"


def _connected_client(scheduler: str, address: str, timeout: float):
    """A Client of `address`, or InfrastructureError at once. A listener that sends Dask's handshake and
    then anything else (or closes) can make the Client's start raise any exception (a KeyError, an
    AssertionError on the reply); the half-made Client is then marked closed, or its __del__ would wait
    2 x `timeout` for the connection to close and print a traceback."""
    from distributed import Client

    client = Client.__new__(Client)
    try:
        client.__init__(address, timeout=f"{timeout}s", set_as_default=False)
    except Exception as exc:  # noqa: BLE001 - whatever the remote end made the Client raise
        client.status = "closed"
        if isinstance(exc, TimeoutError):
            why = f"it spoke Dask's handshake, then did not answer as a scheduler within {timeout:g} s"
        elif isinstance(exc, OSError):
            why = _first_line(exc)
        else:
            why = f"it spoke Dask's handshake, then not as a scheduler does ({type(exc).__name__}: {_first_line(exc)})"
        raise InfrastructureError(f"cannot reach the Dask scheduler at {scheduler}: {why}") from None
    return client


def scheduler_address(text: str) -> tuple[str, int]:
    """(host, port) of `tcp://HOST:PORT` or `HOST:PORT` ([IPv6]:PORT too); UsageError for anything else."""
    rest = text[len("tcp://"):] if text.startswith("tcp://") else text
    host, sep, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    good_host = host and all(c.isalnum() or c in ".-_:" for c in host)
    if "://" in rest or not sep or not good_host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--scheduler {text!r}: not a Dask scheduler address (tcp://HOST:PORT)")
    return host, int(port)


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _expect_dask(scheduler: str, host: str, port: int, timeout: float) -> None:
    """Connect and read the scheduler's handshake within `timeout` seconds; InfrastructureError when
    nothing answers, or something that is not Dask."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as link:
            header = _read_exactly(link, 16, deadline)
            total, frames = struct.unpack("<QQ", header)
            if not (16 <= total <= _MAX_HANDSHAKE_BYTES and 0 < frames <= _MAX_FRAMES
                    and 8 * (1 + frames) <= total):
                raise InfrastructureError(f"{scheduler} answered, but not as a Dask scheduler does "
                                          f"(it sent {header[:8]!r}...)")
            lengths = struct.unpack(f"<{frames}Q", _read_exactly(link, 8 * frames, deadline))
            if 8 * (1 + frames) + sum(lengths) < total or sum(lengths) > _MAX_HANDSHAKE_BYTES:
                raise InfrastructureError(f"{scheduler} answered, but not as a Dask scheduler does")
    except socket.timeout:
        raise InfrastructureError(f"the Dask scheduler at {scheduler} did not answer within {timeout:g} s "
                                  "(not a Dask scheduler? raise --connect-timeout for a slow one)") from None
    except OSError as exc:
        raise InfrastructureError(f"cannot reach the Dask scheduler at {scheduler}: "
                                  f"{exc.strerror or _first_line(exc)}") from None


def _read_exactly(link: socket.socket, count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        link.settimeout(left)
        chunk = link.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the connection was closed before a Dask handshake came")
        data += chunk
    return data


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
