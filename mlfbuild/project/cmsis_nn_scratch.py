"""Scratch buffers and kernel sums for CMSIS-NN calls: what TVM's generated code leaves out.

Every call that takes a `cmsis_nn_context` gets a buffer of the size the library's own
`<kernel>_get_buffer_size` returns for that call's parameters on the board's core. The sizes come from
running those functions (cmsis_nn_probe.py): on the board's core in QEMU, built with the board's flags,
where the plain function takes the core's own path; else natively in a PID namespace, where their host
variants answer (`_dsp`, `_mve`, which the library declares "intended for compilation on Host"; the
plain one is the generic answer there). Before each call the firmware asks the same
library, compiled for the real core, again and fails the operator, naming it, when the region is
smaller. MVE fully-connected layers of CMSIS-NN 6 and 7 also get their kernel sums, with the contract
of the tree's own declaration: computed at build time into a const array their context points at when
their operands are constants of the code (canalysis/cmsis_nn_prepare.py, which also replaces calls by
faster ones of the same arithmetic), otherwise by `arm_vector_sum_s8` into the buffer before each call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import BuildError
from ..canalysis.callsites import CmsisNnCall
from ..canalysis.cmsis_nn_prepare import Preparation, kernel_sums, replace_call
from ..canalysis.constants import ConstantBytes
from .cmsis_nn_probe import FEATURE_MACROS, NATIVE, ProbeTarget, build_probe, probe_program, run_probe

REGION = "mlf_cmsis_nn_scratch"  # the firmware's scratch region (src/mlf_cmsis_nn_scratch.h)
REGION_BYTES = "MLF_CMSIS_NN_SCRATCH_BYTES"
REGION_HEADER = "mlf_cmsis_nn_scratch.h"

# How each kernel's size function is called, where its parameters are not the kernel's own by name:
# arm_avgpool_s8 calls arm_avgpool_s8_get_buffer_size(output_dims->w, input_dims->c) itself
# (Source/PoolingFunctions/arm_avgpool_s8.c, CMSIS-NN v4.1.0 and v6.0.0; s16 likewise).
_SIZE_ARGUMENTS = {
    "arm_avgpool_s8": {"dim_dst_width": ("output_dims", "->w"), "ch_src": ("input_dims", "->c")},
    "arm_avgpool_s16": {"dim_dst_width": ("output_dims", "->w"), "ch_src": ("input_dims", "->c")},
}
# Host variants of the size functions per compiled feature set (arm_nnfunctions.h, v4.1.0 and v6.0.0).
_HOST_VARIANT = {"mve": "_mve", "dsp": "_dsp"}

KERNEL_SUMS = "arm_vector_sum_s8"
_KERNEL_SUM_USERS = ("arm_fully_connected_s8",)
# The kernel sums arm_fully_connected_s8 reads from its buffer on MVE, by the parameter names of the
# tree's arm_vector_sum_s8 declaration (Include/arm_nnfunctions.h):
#   v6.0.0 (buf, cols, rows, data, lhs_offset, bias_data): the plain row sums; the kernel multiplies them
#     by the input offset and adds the bias itself (its unit test passes `1, NULL`);
#   v7.0.0 (buf, cols, rows, data, lhs_offset, rhs_offset, bias_data): bias + input offset x (row sum +
#     cols x filter offset), all folded in (its unit test passes input_offset, filter_offset, bias).
_KERNEL_SUM_CONTRACTS = {
    ("vector_sum_buf", "vector_cols", "vector_rows", "vector_data", "lhs_offset", "bias_data"):
        ("v6", ("{buf}", "{filter_dims}->n", "{output_dims}->c", "{filter_data}", "1", "NULL")),
    ("vector_sum_buf", "vector_cols", "vector_rows", "vector_data", "lhs_offset", "rhs_offset", "bias_data"):
        ("v7", ("{buf}", "{filter_dims}->n", "{output_dims}->c", "{filter_data}", "{fc_params}->input_offset",
                "{fc_params}->filter_offset", "{bias_data}")),
}
KERNEL_SUM_VERSIONS = "CMSIS-NN v6.0.0 and v7.0.0 (and trees without arm_vector_sum_s8, such as v4.1.0, need none)"


@dataclass(frozen=True)
class ScratchCall:
    """One call's buffer: the library's size for it and where it comes from."""

    call: CmsisNnCall
    source: str  # the generated file
    size_function: str | None  # the library's size function (None: the kernel has none, needs no buffer)
    size_arguments: tuple[str, ...]
    library_bytes: int  # what the library's size function returned for the board's paths
    kernel_sums: tuple[str, ...] | None  # arm_vector_sum_s8's arguments, when the call computes them at run time
    original: CmsisNnCall | None = None  # the call as TVM wrote it, when it is replaced
    declarations: tuple[str, ...] = ()  # the replacement's constant locals, declared before it
    preparations: tuple[Preparation, ...] = ()  # what is done for the call at build time

    @property
    def precomputed_sums(self) -> Preparation | None:
        return next((p for p in self.preparations if p.kind == "kernel_sums"), None)

    @property
    def keeps_tvm_buffer(self) -> bool:
        return not self.precomputed_sums and self.call.scratch_bytes > 0 and \
            self.call.scratch_bytes >= self.library_bytes

    @property
    def supplied(self) -> bool:
        """Given a region of the scratch buffer (a call whose buffer only holds precomputed sums gets those)."""
        return self.library_bytes > 0 and not self.keeps_tvm_buffer and not self.precomputed_sums

    def to_json(self) -> dict[str, Any]:
        buffer = "tvm" if self.keeps_tvm_buffer else "mlfbuild" if self.supplied else \
            "precomputed" if self.precomputed_sums else "none"
        return {"function": self.call.function, "kernel": self.call.kernel, "size_function": self.size_function,
                "library_bytes": self.library_bytes, "tvm_bytes": self.call.scratch_bytes, "buffer": buffer,
                "kernel_sums": "run time" if self.kernel_sums else "build time" if self.precomputed_sums else None,
                "tvm_kernel": (self.original or self.call).kernel,
                "prepared": [p.to_json() for p in self.preparations]}


@dataclass(frozen=True)
class ScratchPlan:
    calls: tuple[ScratchCall, ...]
    kernel_sums: str | None  # the arm_vector_sum_s8 contract in use (v6, v7), when any call needs sums
    pooled: tuple[tuple[str, str], ...] = ()  # (operator, buffer): calls given a region of the model's workspace pool
    probed: str = ""  # where the library's size functions ran

    def wanted(self) -> dict[str, int]:
        """Bytes each supplied call's operator needs: what a workspace pool could hold instead."""
        return {c.call.function: c.library_bytes for c in self.calls if c.supplied}

    def region_bytes_without(self, functions: set[str]) -> int:
        return max((c.library_bytes for c in self.calls if c.supplied and c.call.function not in functions), default=0)

    @property
    def region_bytes(self) -> int:
        """One region serves every supplied call not given a region of its pool: the calls run one after another."""
        return self.region_bytes_without({function for function, _ in self.pooled})

    @property
    def preparations(self) -> list[Preparation]:
        return [p for c in self.calls for p in c.preparations]

    def to_json(self) -> dict[str, Any]:
        return {"region_bytes": self.region_bytes, "kernel_sums": self.kernel_sums,
                "in_workspace_pool": sorted(function for function, _ in self.pooled), "probed": self.probed,
                "calls": [c.to_json() for c in self.calls],
                "prepared": [p.to_json() for p in self.preparations]}

    def summary(self) -> str:
        supplied = sum(c.supplied for c in self.calls)
        kept = sum(c.keeps_tvm_buffer for c in self.calls)
        text = (f"{supplied} of {len(self.calls)} call(s) get a scratch buffer from mlfbuild "
                f"({self.region_bytes} B region, sized by the library's own get_buffer_size)")
        if kept:
            text += f", {kept} keep TVM's"
        if self.kernel_sums:
            text += f"; kernel sums by arm_vector_sum_s8 ({self.kernel_sums} contract)"
        prepared = self.preparations
        sums = [p for p in prepared if p.kind == "kernel_sums"]
        replaced = [p for p in prepared if p.kind == "replacement"]
        if sums:
            text += (f"; kernel sums of {len(sums)} call(s) computed at build time into flash "
                     f"({sum(a.nbytes for p in sums for a in p.arrays):,} B)")
        if replaced:
            text += "; " + "; ".join(p.describe() for p in replaced)
        return text

    def rewrite(self, source: str, code: str) -> str:
        """`code` (the generated file `source`) with every call given its buffer, check and kernel sums."""
        calls = [c for c in self.calls if c.source == source]
        if not calls:
            return code
        pooled = dict(self.pooled)
        for item in calls:
            code = _rewrite_call(code, item, pooled.get(item.call.function))
        arrays = [a.declaration() for c in calls for p in c.preparations for a in p.arrays]
        prelude = f'#include "{REGION_HEADER}"\n' + ("#include <stdint.h>\n" + "".join(arrays) if arrays else "")
        return prelude + code


