"""`mlfbuild build` as a library call: MLF + board → OUTDIR with firmware and build.json.

Stages in order: read the MLF, load the board, render the project, run make, collect outputs and
record what went in and came out. Each stage is its own module; this file only sequences them.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import __version__, outfolder, record as build_folder
from .boards import Board, load_board
from .errors import BuildError, UsageError
from .record import BUILD_LOG, ELF, OUTPUTS
from .mlf.archive import DEFAULT_MAX_TOTAL_BYTES
from .mlf.limits import DEFAULT_MAX_GRAPH_NODES
from .mlf.model import ModelLibrary
from .mlf.reader import describe, read_mlf
from .mlf.rename import parse_renames, renamed_libraries
from .errors import OverBudgetError
from .project import (Project, ProjectOptions, linked_stack_bytes, linker_script_text, render_oversize_linker_script,
                      render_project, toolchain_names)
from .project.sizes import Bounds, check_constants_fit
from .size.stack import STACK_MARGIN, compute_stack_bound, stack_reserve
from .size import SizeReport, size_report
from .toolchain import (DEFAULT_BUILD_TIMEOUT, MakeResult, count_compiles, find_tools, numbered, run_make,
                        symbol_renamer, toolchain_used)

HOST_SKIPS = ("firmware.bin", "firmware.hex")


@dataclass
class BuildResult:
    outdir: Path
    library: ModelLibrary
    board: Board
    project: Project
    make: MakeResult
    record: dict
    size: SizeReport

    @property
    def elf(self) -> Path:
        return self.outdir / "firmware.elf"


def build(mlf: Path, board_name: str, outdir: Path, *, options: ProjectOptions = ProjectOptions(),
          board_files: tuple[Path, ...] = (), jobs: int = 2, progress: Callable[[str], None] | None = None,
          max_mlf_bytes: int = DEFAULT_MAX_TOTAL_BYTES, budget_flash: int | None = None,
          budget_ram: int | None = None, verbose: bool = False, max_graph_nodes: int = DEFAULT_MAX_GRAPH_NODES,
          build_timeout: float = DEFAULT_BUILD_TIMEOUT, renames: list[str] = ()) -> BuildResult:
    """Build the firmware (`renames`: `OLD=NEW` items, module OLD built as NEW); raises OverBudgetError (after writing every output, so the build can be
    inspected) when it does not fit the board or the tighter budgets. The output folder is locked
    for the build: a second build into it at the same time is refused (UsageError)."""
    rename_pairs = parse_renames(renames)
    board = load_board(board_name, list(board_files))
    _check_stack_bytes(options.stack_bytes, board)
    _check_folder(Path(outdir))
    outdir = outfolder.prepare(Path(outdir))
    with outfolder.locked(outdir):
        return _build(Path(mlf), board, outdir, options=options, jobs=jobs, progress=progress,
                      max_mlf_bytes=max_mlf_bytes, budget_flash=budget_flash, budget_ram=budget_ram,
                      verbose=verbose, max_graph_nodes=max_graph_nodes, build_timeout=build_timeout,
                      renames=rename_pairs)


def _check_folder(folder: Path) -> None:
    """A build goes into a new or empty folder, or one an earlier build wrote (its lock, record or log
    is there); never into a folder of the user's own files, which project/, mlf/ and firmware.* would
    be mixed into."""
    ours = (outfolder.LOCK_FILE, build_folder.BUILD_RECORD, build_folder.BUILD_LOG)
    if folder.is_dir() and any(folder.iterdir()) and not any((folder / name).exists() for name in ours):
        raise UsageError(f"{folder}: exists, is not empty and is not an mlfbuild build folder; name a new or "
                         "empty folder, or a previous build's")


def _check_stack_bytes(stack_bytes: int | None, board: Board) -> None:
    """--stack-bytes: a reserve the board's RAM can hold, in the 8-byte units of the AAPCS stack."""
    if stack_bytes is None:
        return
    if board.is_host:
        raise UsageError(f"--stack-bytes does not apply to the host board {board.name}: its stack is the "
                         "operating system's, with no .stack reserve to fix")
    ram = board.memory.ram.length
    if stack_bytes % 8 or not 8 <= stack_bytes <= ram:
        raise UsageError(f"--stack-bytes {stack_bytes}: the .stack reserve on {board.name} must be a multiple of 8 "
                         f"from 8 to {ram:,} B (its RAM)")


