"""CMSIS-NN: the user's library tree, compiled with the board's CPU flags and its fastest paths.

The library chooses its paths from the ACLE feature macros (`__ARM_FEATURE_DSP`, `__ARM_FEATURE_MVE`
in `Include/arm_nn_math_types.h` and `Include/Internal/arm_nn_compiler.h`). When every CMSIS-NN call
of the model is in the shape TVM writes, mlfbuild gives each call the scratch buffer and kernel sums
the library asks for on the board's core (cmsis_nn_scratch.py), and the library keeps all the board's
features. Otherwise TVM sized the buffers for the paths of one core, and the library loses the
feature macros of the other paths. Every refusal comes before anything is compiled.
"""

from __future__ import annotations

import hashlib
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..boards import Board
from ..canalysis.callsites import cmsis_nn_call_sites
from ..canalysis.cfront import HOST, CFrontError, Preprocessor, parse_sources
from ..canalysis.constants import ConstantBytes, operator_constants
from ..errors import BuildError, InvalidInputError
from ..mlf.model import ModelLibrary, Module
from ..untrusted import kind_of, read_regular
from .pool_plan import header_dirs
from .cmsis_nn_probe import FEATURE_MACROS, probe_target
from .cmsis_nn_scratch import KERNEL_SUMS, ScratchPlan, plan_scratch

if TYPE_CHECKING:
    from .writer import Writer


# What gcc enables by default for each -mcpu (checked with `gcc -dM -E`); +nodsp/+nomve remove features.
_CORE_FEATURES: dict[str, frozenset[str]] = {
    **dict.fromkeys(("cortex-m0", "cortex-m0plus", "cortex-m1", "cortex-m3", "cortex-m23"), frozenset()),
    **dict.fromkeys(("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p", "star-mc1"), frozenset({"dsp"})),
    **dict.fromkeys(("cortex-m52", "cortex-m55", "cortex-m85"), frozenset({"dsp", "mve"})),
}

# Kernels that, once the tree declares arm_vector_sum_s8 (CMSIS-NN >= 6), read precomputed kernel
# sums from their context buffer on MVE and refuse a NULL one.
_KERNEL_SUM_USERS = ("arm_fully_connected_s8",)
_KERNEL_SUMS = "arm_vector_sum_s8"

# Where a CMSIS-Core include folder is usually found next to a CMSIS-NN checkout.
_CORE_BESIDE_TREE = ("CMSIS_5/CMSIS/Core/Include", "CMSIS_6/CMSIS/Core/Include", "CMSIS/Core/Include", "Core/Include")
_CORE_HEADER = "cmsis_compiler.h"
# The biggest file of CMSIS-NN or CMSIS-Core is about 100 KiB.
MAX_LIBRARY_FILE_BYTES = 16 << 20

# TVM's cmsis-nn codegen tests `switch (!status)`: every error (negative) becomes case 0, SUCCESS.
# The fix tests the status itself, and its `default` also catches the errors TVM's cases do not list
# (ARM_CMSIS_NN_FAILURE, -3, from CMSIS-NN 6): a `default` label may stand anywhere in a switch.
_INVERTED_STATUS_CHECK = b"switch (!status) {"
_STATUS_CHECK = b"switch (status) { default: return -1;"


@dataclass(frozen=True)
class CmsisNnLibrary:
    """The CMSIS-NN tree a build compiled and how; build.json records it."""

    tree: Path
    sha256: str
    features: frozenset[str]  # the library paths compiled in: dsp, mve
    flags: tuple[str, ...]  # added to the CMSIS-NN sources only
    sources: tuple[str, ...]  # project-relative .c files
    includes: tuple[str, ...]  # project-relative include folders
    core_include: Path | None  # the CMSIS-Core headers the tree needed, if any
    core_sha256: str | None
    reason: str  # why these paths
    scratch: ScratchPlan | None  # the buffers mlfbuild supplies (None: the code's own are used as written)

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "path": str(self.tree), "sha256": self.sha256, "features": sorted(self.features),
            "paths": describe_features(self.features), "reason": self.reason, "flags": list(self.flags),
            "sources": [path.removeprefix("lib/cmsis-nn/") for path in self.sources]}
        if self.scratch:
            record["scratch"] = self.scratch.to_json()
        if self.core_include:
            record["cmsis_core"] = {"path": str(self.core_include), "sha256": self.core_sha256}
        return record