def plan_scratch(sites: list[tuple[str, CmsisNnCall]], tree: Path, headers: dict[str, str],
                 features: frozenset[str], probe_dir: Path, core_include: Path | None,
                 library_sources: Callable[[set[str]], list[str]], memory: int,
                 constants: dict[tuple[str, str], ConstantBytes] | None = None,
                 target: ProbeTarget = NATIVE) -> ScratchPlan:
    """Each call's size from the library's own functions for `features`, run on `target` (the board's
    core in QEMU, else this machine's host variants in a PID namespace); with the code's `constants`
    (operator, parameter) -> bytes, each call's build-time preparation."""
    constants = constants or {}
    declared = {name for name in ("arm_convolve_wrapper_s8", "arm_convolve_wrapper_s8_get_buffer_size")
                if prototype(headers, name) is not None}
    users = any(call.kernel in _KERNEL_SUM_USERS for _, call in sites)
    sums_contract = kernel_sum_contract(headers) if "mve" in features and users else None
    # On the core the plain size function takes the core's own path; natively, the host variant does.
    variant = "" if target.emulated else next((_HOST_VARIANT[f] for f in ("mve", "dsp") if f in features), "")
    pending = []
    for rel, call in sites:
        original, declarations, preparations = None, (), []
        replaced = replace_call(call, prototype(headers, call.kernel) or [], constants, features, declared)
        if replaced:
            original, call, declarations = call, replaced.call, replaced.declarations
            preparations.append(replaced.preparation)
        size_function, arguments = _size_call(call, headers)
        sums = None
        if sums_contract and call.kernel in _KERNEL_SUM_USERS:
            precomputed = kernel_sums(call, prototype(headers, call.kernel) or [], constants, sums_contract[0])
            if precomputed:
                preparations.append(precomputed)
            else:
                sums = _kernel_sum_arguments(call, headers, sums_contract[1])
        pending.append((rel, call, size_function, arguments, sums, original, declarations, tuple(preparations)))
    probed = [(f"{p[2]}{variant}", p[3], p[1]) for p in pending if p[2]]
    sizes = iter(_probe(probed, tree, headers, probe_dir, core_include, library_sources, memory, target, features))
    calls = tuple(ScratchCall(call=call, source=rel, size_function=fn, size_arguments=args,
                              library_bytes=next(sizes) if fn else 0, kernel_sums=sums, original=original,
                              declarations=declarations, preparations=prepared)
                  for rel, call, fn, args, sums, original, declarations, prepared in pending)
    for item in calls:
        sums_bytes = item.precomputed_sums.arrays[0].nbytes if item.precomputed_sums else None
        if sums_bytes is not None and sums_bytes < item.library_bytes:
            raise BuildError(f"{item.call.function}: {item.size_function} asks for {item.library_bytes} B, more than "
                             f"the {sums_bytes} B of kernel sums its contract defines; mlfbuild does not know this "
                             "kernel's buffer")
    needs_sums = any(c.kernel_sums for c in calls)
    return ScratchPlan(calls=calls, kernel_sums=sums_contract[0] if sums_contract and needs_sums else None,
                       probed=target.describe() if probed else "")