def _read_before_replacing(mlf: Path, outdir: Path, board: Board, max_mlf_bytes: int, max_graph_nodes: int,
                           renames: list[tuple[str, str]], redefine_symbols):
    """The MLF read and checked in a staging folder first: only a good input replaces the previous
    build's files (a wrong file given by mistake, or a model whose constants alone overflow the
    board's flash, must not cost the user the last firmware). Renamed modules make a renamed copy,
    which becomes OUT/mlf (a folder MLF is never written to)."""
    staging = outdir / ".mlf-staging"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        library = read_mlf(mlf, staging, max_total_bytes=max_mlf_bytes, max_graph_nodes=max_graph_nodes)
        check_constants_fit(library.modules, Bounds.of(board))
        library = renamed_libraries([library], renames, staging, redefine_symbols)[0]
        build_folder.forget_previous_build(outdir)
        if mlf.is_dir() and not renames:
            return library
        unpacked = outdir / "mlf"
        if unpacked.exists():
            shutil.rmtree(unpacked)
        library.root.rename(unpacked)
        return describe(unpacked, sha256=library.sha256, max_graph_nodes=max_graph_nodes)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build(mlf: Path, board: Board, outdir: Path, *, options: ProjectOptions, jobs: int,
           progress: Callable[[str], None] | None, max_mlf_bytes: int, budget_flash: int | None,
           budget_ram: int | None, verbose: bool, max_graph_nodes: int, build_timeout: float,
           renames: list[tuple[str, str]]) -> BuildResult:
    from .importer import imported_if_tflite

    ram = board.memory.ram.length if board.memory else None
    mlf = imported_if_tflite(Path(mlf), outdir / f"{Path(mlf).stem}.mlf.tar", ram)
    tools = toolchain_names(board, options.toolchain_prefix)
    library = _read_before_replacing(mlf, outdir, board, max_mlf_bytes, max_graph_nodes, renames,
                                     symbol_renamer(tools["objcopy"], None if board.is_host else options.toolchain_prefix))
    for warning in library.warnings:
        if progress:
            progress(f"warning: {warning}")

    project_dir = outdir / "project"
    project = render_project(library, board, project_dir, options, stack_bytes=linked_stack_bytes(project_dir))
    tools = toolchain_names(board, options.toolchain_prefix)
    find_tools([tools["cc"], *([tools["cxx"]] if project.cxx else []), tools["objcopy"]],
               None if board.is_host else options.toolchain_prefix)
    log = outdir / BUILD_LOG
    if progress:
        total = count_compiles(project.path)
        progress = numbered(progress, total) if total is not None else progress
    try:
        try:
            make = run_make(project.path, jobs=jobs, log=log, progress=progress, verbose=verbose,
                            timeout=build_timeout, memory=options.build_memory)
        except OverBudgetError:
            if not _fits_with_computed_stack(project, board, options, log):
                raise
            make = run_make(project.path, jobs=jobs, log=log, append=True, timeout=build_timeout,
                            memory=options.build_memory)
    except OverBudgetError as overflow:
        raise _explain_overflow(overflow, Path(mlf), library, board, project, log, build_timeout,
                                options.build_memory) from None
    if progress and make.warning_summary():
        progress(f"{make.warning_summary()} (full log: {log})")
    stack = _reserve_stack(project, board, options, log)
    outputs = _collect_outputs(project.path / "build", outdir, board)
    outputs.update(_uf2_output(outdir, board))
    record = _record(Path(mlf), library, board, project, toolchain_used(project.path), outputs)
    if renames:
        record["mlf"]["modules_renamed"] = dict(renames)
    if stack:
        record["stack"] = stack
    size = size_report(outdir / ELF, record, budget_flash=budget_flash, budget_ram=budget_ram)
    build_folder.write_snapshot(outdir, size.to_json_text())
    record["size"] = {"flash_used": size.flash.used, "flash_total": size.flash.total,
                      "ram_used": size.ram.used, "ram_total": size.ram.total}
    build_folder.write(outdir, record)
    result = BuildResult(outdir=outdir, library=library, board=board, project=project, make=make, record=record,
                         size=size)
    if progress:
        progress(size.format_short())
        for item in project.lowered:  # what became of each workspace pool, and why a pool was kept
            if item.pool:
                progress(item.pool.note(item.module.name))
    size.raise_if_over_budget()
    return result


def _fits_with_computed_stack(project: Project, board: Board, options: ProjectOptions, log: Path) -> bool:
    """The first link overflowed with the script's stack reserve: link into roomier regions, compute the
    bound there and write its reserve into the script. True when that reserve is smaller (worth a retry)."""
    if board.is_host or options.stack_bytes is not None:
        return False
    render_oversize_linker_script(board, project.path)
    try:
        run_make(project.path, jobs=1, log=log, append=True, targets=["build/oversize.elf"],
                 memory=options.build_memory)
        bound = compute_stack_bound(project.path / "build" / "oversize.elf", project.path / "build",
                                    f"{options.toolchain_prefix}objdump", fpu=project.float_abi in ("hard", "softfp"))
    except (BuildError, OverBudgetError, RuntimeError):
        return False
    reserve = stack_reserve(bound.bound, board.memory.stack_bytes)
    if reserve >= (linked_stack_bytes(project.path) or 0):
        return False
    (project.path / "linker.ld").write_text(linker_script_text(board, reserve))
    return True


