"""Human-readable summary of a ModelLibrary (the text form of `mlfbuild inspect`)."""

from __future__ import annotations

from .model import CmsisNnAssumptions, ModelLibrary, Module, TensorSpec


def _tensor_line(kind: str, t: TensorSpec) -> str:
    shape = "x".join(str(d) for d in t.shape) if t.shape is not None else "?"
    alias = f" (C: {t.c_name})" if t.c_name != t.name else ""
    return f"    {kind:<6} {t.name}{alias}: {t.dtype}[{shape}] {t.nbytes:,} B"


def _module_lines(m: Module) -> list[str]:
    executor = m.executor or "operator"
    flags = []
    if m.interface_api:
        flags.append(f"interface {m.interface_api}")
    if m.unpacked_api is not None:
        flags.append("unpacked" if m.unpacked_api else "packed args")
    flags.append("USMP on" if m.usmp else "USMP off")
    if m.link_params is not None:
        flags.append("weights linked" if m.link_params else "weights in params file")
    if m.system_lib:
        flags.append("system-lib")
    lines = [f"  module {m.name}: {executor} ({', '.join(flags)})",
             f"    target {'; '.join(t.raw for t in m.targets)}"]
    if m.imported_from:
        made = m.imported_from
        lines.append(f"    made by {made.get('tool', 'mlfbuild import')} from {made.get('model', '?')} "
                     f"(sha256 {made.get('sha256', '?')[:12]}…, {made.get('rounding', 'tflite')} rounding, "
                     f"{made.get('memory', 'floor')} memory plan, {made.get('kernels', 'cmsis-nn')} kernels); "
                     f"the model travels in {made.get('model_path', 'src/model.tflite')}")
    code = [f"{len(m.sources)} C source(s)"] if m.sources else []
    code += [f"{o.path.rsplit('/', 1)[-1]} ({o.machine}, {o.cpu or '?'}, {o.float_abi}-float)" for o in m.objects]
    lines.append(f"    code   {', '.join(code)}")
    lines += [_tensor_line("input", t) for t in m.inputs]
    lines += [_tensor_line("output", t) for t in m.outputs]
    tensors = sum(t.nbytes for t in (*m.inputs, *m.outputs))
    for mem in m.memory:
        io = f"io {mem.io_size_bytes:,} B"
        if m.io_in_pool:
            io += f" (the inputs and outputs, {tensors:,} B, are inside the workspace: tvmgen_{m.name}_map_inputs)"
        elif mem.io_size_bytes != tensors and m.inputs:  # TVM's AOT figure is not the buffers the firmware holds
            io += f" (TVM's figure; the inputs and outputs are {tensors:,} B)"
        lines.append(f"    memory device {mem.device}: workspace {mem.workspace_size_bytes:,} B, "
                     f"constants {mem.constants_size_bytes:,} B, {io}")
    if m.operators:
        lines.append(f"    operators {len(m.operators)}")
    if m.params_path:
        lines.append(f"    params {len(m.params)} arrays, {m.params_bytes:,} B ({m.params_path})")
    if m.cmsis_nn:
        lines += _cmsis_nn_lines(m.cmsis_nn)
    return lines


def _cmsis_nn_lines(c: CmsisNnAssumptions) -> list[str]:
    core = f"-mcpu={c.mcpu}" if c.mcpu else "no -mcpu"
    if c.mattr:
        core += f" -mattr={c.mattr}"
    origin = f"{c.target_kind} target" if c.target_kind else "no target"
    calls = len(c.scratch_bytes)
    if c.generic:
        buffers = f"no scratch buffers ({{NULL,0}} in {calls} call(s))"
    else:
        sizes = ", ".join(str(size) for size in c.scratch_bytes)
        buffers = f"scratch buffers of {sizes} B (sized by TVM for {c.mcpu or 'its core'})"
    paths = ("the board's own (DSP, MVE where it has them): at build, mlfbuild reads every call from the code's "
             "syntax tree and gives each the buffer the library's get_buffer_size asks for on that core (where a "
             "call is not in the shape TVM writes, the paths the code's buffers were sized for)")
    return [f"    cmsis-nn calls {', '.join(c.functions)}",
            f"    cmsis-nn core {core} ({origin}); {buffers}",
            f"    cmsis-nn paths {paths}"]


def format_summary(lib: ModelLibrary, source: str) -> str:
    lines = [f"{source}: MLF version {lib.version}, {lib.style}, {len(lib.modules)} module(s)"]
    for module in lib.modules:
        lines += _module_lines(module)
    if lib.runtime:
        lines.append(f"  bundled runtime: TVM standalone CRT {lib.runtime.version or '?'} "
                     f"({lib.runtime.path}/, {lib.runtime.build_system}"
                     f"{', templates' if lib.runtime.templates else ''})")
    else:
        lines.append("  bundled runtime: none")
    lines += [f"  warning: {w}" for w in lib.warnings]
    return "\n".join(lines)