def kernel_sum_contract(headers: dict[str, str]) -> tuple[str, tuple[str, ...]] | None:
    """The tree's arm_vector_sum_s8 contract (None: the tree has none, its kernels need no sums)."""
    parameters = prototype(headers, KERNEL_SUMS)
    if parameters is None:
        return None
    contract = _KERNEL_SUM_CONTRACTS.get(tuple(parameters))
    if contract is None:
        raise BuildError(f"the CMSIS-NN tree declares {KERNEL_SUMS}({', '.join(parameters)}), a contract mlfbuild "
                         "does not know, and its MVE fully-connected kernel needs those kernel sums; use "
                         f"{KERNEL_SUM_VERSIONS}")
    return contract


def prototype(headers: dict[str, str], function: str) -> list[str] | None:
    """Parameter names of `function` as the tree's headers declare it (None: not declared)."""
    pattern = re.compile(r"^[ \t]*[A-Za-z_][A-Za-z0-9_ \t*]*?\b" + re.escape(function) + r"[ \t]*\(([^;{}]*)\)[ \t]*;",
                         re.M)
    for text in headers.values():
        match = pattern.search(text)
        if match:
            parameters = [p.strip() for p in re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.S).split(",")]
            return [re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p)[-1] if p and p != "void" else "" for p in parameters
                    if p != "void"]
    return None


