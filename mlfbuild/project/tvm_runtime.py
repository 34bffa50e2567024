"""`--runtime tvm`: build the firmware with TVM's own standalone C runtime (CRT) instead of ours.

The CRT is the one an AOT MLF bundles under runtime/, or the folder given with --crt-dir (graph and
operator exports, and every TVM 0.8 export, carry none). What goes into the project:

  tvm_crt/standalone_crt/   TVM's CRT, copied unchanged: the public headers, and the C sources of
                            the components this firmware needs — `common` and `memory` always,
                            `graph_executor` when a module uses the graph executor (TVM's own
                            executor then runs the graph JSON, see lowering/graph_tvm.py).
                            Third-party code: compiled like model code (LIB_SRCS, no -Werror).
  tvm_crt/include/          crt_config.h (TVM's template with its defaults) and mlf_tvm_platform.h
  tvm_crt/src/              mlf_tvm_platform.c: the platform hooks TVM's CRT needs, ours
  tvm_crt/README.md         where the CRT came from and how it is set up

Our runtime keeps its platform part (startup, console, timer, exit: main.c's console protocol
needs it); its TVM backend (crt/src/backend.c, func_registry.c and our ABI headers) is left out,
so every TVM function the model calls comes from TVM's CRT.

Memory behind TVMPlatformMemoryAllocate (and so TVMBackendAllocWorkspace, crt_backend_api.c):
  * AOT: TVM's stack allocator, as TVM's own AOT demos use it (Zephyr aot_standalone_demo and
    mlperftiny). The pool is mlfbuild's workspace pool, sized by the AOT lowering at the peak the
    code's allocations reach, each rounded to 16 B as the stack allocator rounds it to
    TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES (the LIFO check and its 4-byte tags are off, as in TVM's
    template); where sizes are not literals, from the metadata's workspace_size_bytes + 16 B per
    TVMBackendAllocWorkspace call site.
  * Graph executor: TVM's page allocator (its frees are not LIFO), 256-byte pages as in TVM's
    platform.c.template, over a pool the graph lowering sizes (see graph_tvm.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..boards import Board
from ..errors import BuildError
from ..mlf.model import ModelLibrary
from ..resources import data_dir
from .runtime import RuntimeChoice, RuntimeFiles

# Relative to a standalone CRT root (TVM's build/standalone_crt, or an AOT MLF's runtime/).
_MARKERS = ("include/tvm/runtime/crt/platform.h", "src/runtime/crt/common/crt_runtime_api.c")
_SOURCE_ROOT = "src/runtime/crt"
PROJECT_DIR = "tvm_crt"
CRT_COPY = f"{PROJECT_DIR}/standalone_crt"
PAGE_SIZE_LOG2 = 8
# Our runtime's TVM backend, replaced by TVM's CRT (the rest of crt/ is the platform layer).
_OUR_BACKEND_SOURCES = ("crt/src/backend.c", "crt/src/func_registry.c")
_OUR_ABI_HEADERS = ("crt/include/tvm/", "crt/include/dlpack/")
# newlib (arm-none-eabi) tests __int64_t_defined in <inttypes.h> before <stdint.h> has defined it,
# so PRIu64/PRId64 (used by crt_backend_api.c) stay undefined; see docs/tvm-runtime-footprint.md §3.
_NEWLIB_CRT_FLAGS = ["-include", "inttypes.h", "-D__int64_t_defined=1"]


def tvm_runtime_files(choice: RuntimeChoice, lib: ModelLibrary, board: Board, writer,
                      builtin: RuntimeFiles) -> RuntimeFiles:
    crt, origin = locate_crt(choice, lib)
    graph_modules = [m for m in lib.modules if m.executor == "graph"]
    _check_one_pool(lib, graph_modules)
    _check_registry_format(crt, lib, graph_modules)
    components = ["common", "memory"] + (["graph_executor"] if graph_modules else [])
    for component in components:
        if not any((crt / _SOURCE_ROOT / component).glob("*.c")):
            raise BuildError(f"{crt}: TVM standalone CRT without its '{component}' component "
                             f"({_SOURCE_ROOT}/{component}/*.c)")

    _drop_our_backend(writer)
    digest = hashlib.sha256()
    for path in sorted((crt / "include").rglob("*.h")):
        relative = path.relative_to(crt)
        if relative.parts[1] == "dmlc":  # dmlc-core: C++ headers the C runtime never includes
            continue
        writer.copy(path, f"{CRT_COPY}/{relative}")
        digest.update(str(relative).encode() + path.read_bytes())
    sources = []
    for component in components:
        for path in sorted((crt / _SOURCE_ROOT / component).glob("*.c")):
            relative = path.relative_to(crt)
            writer.copy(path, f"{CRT_COPY}/{relative}")
            digest.update(str(relative).encode() + path.read_bytes())
            sources.append(f"{CRT_COPY}/{relative}")

    templates = data_dir("templates") / "tvm_crt"
    env = _environment()
    limits = _graph_limits(graph_modules)
    writer.write(f"{PROJECT_DIR}/include/crt_config.h", env.get_template("tvm_crt/crt_config.h.j2").render(
        page_allocator=bool(graph_modules), page_size_log2=PAGE_SIZE_LOG2, **limits))
    writer.copy(templates / "mlf_tvm_platform.h", f"{PROJECT_DIR}/include/mlf_tvm_platform.h")
    writer.copy(templates / "mlf_tvm_platform.c", f"{PROJECT_DIR}/src/mlf_tvm_platform.c")
    version = crt_version(crt, choice, lib)
    fingerprint = digest.hexdigest()[:16]
    allocator = (f"page allocator ({1 << PAGE_SIZE_LOG2} B pages)" if graph_modules
                 else "stack allocator over the workspace pool")
    writer.write(f"{PROJECT_DIR}/README.md", env.get_template("tvm_crt/README.md.j2").render(
        origin=origin, version=version, fingerprint=fingerprint, components=components, sources=sources,
        graph=bool(graph_modules), allocator=allocator, newlib=not board.is_host, flags=_NEWLIB_CRT_FLAGS))

    ours = [s for s in builtin.sources if s not in _OUR_BACKEND_SOURCES]
    note = (f"runtime: TVM standalone CRT {version or '(version unknown)'} from {origin} "
            f"(sources sha256 {fingerprint}); components {', '.join(components)}; {allocator}")
    return RuntimeFiles(
        sources=ours + [f"{PROJECT_DIR}/src/mlf_tvm_platform.c"],
        includes=[f"{PROJECT_DIR}/include", f"{CRT_COPY}/include", *builtin.includes],
        defines=builtin.defines + ["-DMLF_RUNTIME_TVM=1"],
        notes=builtin.notes + [note],
        library_sources=sources,
        library_flags=[] if board.is_host else list(_NEWLIB_CRT_FLAGS))


def is_standalone_crt(path: Path) -> bool:
    return all((path / marker).is_file() for marker in _MARKERS)


def locate_crt(choice: RuntimeChoice, lib: ModelLibrary) -> tuple[Path, str]:
    """The CRT folder and how to name it for the user: --crt-dir wins over the MLF's runtime/."""
    if choice.crt_dir is not None:
        given = Path(choice.crt_dir)
        for candidate in (given, given / "runtime", given / "standalone_crt"):
            if is_standalone_crt(candidate):
                return candidate.resolve(), str(candidate)
        raise BuildError(f"--crt-dir {given}: not a TVM standalone CRT (expected {' and '.join(_MARKERS)}); "
                         "point it at the runtime/ folder of an AOT MLF or at TVM's build/standalone_crt")
    if lib.runtime is not None:
        bundled = lib.root / lib.runtime.path
        if is_standalone_crt(bundled):
            return bundled, f"the MLF's {lib.runtime.path}/"
        raise BuildError(f"the MLF's {lib.runtime.path}/ is not a complete TVM standalone CRT "
                         f"(expected {' and '.join(_MARKERS)}); give one with --crt-dir")
    kinds = sorted({m.executor or "operator" for m in lib.modules})
    raise BuildError(f"--runtime tvm: this MLF ({'/'.join(kinds)}, metadata v{lib.version}) carries no TVM runtime; "
                     "give --crt-dir DIR with TVM's standalone CRT (e.g. the runtime/ folder of an AOT MLF "
                     "exported by the same TVM version)")


