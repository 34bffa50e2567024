"""What a worker does: the build and the run of a job, as pure functions of plain data.

`build_task` and `run_task` are the functions the engine hands to Dask. Their inputs are bytes
(the MLF, board files, CMSIS-NN tree, references, the firmware) and plain dicts, so a worker needs
nothing of the submitter's file system; their results are plain dicts (files as bytes). Each stage
runs in a child process of its own (`python -m mlfbuild.matrix.stage build|run DIR`) in its own
process group, so the per-job time limit can end it together with its compiler or emulator.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from ..errors import (EXIT_BUILD, EXIT_INFRASTRUCTURE, EXIT_INVALID_INPUT, EXIT_MISMATCH, EXIT_OVER_BUDGET,
                      EXIT_RUN)
from ..record import BUILD_LOG, BUILD_RECORD, ELF, SIZE_SNAPSHOT
from ..run.references import HOST
from ..run.twin import TWIN_MLF

# Statuses of a build stage; a job's final status is one of these or a run's.
BUILT, OVER_BUDGET, BUILD_ERROR, INVALID_INPUT, INFRASTRUCTURE = (
    "built", "over budget", "build error", "invalid input", "infrastructure error")
PASS, MISMATCH, NOT_CHECKED, RUN_ERROR, NOT_RUN = "pass", "mismatch", "not checked", "run error", "not run"

BUILD_FILES = (ELF, "firmware.map", BUILD_RECORD, BUILD_LOG, SIZE_SNAPSHOT, "size.html")
SPEC, RESULT, OUT = "spec.json", "result.json", "out"


def build_task(spec: dict, mlf: bytes, board_files: list[bytes], cmsis_nn: bytes | None) -> dict:
    """Build one firmware. spec: mlf_name, board, board_file_names, opt, runtime, budget_flash, budget_ram,
    build_memory, timeout."""
    with tempfile.TemporaryDirectory(prefix="mlfbuild-build-") as work:
        folder = Path(work)
        (folder / spec["mlf_name"]).write_bytes(mlf)
        board_paths = []
        for index, (name, content) in enumerate(zip(spec["board_file_names"], board_files)):
            path = folder / f"boards{index}" / name  # a board file is named after its board
            path.parent.mkdir()
            path.write_bytes(content)
            board_paths.append(str(path.relative_to(folder)))
        if cmsis_nn is not None:
            with tarfile.open(fileobj=io.BytesIO(cmsis_nn)) as tar:
                tar.extractall(folder / "cmsis-nn", filter="data")
        stage = {**spec, "board_files": board_paths,
                 "cmsis_nn": "cmsis-nn" if cmsis_nn is not None else None}
        return _in_child("build", folder, stage, spec["timeout"], EXIT_BUILD, BUILD_ERROR)


def run_task(job: dict, built: dict, references: list[bytes], reply_timeout: float, timeout: float,
             build_only: bool) -> dict:
    """The result of one job: its build's, and when the firmware was built and its board can be run
    here (QEMU or host), the run's. Never raises: failures are data."""
    result = {"status": built["status"], "exit_code": built["exit_code"], "message": built["message"],
              "flash": built.get("flash"), "ram": built.get("ram"), "ticks": None, "ms": None, "clock": None,
              "instructions": None, "unchecked": [], "build_seconds": built["seconds"],
              "build_worker": built.get("worker"), "run_seconds": 0.0, "worker": _worker_address(),
              "files": dict(built.get("files", {}))}
    if built["status"] != BUILT:
        return result
    if build_only or not built["runnable"]:
        why = "--build-only" if build_only else "real hardware: flash it and run with mlfbuild run --port"
        return {**result, "status": NOT_RUN, "message": f"built, not run ({why}); outputs not checked"}
    with tempfile.TemporaryDirectory(prefix="mlfbuild-run-") as work:
        folder = Path(work)
        for name in (ELF, BUILD_RECORD):
            (folder / name).write_bytes(built["files"][name])
        (folder / "firmware.elf").chmod(0o755)  # a host board runs it as a program
        names, copies = [], {}
        for index, (reference, content) in enumerate(zip(job["references"], references)):
            model, sep, original = reference.rpartition("=")
            if original == HOST:  # its content is the MLF, which the host twin is built from
                (folder / TWIN_MLF).write_bytes(content)
                names.append(reference)
                continue
            copy = folder / f"reference{index}{Path(original).suffix or '.npz'}"  # .npz, or a .tflite
            copy.write_bytes(content)
            names.append(f"{model}{sep}{copy}")
            copies[str(copy)] = original
        spec = {"references": names, "atol": job["atol"], "rtol": job["rtol"], "timeout": reply_timeout,
                "samples": job.get("samples")}
        ran = _in_child("run", folder, spec, timeout, EXIT_RUN, RUN_ERROR)
        for copy, original in copies.items():  # messages name the user's file, not the worker's copy
            ran["message"] = ran["message"].replace(copy, original)
    files = {**result["files"], **ran.pop("files", {})}
    return {**result, **ran, "run_seconds": ran["seconds"], "files": files}


def _worker_address() -> str | None:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return None