def describe_features(features: Iterable[str]) -> str:
    names = [name.upper() for name in sorted(features)]
    return " + ".join(names) if names else "generic C (no DSP, no MVE)"


def core_features(mcpu: str | None, mattr: str | None = None) -> frozenset[str] | None:
    """DSP/MVE of a core named as gcc and TVM name it (cortex-m55, cortex-m33+nodsp; TVM's -mattr=+nomve);
    None for a core this table does not know. No -mcpu is TVM's default cmsis-nn target: neither."""
    if not mcpu:
        return frozenset()
    name, *modifiers = mcpu.lower().split("+")
    modifiers += [item.strip().lstrip("+") for item in (mattr or "").split(",") if item.strip()]
    if name not in _CORE_FEATURES:
        return None
    features = set(_CORE_FEATURES[name])
    if "nodsp" in modifiers:
        features -= {"dsp", "mve"}  # MVE implies DSP
    if "nomve" in modifiers:
        features.discard("mve")
    return frozenset(features)


def flags_features(board: Board, arch_flags: list[str]) -> frozenset[str] | None:
    """DSP/MVE the board's compile flags enable (gcc has no MVE with the soft float ABI)."""
    if board.is_host:
        return frozenset()
    mcpu = next((f.split("=", 1)[1] for f in arch_flags if f.startswith("-mcpu=")), board.cpu.core if board.cpu else None)
    features = core_features(mcpu)
    if features is not None and "-mfloat-abi=soft" in arch_flags:
        features -= {"mve"}
    return features


def generated_for(module: Module) -> frozenset[str] | None:
    """The library paths a module's CMSIS-NN code sized its scratch buffers for."""
    assumptions = module.cmsis_nn
    if assumptions is None or assumptions.generic:
        return frozenset()
    return core_features(assumptions.mcpu, assumptions.mattr)


def fix_status_checks(source: bytes) -> tuple[bytes, int]:
    """TVM's `switch (!status)` maps every CMSIS-NN error to the SUCCESS case; test the status itself so
    that any failing kernel makes its operator return -1."""
    return source.replace(_INVERTED_STATUS_CHECK, _STATUS_CHECK), source.count(_INVERTED_STATUS_CHECK)


def render_cmsis_nn(lib: ModelLibrary, board: Board, arch_flags: list[str], tree: Path | None,
                    core: Path | None, writer: "Writer", memory: int,
                    probe_dir: Path | None = None, optimize: str | None = None,
                    preprocessor: Preprocessor = HOST) -> CmsisNnLibrary | None:
    """Check that `tree` can serve the model's CMSIS-NN code on this board, then copy it under lib/.
    `probe_dir`: where the buffer-size probe is built (default: the project's build/ folder);
    `optimize`: the library's own optimisation level (None: the build's); `preprocessor`: the build's
    compiler, with which the model's calls are read."""
    users = [m for m in lib.modules if m.cmsis_nn]
    if not users:
        return None
    tree = _checked_tree(tree, users)
    core_include = _cmsis_core(tree, core)
    headers = {path.relative_to(tree).as_posix(): _text(path) for path in _library_files(tree / "Include", ".h")}
    texts = _source_texts(tree)
    called = {name for m in users for name in m.cmsis_nn.functions}
    sites = cmsis_nn_call_sites({rel: _text(lib.root / rel) for m in users for rel in m.cmsis_nn.sources},
                       header_dirs(lib.root, tree, core_include, preprocessor))
    scratch = None
    if sites is None:
        features = _code_features(users)
        _check_board(users, features, board, arch_flags)
        _check_kernel_sums(users, features, tree)
        reason = ("the CMSIS-NN calls are not all in the shape TVM writes, so mlfbuild cannot supply their buffers: "
                  f"the paths the code's buffers were sized for ({describe_features(features)})")
    else:
        available = flags_features(board, arch_flags)
        features = available or frozenset()
        core_name = board.cpu.core if board.cpu else board.name
        reason = (f"the board's {core_name} has {describe_features(features)}; every call's scratch buffer is sized "
                  "by the library's own get_buffer_size for them" if features else
                  f"the board's {core_name} has neither DSP nor MVE; every call's scratch buffer is sized by the "
                  "library's own get_buffer_size")
        if available is None:
            reason = f"mlfbuild does not know the DSP/MVE features of {board.name}'s {core_name}: generic C"
        scratch = plan_scratch(sites, tree, headers, features, probe_dir or writer.root / "build" / "cmsis-nn-probe",
                               core_include,
                               lambda names: needed_sources(texts, headers, names), memory,
                               _constants(lib, users, header_dirs(lib.root, tree, core_include, preprocessor)),
                               probe_target(board, preprocessor.compiler or "", arch_flags))
        called |= {c.size_function for c in scratch.calls if c.size_function}
        called |= {c.call.kernel for c in scratch.calls}
        if scratch.kernel_sums:
            called.add(KERNEL_SUMS)

    includes = [_copy(writer, tree / "Include", "lib/cmsis-nn/Include", ".h")[0]]
    sources = _copy_sources(writer, tree, texts, headers, called)
    sources = _rounding_once(writer, sources, {name for m in users for name in m.single_rounding})
    if core_include:
        includes.append(_copy(writer, core_include, "lib/cmsis-core/Include", ".h")[0])
    flags = tuple(f"-U{macro}" for feature, macro in FEATURE_MACROS.items() if feature not in features)
    # v4.1.0's Internal/arm_nn_compiler.h names uint8_t before anything includes <stdint.h> on a host
    # compiler (arm_convolve_get_buffer_sizes_s8.c includes it first); Arm's headers include it themselves.
    flags += ("-include", "stdint.h") if board.is_host else ()  # two arguments: a compiler run without a shell takes them so
    flags += (optimize,) if optimize else ()
    return CmsisNnLibrary(tree=tree.resolve(), sha256=_tree_sha256(tree, ("Include", "Source")), features=features,
                          flags=flags, sources=tuple(sources), includes=tuple(includes), core_include=core_include,
                          core_sha256=_tree_sha256(core_include, (".",)) if core_include else None, reason=reason,
                          scratch=scratch)