def crt_version(crt: Path, choice: RuntimeChoice, lib: ModelLibrary) -> str | None:
    """The CRT's TVM version where something records it: the MLF's external_dependencies for its own
    runtime/, or the metadata.json next to a --crt-dir that is an unpacked MLF's runtime/."""
    if choice.crt_dir is None and lib.runtime is not None:
        return lib.runtime.version
    metadata = crt.parent / "metadata.json"
    if crt.name == "runtime" and metadata.is_file():
        try:
            text = json.loads(metadata.read_text(errors="replace"))
        except ValueError:
            return None
        for module in (text.get("modules") or {}).values() if isinstance(text, dict) else []:
            for dep in (module.get("external_dependencies") or []) if isinstance(module, dict) else []:
                if isinstance(dep, dict) and dep.get("short_name") == "tvm_standalone_crt":
                    return str(dep.get("version_spec"))
    return None


def _check_one_pool(lib: ModelLibrary, graph_modules) -> None:
    """TVMPlatformMemoryAllocate has one memory manager: the graph executor's page pool cannot also
    serve other modules' TVMBackendAllocWorkspace calls, which are sized for the workspace pool."""
    if not graph_modules:
        return
    others = [m.name for m in lib.modules if m.executor != "graph" and not m.usmp
              and (m.workspace_bytes() or m.executor is None)]
    if others:
        raise BuildError(f"--runtime tvm: graph module {graph_modules[0].name} and module(s) {', '.join(others)} "
                         "that allocate a workspace cannot share TVM's one memory manager; build them separately")


