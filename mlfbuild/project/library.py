"""The model library: what a model is in C, the same for our firmware and for an export.

Per module: the MLF's generated code (copied under model/, TVM's layout kept), the lowered executor
behind `tvmgen_<mod>_run` (src/model_<mod>.c), the interface header when the MLF brings none
(include/tvmgen_<mod>.h) and the header an application plans with (include/mlf_<mod>.h: tensors,
arena, sections, version). The runtime a model calls and the board support are not in it (runtime.py,
board_support.py); the application that calls it is either our console (src/main.c, src/models.c)
or the user's.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from jinja2 import Environment

from .. import __version__
from ..canalysis.copies import identity_copies, rewrite as rewrite_copies
from ..mlf.model import ModelLibrary, Module, c_identifier
from ..mlf.rename import module_pool_sections
from .cmsis_nn import CmsisNnLibrary, describe_features, fix_status_checks
from .lowering import Lowered, lowering_for
from .lowering.base import CTensor, module_sources, shape_of
from ..canalysis.cfront import HOST, Preprocessor
from .pool_plan import header_dirs, plan_usmp_pool

if TYPE_CHECKING:
    from ..size.stack import CallDepth

INCLUDE_DIR = "include"


@dataclass(frozen=True)
class TensorQuantization:
    """Affine quantization of one tensor (real = scale * (q - zero_point)), where a source states it."""

    scale: float
    zero_point: int

    @property
    def scale_literal(self) -> str:
        return f"{self.scale!r}f"


@dataclass
class _HeaderTensor(CTensor):
    c_name: str = ""
    quantization: TensorQuantization | None = None


# Module name -> tensor name -> (scale, zero point), where a source states them (the original model:
# run/references.py); tensors it does not name get no quantization macros.
Quantizations = dict[str, dict[str, tuple[float, int]]]


@dataclass
class LibraryFiles:
    """What the model library holds, as paths relative to the folder it was rendered into."""

    lowered: list[Lowered]
    sources: list[str]  # mlfbuild's C: the lowered executors
    model_sources: list[str]  # the MLF's C, compiled with the model's own warnings
    model_objects: list[str]  # the MLF's object files (LLVM targets)
    includes: list[str]
    headers: list[str]  # the application's headers: mlf_<mod>.h and every tvmgen_<mod>.h
    arenas: list[str] = field(default_factory=list)  # src/mlf_<mod>_arena.c, also in `sources`
    status_fixes: int = 0  # TVM's inverted CMSIS-NN status checks patched
    cmsis_nn: CmsisNnLibrary | None = None  # the CMSIS-NN library compiled in, when the model calls it
    notes: list[str] = field(default_factory=list)


def render_library(lib: ModelLibrary, writer, env: Environment, runtime: str = "builtin",
                   quantizations: Quantizations | None = None, source_name: str | None = None,
                   model_dir: str = "model", check: Callable[[list[Lowered]], None] | None = None,
                   cmsis_nn: Callable[[], CmsisNnLibrary | None] | None = None,
                   cmsis_nn_tree: Path | None = None, cmsis_core: Path | None = None,
                   preprocessor: Preprocessor = HOST) -> LibraryFiles:
    """`model_dir`: where the MLF's code goes (one folder per MLF when several are rendered together);
    `check` sees the lowered modules before anything is written; `cmsis_nn` renders the CMSIS-NN
    library the model calls (its scratch buffers change the model's code); `cmsis_nn_tree` and
    `cmsis_core`: the trees whose headers the model's C includes; `preprocessor`: the build's compiler
    and CPU flags, with which the analyses read the model's C."""
    headers = header_dirs(lib.root, cmsis_nn_tree, cmsis_core, preprocessor)
    lowered = [lowering_for(m, runtime).lower(m, lib.root, env, headers) for m in lib.modules]
    for item in lowered:
        item.copies = identity_copies(module_sources(item.module, lib.root), headers)
    if check:
        check(lowered)
    kernels = _scratch_in_pools(lib, lowered, cmsis_nn(), headers) if cmsis_nn else None
    files = _copy_model(lib, lowered, writer, kernels, model_dir)
    files.cmsis_nn = kernels
    files.sources += _render_cmsis_nn_scratch(kernels, env, writer)
    for item in lowered:
        name = item.module.name
        if item.code:
            writer.write(f"src/model_{name}.c", item.code)
            files.sources.append(f"src/model_{name}.c")
        if item.arena_bytes:
            writer.write(f"src/mlf_{name}_arena.c", env.get_template("library/mlf_arena.c.j2").render(
                m=item.module, M=c_identifier(name).upper()))
            files.sources.append(f"src/mlf_{name}_arena.c")
            files.arenas.append(f"src/mlf_{name}_arena.c")
        if item.interface_header is not None:
            writer.write(f"{INCLUDE_DIR}/tvmgen_{name}.h", item.interface_header)
            files.headers.append(f"{INCLUDE_DIR}/tvmgen_{name}.h")
        else:
            files.headers.append(f"{model_dir}/{item.module.header}")
        writer.write(f"{INCLUDE_DIR}/mlf_{name}.h",
                     model_header(env, item, lib, quantizations or {}, source_name or lib.root.name,
                                  kernels.scratch.region_bytes if kernels and kernels.scratch and item.module.cmsis_nn
                                  else 0))
        files.headers.append(f"{INCLUDE_DIR}/mlf_{name}.h")
    files.lowered = lowered
    return files


def model_header(env: Environment, item: Lowered, lib: ModelLibrary, quantizations: Quantizations,
                 source_name: str, cmsis_nn_scratch_bytes: int = 0, stack: CallDepth | None = None,
                 stack_flags: str = "") -> str:
    """`stack`: the run function's depth in the export's prebuilt code, compiled with `stack_flags`
    (None: not computed, as for a build's library or the host)."""
    module = item.module

    def tensors(specs) -> list[_HeaderTensor]:
        known = quantizations.get(module.name, {})
        return [_HeaderTensor(name=s.name, dtype=s.dtype, shape=shape_of(s), nbytes=s.nbytes, data="", c_name=s.c_name,
                              quantization=TensorQuantization(*known[s.name]) if s.name in known else None)
                for s in specs]

    usmp_pool = item.pool.bytes if item.pool and item.pool.kind == "usmp" else 0
    return env.get_template("library/mlf_model.h.j2").render(
        m=module, M=c_identifier(module.name).upper(), version=__version__,
        mlf_name=source_name, mlf_sha256=lib.sha256, executor=_executor(module),
        inputs=tensors(module.inputs), outputs=tensors(module.outputs),
        arena_bytes=item.arena_bytes, arena_what=_arena_what(item), usmp_pool_bytes=usmp_pool,
        cmsis_nn_scratch_bytes=cmsis_nn_scratch_bytes, stack=stack, stack_flags=stack_flags)


def _executor(module: Module) -> str:
    if module.style == "operator":
        return "operator"
    return f"{module.executor}/{module.interface_api}" if module.executor == "aot" else str(module.executor)


def _arena_what(item: Lowered) -> str:
    parts = []
    if item.memory_plan:
        parts.append(f"{item.memory_plan['arena_bytes']} B of planned activations")
    if item.workspace_bytes:
        parts.append(f"a {item.workspace_bytes} B pool for TVMBackendAllocWorkspace")
    return " and ".join(parts) or "none"


def _copy_model(lib: ModelLibrary, lowered: list[Lowered], writer, cmsis_nn: CmsisNnLibrary | None,
                model_dir: str) -> LibraryFiles:
    """Copy each module's generated code under `model_dir`, keeping TVM's relative layout, with a
    re-planned workspace pool's offsets rewritten. CMSIS-NN callers get their status checks fixed and
    their scratch buffers and kernel sums; TVM's identity copy loops become memcpy; a module whose tvmgen_<mod>_run mlfbuild wraps gets a first
    line that compiles TVM's function under another name (as -D would, but any build of the file sees it)."""
    files = LibraryFiles(lowered=[], sources=[], model_sources=[], model_objects=[], includes=[INCLUDE_DIR], headers=[])
    for module, item in zip(lib.modules, lowered):
        rewritten = item.pool.sources if item.pool else {}
        for rel in module.sources:
            code = rewritten[rel].encode(errors="surrogateescape") if rel in rewritten else (lib.root / rel).read_bytes()
            if module.cmsis_nn and rel in module.cmsis_nn.sources:
                code, fixed = fix_status_checks(code)
                files.status_fixes += fixed
                if cmsis_nn and cmsis_nn.scratch:
                    code = cmsis_nn.scratch.rewrite(rel, code.decode("utf-8", errors="surrogateescape")).encode(
                        "utf-8", errors="surrogateescape")
            code = _replace_copies(item, rel, code)
            code = module_pool_sections(code.decode("utf-8", errors="surrogateescape"), module.name).encode(
                "utf-8", errors="surrogateescape")
            if item.entry_rename:
                code = (f"#define tvmgen_{module.name}_run {item.entry_rename}  /* mlfbuild: "
                        f"src/model_{module.name}.c defines tvmgen_{module.name}_run around it */\n").encode() + code
            writer.write(f"{model_dir}/{rel}", code)
            files.model_sources.append(f"{model_dir}/{rel}")
        for obj in module.objects:
            writer.copy(lib.root / obj.path, f"{model_dir}/{obj.path}")
            files.model_objects.append(f"{model_dir}/{obj.path}")
        if module.header:
            writer.copy(lib.root / module.header, f"{model_dir}/{module.header}")
    if any(m.header for m in lib.modules):
        files.includes.append(f"{model_dir}/codegen/host/include")
    return files


def _replace_copies(item: Lowered, rel: str, code: bytes) -> bytes:
    """The file's identity copies replaced; those whose loop is not found as read stay TVM's (and unrecorded)."""
    copies = [copy for copy in item.copies if copy.path == rel]
    if not copies:
        return code
    text, replaced = rewrite_copies(code.decode("utf-8", errors="surrogateescape"), copies)
    item.copies = [copy for copy in item.copies if copy.path != rel or copy in replaced]
    item.notes += [f"{item.module.name}: {copy.describe()}" for copy in replaced]
    return text.encode("utf-8", errors="surrogateescape")


def _scratch_in_pools(lib: ModelLibrary, lowered: list[Lowered], cmsis_nn: CmsisNnLibrary | None,
                      headers: tuple[Path, ...]) -> CmsisNnLibrary | None:
    """CMSIS-NN scratch buffers as regions of their model's re-planned USMP pool, each live during its
    call, where the pool grows by less than the shared scratch region shrinks (kws: not at all)."""
    if not cmsis_nn or not cmsis_nn.scratch or not cmsis_nn.scratch.wanted():
        return cmsis_nn
    scratch, pooled = cmsis_nn.scratch, {}
    for item in lowered:
        if not (item.pool and item.pool.kind == "usmp"):
            continue
        trial = plan_usmp_pool(module_sources(item.module, lib.root), item.module.name, scratch.wanted(), headers,
                               producer=item.module.producer)
        if not (trial and trial.replanned and trial.scratch):
            continue
        before = item.pool.bytes + scratch.region_bytes_without(set(pooled))
        after = trial.bytes + scratch.region_bytes_without(set(pooled) | set(trial.scratch))
        if after <= before:
            item.pool = trial
            item.notes = [trial.note(item.module.name)]
            pooled.update(trial.scratch)
    if not pooled:
        return cmsis_nn
    return dataclasses.replace(cmsis_nn, scratch=dataclasses.replace(scratch, pooled=tuple(sorted(pooled.items()))))


# Defined by every model file that calls CMSIS-NN, to one value per library (tree and paths): a link of
# models built against two libraries stops on it, and the linker's message names the rule.
CMSIS_NN_IDENTITY = "mlf_cmsis_nn_one_library_per_image_all_models_must_use_the_same_tree_and_paths"


def _render_cmsis_nn_scratch(cmsis_nn: CmsisNnLibrary | None, env: Environment, writer) -> list[str]:
    """src/mlf_cmsis_nn_scratch.[ch]: the region the CMSIS-NN calls share, when mlfbuild supplies buffers."""
    if not cmsis_nn or not cmsis_nn.scratch:
        return []
    identity = hashlib.sha256(f"{cmsis_nn.sha256} {sorted(cmsis_nn.features)} {cmsis_nn.flags}".encode()).digest()
    for name in ("mlf_cmsis_nn_scratch.h", "mlf_cmsis_nn_scratch.c"):
        writer.write(f"src/{name}", env.get_template(f"project/src/{name}.j2").render(
            region_bytes=cmsis_nn.scratch.region_bytes, tree_sha256=cmsis_nn.sha256,
            paths=describe_features(cmsis_nn.features), identity_symbol=CMSIS_NN_IDENTITY,
            identity=f"0x{int.from_bytes(identity[:4], 'big'):08X}"))
    return ["src/mlf_cmsis_nn_scratch.c"]
