"""Render a board project: ModelLibrary + Board → a folder a user can read and rebuild with `make`.

Knows nothing of how the project will be compiled or run. Files are written only when their content
changes, so an unchanged rebuild compiles nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment

from ..boards import Board
from ..errors import BuildError, InvalidInputError, UsageError
from ..mlf.model import ModelLibrary
from ..resources import data_dir
from ..toolchain import DEFAULT_BUILD_MEMORY, OPT_LEVELS, RUNTIMES  # noqa: F401 - re-exported
from ..untrusted import read_regular
from .abi import check_c_code, float_abi_for
from .cmsis_nn import CmsisNnLibrary, describe_features, render_cmsis_nn
from .library import render_library
from .lowering import Lowered
from .lowering.aot_c import io_tensors
from .runtime import RuntimeChoice, RuntimeFiles, builtin_runtime_files
from .tvm_runtime import tvm_runtime_files
from .templating import template_environment
from .writer import Writer
from .sizes import (DEFAULT_MAX_CODE_BYTES, Bounds, check_constants_fit, check_lowered, check_module,
                    check_plan_fits)

from ..canalysis.cfront import HOST, Preprocessor

_TOOLCHAIN_DEFAULT_PREFIX = "arm-none-eabi-"




@dataclass(frozen=True)
class ProjectOptions:
    runtime: str = "builtin"  # one of RUNTIMES: builtin (crt/) | tvm (TVM's standalone CRT)
    crt_dir: Path | None = None  # TVM standalone CRT to use with runtime "tvm"
    cmsis_nn: Path | None = None  # CMSIS-NN source tree, for MLFs that call arm_nnfunctions
    cmsis_core: Path | None = None  # CMSIS-Core headers, for CMSIS-NN trees that include cmsis_compiler.h
    optimize: str = "-Os"  # one of OPT_LEVELS
    # CMSIS-NN's own level (None: `optimize`); TFLM compiles the library at -O2 beside an -Os core
    cmsis_nn_optimize: str | None = None
    toolchain_prefix: str = _TOOLCHAIN_DEFAULT_PREFIX
    werror: bool = False  # -Werror for our code (the tests use it)
    max_code_bytes: int = DEFAULT_MAX_CODE_BYTES  # generated C per module and in all
    stack_bytes: int | None = None  # a fixed .stack reserve (else the computed bound + margin)
    build_memory: int = DEFAULT_BUILD_MEMORY  # address space of make and of each compiler it runs
    mlperf_model_id: str | None = None
    app: Path | None = None  # the user's application sources (build --app), instead of our console


@dataclass
class Project:
    path: Path
    board: Board
    lowered: list[Lowered]
    cflags: list[str]
    float_abi: str | None
    workspace_bytes: int
    runtime: str
    template_hash: str
    notes: list[str] = field(default_factory=list)
    cmsis_nn: CmsisNnLibrary | None = None  # the CMSIS-NN tree compiled in, when the model calls it
    app: dict | None = None  # build --app: {"folder", "files": {path: sha256}} (build.json "app")
    cxx: bool = False  # the application has C++ sources: compiled and linked with the board's g++


def templates_hash() -> str:
    """Identifies the template and runtime versions that went into a build (recorded in build.json)."""
    digest = hashlib.sha256()
    for folder in (data_dir("templates"), data_dir("crt")):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _app_quantizations(lib: ModelLibrary, options: ProjectOptions) -> dict:
    """The io quantization an imported MLF carries, for the headers the user's application includes (as
    `export` writes them); the console app reads none."""
    if options.app is None:
        return {}
    from ..reference.carried import carried_quantizations

    return carried_quantizations(lib)


def render_project(lib: ModelLibrary, board: Board, dest: Path, options: ProjectOptions = ProjectOptions(),
                   stack_bytes: int | None = None) -> Project:
    """`stack_bytes`: the .stack reserve to link with when options do not fix one (default: the board's)."""
    check_library(lib, board, options)
    bounds = Bounds.of(board)
    check_constants_fit(lib.modules, bounds)      # the firmware's own memory map: not an export's
    env = template_environment()
    writer = Writer(dest)
    dest.mkdir(parents=True, exist_ok=True)

    def check(lowered: list[Lowered]) -> None:
        check_lowered(lowered, sum(item.workspace_bytes for item in lowered), bounds, options.max_code_bytes)
        check_plan_fits(lowered, bounds, own_io=options.app is None)

    float_abi = float_abi_for(board, [o for m in lib.modules for o in m.objects])
    arch_flags = arch_flags_for(board, float_abi)
    preprocessor = code_preprocessor(board, options.toolchain_prefix, arch_flags)
    library = render_library(lib, writer, env, options.runtime, check=check, quantizations=_app_quantizations(lib, options),
        cmsis_nn=lambda: render_cmsis_nn(lib, board, arch_flags, options.cmsis_nn, options.cmsis_core, writer,
                                       options.build_memory, optimize=options.cmsis_nn_optimize,
                                       preprocessor=preprocessor),
        cmsis_nn_tree=options.cmsis_nn, cmsis_core=options.cmsis_core, preprocessor=preprocessor)
    lowered, cmsis_nn = library.lowered, library.cmsis_nn
    workspace = sum(item.workspace_bytes for item in lowered)
    if options.app is None:
        app_sources, app_record = render_console_app(lowered, writer, env, options.runtime), None
    else:
        app_sources, app_record = copy_user_app(options.app, writer)

    runtime = _runtime_files(RuntimeChoice(options.runtime, options.crt_dir), lib, board, writer)
    library_includes = list(cmsis_nn.includes) if cmsis_nn else []

    defines = runtime.defines + _app_defines(lib, board, options)
    linker_script = None
    if not board.is_host:
        linker_script = "linker.ld"
        writer.write(linker_script, linker_script_text(board, options.stack_bytes or stack_bytes))
    toolchain = toolchain_names(board, options.toolchain_prefix)
    cxx_sources = [s for s in app_sources if not s.endswith(".c")]
    makefile = env.get_template("project/Makefile.j2").render(
        board=board, toolchain=toolchain, arch_flags=arch_flags, opt_flags=[options.optimize, "-g"],
        werror=options.werror, defines=defines,
        # src/ holds the console app, or with the user's app just the CMSIS-NN scratch region's header
        includes=[*(["app"] if options.app else []), "src", *library.includes, *runtime.includes, *library_includes],
        ld_flags=link_flags(board), ld_libs=["-lm"], linker_script=linker_script,
        our_sources=[*[s for s in app_sources if s.endswith(".c")], *library.sources, *runtime.sources],
        cxx_sources=cxx_sources, cxx_extensions=[e[1:] for e in APP_SOURCES if e != ".c"],
        model_sources=library.model_sources, model_objects=library.model_objects,
        library_sources=runtime.library_sources,
        library_flags=runtime.library_flags, libraries_note="TVM CRT" if runtime.library_sources else "",
        cmsis_nn_sources=cmsis_nn.sources if cmsis_nn else [], cmsis_nn_flags=cmsis_nn.flags if cmsis_nn else [])
    writer.write("Makefile", makefile)
    for folder in ("src", "app", "include", "crt", "model", "lib", "tvm_crt"):
        writer.prune(folder)
    notes = [note for item in lowered for note in item.notes] + runtime.notes
    if library.status_fixes:
        notes.append(f"patched TVM's inverted CMSIS-NN status check (switch (!status)) in {library.status_fixes} "
                     "places, so that a failing CMSIS-NN kernel fails its operator")
    if cmsis_nn:
        notes.append(f"CMSIS-NN paths: {describe_features(cmsis_nn.features)} ({cmsis_nn.reason})"
                     + (f"; {cmsis_nn.scratch.summary()}" if cmsis_nn.scratch else ""))
    return Project(path=dest, board=board, lowered=lowered, cflags=arch_flags + [options.optimize], float_abi=float_abi,
                   workspace_bytes=workspace, runtime=options.runtime, template_hash=templates_hash(), notes=notes,
                   cmsis_nn=cmsis_nn, app=app_record, cxx=bool(cxx_sources))


APP_SOURCES = (".c", ".cc", ".cpp", ".cxx")
_APP_FILES = (*APP_SOURCES, ".h", ".hh", ".hpp", ".inc")


# What a source's path may hold to reach the generated Makefile as it is: make expands `$`, splits at
# spaces and ends a rule at `:`, `;` or a newline; quoting cannot make all of those safe, so none is let in.
_MAKE_SAFE = re.compile(r"[A-Za-z0-9._+/-]+")

# An application is sources people write: bounds far above any real one, so that `--app /` or a
# header that is really a disk image stops with a line instead of filling the memory.
MAX_APP_FILE_BYTES = 16 * 1024 * 1024
MAX_APP_BYTES = 64 * 1024 * 1024
MAX_APP_FILES = 4096


def _app_file_list(folder: Path) -> list[Path]:
    files = []
    for path in folder.rglob("*"):
        if path.suffix in _APP_FILES and path.is_file() and \
                not any(part.startswith(".") for part in path.relative_to(folder).parts):
            files.append(path)
            if len(files) > MAX_APP_FILES:
                raise InvalidInputError(f"--app {folder}: more than {MAX_APP_FILES:,} C/C++ sources and headers; "
                                        "name the folder of the application itself")
    return sorted(files)


def _read_app_file(folder: Path, path: Path, total: int) -> bytes:
    data = read_regular(path, "application file", MAX_APP_FILE_BYTES)
    if total + len(data) > MAX_APP_BYTES:
        raise InvalidInputError(f"--app {folder}: its sources and headers are over {MAX_APP_BYTES:,} bytes together "
                                f"(at {path.relative_to(folder)})")
    return data


def copy_user_app(folder: Path, writer: Writer) -> tuple[list[str], dict]:
    """The user's application (build --app) under app/: its C/C++ sources and headers, with hashes."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--app {folder}: no such folder")
    files = _app_file_list(folder)
    sources = [p for p in files if p.suffix in APP_SOURCES]
    if not sources:
        raise UsageError(f"--app {folder}: no C or C++ sources ({', '.join('*' + s for s in APP_SOURCES)})")
    for path in sources:
        name = path.relative_to(folder).as_posix()
        if not _MAKE_SAFE.fullmatch(name) or name.startswith("-"):
            raise UsageError(f"--app {folder}: the file name {name!r} cannot be handed to make safely; rename it "
                             "with letters, digits and . _ - + / only")
    stems: dict[Path, Path] = {}
    for path in sources:  # each source compiles to build/app/<its path without the extension>.o
        other = stems.setdefault(path.with_suffix(""), path)
        if other != path:
            raise UsageError(f"--app {folder}: {other.relative_to(folder)} and {path.relative_to(folder)} would "
                             "compile to one object file; rename one")
    hashes, total = {}, 0
    for path in files:
        relative = f"app/{path.relative_to(folder).as_posix()}"
        data = _read_app_file(folder, path, total)
        total += len(data)
        writer.write(relative, data)
        hashes[relative] = hashlib.sha256(data).hexdigest()
    return [f"app/{p.relative_to(folder).as_posix()}" for p in sources], {"folder": str(folder), "files": hashes}


def check_library(lib: ModelLibrary, board: Board, options: ProjectOptions) -> None:
    """What must hold before a model library is rendered for a board (one line each when it does not)."""
    if options.crt_dir is not None and options.runtime != "tvm":
        raise UsageError("--crt-dir names TVM's standalone CRT: it goes with --runtime tvm")
    for module in lib.modules:
        if module.defects:
            raise InvalidInputError(f"{module.name}: {module.defects[0]}")
        check_c_code(board, module)
    _check_link_collisions(lib)
    bounds = Bounds.of(board)
    for module in lib.modules:
        check_module(module, bounds, options.max_code_bytes)


CONSOLE_MAX_TENSORS = 256  # the console protocol's input/output index is one byte (console/frames.py)


def render_console_app(lowered: list[Lowered], writer: Writer, env: Environment, runtime: str) -> list[str]:
    """Our application: the console protocol (main.c) over a table of the models' buffers (models.c)."""
    templates = data_dir("templates")
    io = []
    for item in lowered:
        inputs, outputs = io_tensors(item.module, f"mlf_{item.module.name}")
        if max(len(inputs), len(outputs)) > CONSOLE_MAX_TENSORS:
            raise InvalidInputError(f"{item.module.name}: {len(inputs)} inputs and {len(outputs)} outputs; the console "
                                    f"firmware addresses {CONSOLE_MAX_TENSORS} of each per model (a byte in its "
                                    "requests, docs/protocol.md): build your own application with --app, or export")
        io.append({"inputs": inputs, "outputs": outputs})
    writer.write("src/models.c", env.get_template("project/src/models.c.j2").render(lowered=lowered, io=io,
                                                                                      runtime=runtime))
    writer.copy(templates / "project" / "src" / "main.c", "src/main.c")
    writer.copy(templates / "project" / "src" / "mlf_model.h", "src/mlf_model.h")
    return ["src/main.c", "src/models.c"]


def _check_link_collisions(lib: ModelLibrary) -> None:
    seen: dict[str, str] = {}
    for module in lib.modules:  # tiny and TINY: one include guard, one set of MLF_TINY_* macros
        other = seen.setdefault(module.name.casefold(), module.name)
        if other != module.name:
            raise InvalidInputError(f"modules '{other}' and '{module.name}' differ only in case: their headers' "
                                    f"guards and MLF_{module.name.upper()}_* macros would be one; build them with "
                                    f"names that differ otherwise (--module {module.name}=NEW)")
    system_libs = [m.name for m in lib.modules if m.system_lib]
    if len(system_libs) > 1:
        raise InvalidInputError(f"modules {', '.join(system_libs)} each define TVMSystemLibEntryPoint and cannot "
                                "be linked into one firmware; export all but one without system-lib")


def arch_flags_for(board: Board, float_abi: str | None) -> list[str]:
    if board.is_host:
        return []
    flags = [f for f in board.cpu.cflags if not f.startswith("-mfloat-abi=")]
    if float_abi:
        flags.append(f"-mfloat-abi={float_abi}")
    if float_abi == "soft":
        flags = [f for f in flags if not f.startswith("-mfpu=")]
    return flags


def _runtime_files(choice: RuntimeChoice, lib: ModelLibrary, board: Board, writer: Writer) -> RuntimeFiles:
    if choice.name == "builtin":
        return builtin_runtime_files(board, writer)
    if choice.name == "tvm":
        return tvm_runtime_files(choice, lib, board, writer, builtin_runtime_files(board, writer))
    raise BuildError(f"unknown runtime '{choice.name}' (choose builtin or tvm)")


def link_flags(board: Board) -> list[str]:
    if board.is_host:
        return []
    # --emit-relocs keeps the link's relocations in the ELF (not in the image): they tell the stack
    # bound which stored words are function addresses and which are data that merely look like one.
    return ["-nostartfiles", "--specs=nano.specs", "-Wl,--emit-relocs"]


def linker_script_text(board: Board, stack_bytes: int | None = None) -> str:
    return template_environment().get_template("linker.ld.j2").render(
        board=board, stack_bytes=stack_bytes or board.memory.stack_bytes, heap_bytes=board.memory.heap_bytes)


def linked_stack_bytes(project: Path) -> int | None:
    """The .stack reserve the project's linker script holds now (None: no script yet)."""
    path = project / "linker.ld"
    if not path.is_file():
        return None
    match = re.search(r"^__stack_size = 0x([0-9A-Fa-f]+);", path.read_text(), re.M)
    return int(match.group(1), 16) if match else None


# Room for the diagnostic link: 128 MiB per region keeps every board's regions apart.
_OVERSIZE_REGION = 0x08000000


def render_oversize_linker_script(board: Board, project: Path, stack_bytes: int | None = None) -> Path:
    """oversize.ld: the board's memory map with roomier regions (see the Makefile's oversize.elf) and the
    .stack reserve `stack_bytes` (default: the board's), so the diagnostic link counts the reserve asked for."""
    memory = board.memory
    roomy = dataclasses.replace(memory, flash=dataclasses.replace(memory.flash, length=_OVERSIZE_REGION),
                                ram=dataclasses.replace(memory.ram, length=_OVERSIZE_REGION))
    path = project / "oversize.ld"
    path.write_text(template_environment().get_template("linker.ld.j2").render(
        board=dataclasses.replace(board, memory=roomy), stack_bytes=stack_bytes or memory.stack_bytes,
        heap_bytes=memory.heap_bytes))
    return path


def code_preprocessor(board: Board, prefix: str, arch_flags: list[str]) -> Preprocessor:
    """The compiler the analyses read the model's C with: the one that compiles it, with the same CPU flags."""
    if board.is_host:
        return HOST
    return Preprocessor(toolchain_names(board, prefix)["cc"], tuple(arch_flags))


def toolchain_names(board: Board, prefix: str) -> dict[str, str]:
    if board.is_host:
        return {"cc": "gcc", "cxx": "g++", "objcopy": "objcopy"}
    return {"cc": f"{prefix}gcc", "cxx": f"{prefix}g++", "objcopy": f"{prefix}objcopy"}


def _mlperf_model_id(lib: ModelLibrary, options: ProjectOptions) -> str:
    if options.mlperf_model_id:
        return options.mlperf_model_id
    name = lib.modules[0].name
    for known in ("kws", "vww", "ad", "ic"):
        if name.startswith(known):
            return f"{known}01"
    return "ic01"


def _app_defines(lib: ModelLibrary, board: Board, options: ProjectOptions) -> list[str]:
    defines = [f'-DMLF_BOARD_NAME=\\"{board.name}\\"', f'-DMLF_MLPERF_MODEL_ID=\\"{_mlperf_model_id(lib, options)}\\"']
    if board.is_emulated:
        defines.append("-DMLF_FRAME_TIMEOUT_MS=30000u")
    return defines


__all__ = ["Project", "ProjectOptions", "Writer", "arch_flags_for", "check_library", "render_project", "linker_script_text", "linked_stack_bytes", "render_oversize_linker_script", "template_environment",
           "templates_hash"]