_REGISTRY = re.compile(r'TVMFuncRegistry\s+_tvm_func_registry\s*=\s*\{\s*"')
_C_ESCAPE = re.compile(r'\\([0-7]{1,3}|x[0-9a-fA-F]+|.)|([^"\\])', re.S)
_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11}


def _literal_bytes(text: str, start: int, count: int) -> bytes:
    """The first `count` bytes of the C string literal whose body starts at text[start]."""
    out = bytearray()
    position = start
    while len(out) < count:
        match = _C_ESCAPE.match(text, position)
        if match is None:  # the closing quote
            break
        position = match.end()
        escape, plain = match.groups()
        if plain is not None:
            out += plain.encode()
        elif escape[0] in "01234567":
            out.append(int(escape, 8) & 0xFF)
        elif escape[0] == "x":
            out.append(int(escape[1:], 16) & 0xFF)
        else:
            out.append(_SIMPLE_ESCAPES.get(escape, ord(escape[0])))
    return bytes(out[:count])


def _check_registry_format(crt: Path, lib: ModelLibrary, graph_modules) -> None:
    """TVM's graph executor finds the kernels by name in the system library's function registry,
    whose names blob starts with the function count: 1 byte in TVM 0.8, a uint16 from TVM 0.9 on.
    A CRT reading the other width calls the wrong kernels, so refuse the mix before building."""
    registry_c = crt / _SOURCE_ROOT / "common" / "func_registry.c"
    if not graph_modules or not registry_c.is_file():
        return
    crt_width = 2 if "sizeof(uint16_t)" in registry_c.read_text(errors="replace") else 1
    for module in graph_modules:
        for rel in module.sources:
            text = (lib.root / rel).read_text(errors="replace")
            match = _REGISTRY.search(text)
            head = _literal_bytes(text, match.end(), 2) if match else b""
            if len(head) < 2:
                continue
            # After a 1-byte count comes the first function name (a C identifier); after a uint16
            # count its high byte, which is below 'A' for fewer than 16 640 functions.
            model_width = 1 if chr(head[1]).isalpha() or head[1] == ord("_") else 2
            if model_width != crt_width:
                producer = "TVM 0.8" if model_width == 1 else "TVM 0.9 or later"
                raise BuildError(
                    f"{module.name}: its function registry ({rel}) counts functions in {model_width} byte(s), as "
                    f"{producer} writes it, but the CRT in {crt} reads {crt_width} byte(s): TVM's graph executor "
                    f"would call the wrong kernels; use a standalone CRT from the TVM version that exported the MLF")
            break


def _graph_limits(graph_modules) -> dict[str, int]:
    """The CRT's fixed-size limits this model's graph needs (crt_config.h keeps TVM's defaults where
    they suffice): node and function names live in TVM_CRT_MAX_STRLEN_FUNCTION_NAME buffers,
    parameter names in TVM_CRT_MAX_STRLEN_PARAM_NAME ones (NUL included), and SetupOpExecs wants
    fewer than TVM_CRT_MAX_ARGS arguments per kernel (graph_executor.c checks args >= MAX_ARGS)."""
    limits = {"max_ndim": 0, "max_args": 0, "max_dltype": 0, "max_function": 0, "max_param": 0}
    for module in graph_modules:
        graph = module.graph
        if graph is None:
            continue
        for node in graph.nodes:
            limits["max_function"] = max(limits["max_function"], len(node.name) + 1, len(node.func_name or "") + 1)
            if node.op != "null":
                limits["max_args"] = max(limits["max_args"], len(node.inputs) + node.num_outputs + 1)
            elif node.name in module.params:
                limits["max_param"] = max(limits["max_param"], len(node.name) + 1)
        for entry in graph.entries:
            limits["max_ndim"] = max(limits["max_ndim"], len(entry.shape))
            limits["max_dltype"] = max(limits["max_dltype"], len(entry.dtype) + 1)
    return limits


def _drop_our_backend(writer) -> None:
    """Our runtime's TVM backend was copied with the rest of crt/; leave it out of this project
    (the writer's prune then removes what an earlier builtin render left behind)."""
    for relative in list(writer.written):
        if relative in _OUR_BACKEND_SOURCES or relative.startswith(_OUR_ABI_HEADERS):
            writer.written.discard(relative)
            target = writer.root / relative
            if target.is_file():
                target.unlink()


def _environment():
    from .templating import template_environment
    return template_environment()