def _constants(lib: ModelLibrary, users: list[Module], include_dirs: tuple[Path, ...]) -> dict[tuple[str, str], ConstantBytes]:
    """The constant operands the modules' code hands its operators (none when the code cannot be read)."""
    found: dict[tuple[str, str], ConstantBytes] = {}
    for module in users:
        try:
            files = parse_sources({rel: _text(lib.root / rel) for rel in module.sources}, include_dirs)
        except CFrontError:
            continue
        found.update(operator_constants(files))
    return found


def _checked_tree(tree: Path | None, users: list[Module]) -> Path:
    if tree is None:
        raise BuildError(f"{', '.join(m.name for m in users)}: the generated code calls CMSIS-NN (arm_nnfunctions.h); "
                         "point --cmsis-nn at a CMSIS-NN source tree (github.com/ARM-software/CMSIS-NN)")
    if not (tree / "Include" / "arm_nnfunctions.h").is_file() or not (tree / "Source").is_dir():
        # A damaged tree is bad input, as its unreadable files are (exit 3): one class for both.
        raise InvalidInputError(f"{tree}: not a CMSIS-NN source tree (expected Include/arm_nnfunctions.h and Source/)")
    return tree


def _code_features(users: list[Module]) -> frozenset[str]:
    """The one set of library paths every module's code was generated for (the library is built once)."""
    chosen: dict[frozenset[str], str] = {}
    for module in users:
        features = generated_for(module)
        if features is None:
            raise BuildError(f"{module.name}: the CMSIS-NN code passes scratch buffers sized for "
                             f"-mcpu={module.cmsis_nn.mcpu}, a core whose DSP/MVE features mlfbuild does not know; "
                             "export it for a Cortex-M core")
        chosen.setdefault(features, module.name)
    if len(chosen) > 1:
        described = "; ".join(f"{name}: {describe_features(f)}" for f, name in chosen.items())
        raise BuildError(f"the modules' CMSIS-NN code was generated for different library paths ({described}); "
                         "one firmware compiles the library once: export them for the same cmsis-nn core")
    return next(iter(chosen))


def _check_board(users: list[Module], features: frozenset[str], board: Board, arch_flags: list[str]) -> None:
    if not features:
        return
    module = users[0]
    core = board.cpu.core if board.cpu else board.name
    available = flags_features(board, arch_flags)
    if available is None:
        raise BuildError(f"{module.name}: the CMSIS-NN code was generated for {describe_features(features)} "
                         f"(-mcpu={module.cmsis_nn.mcpu}) and mlfbuild does not know whether {board.name}'s {core} "
                         "has them")
    missing = features - available
    if missing:
        raise BuildError(f"{module.name}: the CMSIS-NN code passes scratch buffers sized for the "
                         f"{describe_features(features)} paths of -mcpu={module.cmsis_nn.mcpu}, but {board.name} "
                         f"({core}) has no {describe_features(missing)}; build for a board with that core, or "
                         f"export with the cmsis-nn target's -mcpu={core}")