def _in_child(kind: str, folder: Path, spec: dict, timeout: float, timeout_code: int, timeout_status: str) -> dict:
    """Run a stage in a child process group; after `timeout` seconds the whole group is killed."""
    (folder / SPEC).write_text(json.dumps(spec))
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "mlfbuild.matrix.stage", kind, str(folder)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        said, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child.pid)
        child.communicate()
        return _failed(timeout_status, timeout_code, f"{kind} timed out after {timeout:g} s (per-job timeout)",
                       started)
    finally:
        _kill_group(child.pid)  # nothing the stage started (an emulator) outlives it
    try:
        result = json.loads((folder / RESULT).read_text())
    except (OSError, ValueError):
        tail = said.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
        return _failed(INFRASTRUCTURE, EXIT_INFRASTRUCTURE, f"{kind} stage died: {tail[0]}", started)
    out = folder / OUT
    result["files"] = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()} if out.is_dir() else {}
    result["seconds"] = round(time.monotonic() - started, 3)
    result["worker"] = _worker_address()
    return result


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _failed(status: str, exit_code: int, message: str, started: float) -> dict:
    return {"status": status, "exit_code": exit_code, "message": message,
            "seconds": round(time.monotonic() - started, 3), "worker": _worker_address(), "files": {}}


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _build_stage(folder: Path, spec: dict) -> dict:
    from ..build import build
    from ..errors import InvalidInputError, MlfError, OverBudgetError
    from ..project import ProjectOptions
    from ..size.html import format_html

    out = folder / OUT
    options = ProjectOptions(runtime=spec["runtime"], optimize=spec["opt"], build_memory=spec["build_memory"],
                             cmsis_nn=folder / spec["cmsis_nn"] if spec["cmsis_nn"] else None)
    result = {"status": BUILT, "exit_code": 0, "message": "", "flash": None, "ram": None, "runnable": False}
    try:
        built = build(folder / spec["mlf_name"], spec["board"], out, options=options,
                      board_files=tuple(folder / name for name in spec["board_files"]), jobs=1,
                      budget_flash=spec["budget_flash"], budget_ram=spec["budget_ram"])
        result.update(flash=built.size.flash.used, ram=built.size.ram.used,
                      runnable=built.board.is_emulated or built.board.is_host)
        (out / "size.html").write_text(format_html(built.size))
    except OverBudgetError as exc:
        result.update(status=OVER_BUDGET, exit_code=EXIT_OVER_BUDGET, message=_first_line(exc), **_sizes(out))
    except InvalidInputError as exc:
        result.update(status=INVALID_INPUT, exit_code=EXIT_INVALID_INPUT, message=_first_line(exc))
    except MlfError as exc:
        result.update(status=BUILD_ERROR, exit_code=exc.exit_code, message=_first_line(exc))
    _keep_only(out, BUILD_FILES)
    return result


def _sizes(out: Path) -> dict:
    """Flash and RAM use from the size snapshot a build over budget leaves (none when the link failed)."""
    try:
        snapshot = json.loads((out / SIZE_SNAPSHOT).read_text())
        return {"flash": snapshot["flash"]["used"], "ram": snapshot["ram"]["used"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _keep_only(out: Path, names: tuple[str, ...]) -> None:
    """The stage's result carries only the files a report needs, not the project or the MLF."""
    import shutil

    for path in out.iterdir() if out.is_dir() else ():
        if path.name not in names:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _run_stage(folder: Path, spec: dict) -> dict:
    from ..errors import InvalidInputError, MlfError
    from ..record import RUN_RECORD
    from ..run import run_build
    from ..run.report import model_properties

    result = {"status": PASS, "exit_code": 0, "message": ""}
    try:
        ran = run_build(folder, references=spec["references"], atol=spec["atol"], rtol=spec["rtol"],
                        timeout=spec["timeout"], samples=spec.get("samples"))
    except InvalidInputError as exc:
        return {**result, "status": INVALID_INPUT, "exit_code": EXIT_INVALID_INPUT, "message": _first_line(exc)}
    except MlfError as exc:
        return {**result, "status": RUN_ERROR, "exit_code": exc.exit_code, "message": _first_line(exc)}
    timing = {m.name: model_properties(m) for m in ran.models}
    result.update(ticks={name: t["ticks"] for name, t in timing.items()},
                  ms={name: t["ms"] for name, t in timing.items()},
                  instructions={name: t["instructions"] for name, t in timing.items() if "instructions" in t} or None,
                  clock={name: t["clock"] for name, t in timing.items()},
                  unchecked=ran.unchecked)
    if ran.status == MISMATCH:
        differing = [f"{m.name}/{c.name} ({c.failure()})" for m in ran.models
                     for c in m.comparisons if not c.ok]
        result.update(status=MISMATCH, exit_code=EXIT_MISMATCH, message=f"outputs differ from the reference: {', '.join(differing)}")
    elif ran.status == NOT_CHECKED:
        result.update(status=NOT_CHECKED, message=f"outputs not checked (no reference): {', '.join(ran.unchecked)}")
    (folder / OUT).mkdir(exist_ok=True)
    (folder / OUT / RUN_RECORD).write_bytes((folder / RUN_RECORD).read_bytes())
    return result


def _end_with_parent() -> None:
    """A stage whose worker died ends at once with all it started (the stage leads its own
    process group): a lost worker must not leave a compiler or an emulator running."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str]) -> int:
    kind, folder = argv[0], Path(argv[1])
    _end_with_parent()
    spec = json.loads((folder / SPEC).read_text())
    stage = {"build": _build_stage, "run": _run_stage}[kind]
    try:
        result = stage(folder, spec)
    except Exception as exc:  # a bug or a broken worker: the job reports it, the matrix goes on
        result = {"status": INFRASTRUCTURE, "exit_code": EXIT_INFRASTRUCTURE,
                  "message": f"internal error in the {kind} stage: {type(exc).__name__}: {_first_line(exc)}"}
    (folder / RESULT).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
