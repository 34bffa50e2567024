"""Turn an unpacked MLF folder into a ModelLibrary, for every layout TVM produced (metadata v5 and v7,
full-model and operator exports, single and multi-module).

Where metadata.json is silent (it never records the interface API, USMP or the runtime; TVM < 0.11
does not record tensor shapes), the facts are read from the generated files themselves, by presence
rather than by version number (TVM changed v7 several times without bumping it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..checked import describe_value, is_kind, kind_name
from ..errors import GraphError, MetadataError, ParamsError
from . import csource, relay
from .archive import DEFAULT_MAX_TOTAL_BYTES, sha256_of, unpack
from .dtypes import dtype_nbytes
from .graph import Graph, read_graph
from .limits import DEFAULT_MAX_GRAPH_NODES, MAX_BYTES, is_c_identifier, name_problem, size_problem
from .model import (BundledRuntime, CmsisNnAssumptions, MainMemory, ModelLibrary, Module, ObjectFile,
                    OperatorFunction, Target, TensorSpec, c_identifier, spec_from_shape)
from .objfile import inspect_object
from .params import Param, read_params

SUPPORTED_VERSIONS = (5, 7)
STYLES = ("full-model", "operator")  # what TVM's export_model_library_format writes
_MAX_METADATA_BYTES = 64 * 1024 * 1024


def read_mlf(source: Path, workdir: Path, *, max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
             max_graph_nodes: int = DEFAULT_MAX_GRAPH_NODES) -> ModelLibrary:
    """Unpack `source` (tar, tar.gz or folder) under `workdir` and describe it."""
    source = Path(source)
    if not source.exists():
        raise MetadataError(f"{source}: no such file or folder")
    root = source if source.is_dir() else unpack(source, Path(workdir) / "mlf", max_total_bytes=max_total_bytes)
    return describe(root, sha256=sha256_of(source), max_graph_nodes=max_graph_nodes)


def describe(root: Path, sha256: str = "", *, max_graph_nodes: int = DEFAULT_MAX_GRAPH_NODES) -> ModelLibrary:
    metadata = _load_metadata(root)
    version = metadata.get("version")
    if type(version) is not int:
        raise MetadataError(f"{root.name}/metadata.json: 'version' must be an integer, got {version!r}")
    if version not in SUPPORTED_VERSIONS:
        raise MetadataError(f"{root.name}/metadata.json: unsupported MLF version {version} "
                            "(mlfbuild reads versions 5 (TVM 0.8) and 7 (TVM 0.9-0.18))")
    meta = _Obj(metadata, "metadata.json")
    style = meta.str("style", "full-model")
    if style not in STYLES:
        raise MetadataError(f"metadata.json.style: expected one of {', '.join(map(repr, STYLES))}, "
                            f"got {describe_value(style)}")
    if style == "operator":
        modules = [_operator_module(root, meta, version)]
    elif version == 5:
        modules = [_full_model_module(root, meta, meta.str("model_name"), version, max_graph_nodes)]
    else:
        module_map = meta.obj("modules")
        if not module_map.value:
            raise MetadataError("metadata.json: 'modules' is empty")
        modules = [_full_model_module(root, module_map.obj(name), name, version, max_graph_nodes)
                   for name in module_map.value]
    _check_unique_symbols(modules)
    warnings = [f"{m.name}: {defect}" for m in modules for defect in m.defects]
    warnings += _producer_notes(root, modules, version)
    return ModelLibrary(root=root, version=version, style=style, modules=tuple(modules),
                        runtime=_bundled_runtime(root, meta, version), sha256=sha256, warnings=tuple(warnings))


# --- typed access to untrusted JSON -------------------------------------------------------------

class _Obj:
    """A JSON object with a path for error messages; every accessor checks the type it returns."""

    def __init__(self, value: Any, where: str):
        if not isinstance(value, dict):
            raise MetadataError(f"{where}: expected an object, got {describe_value(value)}")
        self.value = value
        self.where = where

    def _get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if key not in self.value:
            if default is ...:
                raise MetadataError(f"{self.where}: missing '{key}'")
            return default
        item = self.value[key]
        if not is_kind(item, kind):
            raise MetadataError(f"{self.where}.{key}: expected {kind_name(kind)}, got {describe_value(item)}")
        return item

    def str(self, key: str, default: Any = ...) -> str:
        return self._get(key, str, default)

    def optional_str(self, key: str) -> str | None:
        """A string, or None where the key is absent or null."""
        return self._get(key, (str, type(None)), None)

    def int(self, key: str, default: Any = ...) -> int:
        value = self._get(key, int, default)
        if isinstance(value, int) and (value < 0 or value > MAX_BYTES):
            raise MetadataError(f"{self.where}.{key}: {size_problem(value) or 'must not be negative'}")
        return value

    def list(self, key: str, default: Any = ...) -> list:
        return self._get(key, list, default)

    def obj(self, key: str, default: Any = ...) -> "_Obj":
        value = self._get(key, dict, default)
        return _Obj(value, f"{self.where}.{key}") if isinstance(value, dict) else value

    def objects(self, key: str) -> list["_Obj"]:
        return [_Obj(item, f"{self.where}.{key}[{i}]") for i, item in enumerate(self.list(key, []))]


def _load_metadata(root: Path) -> dict:
    path = root / "metadata.json"
    if not path.is_file():
        raise MetadataError(f"{root.name}: no metadata.json — not a Model Library Format export")
    if path.stat().st_size > _MAX_METADATA_BYTES:
        raise MetadataError(f"{path.name}: {path.stat().st_size} bytes is too large for a metadata file")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MetadataError(f"metadata.json: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise MetadataError(f"metadata.json: expected an object at the top level, got {type(data).__name__}")
    return data


# --- full-model modules -------------------------------------------------------------------------

def _full_model_module(root: Path, meta: _Obj, name: str, version: int, max_graph_nodes: int) -> Module:
    if not is_c_identifier(name):
        raise MetadataError(f"metadata.json: module name {name[:80]!r} is not a C identifier")
    where = meta.where
    executors = meta.list("executors")
    if len(executors) != 1 or executors[0] not in ("aot", "graph"):
        raise MetadataError(f"{where}.executors: expected ['aot'] or ['graph'], got {executors!r}")
    executor = executors[0]
    targets = _targets(meta, version)
    memory, operators, meta_io = _memory(meta.obj("memory"))

    sources = _codegen_files(root, "src", f"{name}_lib", (".c", ".cc", ".cpp"))
    objects = tuple(inspect_object(root / rel, rel) for rel in _codegen_files(root, "lib", f"{name}_lib", (".o",)))
    if not sources and not objects:
        raise MetadataError(f"{name}: no generated code (codegen/host/src/{name}_lib*.c or lib/{name}_lib*.o)")
    source_text = {rel: _read_text(root / rel) for rel in sources}
    header_rel = f"codegen/host/include/tvmgen_{name}.h"
    header = _read_text(root / header_rel) if (root / header_rel).is_file() else None

    attrs = _target_attrs(targets)
    params_rel = f"parameters/{name}.params"
    params = _read_params(root, params_rel)
    graph_rel = "executor-config/graph/graph.json" if version == 5 else f"executor-config/graph/{name}.graph"
    graph = _read_graph(root, graph_rel, max_graph_nodes) if executor == "graph" else None
    all_source = "\n".join(source_text.values())

    interface = attrs.get("interface-api") or ("c" if header else ("packed" if executor == "aot" else None))
    unpacked = _flag(attrs, "unpacked-api")
    if unpacked is None and executor == "aot":
        unpacked = interface == "c"
    link_params = _flag(attrs, "link-params")
    if link_params is None:
        link_params = True if executor == "aot" else (graph is not None and not _graph_needs_params(graph, params))
    system_lib = "TVMSystemLibEntryPoint" in all_source or any("TVMSystemLibEntryPoint" in o.symbols for o in objects)
    usmp = csource.names_word(all_source, "global_workspace") or any("global_workspace" in o.symbols for o in objects)

    relay_rel = "src/relay.txt" if version == 5 else f"src/{name}.relay"
    relay_text = _read_text(root / relay_rel) if (root / relay_rel).is_file() else ""
    relay_params, relay_outputs = relay.main_signature(relay_text)
    io = _IoFacts(name, meta_io, relay_params, relay_outputs, header, all_source)
    io.relay_text = relay_text
    if graph is not None:
        inputs, outputs = io.from_graph(graph, params)
    elif interface == "c" and header is not None:
        inputs, outputs = io.from_header()
    else:
        inputs, outputs = io.from_packed()
    _check_tensors(name, inputs, outputs)

    return Module(
        name=name, style="full-model", executor=executor, interface_api=interface, unpacked_api=unpacked,
        usmp=usmp, link_params=link_params, system_lib=system_lib, targets=targets, sources=tuple(sources),
        objects=objects, header=header_rel if header is not None else None,
        graph_path=graph_rel if graph is not None else None,
        params_path=params_rel if (root / params_rel).is_file() else None,
        inputs=tuple(inputs), outputs=tuple(outputs), memory=tuple(memory), operators=tuple(operators),
        graph=graph, params=params, entry_function=f"tvmgen_{name}_run" if executor == "aot" else None,
        defects=tuple(_aot_defects(name, executor, source_text) + _object_defects(objects)),
        system_headers=tuple(sorted(csource.system_includes(all_source))),
        cmsis_nn=_cmsis_nn_assumptions(source_text, targets),
        single_rounding=_single_rounding(meta), imported_from=_provenance(meta),
        io_in_pool=_io_in_pool(name, header),
    )


def _io_in_pool(name: str, header: str | None) -> bool:
    """The header maps the inputs and outputs into the module's own pool: `mlfbuild import --memory
    min`'s tvmgen_<mod>_map_inputs(void). (TVM's use_workspace_io maps them into external pools,
    `map_inputs(struct tvmgen_<mod>_workspace_pools*)`, which the build refuses with those pools.)"""
    return header is not None and all(re.search(rf"\btvmgen_{name}_map_{kind}\s*\(\s*void\s*\)", header)
                                      for kind in ("inputs", "outputs"))


# The CMSIS-NN functions whose requantisation an MLF may ask to round once (mlfbuild import does for
# the fully connected layers: TFLite's reference kernel for them rounds once).
SINGLE_ROUNDING_FUNCTIONS = ("arm_fully_connected_s8",)


def _imported(meta: _Obj) -> dict:
    value = meta.value.get("mlfbuild_import")
    return value if isinstance(value, dict) else {}


def _single_rounding(meta: _Obj) -> tuple[str, ...]:
    names = _imported(meta).get("single_rounding", [])
    if not isinstance(names, list) or not all(n in SINGLE_ROUNDING_FUNCTIONS for n in names):
        raise MetadataError(f"{meta.where}.mlfbuild_import.single_rounding: expected a list of "
                            f"{', '.join(SINGLE_ROUNDING_FUNCTIONS)}")
    return tuple(sorted(set(names)))


def _provenance(meta: _Obj) -> dict | None:
    imported = _imported(meta)
    keys = ("tool", "model", "sha256", "model_path", "rounding", "memory", "kernels")
    return {k: str(imported[k])[:200] for k in keys if k in imported} or None


class _IoFacts:
    """Every place a module's inputs/outputs may be recorded, reconciled in one spot."""

    def __init__(self, name, meta_io, relay_params, relay_outputs, header, source):
        self.name = name
        self.meta_inputs, self.meta_outputs = meta_io
        self.relay_params = relay_params
        self.relay_by_c = {c_identifier(n): (n, shape, dtype) for n, shape, dtype in relay_params}
        self.relay_outputs = relay_outputs
        self.header = header
        self.source = source
        self.relay_text = ""

    def _spec(self, c_name: str, meta: dict[str, dict], shape=None, dtype=None) -> TensorSpec:
        meta_name = next((n for n in meta if _meta_c_name(n, meta[n]) == c_name), None)
        relay_name, relay_shape, relay_dtype = self.relay_by_c.get(c_name, (None, None, None))
        name = meta_name or relay_name or c_name
        shape = shape if shape is not None else relay_shape
        if shape is None and meta_name:  # mlfbuild's own MLFs state shapes in metadata (TVM's do not)
            shape = _meta_shape(meta[meta_name].get("shape"))
        dtype = dtype or (meta[meta_name]["dtype"] if meta_name else None) or relay_dtype or "unknown"
        c_field = c_name if c_name != c_identifier(name) else ""
        return _tensor(self.name, name, dtype, shape, meta[meta_name]["size"] if meta_name else 0, c_field)

    def _outputs_by_position(self, names: list[str]) -> list[TensorSpec]:
        specs = []
        for index, c_name in enumerate(names):
            shape, dtype = self.relay_outputs[index] if index < len(self.relay_outputs) else (None, None)
            spec = self._spec(c_name, self.meta_outputs, shape, dtype)
            if spec.shape is None and len(names) == 1:
                spec = self._infer_output(spec)
            specs.append(spec)
        return specs

    def _infer_output(self, spec: TensorSpec) -> TensorSpec:
        known = spec.dtype != "unknown" and spec.nbytes > 0
        count = spec.nbytes // dtype_nbytes(spec.dtype) if known else None
        batch = self.relay_params[0][1][0] if self.relay_params and self.relay_params[0][1] else 1
        shape, dtype = relay.infer_single_output(self.relay_text, count, batch)
        dtype = spec.dtype if spec.dtype != "unknown" else dtype
        if shape is None or dtype is None:
            return spec
        return _tensor(self.name, spec.name, dtype, shape)

    def from_header(self) -> tuple[list[TensorSpec], list[TensorSpec]]:
        inputs = csource.struct_fields(self.header, f"tvmgen_{self.name}_inputs")
        outputs = csource.struct_fields(self.header, f"tvmgen_{self.name}_outputs")
        if inputs is None or outputs is None:
            raise MetadataError(f"tvmgen_{self.name}.h: no tvmgen_{self.name}_inputs/outputs structs")
        return [self._spec(c, self.meta_inputs) for c in inputs], self._outputs_by_position(outputs)

    def from_packed(self) -> tuple[list[TensorSpec], list[TensorSpec]]:
        ins = csource.packed_metadata_tensors(self.source, "inputs")
        outs = csource.packed_metadata_tensors(self.source, "outputs")
        if ins or outs:  # TVM >= 0.9 packed AOT: kTvmgenMetadata holds names, shapes and dtypes
            return ([self._spec(c_identifier(n), self.meta_inputs, s, d) for n, s, d in ins],
                    [self._spec(c_identifier(n), self.meta_outputs, s, d) for n, s, d in outs])
        if self.meta_inputs:  # metadata (TVM >= 0.11) names the real inputs
            names = [c_identifier(n) for n in self.meta_inputs]
        else:  # TVM 0.8: the packed main takes inputs then outputs; Relay lists inputs first
            outputs = len(self.relay_outputs) or 1  # untyped Relay: a single output
            count = csource.packed_arg_count(self.source, f"tvmgen_{self.name}_run_model")
            if count is None:
                count = len(self.relay_params) + outputs
            names = [c_identifier(n) for n, _, _ in self.relay_params[: max(count - outputs, 0)]]
        out_names = [c_identifier(n) for n in self.meta_outputs] or _default_output_names(len(self.relay_outputs) or 1)
        return [self._spec(c, self.meta_inputs) for c in names], self._outputs_by_position(out_names)

    def from_graph(self, graph: Graph, params: dict[str, Param]) -> tuple[list[TensorSpec], list[TensorSpec]]:
        inputs = []
        for node_id in graph.arg_nodes:
            node = graph.nodes[node_id]
            if node.name in params:
                continue
            entry = graph.entries[graph.entry_id(node_id, 0)]
            inputs.append(_tensor(self.name, node.name, entry.dtype, entry.shape))
        names = _graph_output_names(self.meta_outputs, len(graph.heads))
        outputs = []
        for name, (node_id, index) in zip(names, graph.heads):
            entry = graph.entries[graph.entry_id(node_id, index)]
            outputs.append(_tensor(self.name, name, entry.dtype, entry.shape))
        return inputs, outputs


def _meta_shape(value) -> tuple[int, ...] | None:
    if isinstance(value, list) and len(value) <= 16 and all(type(d) is int and 0 <= d < 1 << 31 for d in value):
        return tuple(value)
    return None


def _tensor(module: str, name: str, dtype: str, shape: tuple[int, ...] | None, nbytes: int = 0,
            c_field: str = "") -> TensorSpec:
    """A tensor from what the MLF says of it: a dtype of unknown size is refused, not guessed; the
    dtype may still be unknown ("unknown") until every source was asked (see _check_tensors)."""
    if dtype != "unknown":
        _check_dtype(dtype, f"{module}: tensor {name[:80]!r}")
    if shape is None or dtype == "unknown":
        return TensorSpec(name=name, dtype=dtype, shape=shape, nbytes=nbytes, c_field=c_field)
    if any(dim < 0 or dim > MAX_BYTES for dim in shape):
        raise MetadataError(f"{module}: tensor {name[:80]!r} has an impossible shape {list(shape)[:8]}")
    return spec_from_shape(name, dtype, shape, c_field)


def _meta_c_name(name: str, entry: dict) -> str:
    """The C identifier of a metadata tensor: as mlfbuild import records it (made unique), else TVM's
    sanitisation of its name."""
    return entry.get("c_name") or c_identifier(name)


def _check_tensors(module: str, inputs: list[TensorSpec], outputs: list[TensorSpec]) -> None:
    """Every tensor that reaches the firmware has a known dtype, a possible size and a printable name."""
    for kind, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            where = f"{module}: {kind} tensor {spec.name[:80]!r}"
            problem = name_problem(spec.name)
            if problem:
                raise MetadataError(f"{where}: the name {problem}")
            if spec.dtype == "unknown":
                raise MetadataError(f"{where}: its dtype is recorded nowhere (metadata, interface header, "
                                    "graph or Relay text)")
            problem = size_problem(spec.nbytes)
            if problem:
                raise MetadataError(f"{where}: {problem}")


def _default_output_names(count: int) -> list[str]:
    return ["output"] if count == 1 else [f"output{i}" for i in range(count)]


def _graph_output_names(meta_outputs: dict[str, dict], count: int) -> list[str]:
    names = list(meta_outputs)
    if len(names) == count and (count == 1 or all(re.fullmatch(r"output\d+", n) for n in names)):
        return sorted(names, key=lambda n: int(n[6:]) if count > 1 else 0)
    return _default_output_names(count)


def _graph_needs_params(graph: Graph, params: dict[str, Param]) -> bool:
    return any(graph.nodes[i].name in params for i in graph.arg_nodes)


def _aot_defects(name: str, executor: str, source_text: dict[str, str]) -> list[str]:
    """Entry points the AOT wrapper calls but no generated file defines (TVM 0.8 without link-params)."""
    if executor != "aot" or not source_text:
        return []
    texts = source_text.values()
    defects = []
    for entry in (f"tvmgen_{name}_run_model", f"tvmgen_{name}___tvm_main__"):
        if (any(csource.calls_function(text, entry) for text in texts)
                and not any(csource.defines_function(text, entry) for text in texts)):
            defects.append(
                f"the AOT wrapper tvmgen_{name}_run calls {entry}, but no generated file defines it. "
                "This is a TVM 0.8 defect: AOT exports made without link-params drop the model's main "
                "function. Re-export with link-params enabled (target option --link-params=1) or with TVM >= 0.9.")
    return defects


# What an MLF's object files may leave undefined: the TVM runtime API, compiler helpers and libc/libm.
_PROVIDED_ELSEWHERE = re.compile(
    r"^(TVM\w+|__\w+|_lookup_linked_param|mem(cpy|set|move|cmp)|str\w+|abort|"
    r"(exp|log|log2|log10|sqrt|tanh|pow|round|floor|ceil|fabs|sin|cos|tan|atan|atan2|erf|fmod|fmax|fmin|"
    r"trunc|nearbyint|rint|lround|exp2|expm1|log1p|sinh|cosh|asin|acos)f?)$")


def _object_defects(objects: tuple[ObjectFile, ...]) -> list[str]:
    """Functions the LLVM objects call that neither they nor any runtime or C library define.
    TVM's arm_cpu schedules tensorize with C micro-kernels that the LLVM export leaves out."""
    defined = set().union(*(o.symbols for o in objects)) if objects else set()
    missing = sorted({name for o in objects for name in o.undefined
                      if name not in defined and not _PROVIDED_ELSEWHERE.match(name)})
    if not missing:
        return []
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return [f"the object code calls {shown}, which the MLF does not contain. TVM's arm_cpu schedules "
            "emit these tensorize micro-kernels as C next to LLVM code, and the LLVM export leaves them out. "
            "Re-export with target 'c' (or without the arm_cpu micro-kernel schedules)."]


def _cmsis_nn_assumptions(source_text: dict[str, str], targets: tuple[Target, ...]) -> CmsisNnAssumptions | None:
    """What the CMSIS-NN calls assume of the library: TVM sizes scratch buffers for the core of its
    cmsis-nn target (which defaults to no -mcpu: a core without DSP or MVE)."""
    files = [rel for rel, text in source_text.items() if csource.includes(text, "arm_nnfunctions.h")]
    if not files:
        return None
    functions: set[str] = set()
    scratch: list[int] = []
    for rel in files:
        functions |= csource.cmsis_nn_calls(source_text[rel])
        scratch += csource.cmsis_nn_scratch_sizes(source_text[rel], rel)
    target = next((t for kind in ("cmsis-nn", "c") for t in targets if t.kind == kind), None)
    attrs = target.attrs if target else {}
    return CmsisNnAssumptions(sources=tuple(files), functions=tuple(sorted(functions)), mcpu=attrs.get("mcpu"),
                              mattr=attrs.get("mattr"), target_kind=target.kind if target else None,
                              scratch_bytes=tuple(scratch))


# --- operator-style exports ---------------------------------------------------------------------

def _operator_module(root: Path, meta: _Obj, version: int) -> Module:
    name = meta.str("model_name")
    if not is_c_identifier(name):
        raise MetadataError(f"metadata.json: operator name {name[:80]!r} is not a C identifier")
    targets = _targets(meta, version)
    memory = meta.obj("memory")
    if len(memory.value) != 1:
        raise MetadataError(f"metadata.json.memory: an operator export describes exactly one function, found {len(memory.value)}")
    function = next(iter(memory.value))
    if not is_c_identifier(function):
        raise MetadataError(f"metadata.json.memory: operator function {function[:80]!r} is not a C identifier")
    buffers = memory.objects(function)
    if not buffers:
        raise MetadataError(f"metadata.json.memory.{function}: no buffers")
    sources = _codegen_files(root, "src", "lib", (".c", ".cc", ".cpp"))
    objects = tuple(inspect_object(root / rel, rel) for rel in _codegen_files(root, "lib", "lib", (".o",)))
    if not sources and not objects:
        raise MetadataError("operator export has no generated code (codegen/host/src/lib*.c or lib/lib*.o)")
    tir_names = _tir_param_names(root, function)
    specs = []
    for index, buffer in enumerate(buffers):
        shape = tuple(_shape_list(buffer.list("shape"), buffer.where))
        dtype = buffer.str("dtype")
        _check_dtype(dtype, buffer.where)
        binding = buffer.optional_str("input_binding")
        name_ = tir_names[index] if index < len(tir_names) else (
            re.sub(r"_\d+$", "", binding) if binding else f"arg{index}")
        specs.append(_tensor(name, name_, dtype, shape))
    source_text = {rel: _read_text(root / rel) for rel in sources}
    all_source = "\n".join(source_text.values())
    system_lib = "TVMSystemLibEntryPoint" in all_source or any("TVMSystemLibEntryPoint" in o.symbols for o in objects)
    _check_tensors(name, specs[:-1], specs[-1:])
    # TE/TIR puts outputs last; metadata cannot tell inputs from outputs, so the last buffer is the output.
    return Module(
        name=name, style="operator", executor=None, interface_api="packed", unpacked_api=False, usmp=False,
        link_params=None, system_lib=system_lib, targets=targets, sources=tuple(sources), objects=objects,
        header=None, graph_path=None, params_path=None, inputs=tuple(specs[:-1]), outputs=tuple(specs[-1:]),
        memory=(), operators=(OperatorFunction(function, 0),), entry_function=function,
        cmsis_nn=_cmsis_nn_assumptions(source_text, targets))


def _tir_param_names(root: Path, function: str) -> list[str]:
    for path in sorted((root / "src").glob("tir-*.txt")) if (root / "src").is_dir() else []:
        text = _read_text(path)
        script = re.search(r"def\s+" + re.escape(function) + r"\((.*?)\)\s*(?:->[^:]*)?:\s*\n", text, re.S)
        if script:  # TVMScript (TVM >= 0.9): def f(A: T.Buffer(...), ...)
            return re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*:\s*T\.Buffer", script.group(1))
        legacy = re.search(r"@" + re.escape(function) + r"\s*=\s*primfn\(([^)]*)\)", text)
        if legacy:  # TVM 0.8: primfn(A_1: handle, ...) — handles carry a numeric suffix
            return [re.sub(r"_\d+$", "", n) for n in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*:\s*handle", legacy.group(1))]
    return []


# --- shared pieces ------------------------------------------------------------------------------

def _targets(meta: _Obj, version: int) -> tuple[Target, ...]:
    raw = meta.value.get("target")
    if version == 5 and isinstance(raw, dict):
        values = list(raw.values())
    elif isinstance(raw, list):
        values = raw
    else:
        raise MetadataError(f"{meta.where}.target: expected {'an object' if version == 5 else 'a list'} of target strings")
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise MetadataError(f"{meta.where}.target: expected non-empty target strings, got {values!r}")
    return tuple(Target.parse(v) for v in values)


def _target_attrs(targets: tuple[Target, ...]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for target in targets:
        merged.update(target.attrs)
    return merged


def _flag(attrs: dict[str, str], key: str) -> bool | None:
    if key not in attrs:
        return None
    return attrs[key] not in ("0", "false", "False")


def _memory(memory: _Obj) -> tuple[list[MainMemory], list[OperatorFunction], tuple[dict, dict]]:
    functions = memory.obj("functions")
    main = []
    meta_inputs: dict[str, dict] = {}
    meta_outputs: dict[str, dict] = {}
    for entry in functions.objects("main"):
        main.append(MainMemory(device=entry.int("device"), workspace_size_bytes=entry.int("workspace_size_bytes", 0),
                               constants_size_bytes=entry.int("constants_size_bytes", 0),
                               io_size_bytes=entry.int("io_size_bytes", 0)))
        if not meta_inputs and not meta_outputs:  # TVM >= 0.11; the C header uses main[0] only
            meta_inputs = _tensor_map(entry.obj("inputs", {}))
            meta_outputs = _tensor_map(entry.obj("outputs", {}))
    operators = []
    for op in functions.objects("operator_functions"):
        workspace = max((w.int("workspace_size_bytes", 0) for w in op.objects("workspace")), default=0)
        operators.append(OperatorFunction(op.str("function_name"), workspace))
    return main, operators, (meta_inputs, meta_outputs)


def _tensor_map(tensors: _Obj | dict) -> dict[str, dict]:
    if not isinstance(tensors, _Obj):
        return {}
    result = {}
    for name in tensors.value:
        item = tensors.obj(name)
        dtype = item.str("dtype")
        _check_dtype(dtype, item.where)
        result[name] = {"size": item.int("size"), "dtype": dtype, "shape": item.value.get("shape")}
        c_name = item.str("c_name", None)  # mlfbuild import's: the struct field, made unique
        if c_name is not None:
            if not is_c_identifier(c_name):
                raise MetadataError(f"{item.where}.c_name: {c_name[:80]!r} is not a C identifier")
            result[name]["c_name"] = c_name
    return result


def _check_dtype(dtype: str, where: str) -> None:
    try:
        dtype_nbytes(dtype)
    except (KeyError, ValueError):
        raise MetadataError(f"{where}: unsupported dtype {dtype!r}") from None


def _shape_list(values: list, where: str) -> list[int]:
    if not all(type(v) is int and v >= 0 for v in values):
        raise MetadataError(f"{where}.shape: expected non-negative integers, got {values!r}")
    return values


def _codegen_files(root: Path, kind: str, prefix: str, suffixes: tuple[str, ...]) -> list[str]:
    folder = root / "codegen" / "host" / kind
    if not folder.is_dir():
        return []
    pattern = re.compile(re.escape(prefix) + r"(\d+)(" + "|".join(re.escape(s) for s in suffixes) + r")$")
    found = [(int(m.group(1)), p.name) for p in folder.iterdir() if p.is_file() and (m := pattern.match(p.name))]
    return [f"codegen/host/{kind}/{file}" for _, file in sorted(found)]


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _read_params(root: Path, rel: str) -> dict[str, Param]:
    path = root / rel
    if not path.is_file():
        return {}
    try:
        return read_params(path.read_bytes(), source=rel)
    except ParamsError:
        raise
    except Exception as exc:  # defensive: a parser bug must still read as invalid input
        raise ParamsError(f"{rel}: unreadable ({exc})") from None


def _read_graph(root: Path, rel: str, max_nodes: int) -> Graph:
    path = root / rel
    if not path.is_file():
        raise GraphError(f"{rel}: missing; a graph-executor export must carry its executor config")
    return read_graph(path.read_bytes(), source=rel, max_nodes=max_nodes)


def _bundled_runtime(root: Path, meta: _Obj, version: int) -> BundledRuntime | None:
    runtime = root / "runtime"
    if not runtime.is_dir():
        return None
    spec = None
    for deps in _find_key(meta.value, "external_dependencies"):
        for index, dep in enumerate(deps if isinstance(deps, list) else []):
            if isinstance(dep, dict) and dep.get("short_name") == "tvm_standalone_crt":
                spec = _Obj(dep, f"metadata.json: external_dependencies[{index}]").optional_str("version_spec")
    build = "cmake" if (runtime / "CMakeLists.txt").is_file() else "make" if (runtime / "Makefile").is_file() else "none"
    templates = tuple(sorted(f"templates/{p.name}" for p in (root / "templates").glob("*") if p.is_file())) \
        if (root / "templates").is_dir() else ()
    return BundledRuntime(path="runtime", version=spec, build_system=build, templates=templates)


def _find_key(value: Any, key: str, depth: int = 0) -> list[Any]:
    if depth > 3 or not isinstance(value, dict):
        return []
    found = [value[key]] if key in value else []
    for item in value.values():
        found += _find_key(item, key, depth + 1)
    return found


def _check_unique_symbols(modules: list[Module]) -> None:
    names = [m.name for m in modules]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise MetadataError(f"metadata.json: module names repeat: {', '.join(sorted(duplicates))}")


def _producer_notes(root: Path, modules: list[Module], version: int) -> list[str]:
    notes = []
    for module in modules:
        if module.executor == "graph" and module.link_params and module.params:
            notes.append(f"{module.name}: weights are linked into the code; {module.params_path} holds a "
                         "copy that will not be loaded (TVM 0.8 writes it anyway)")
        if module.executor == "graph" and not module.system_lib:
            notes.append(f"{module.name}: graph executor code without a system-lib registry (runtime 'cpp'?)")
    return notes