def _size_call(call: CmsisNnCall, headers: dict[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """The kernel's size function and its arguments in the call's own expressions."""
    function = f"{call.kernel}_get_buffer_size"
    wanted = prototype(headers, function)
    if wanted is None:
        return None, ()  # the library offers no size: the kernel needs no buffer
    kernel = _kernel_arguments(call, headers)
    explicit = _SIZE_ARGUMENTS.get(call.kernel, {})
    arguments = []
    for name in wanted:
        if name in explicit:
            source, member = explicit[name]
            arguments.append(f"({kernel[source]}){member}")
        elif name in kernel:
            arguments.append(kernel[name])
        else:
            raise BuildError(f"{call.function}: CMSIS-NN's {function} takes {name}, which {call.kernel} does not; "
                             "mlfbuild cannot size this call's scratch buffer")
    return function, tuple(arguments)


def _kernel_arguments(call: CmsisNnCall, headers: dict[str, str]) -> dict[str, str]:
    names = prototype(headers, call.kernel)
    if names is None or len(names) != len(call.arguments):
        raise BuildError(f"{call.function}: the CMSIS-NN tree declares {call.kernel} with "
                         f"{'no' if names is None else len(names)} parameter(s), the generated code passes "
                         f"{len(call.arguments)}")
    return dict(zip(names, call.arguments))


def _kernel_sum_arguments(call: CmsisNnCall, headers: dict[str, str], shape: tuple[str, ...]) -> tuple[str, ...]:
    kernel = _kernel_arguments(call, headers)
    values = {name: f"({value})" for name, value in kernel.items()}
    values["buf"] = "(int32_t*)context.buf"
    try:
        return tuple(item.format(**values) for item in shape)
    except KeyError as missing:
        raise BuildError(f"{call.function}: {call.kernel} in the CMSIS-NN tree has no parameter {missing}, which "
                         f"its kernel sums need") from None


def _probe(calls: list[tuple[str, tuple[str, ...], CmsisNnCall]], tree: Path, headers: dict[str, str],
           work: Path, core_include: Path | None, library_sources: Callable[[set[str]], list[str]],
           memory: int, target: ProbeTarget, features: frozenset[str]) -> list[int]:
    """Run the library's size functions where the tree's code cannot reach this machine: one size a call."""
    if not calls:
        return []
    for function, _, call in calls:
        if prototype(headers, function) is None:
            raise BuildError(f"{call.function}: the CMSIS-NN tree declares no {function}, so mlfbuild cannot size "
                             f"{call.kernel}'s scratch buffer for this board's paths")
    blocks = ["  {\n" + "".join(f"    {line}\n" for line in call.constants)
              + f"    print_size((long){function}({', '.join(arguments)}));\n  }}\n"
              for function, arguments, call in calls]
    sources = [str(tree / "Source" / rel) for rel in library_sources({function for function, _, _ in calls})]
    includes = [f"-I{tree / 'Include'}"] + ([f"-I{core_include}"] if core_include else [])
    # On the core, the library takes the paths the firmware compiles it with (cmsis_nn.py's flags).
    undefined = [f"-U{macro}" for feature, macro in FEATURE_MACROS.items() if feature not in features] \
        if target.emulated else []
    executable = build_probe(work, probe_program(blocks, target), sources, includes, undefined, target, memory)
    sizes = run_probe(executable, target, len(calls), memory)
    for size, (function, _, call) in zip(sizes, calls):
        if size < 0:
            raise BuildError(f"{call.function}: CMSIS-NN's {function} returned {size}")
    return sizes


def _rewrite_call(code: str, item: ScratchCall, pool_buffer: str | None = None) -> str:
    """Give the call its buffer (the shared region, or `pool_buffer`: its region of the model's workspace
    pool), check the buffer against the library before the call, add kernel sums."""
    call = item.call
    written = item.original or call
    start = re.search(r"\b" + re.escape(call.function) + r"\([^;{}()]*\)[ \t]*\{", code)
    if start is None:
        raise BuildError(f"{item.source}: {call.function} not found again while rewriting it")
    head, body = code[:start.end()], code[start.end():]
    if written.context not in body or written.call not in body:
        raise BuildError(f"{item.source}: the CMSIS-NN call in {call.function} changed before mlfbuild could give it "
                         "its scratch buffer")
    if item.original:  # the replacement's constant locals, then the replacement, where TVM's call was
        body = body.replace(written.call, "\n  ".join((*item.declarations, call.call)), 1)
    if item.supplied:
        buffer = f"{pool_buffer},{item.library_bytes}" if pool_buffer else f"{REGION},{REGION_BYTES}"
        body = body.replace(call.context, f"cmsis_nn_context context= {{{buffer}}}", 1)
    elif item.precomputed_sums:
        sums = item.precomputed_sums.arrays[0]
        body = body.replace(call.context, f"cmsis_nn_context context= {{(void *){sums.name},{sums.nbytes}}}", 1)
    message = f"{call.function}: {call.kernel} scratch buffer too small"  # short: one per call, in flash
    inserted = []
    if item.size_function:
        inserted += [f"  if (context.size < {item.size_function}({', '.join(item.size_arguments)})) {{",
                     f"    TVMAPISetLastError(\"{message}\");",
                     "    return -1;",
                     "  }"]
    if item.kernel_sums:
        inserted += [f"  if ({KERNEL_SUMS}({', '.join(item.kernel_sums)}) != ARM_CMSIS_NN_SUCCESS) {{",
                     f"    TVMAPISetLastError(\"{call.function}: {KERNEL_SUMS} failed\");",
                     "    return -1;",
                     "  }"]
    if inserted:
        index = body.index(call.call)
        index = body.rindex("\n", 0, index) + 1
        body = body[:index] + "\n".join(inserted) + "\n" + body[index:]
    return head + body