def _check_kernel_sums(users: list[Module], features: frozenset[str], tree: Path) -> None:
    if "mve" not in features or not _declares(tree, _KERNEL_SUMS):
        return
    for module in users:
        calls = set(module.cmsis_nn.functions)
        if calls & set(_KERNEL_SUM_USERS) and _KERNEL_SUMS not in calls:
            raise BuildError(f"{module.name}: CMSIS-NN at {tree} declares {_KERNEL_SUMS}, so on MVE its "
                             "fully-connected kernel needs kernel sums precomputed into its buffer, which TVM's "
                             "generated code never computes; use CMSIS-NN v5.x or older (e.g. v4.1.0) for "
                             f"-mcpu={module.cmsis_nn.mcpu}, or export the cmsis-nn target for a core without "
                             "MVE (e.g. -mcpu=cortex-m7)")


def _declares(tree: Path, function: str) -> bool:
    """Whether the tree's headers declare `function` (a prototype, not a mention in a comment)."""
    prototype = re.compile(r"^[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t*]+" + re.escape(function) + r"[ \t]*\(", re.M)
    return any(prototype.search(_text(path)) for path in _library_files(tree / "Include", ".h"))


def _cmsis_core(tree: Path, given: Path | None) -> Path | None:
    """CMSIS-NN before v4.1 includes cmsis_compiler.h from CMSIS-Core: found beside the tree or given."""
    include = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]" + re.escape(_CORE_HEADER) + r"[>\"]", re.M)
    headers = _library_files(tree / "Include", ".h")
    if any(path.name == _CORE_HEADER for path in headers) or not any(include.search(_text(p)) for p in headers):
        return None
    if given is not None:
        if not (given / _CORE_HEADER).is_file():
            raise BuildError(f"--cmsis-core {given}: no {_CORE_HEADER} there "
                             "(expected the CMSIS/Core/Include folder of ARM-software/CMSIS_5 or CMSIS_6)")
        return given
    for candidate in (tree.parent / relative for relative in _CORE_BESIDE_TREE):
        if (candidate / _CORE_HEADER).is_file():
            return candidate
    raise BuildError(f"CMSIS-NN at {tree} includes {_CORE_HEADER} from CMSIS-Core and none is beside it: "
                     "pass --cmsis-core DIR (the CMSIS/Core/Include folder of ARM-software/CMSIS_5 or CMSIS_6)")


def _source_texts(tree: Path) -> dict[str, str]:
    source = tree / "Source"
    return {path.relative_to(source).as_posix(): _text(path) for path in _library_files(source, ".c")}


def _copy_sources(writer: "Writer", tree: Path, texts: dict[str, str], headers: dict[str, str],
                  called: set[str]) -> list[str]:
    """Copy the library's .c files the model needs under lib/cmsis-nn/Source (compiling all of them
    takes several times longer and the linker drops the rest anyway)."""
    source = tree / "Source"
    copied = []
    for relative in needed_sources(texts, headers, called):
        writer.write(f"lib/cmsis-nn/Source/{relative}", _read(source / relative))
        copied.append(f"lib/cmsis-nn/Source/{relative}")
    return copied


# Where each function's requantisation is compiled (the same file in v4.1.0, v6.0.0 and v7.0.0:
# arm_fully_connected_s8 hands every row to arm_nn_vec_mat_mult_t_s8, which requantises).
_REQUANTISED_IN = {"arm_fully_connected_s8": "NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c"}


# The library's own single-rounding arm_nn_requantize, compiled out of line: inlined, its 64-bit
# product holds two more registers across the multiply-accumulate loops, and gcc -Os then spills the
# loop's operands to the stack (micro_speech's fully connected layer: 5,949 more instructions on the
# Cortex-M4F). The macro renames the calls in the included file only; the arithmetic is Arm's.
_SINGLE_ROUNDING_WRAPPER = """/* {name} with one rounding per requantisation, as TFLite's reference kernel for {function} rounds. */
#define CMSIS_NN_USE_SINGLE_ROUNDING
#include "arm_nnsupportfunctions.h"
static int32_t __attribute__((noinline)) mlf_requantize_once(int32_t value, int32_t multiplier, int32_t shift)
{{
    return arm_nn_requantize(value, multiplier, shift);
}}
#define arm_nn_requantize mlf_requantize_once
#include "{name}"
"""


