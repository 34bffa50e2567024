"""`mlfbuild export` as a library call: MLFs + board → a folder a user copies into their own firmware.

The folder holds the model library exactly as `build` renders it (project/library.py: the MLF's code,
the lowered executors, mlf_<mod>.h and tvmgen_<mod>.h), the runtime a model calls (crt/), the board
support our firmware runs on (crt/'s start-up, console and exit, and board/linker.ld), prebuilt
static libraries for the board's CPU and float ABI, and the build glue: a CMake package usable with
add_subdirectory() or find_package(), an arm-none-eabi toolchain file and a Makefile fragment.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import __version__, outfolder, schemas
from .boards import Board, load_board
from .errors import BuildError, InvalidInputError, UsageError
from .mlf.archive import DEFAULT_MAX_TOTAL_BYTES
from .mlf.model import ModelLibrary, c_identifier
from .mlf.reader import read_mlf
from .mlf.rename import parse_renames, renamed_libraries
from .project import (ProjectOptions, Writer, arch_flags_for, check_library, code_preprocessor, link_flags,
                      linker_script_text, render_oversize_linker_script, template_environment, toolchain_names)
from .project.abi import float_abi_for
from .project.cmsis_nn import CmsisNnLibrary, render_cmsis_nn
from .project.library import INCLUDE_DIR, LibraryFiles, model_header, render_library
from .project.runtime import builtin_runtime_files, crt_defines, is_board_support
from .size.stack import CallDepth, call_depths
from .toolchain import find_tools, first_error, run_compiler, symbol_renamer
from .untrusted import read_regular

MARKER = "mlfbuild-export.json"  # what makes a folder an export (and what `export --json` prints)
_TOOLCHAIN_FILE = "cmake/arm-none-eabi.cmake"
_LINKER_SCRIPT = "board/linker.ld"
_MODEL_WARNINGS = ["-Wno-error", "-Wno-error=incompatible-pointer-types"]


@dataclass
class ExportResult:
    folder: Path
    description: dict  # the export's JSON (mlfbuild-export.json)


def export(mlfs: list[Path], board_name: str, folder: Path, *, name: str | None = None,
           board_files: tuple[Path, ...] = (), options: ProjectOptions = ProjectOptions(), jobs: int = 2,
           max_mlf_bytes: int = DEFAULT_MAX_TOTAL_BYTES, models: list[str] = (),
           renames: list[str] = ()) -> ExportResult:
    """`models`: `[MODULE=]MODEL.tflite` items, the original models whose scale and zero point the
    headers give (each checked to describe its module's graph). `renames`: `OLD=NEW` items, module
    OLD exported as NEW (mlf/rename.py)."""
    rename_pairs = parse_renames(renames)
    board = load_board(board_name, list(board_files))
    folder = Path(folder)
    _check_folder(folder)
    created = _missing_folders(folder)
    folder = outfolder.prepare(folder)
    try:
        with outfolder.locked(folder, remove=True):
            _remove_leftovers(folder)
            with tempfile.TemporaryDirectory(prefix=UNPACK_PREFIX, dir=folder) as unpack:
                if not (folder / MARKER).is_file():  # an export that fails half-way may still be written over
                    (folder / MARKER).write_text(json.dumps({"schema": schemas.EXPORT, "complete": False}) + "\n")
                from .importer import imported_if_tflite

                libraries = [read_mlf(imported_if_tflite(Path(mlf), Path(unpack) / f"{i}.tar"),
                                      Path(unpack) / str(i), max_total_bytes=max_mlf_bytes)
                             for i, mlf in enumerate(mlfs)]
                libraries = renamed_libraries(libraries, rename_pairs, Path(unpack), _symbol_renamer(board, options))
                _check_names(libraries)
                for lib in libraries:
                    check_library(lib, board, options)
                return _export(mlfs, libraries, board, folder, name, options, jobs,
                               _quantizations(libraries, list(models)), Path(unpack) / "cmsis-nn-probe")
    except BaseException:
        _remove_created(created)  # a failed export into a new folder leaves nothing behind
        raise


UNPACK_PREFIX, OBJECTS_PREFIX = ".unpack-", ".objects-"  # an export's working folders, inside its folder


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, innermost first."""
    missing = []
    for path in [folder, *folder.parents]:
        if path.exists() or path.is_symlink():
            break
        missing.append(path)
    return missing


def _remove_created(created: list[Path]) -> None:
    if created:
        shutil.rmtree(created[0], ignore_errors=True)
    for parent in created[1:]:
        with contextlib.suppress(OSError):
            parent.rmdir()  # only while empty


def _remove_leftovers(folder: Path) -> None:
    """The working folders of an export that was killed: the lock is ours, so nothing else uses them."""
    for path in folder.iterdir():
        if path.name.startswith((UNPACK_PREFIX, OBJECTS_PREFIX)) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def _quantizations(libraries: list[ModelLibrary], models: list[str]) -> dict[str, dict[str, tuple[float, int]]]:
    """(scale, zero point) of each module's inputs and outputs, by module: from the original model
    `--model` names, else from the one an imported MLF carries; a TVM MLF without --model has none."""
    found = {}
    if models:
        from .run.references import resolve

        modules = [m.to_json() for lib in libraries for m in lib.modules]
        chosen = resolve(models, modules)
        found = {m["name"]: chosen[m["name"]].quantization_of(m) for m in modules if m["name"] in chosen}
    from .reference.carried import carried_quantizations

    for lib in libraries:
        found.update(carried_quantizations(lib, known=set(found)))
    return found


def _check_folder(folder: Path) -> None:
    """An export may replace an earlier export, never a folder of something else."""
    ours = {MARKER, outfolder.LOCK_FILE}
    if folder.exists() and (not folder.is_dir() or (any(p.name not in ours for p in folder.iterdir())
                                                    and not (folder / MARKER).is_file())):
        raise UsageError(f"{folder}: exists and is not an mlfbuild export (no {MARKER}); "
                         "name a new or empty folder, or a previous export")


def _symbol_renamer(board: Board, options: ProjectOptions):
    prefix = None if board.is_host else options.toolchain_prefix
    return symbol_renamer(toolchain_names(board, options.toolchain_prefix)["objcopy"], prefix)


def _check_names(libraries: list[ModelLibrary]) -> None:
    seen: dict[str, str] = {}
    for lib in libraries:
        for module in lib.modules:
            other = seen.get(module.name.casefold())
            if other == module.name:
                raise InvalidInputError(f"two modules are named '{module.name}': their symbols (tvmgen_{module.name}_*) "
                                        "would clash in one image; rename one as it is exported, "
                                        f"with --module {module.name}=NEW (the first MLF's '{module.name}' is renamed)")
            if other is not None:  # tiny and TINY: one include guard, one set of MLF_TINY_* macros
                raise InvalidInputError(f"modules '{other}' and '{module.name}' differ only in case: their headers' "
                                        f"guards and MLF_{module.name.upper()}_* macros would be one; export them "
                                        f"with names that differ otherwise (--module {module.name}=NEW)")
            seen[module.name.casefold()] = module.name
    callers = [lib for lib in libraries if any(m.cmsis_nn for m in lib.modules)]
    if len(callers) > 1:
        raise UsageError(f"{len(callers)} of the MLFs call CMSIS-NN: one export compiles the library and its "
                         "scratch region for one MLF's calls; export one CMSIS-NN MLF at a time")


def _export(mlfs: list[Path], libraries: list[ModelLibrary], board: Board, folder: Path, name: str | None,
            options: ProjectOptions, jobs: int, quantizations: dict, probe_dir: Path) -> ExportResult:
    env = template_environment()
    writer = Writer(folder)
    name = c_identifier(name or "_".join(m.name for lib in libraries for m in lib.modules))
    package = f"mlf_{name}"  # the CMake package and library; its target's alias is mlf::<name>
    float_abi = float_abi_for(board, [o for lib in libraries for m in lib.modules for o in m.objects])
    arch_flags = arch_flags_for(board, float_abi)
    preprocessor = code_preprocessor(board, options.toolchain_prefix, arch_flags)
    rendered: list[tuple[Path, ModelLibrary, LibraryFiles]] = []
    for index, (mlf, lib) in enumerate(zip(mlfs, libraries)):
        model_dir = "model" if len(libraries) == 1 else f"model/{index}_{c_identifier(Path(mlf).stem)}"
        cmsis_nn = (lambda lib=lib: render_cmsis_nn(lib, board, arch_flags, options.cmsis_nn, options.cmsis_core,
                                                    writer, options.build_memory, probe_dir,
                                                    preprocessor=preprocessor))
        rendered.append((Path(mlf), lib, render_library(lib, writer, env, source_name=Path(mlf).name,
                                                        model_dir=model_dir, quantizations=quantizations,
                                                        cmsis_nn=cmsis_nn, cmsis_nn_tree=options.cmsis_nn,
                                                        cmsis_core=options.cmsis_core,
                                                        preprocessor=preprocessor)))
    runtime = builtin_runtime_files(board, writer)
    cmsis = next((f.cmsis_nn for _, _, f in rendered if f.cmsis_nn), None)
    if not board.is_host:
        writer.write(_LINKER_SCRIPT, linker_script_text(board))

    files = _file_lists(rendered, runtime.sources, cmsis)
    context = dict(cmsis_nn=cmsis, cmsis_nn_json=cmsis.to_json() if cmsis else None, package=package, name=name,
                   board=board, arch_flags=arch_flags, opt=options.optimize, files=files,
                   crt_defines=[d[2:] for d in crt_defines(board)], model_warnings=_MODEL_WARNINGS,
                   toolchain=toolchain_names(board, options.toolchain_prefix), prefix=options.toolchain_prefix,
                   version=__version__, linker_script=None if board.is_host else _LINKER_SCRIPT,
                   toolchain_file=_TOOLCHAIN_FILE,
                   models=[item for _, _, lib_files in rendered for item in lib_files.lowered])
    for template, target in (("CMakeLists.txt.j2", "CMakeLists.txt"), ("targets.cmake.j2", f"{package}-targets.cmake"),
                             ("config.cmake.j2", f"{package}-config.cmake"), ("mlf.mk.j2", "mlf.mk"),
                             ("README.md.j2", "README.md"), ("main.c.j2", "example/main.c")):
        writer.write(target, env.get_template(f"export/{template}").render(**context))
    if not board.is_host:
        writer.write(_TOOLCHAIN_FILE, env.get_template("export/arm-none-eabi.cmake.j2").render(**context))
    runs = [f"tvmgen_{item.module.name}_run" for item in context["models"]]
    libraries_built, stack = _prebuild(folder, files, board, arch_flags, options, package, jobs, runs)
    writer.written.update(libraries_built.values())
    _write_headers_with_stack(writer, env, rendered, quantizations, stack, arch_flags, options)
    description = _describe(folder, package, name, board, arch_flags, float_abi, rendered, files, libraries_built,
                            cmsis, stack)
    previous = owned_files(folder)
    description["files"] = sorted(writer.written | {MARKER})
    writer.write(MARKER, json.dumps(description, indent=2) + "\n")
    writer.prune_owned(previous)  # what the last export wrote and this one did not; never the user's files
    return ExportResult(folder=folder, description=description)


def owned_files(folder: Path) -> list[str]:
    """The files an earlier export into `folder` recorded writing (none for a marker without the
    record, such as an export's marker copied into a project): only those may be replaced or removed."""
    try:
        recorded = json.loads(read_regular(folder / MARKER, "the export's record", _MARKER_LIMIT)).get("files", [])
    except (OSError, ValueError, AttributeError, InvalidInputError):
        return []
    if not isinstance(recorded, list):
        return []
    return [item for item in recorded if isinstance(item, str) and _inside(item)]


_MARKER_LIMIT = 4 << 20


def _inside(relative: str) -> bool:
    """A path recorded in the marker names a file inside the folder: relative, no `..`, no empty part."""
    parts = relative.split("/")
    return bool(relative) and not relative.startswith("/") and all(part not in ("", ".", "..") for part in parts)


def _file_lists(rendered, crt_sources: list[str], cmsis_nn: CmsisNnLibrary | None) -> dict[str, list]:
    """The export's files by how they are compiled; CMSIS-NN's sources take its flags (the feature macros
    of the paths the build chose) on top of the model's."""
    model, objects, includes, headers = [], [], [], []
    for _, _, files in rendered:
        model += files.sources + files.model_sources
        objects += files.model_objects
        includes += [i for i in files.includes if i not in includes]
        headers += files.headers
    if cmsis_nn:
        # The model's CMSIS-NN calls include arm_nnfunctions.h, and mlf_cmsis_nn_scratch.h from src/.
        includes += [*cmsis_nn.includes, *(["src"] if cmsis_nn.scratch else [])]
    return {"model": model, "model_objects": objects, "model_includes": includes, "headers": headers,
            "cmsis_nn": list(cmsis_nn.sources) if cmsis_nn else [],
            "cmsis_nn_flags": list(cmsis_nn.flags) if cmsis_nn else [],
            "our_model": [s for _, _, f in rendered for s in f.sources],
            "arenas": [s for _, _, f in rendered for s in f.arenas],
            "runtime": [s for s in crt_sources if not is_board_support(s)],
            "board": [s for s in crt_sources if is_board_support(s)], "runtime_includes": ["crt/include"]}


def _prebuild(folder: Path, files: dict, board: Board, arch_flags: list[str], options: ProjectOptions,
              package: str, jobs: int, runs: list[str]) -> tuple[dict[str, str], dict[str, CallDepth]]:
    """Compile the model library and the runtime into static libraries for the board's CPU, and bound
    the stack each model's run function needs in them (`runs`; Cortex-M boards). The compiler runs
    inside the folder, so every path it is given is absolute (`-o RELATIVE` included)."""
    folder = folder.absolute()
    cc = toolchain_names(board, options.toolchain_prefix)["cc"]
    ar = "ar" if board.is_host else f"{options.toolchain_prefix}ar"
    find_tools([cc, ar], None if board.is_host else options.toolchain_prefix)
    includes = [f"-I{folder / i}" for i in files["model_includes"] + files["runtime_includes"]]
    # gcc's frame and call reports (.su, .ci) stay in the working folder, for the stack bound only.
    common = [*arch_flags, options.optimize, "-g", "-std=gnu11", "-ffunction-sections", "-fdata-sections",
              f"-ffile-prefix-map={folder}=.", *includes, *([] if board.is_host else _STACK_REPORTS)]
    built = {}
    with tempfile.TemporaryDirectory(prefix=OBJECTS_PREFIX, dir=folder) as work:
        for library, sources, extra in ((f"prebuilt/lib{package}.a", files["model"], _MODEL_WARNINGS),
                                        ("prebuilt/libmlfbuild_runtime.a", files["runtime"], [])):
            objects = _compile(cc, sources, folder, Path(work) / Path(library).stem, common + extra, jobs,
                               options.build_memory)
            if library.startswith(f"prebuilt/lib{package}"):
                objects += _compile(cc, files["cmsis_nn"], folder, Path(work) / Path(library).stem,
                                    common + files["cmsis_nn_flags"] + _MODEL_WARNINGS, jobs, options.build_memory)
                objects += [folder / o for o in files["model_objects"]]
            target = folder / library
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            done = subprocess.run([ar, "rcsD", str(target), *map(str, objects)], capture_output=True, text=True)
            if done.returncode != 0:
                raise BuildError(f"{ar} failed on {library}: {done.stderr.strip()[:300]}")
            built[Path(library).stem.removeprefix("lib")] = library
        stack = {} if board.is_host else _run_depths(cc, folder, Path(work), files, board, common, built, options,
                                                     runs, jobs)
    return built, stack


_STACK_REPORTS = ["-fstack-usage", "-fcallgraph-info=su"]


def _run_depths(cc: str, folder: Path, work: Path, files: dict, board: Board, flags: list[str],
                built: dict[str, str], options: ProjectOptions, runs: list[str], jobs: int) -> dict[str, CallDepth]:
    """Link the export's example with the board target and the prebuilt libraries, as an application
    does, and read each run function's depth off that image (size/stack.py). Regions are made roomy
    so the bound does not depend on the model fitting the board; without an image there is no figure."""
    objects = _compile(cc, ["example/main.c", *files["board"]], folder, work / "example",
                       flags + crt_defines(board), jobs, options.build_memory)
    script = render_oversize_linker_script(board, work)
    elf = work / "example.elf"
    libraries = [str(folder / library) for library in built.values()]
    done = run_compiler([cc, *flags, f"-T{script}", *link_flags(board), "-Wl,--gc-sections", "-o", str(elf),
                         *map(str, objects), "-Wl,--start-group", *libraries, "-lm", "-Wl,--end-group"],
                        memory=options.build_memory, cwd=folder)
    if done.returncode != 0:
        why = first_error(done.stderr, options.build_memory)
        return {run: CallDepth(None, (), (f"the example did not link: {why}",)) for run in runs}
    try:
        return call_depths(elf, work, f"{options.toolchain_prefix}objdump", runs)
    except RuntimeError as exc:
        return {run: CallDepth(None, (), (str(exc),)) for run in runs}


def _write_headers_with_stack(writer: Writer, env, rendered, quantizations: dict, stack: dict[str, CallDepth],
                              arch_flags: list[str], options: ProjectOptions) -> None:
    """mlf_<mod>.h again, now with the stack its run function needs (known only once the library is built;
    the figure is a comment and a macro, so the prebuilt objects do not change)."""
    for mlf, lib, lib_files in rendered:
        for item in lib_files.lowered:
            name = item.module.name
            depth = stack.get(f"tvmgen_{name}_run")
            writer.write(f"{INCLUDE_DIR}/mlf_{name}.h", model_header(
                env, item, lib, quantizations, mlf.name,
                _scratch_bytes(lib_files.cmsis_nn, item.module.cmsis_nn is not None),
                stack=depth, stack_flags=" ".join([options.optimize, *arch_flags])))


def _compile(cc: str, sources: list[str], folder: Path, out: Path, flags: list[str], jobs: int,
             memory: int) -> list[Path]:
    def one(source: str) -> Path:
        obj = out / (source.rsplit(".", 1)[0] + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        # The MLF's code, compiled as make compiles it in a build: no stdin, bounded time and memory.
        done = run_compiler([cc, *flags, "-c", str(folder / source), "-o", str(obj)], memory=memory, cwd=folder)
        if done.returncode != 0:
            raise BuildError(f"compiling {source} for the prebuilt library failed: {first_error(done.stderr, memory)}")
        return obj

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        return list(pool.map(one, sources))


def _describe(folder: Path, package: str, name: str, board: Board, arch_flags: list[str], float_abi: str | None,
              rendered, files: dict, built: dict[str, str], cmsis_nn: CmsisNnLibrary | None,
              stack: dict[str, CallDepth]) -> dict:
    models = []
    for mlf, lib, lib_files in rendered:
        for item in lib_files.lowered:
            module = item.module
            models.append({
                "name": module.name, "mlf": mlf.name, "mlf_sha256": lib.sha256,
                "executor": module.executor or "operator", "interface_api": module.interface_api,
                "header": f"include/mlf_{module.name}.h",
                "interface_header": next(h for h in lib_files.headers if h.endswith(f"/tvmgen_{module.name}.h")),
                "run": f"tvmgen_{module.name}_run", "inputs_struct": f"struct tvmgen_{module.name}_inputs",
                "outputs_struct": f"struct tvmgen_{module.name}_outputs",
                "arena": {"symbol": f"mlf_{module.name}_arena" if item.arena_bytes else None,
                          "bytes": item.arena_bytes, "align": 16},
                "usmp_pool_bytes": item.pool.bytes if item.pool and item.pool.kind == "usmp" else 0,
                "cmsis_nn_scratch_bytes": _scratch_bytes(lib_files.cmsis_nn, module.cmsis_nn is not None),
                "replaced_loops": [copy.to_json() for copy in item.copies],
                "stack": stack[f"tvmgen_{module.name}_run"].to_json() if f"tvmgen_{module.name}_run" in stack else None,
                "inputs": [t.to_json() for t in module.inputs], "outputs": [t.to_json() for t in module.outputs]})
    return {
        "schema": schemas.EXPORT, "complete": True, "mlfbuild_version": __version__, "folder": str(folder),
        "board": board.name, "cpu_flags": arch_flags, "float_abi": float_abi,
        "cmake": {"package": package, "model_target": f"mlf::{name}", "runtime_target": "mlfbuild::runtime",
                  "board_target": f"mlfbuild::board_{c_identifier(board.name)}",
                  "toolchain_file": None if board.is_host else _TOOLCHAIN_FILE},
        "make_fragment": "mlf.mk", "include_dirs": files["model_includes"] + files["runtime_includes"],
        "libraries": built, "linker_script": None if board.is_host else _LINKER_SCRIPT,
        "models": models,
        "cmsis_nn": dict(cmsis_nn.to_json(), include_dirs=list(cmsis_nn.includes), files=list(cmsis_nn.sources))
        if cmsis_nn else None,
        "files": {path: hashlib.sha256((folder / path).read_bytes()).hexdigest()
                  for path in sorted(files["headers"])},
    }


def _scratch_bytes(cmsis_nn: CmsisNnLibrary | None, calls: bool) -> int:
    """The shared CMSIS-NN scratch region beside the arena (regions in the USMP pool count in its bytes)."""
    return cmsis_nn.scratch.region_bytes if calls and cmsis_nn and cmsis_nn.scratch else 0


__all__ = ["export", "ExportResult", "MARKER"]