def _reserve_stack(project: Project, board: Board, options: ProjectOptions, log: Path) -> dict | None:
    """Compute the static stack bound of the linked firmware and make the .stack reserve the bound
    plus the margin (relinking when the script held another value), unless --stack-bytes fixed it;
    without a bound the board's value stays. Returns build.json's "stack"."""
    if board.is_host:
        return None
    elf = project.path / "build" / "firmware.elf"
    try:
        bound = compute_stack_bound(elf, project.path / "build", f"{options.toolchain_prefix}objdump",
                                    fpu=project.float_abi in ("hard", "softfp"))
    except RuntimeError as exc:
        raise BuildError(str(exc)) from None
    if options.stack_bytes is not None:
        reserve, source = options.stack_bytes, "--stack-bytes"
    elif bound.bound is None:
        reserve, source = board.memory.stack_bytes, f"board {board.name} (no static bound)"
    else:
        reserve, source = stack_reserve(bound.bound, board.memory.stack_bytes), f"bound + {STACK_MARGIN} B margin"
    if reserve != linked_stack_bytes(project.path):
        (project.path / "linker.ld").write_text(linker_script_text(board, reserve))
        try:
            run_make(project.path, jobs=1, log=log, append=True, memory=options.build_memory)
        except OverBudgetError as overflow:
            raise OverBudgetError(f"{overflow} (with a .stack reserve of {reserve:,} B from the {source})") from None
    return {**bound.to_json(), "reserve": reserve, "reserve_source": source, "margin": STACK_MARGIN,
            "board_stack_bytes": board.memory.stack_bytes}


def _explain_overflow(overflow: OverBudgetError, mlf: Path, library: ModelLibrary, board: Board, project: Project,
                      log: Path, timeout: float, memory: int) -> OverBudgetError:
    """The linker said a region overflowed; link again with roomier regions and let the size report
    say by how much and what is biggest. Falls back to the linker's words if that link fails too."""
    if board.is_host:
        return overflow
    render_oversize_linker_script(board, project.path, linked_stack_bytes(project.path))  # the reserve that overflowed
    try:
        run_make(project.path, jobs=1, log=log, append=True, targets=["build/oversize.elf"], timeout=timeout,
                 memory=memory)
    except (BuildError, OverBudgetError):
        return overflow
    record = _record(mlf, library, board, project, toolchain_used(project.path), outputs={})
    report = size_report(project.path / "build" / "oversize.elf", record)
    if not report.over_budget:
        return overflow
    try:
        report.raise_if_over_budget()
    except OverBudgetError as explained:  # the size report's numbers only: they match its table
        detail = str(explained).removeprefix("the firmware does not fit: ")
        return OverBudgetError(f"the firmware does not fit the board: {detail} (full log: {log})",
                               table=explained.table)
    return overflow


def _collect_outputs(build_dir: Path, outdir: Path, board: Board) -> dict[str, str]:
    hashes = {}
    for name in OUTPUTS:
        if name in HOST_SKIPS and board.is_host:  # a native executable has no flash image
            continue
        source = build_dir / name
        if not source.is_file():
            raise BuildError(f"make finished but {source} is missing")
        shutil.copyfile(source, outdir / name)
        shutil.copymode(source, outdir / name)
        hashes[name] = hashlib.sha256(source.read_bytes()).hexdigest()
    return hashes


def _uf2_output(outdir: Path, board: Board) -> dict[str, str]:
    """firmware.uf2: firmware.bin at the board's flashing address, for its UF2 bootloader's family."""
    if board.flashing is None or board.flashing.uf2_family is None:
        return {}
    from .flash.uf2 import write_build_file

    path = write_build_file(outdir, (outdir / "firmware.bin").read_bytes(), board.flashing.address,
                            board.flashing.uf2_family)
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}


def _record(mlf: Path, library: ModelLibrary, board: Board, project: Project, toolchain: str,
            outputs: dict[str, str]) -> dict:
    """build.json: the one record of what went in and what came out; later stages read it."""
    record = {
        "mlfbuild_version": __version__,
        "mlf": {"name": mlf.name, "sha256": library.sha256, "version": library.version, "style": library.style},
        "board": board.to_json(),
        "runtime": project.runtime,
        "templates": project.template_hash,
        "toolchain": toolchain,
        "flags": {"cflags": project.cflags, "float_abi": project.float_abi},
        "workspace_bytes": project.workspace_bytes,
        "models": [
            {"index": index, "name": item.module.name, "executor": item.module.executor or "operator",
             "interface_api": item.module.interface_api,
             "inputs": [t.to_json() for t in item.module.inputs],
             "outputs": [t.to_json() for t in item.module.outputs],
             "workspace_bytes": item.workspace_bytes,
             **({"memory_plan": item.memory_plan} if item.memory_plan else {}),
             **({"workspace_pool": item.pool.to_json()} if item.pool else {}),
             **({"replaced_loops": [copy.to_json() for copy in item.copies]} if item.copies else {}),
             **({"imported_from": item.module.imported_from} if item.module.imported_from else {})}
            for index, item in enumerate(project.lowered)],
        "library": library.to_json(),
        "outputs": outputs,
        "notes": project.notes,
    }
    if project.cmsis_nn:
        record["cmsis_nn"] = project.cmsis_nn.to_json()
    if project.app:
        record["app"] = project.app
    return record
