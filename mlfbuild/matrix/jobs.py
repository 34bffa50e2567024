"""What a matrix runs: jobs as plain data, from MLFs on the command line, a jobs file or the
result of an earlier matrix (`--retry-failed`), then narrowed by filters."""

from __future__ import annotations

import fnmatch
import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import InvalidInputError
from ..run.references import HOST
from ..units import tolerance
from ..untrusted import MAX_TEXT_BYTES, read_regular
from .layout import is_plain_name, plain_name

DEFAULT_BOARD = "mps2-an386"


@dataclass(frozen=True)
class Job:
    """One MLF on one board. `references` are "[MODEL=]path.npz" or "[MODEL=]path.tflite" as
    `mlfbuild run --reference` takes them; `samples` as its --samples."""

    id: str
    mlf: str
    board: str
    references: tuple[str, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    samples: int | None = None

    @property
    def model(self) -> str:
        return label(self.mlf)

    def to_json(self) -> dict:
        return {"id": self.id, "mlf": self.mlf, "board": self.board, "references": list(self.references),
                "atol": self.atol, "rtol": self.rtol, "samples": self.samples}

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        """A job of an earlier result (untrusted): its id names its folder, so it must be a plain name."""
        if not isinstance(data, dict):
            raise ValueError(f"a job must be an object, got {type(data).__name__}")
        if not is_plain_name(data.get("id")):
            raise ValueError(f"job id {data.get('id')!r} is not a plain name (letters, digits, '.', '_', '-', '+')")
        for key in ("mlf", "board"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ValueError(f"job {data['id']}: \"{key}\" must be a non-empty string")
        references = data.get("references", [])
        if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
            raise ValueError(f"job {data['id']}: \"references\" must be a list of strings")
        return cls(id=data["id"], mlf=data["mlf"], board=data["board"], references=tuple(references),
                   atol=_tolerance(data.get("atol")), rtol=_tolerance(data.get("rtol")),
                   samples=_samples(data.get("samples")))


@dataclass(frozen=True)
class Entry:
    """An MLF with what checks it, before it is crossed with boards."""

    mlf: str
    references: tuple[str, ...] = ()
    boards: tuple[str, ...] = ()  # empty: the matrix's boards
    atol: float | None = None
    rtol: float | None = None
    samples: int | None = None


@dataclass
class Filters:
    """Which jobs to keep: fnmatch patterns on board and model name, and MLF executor/interface."""

    boards: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    executors: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)


def label(mlf: str) -> str:
    """Short name of an MLF in tables: its folder and stem (fixture sets repeat file names)."""
    path = Path(mlf)
    return f"{path.parent.name}/{path.name.split('.')[0]}"


def _tolerance(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):  # JSON has numbers for these: "0.1" is a mistake, not a tolerance
        raise ValueError(f"a tolerance must be a number, got {value!r}")
    return tolerance(value)


def _samples(value) -> int | None:
    from ..projectfile import MAX_SAMPLES

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAMPLES:
        raise ValueError(f"samples {value!r} is not a whole number from 1 to {MAX_SAMPLES:,}")
    return value


def entries_from_file(path: Path) -> list[Entry]:
    """A jobs file: a JSON list of {"mlf": path, "references": ["[MODEL=]ref.npz|model.tflite", ...],
    "boards": [...], "atol": x, "rtol": y, "samples": n}; only "mlf" is required; paths are relative to the file."""
    text = read_regular(path, "jobs file", MAX_TEXT_BYTES)
    try:
        data = json.loads(text)
        if not isinstance(data, list):
            raise ValueError("expected a JSON list of jobs")
        return [_entry(item, path.parent) for item in data]
    except RecursionError:
        raise InvalidInputError(f"{path}: not a jobs file (nested too deeply)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{path}: not a jobs file ({exc})") from None


def _entry(item: dict, base: Path) -> Entry:
    if not isinstance(item, dict) or not isinstance(item.get("mlf"), str) or not item["mlf"]:
        raise ValueError(f"each job needs an \"mlf\" path, got {json.dumps(item)[:80]}")
    unknown = set(item) - {"mlf", "references", "boards", "atol", "rtol", "samples"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} in job {item['mlf']}")
    references, boards = item.get("references", []), item.get("boards", [])
    if not isinstance(references, list) or not isinstance(boards, list) \
            or not all(isinstance(r, str) for r in references) or not all(isinstance(b, str) and b for b in boards):
        raise ValueError(f"\"references\" and \"boards\" of job {item['mlf']} must be lists of strings")
    return Entry(mlf=_absolute(base / item["mlf"]),
                 references=tuple(_resolve_reference(r, base) for r in references), boards=tuple(boards),
                 atol=_tolerance(item.get("atol")), rtol=_tolerance(item.get("rtol")),
                 samples=_samples(item.get("samples")))


def _resolve_reference(reference: str, base: Path) -> str:
    model, sep, file = reference.rpartition("=")
    if file == HOST:  # the firmware's host twin, not a file
        return reference
    return f"{model}{sep}{_absolute(base / file)}"


def _absolute(path: Path) -> str:
    """The path the user wrote, made absolute without following symbolic links: matrix.json names
    the files the user named, not where links lead."""
    return os.path.abspath(path)


def cross(entries: list[Entry], boards: list[str]) -> list[Job]:
    """Every entry on its own boards, or on the matrix's; each job gets a stable id (its folder name)."""
    jobs: list[Job] = []
    for index, entry in enumerate(entries):
        for board in entry.boards or boards or [DEFAULT_BOARD]:
            stem = Path(entry.mlf).name.split(".")[0]
            job_id = plain_name(f"{index:03d}-{stem}-{board}")  # board names are untrusted (layout.py)
            while any(j.id == job_id for j in jobs):  # two names made plain alike, or a board given twice
                job_id += "+"
            jobs.append(Job(id=job_id, mlf=entry.mlf, board=board,
                            references=entry.references or _the_model_itself(entry.mlf), atol=entry.atol, rtol=entry.rtol,
                            samples=entry.samples))
    return jobs


def _the_model_itself(mlf: str) -> tuple[str, ...]:
    """A .tflite job (imported by its build) is checked against that model, as `run` checks an
    imported MLF against the model it carries."""
    return (mlf,) if mlf.lower().endswith(".tflite") else ()


def with_default_samples(jobs: list[Job], samples: int | None) -> list[Job]:
    """`matrix --samples N`: the count of every job that gives none of its own (a jobs file's entry does)."""
    return [job if job.samples is not None or samples is None else replace(job, samples=samples) for job in jobs]


def apply_filters(jobs: list[Job], filters: Filters) -> list[Job]:
    kept = [j for j in jobs if _matches(j.board, filters.boards) and _matches_model(j, filters.models)]
    if filters.executors or filters.interfaces:
        kinds = {mlf: _kinds(Path(mlf)) for mlf in {j.mlf for j in kept}}
        kept = [j for j in kept if any(_matches(executor, filters.executors) and _matches(interface, filters.interfaces)
                                       for executor, interface in kinds[j.mlf])]
    return kept


def _matches(value: str, patterns: list[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _matches_model(job: Job, patterns: list[str]) -> bool:
    names = (job.model, Path(job.mlf).name, Path(job.mlf).name.split(".")[0])
    return not patterns or any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)


def _kinds(mlf: Path) -> list[tuple[str, str]]:
    """(executor, interface) of every module of an MLF: aot/graph/operator, c/packed/none."""
    from ..mlf.reader import read_mlf

    with tempfile.TemporaryDirectory(prefix="mlfbuild-filter-") as work:
        library = read_mlf(mlf, Path(work))
    return [(m.executor or "operator", m.interface_api or "none") for m in library.modules]
