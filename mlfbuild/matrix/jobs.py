"""What a matrix runs: jobs as plain data, from MLFs on the command line, a jobs file or the
result of an earlier matrix (`--retry-failed`), then narrowed by filters."""

from __future__ import annotations

import fnmatch
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError

DEFAULT_BOARD = "mps2-an386"


@dataclass(frozen=True)
class Job:
    """One MLF on one board. `references` are "[MODEL=]path.npz" as `mlfbuild run --reference` takes them."""

    id: str
    mlf: str
    board: str
    references: tuple[str, ...] = ()
    atol: float | None = None
    rtol: float | None = None

    @property
    def model(self) -> str:
        return label(self.mlf)

    def to_json(self) -> dict:
        return {"id": self.id, "mlf": self.mlf, "board": self.board, "references": list(self.references),
                "atol": self.atol, "rtol": self.rtol}

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        return cls(id=str(data["id"]), mlf=str(data["mlf"]), board=str(data["board"]),
                   references=tuple(str(r) for r in data.get("references", [])),
                   atol=_tolerance(data.get("atol")), rtol=_tolerance(data.get("rtol")))


@dataclass(frozen=True)
class Entry:
    """An MLF with what checks it, before it is crossed with boards."""

    mlf: str
    references: tuple[str, ...] = ()
    boards: tuple[str, ...] = ()  # empty: the matrix's boards
    atol: float | None = None
    rtol: float | None = None


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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"tolerance {value!r} is not a non-negative number")
    return float(value)


def entries_from_file(path: Path) -> list[Entry]:
    """A jobs file: a JSON list of {"mlf": path, "references": ["[MODEL=]ref.npz", ...], "boards": [...],
    "atol": x, "rtol": y}; only "mlf" is required; paths are relative to the file."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, list):
            raise ValueError("expected a JSON list of jobs")
        return [_entry(item, path.parent) for item in data]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{path}: not a jobs file ({exc})") from None


def _entry(item: dict, base: Path) -> Entry:
    if not isinstance(item, dict) or not isinstance(item.get("mlf"), str):
        raise ValueError(f"each job needs an \"mlf\" path, got {json.dumps(item)[:80]}")
    unknown = set(item) - {"mlf", "references", "boards", "atol", "rtol"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))} in job {item['mlf']}")
    references, boards = item.get("references", []), item.get("boards", [])
    if not all(isinstance(r, str) for r in references) or not all(isinstance(b, str) for b in boards):
        raise ValueError(f"\"references\" and \"boards\" of job {item['mlf']} must be lists of strings")
    return Entry(mlf=str((base / item["mlf"]).resolve()),
                 references=tuple(_resolve_reference(r, base) for r in references), boards=tuple(boards),
                 atol=_tolerance(item.get("atol")), rtol=_tolerance(item.get("rtol")))


def _resolve_reference(reference: str, base: Path) -> str:
    model, sep, file = reference.rpartition("=")
    return f"{model}{sep}{(base / file).resolve()}"


def cross(entries: list[Entry], boards: list[str]) -> list[Job]:
    """Every entry on its own boards, or on the matrix's; each job gets a stable id (its folder name)."""
    jobs = []
    for index, entry in enumerate(entries):
        for board in entry.boards or boards or [DEFAULT_BOARD]:
            stem = Path(entry.mlf).name.split(".")[0]
            jobs.append(Job(id=f"{index:03d}-{stem}-{board}", mlf=entry.mlf, board=board,
                            references=entry.references, atol=entry.atol, rtol=entry.rtol))
    return jobs


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
