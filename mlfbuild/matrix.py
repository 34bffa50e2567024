"""Build and run many MLFs × boards in parallel worker processes — the CI job a model team runs.

The worker interface is deliberately narrow: `run_job(job) -> result`, where both are plain
JSON-serialisable dicts and the worker needs only the files the job names. The same function can
be handed to any executor that ships dicts to workers (concurrent.futures here; a distributed
task queue or cluster scheduler later) without changing it.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from xml.etree import ElementTree

from .errors import InvalidInputError, MlfError


@dataclass(frozen=True)
class Job:
    mlf: str
    board: str
    outdir: str
    references: tuple[str, ...] = ()
    timeout: float = 60.0

    def to_json(self) -> dict:
        return {"mlf": self.mlf, "board": self.board, "outdir": self.outdir,
                "references": list(self.references), "timeout": self.timeout}


def run_job(job: dict) -> dict:
    """Build then run one MLF on one board. Never raises: failures come back as data."""
    from .build import build
    from .run import MISMATCH, NOT_CHECKED, run_build

    started = time.monotonic()
    result = {"job": job, "status": "pass", "exit_code": 0, "message": "", "ticks": None, "flash": None, "ram": None}
    try:
        built = build(Path(job["mlf"]), job["board"], Path(job["outdir"]), jobs=1)
        size = built.record.get("size", {})
        result["flash"], result["ram"] = size.get("flash_used"), size.get("ram_used")
        if built.board.is_emulated or built.board.is_host:
            ran = run_build(Path(job["outdir"]), references=job["references"], timeout=job["timeout"])
            result["ticks"] = {m.name: m.ticks[-1] for m in ran.models}
            if ran.status == MISMATCH:
                result.update(status="mismatch", exit_code=7, message="outputs differ from the reference")
            elif ran.status == NOT_CHECKED:
                result.update(status=NOT_CHECKED, message=f"outputs not checked: {', '.join(ran.unchecked)}")
        else:
            result.update(status="built", message="built (real hardware: not run, outputs not checked)")
    except MlfError as exc:
        result.update(status="fail", exit_code=exc.exit_code, message=str(exc).splitlines()[0] if str(exc) else "")
    except Exception as exc:  # a worker must report, not die: the matrix goes on
        result.update(status="error", exit_code=1, message=f"{type(exc).__name__}: {exc}")
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def jobs_from_file(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """A job file: JSON list of {"mlf": path, "references": ["[MODEL=]ref.npz", ...]}, paths relative
    to the file. Returns (mlf, references) items to cross with the boards."""
    try:
        entries = json.loads(path.read_text())
        if not isinstance(entries, list):
            raise ValueError("expected a JSON list")
        items = [(str((path.parent / e["mlf"]).resolve()),
                  tuple(_resolve_reference(r, path.parent) for r in e.get("references", []))) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{path}: not a job file ({exc})") from None
    return items


def _resolve_reference(reference: str, base: Path) -> str:
    model, sep, file = reference.rpartition("=")
    return f"{model}{sep}{(base / file).resolve()}"


def label(mlf: str) -> str:
    """Short name of an MLF in tables: its folder and stem (fixture sets repeat file names)."""
    path = Path(mlf)
    return f"{path.parent.name}/{path.name.split('.')[0]}"


def cross(items: Iterable[tuple[str, tuple[str, ...]]], boards: list[str], outroot: Path, timeout: float) -> list[Job]:
    jobs = []
    for index, (mlf, references) in enumerate(items):
        for board in boards:
            # Every job gets a folder of its own: parallel builds must never share one.
            outdir = outroot / f"{index:03d}-{Path(mlf).name.split('.')[0]}-{board}"
            jobs.append(Job(mlf=mlf, board=board, outdir=str(outdir), references=references, timeout=timeout))
    return jobs


def run_matrix(jobs: list[Job], *, workers: int, progress: Callable[[int, int, dict], None] | None = None) -> list[dict]:
    results: list[dict] = []
    with ProcessPoolExecutor(max_workers=max(workers, 1)) as pool:
        futures = {pool.submit(run_job, job.to_json()): job for job in jobs}
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            if progress:
                progress(len(results), len(jobs), result)
    order = {job.to_json()["outdir"]: i for i, job in enumerate(jobs)}
    return sorted(results, key=lambda r: order[r["job"]["outdir"]])


# Job statuses whose outputs nobody compared: no reference, or real hardware that was only built.
_UNCHECKED = ("not checked", "built")

# Which job's exit code the matrix exits with: bad input first, then errors (build, run, flash,
# infrastructure), then failures (over budget, mismatch). Jobs that passed or were not checked give 0.
_EXIT_PRECEDENCE = (3, 2, 4, 6, 8, 1, 5, 7)


def matrix_exit_code(results: list[dict]) -> int:
    codes = {r["exit_code"] for r in results} - {0}
    return min(codes, key=lambda c: _EXIT_PRECEDENCE.index(c) if c in _EXIT_PRECEDENCE else len(_EXIT_PRECEDENCE),
               default=0)


def summary_table(results: list[dict]) -> str:
    boards = sorted({r["job"]["board"] for r in results})
    models = sorted({label(r["job"]["mlf"]) for r in results})
    cell = {(label(r["job"]["mlf"]), r["job"]["board"]): r["status"] for r in results}
    width = max(len(m) for m in models)
    lines = [f"{'MLF':<{width}}  " + "  ".join(f"{b:<12}" for b in boards)]
    for model in models:
        lines.append(f"{model:<{width}}  " + "  ".join(f"{cell.get((model, b), '-'):<12}" for b in boards))
    counts = {status: sum(r["status"] == status for r in results) for status in dict.fromkeys(r["status"] for r in results)}
    lines.append(f"{counts.get('pass', 0)}/{len(results)} passed (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")")
    return "\n".join(lines)


def junit_xml(results: list[dict]) -> bytes:
    suite = ElementTree.Element("testsuite", name="mlfbuild matrix", tests=str(len(results)),
                                failures=str(sum(r["status"] == "mismatch" for r in results)),
                                errors=str(sum(r["status"] in ("fail", "error") for r in results)),
                                skipped=str(sum(r["status"] in _UNCHECKED for r in results)))
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname=r["job"]["board"],
                                      name=label(r["job"]["mlf"]), time=str(r["seconds"]))
        if r["status"] == "mismatch":
            ElementTree.SubElement(case, "failure", message=r["message"])
        elif r["status"] in _UNCHECKED:
            ElementTree.SubElement(case, "skipped", message="outputs not checked")
        elif r["status"] in ("fail", "error"):
            ElementTree.SubElement(case, "error", message=r["message"], type=f"exit {r['exit_code']}")
        ElementTree.SubElement(case, "system-out").text = json.dumps(
            {"ticks": r["ticks"], "flash": r["flash"], "ram": r["ram"]})
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)
