"""The build folder: the one place that names its files and reads and writes its records.

`mlfbuild build` leaves in OUT:

    build.json   the build record: what went in (MLF, board, options, toolchain) and came out
    size.json    the size snapshot written at the end of the build (a ready `size --diff` base)
    run.json     the last `mlfbuild run` of this build (its measured stack and workspace peaks)
    build.log    the compiler's whole output
    firmware.*   the outputs (.elf, .bin, .hex, .map; .uf2 for UF2 boards)
    project/     the rendered project (a plain make project); mlf/ the unpacked MLF

Later stages read the build only through `BuildRecord`, so a record that is missing, not JSON or
not an object is one one-line error in one place, and no stage reaches into another to read files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInputError
from .outfolder import write_file

BUILD_RECORD = "build.json"
RUN_RECORD = "run.json"
SIZE_SNAPSHOT = "size.json"
BUILD_LOG = "build.log"
ELF = "firmware.elf"
OUTPUTS = ("firmware.elf", "firmware.bin", "firmware.hex", "firmware.map")
UF2_OUTPUT = "firmware.uf2"   # for boards with a UF2 bootloader (flashing.uf2_family)


@dataclass(frozen=True)
class BuildRecord:
    """build.json of one build folder, checked to be a record, with named access to what stages use."""

    folder: Path
    data: dict[str, Any]

    @property
    def path(self) -> Path:
        return self.folder / BUILD_RECORD

    @property
    def board(self) -> dict[str, Any]:
        """The board exactly as it was built (Board.to_json())."""
        board = self.data.get("board")
        if not isinstance(board, dict) or not isinstance(board.get("name"), str):
            raise InvalidInputError(f"{self.path}: no board recorded")
        return board

    @property
    def board_name(self) -> str:
        return self.board["name"]

    @property
    def board_kind(self) -> str:
        return str(self.board.get("kind", "?"))

    @property
    def models(self) -> list[dict[str, Any]]:
        models = self.data.get("models")
        if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
            raise InvalidInputError(f"{self.path}: no model table recorded")
        return models

    @property
    def outputs(self) -> dict[str, str]:
        """Output file name → SHA-256, as the build wrote them."""
        outputs = self.data.get("outputs")
        return outputs if isinstance(outputs, dict) else {}



def is_build_folder(target: Path) -> bool:
    return Path(target).is_dir() and (Path(target) / BUILD_RECORD).is_file()


def load(target: Path) -> BuildRecord:
    """The record of a build folder, or of the folder a file of it (firmware.elf, .bin, build.json)
    lies in."""
    target = Path(target)
    folder = target if target.is_dir() else target.parent
    if not (folder / BUILD_RECORD).is_file():
        raise InvalidInputError(f"{folder}: no {BUILD_RECORD} — not an mlfbuild build folder")
    return _read(folder)


def load_for_elf(target: Path) -> tuple[Path, BuildRecord]:
    """(ELF, record) for a build folder or an ELF whose record lies beside it or up to three folders
    above it (the ELF inside project/build/ works too)."""
    target = Path(target)
    if target.is_dir():
        elf, folders = target / ELF, [target]
    elif target.is_file():
        elf, folders = target, [target.parent, *list(target.parent.parents)[:3]]
    else:
        raise InvalidInputError(f"{target}: no such build folder or ELF file")
    if not elf.is_file():
        raise InvalidInputError(f"{target}: no {ELF} here — not an mlfbuild build folder")
    for folder in folders:
        if (folder / BUILD_RECORD).is_file():
            return elf, _read(folder)
    raise InvalidInputError(f"{target}: no {BUILD_RECORD} beside the ELF — not an mlfbuild build folder")


def write(folder: Path, data: dict[str, Any]) -> BuildRecord:
    write_file(Path(folder) / BUILD_RECORD, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return BuildRecord(Path(folder), data)


def write_snapshot(folder: Path, text: str) -> None:
    write_file(Path(folder) / SIZE_SNAPSHOT, text)


def write_run(folder: Path, document: dict[str, Any]) -> str | None:
    """Keep a run's result beside its build; a folder that cannot take it (read-only, disk full)
    costs the record, never the run: returns a warning to show instead of raising."""
    try:
        (Path(folder) / RUN_RECORD).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        return (f"the run was not recorded in {Path(folder) / RUN_RECORD} "
                f"({exc.strerror or type(exc).__name__}); `mlfbuild size` will not show its peaks")
    return None


def measured_peaks(folder: Path) -> dict[str, int] | None:
    """Stack high-water mark and workspace peak from the last run of this build, if any."""
    try:
        models = json.loads((Path(folder) / RUN_RECORD).read_text())["models"]
        peaks = {key: max(int(m[key]) for m in models) for key in ("stack_peak", "workspace_peak")
                 if all(m.get(key) is not None for m in models)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return peaks or None


def measured_profiles(folder: Path) -> list[dict]:
    """The per-operator profiles of the last `run --profile` of this build: one
    {"model", "instructions", "cycles", "cycle_model", "rows"} per model that has one (rows as run.json
    gives them; cycles and cycle_model: the estimate and its label, null where there is none)."""
    try:
        models = json.loads((Path(folder) / RUN_RECORD).read_text())["models"]
        return [{"model": str(m["name"]), "instructions": m.get("instructions"), "cycles": m.get("cycles"),
                 "cycle_model": m.get("cycle_model"), "rows": [r for r in m["profile"] if isinstance(r, dict)]}
                for m in models if m.get("profile")]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def forget_previous_build(folder: Path) -> None:
    """Remove the files a previous build left, so that a failed build cannot leave stale ones that
    look current."""
    for name in (BUILD_RECORD, RUN_RECORD, SIZE_SNAPSHOT, *OUTPUTS, UF2_OUTPUT):
        (Path(folder) / name).unlink(missing_ok=True)


def _read(folder: Path) -> BuildRecord:
    path = folder / BUILD_RECORD
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: not a build record (a JSON object expected)")
    return BuildRecord(folder, data)