def _rounding_once(writer: "Writer", sources: list[str], functions: set[str]) -> list[str]:
    """Compile the files that requantise for `functions` with CMSIS_NN_USE_SINGLE_ROUNDING, the
    library's own switch (Include/arm_nnsupportfunctions.h: arm_nn_requantize rounds once). The switch
    acts per translation unit, so a small wrapper that sets it and includes the file is compiled in
    its place: every build system that compiles the source list gets the same arithmetic."""
    replaced = list(sources)
    for function in sorted(functions):
        original = f"lib/cmsis-nn/Source/{_REQUANTISED_IN[function]}"
        if original not in replaced:
            continue
        wrapper = original.replace(".c", "_single_rounding.c")
        name = original.rsplit("/", 1)[1]
        writer.write(wrapper, _SINGLE_ROUNDING_WRAPPER.format(name=name, function=function).encode())
        replaced[replaced.index(original)] = wrapper
    return replaced


# A file-scope definition starts in column 0: a function (name, parameters, body) or initialised data.
_DEFINITION = re.compile(r"^[A-Za-z_][A-Za-z0-9_ \t*]*?\b([A-Za-z_][A-Za-z0-9_]*)[ \t]*"
                         r"(?:\([^;{]*\)\s*\{|(?:\[[^\]\n]*\][ \t]*)*=)", re.M)
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*")


def needed_sources(sources: dict[str, str], headers: dict[str, str], called: set[str]) -> list[str]:
    """The source files that define what the model calls and, by name, everything those use in turn
    (through header inline functions too): a superset of what the linker keeps. When a called name is
    defined nowhere, every file, and the linker has the last word."""
    defined_in: dict[str, set[str]] = {}
    for relative, text in sources.items():
        for name in _DEFINITION.findall(text):
            defined_in.setdefault(name, set()).add(relative)
    inline_uses = _inline_function_uses(headers)
    if any(name not in defined_in and name not in inline_uses for name in called):
        return sorted(sources)
    needed: set[str] = set()
    seen: set[str] = set()
    pending = list(called)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending += inline_uses.get(name, ())
        for relative in defined_in.get(name, set()) - needed:
            needed.add(relative)
            pending += [used for used in set(_IDENTIFIER.findall(sources[relative])) if used in defined_in or used in inline_uses]
    return sorted(needed)


_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def _inline_function_uses(headers: dict[str, str]) -> dict[str, set[str]]:
    """Names used in the body of each function and macro a header defines (the library's inline helpers)."""
    uses: dict[str, set[str]] = {}
    for text in headers.values():
        for match in _MACRO.finditer(text):
            uses.setdefault(match.group(1), set()).update(_IDENTIFIER.findall(match.group(2)))
        for match in _DEFINITION.finditer(text):
            if text[match.end() - 1] != "{":
                continue
            depth, end = 1, match.end()
            while depth and end < len(text):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            uses.setdefault(match.group(1), set()).update(_IDENTIFIER.findall(text[match.end():end]))
    return uses


def _copy(writer: "Writer", source: Path, relative: str, suffix: str) -> tuple[str, list[str]]:
    copied = []
    for path in _library_files(source, suffix):
        target = f"{relative}/{path.relative_to(source).as_posix()}"
        writer.write(target, _read(path))
        copied.append(target)
    return relative, copied


def _tree_sha256(root: Path, folders: tuple[str, ...]) -> str:
    """Identifies the library's contents wherever it is checked out: relative paths and bytes."""
    digest = hashlib.sha256()
    for folder in folders:
        base = root / folder
        for path in _library_files(base):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(_read(path))
    return digest.hexdigest()


def _library_files(base: Path, suffix: str = "") -> list[Path]:
    """The files under `base` (named `*suffix`), every one a regular file: a FIFO would hang the build
    and a link to a device would never end."""
    files = []
    for path in sorted(base.rglob(f"*{suffix}")):
        try:
            mode = path.stat().st_mode  # through links: what the compiler would open
        except OSError as exc:
            raise InvalidInputError(f"{path}: cannot read this library file ({exc.strerror or exc})") from None
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise InvalidInputError(f"{path}: this library file is {kind_of(mode)}, not a regular file")
        files.append(path)
    return files


def _read(path: Path) -> bytes:
    return read_regular(path, "library file", MAX_LIBRARY_FILE_BYTES)


def _text(path: Path) -> str:
    return _read(path).decode("utf-8", errors="replace")
