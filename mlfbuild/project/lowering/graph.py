"""Graph executor lowered at build time: the graph JSON becomes straight-line C.

Every activation and every operator's scratch (what it takes from TVMBackendAllocWorkspace) gets
a place in one arena, planned here from the graph's own liveness rather than TVM's storage ids: an
operator's scratch shares bytes with activations that are dead while it runs. Parameters become
const arrays in flash that the operators read in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidInputError
from ...mlf.graph import Graph, Node
from ...mlf.model import Module
from ..memory_plan import Buffer, MemoryPlan, plan_memory
from .base import (WORKSPACE_ALIGNMENT, CTensor, Lowered, Lowering, allocation_sites, arena_pool_offset,
                   operator_scratch, workspace_with_slack)


@dataclass
class _Entry(CTensor):
    id: int = 0


@dataclass
class _Param:
    symbol: str
    nbytes: int
    initializer: str


def _initializer(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 24):
        lines.append("  " + ", ".join(f"0x{b:02x}" for b in data[start:start + 24]) + ",")
    return "\n".join(lines) or "  0"


class GraphExecutor(Lowering):
    template = "graph.c.j2"

    def applies(self, module: Module) -> bool:
        return module.executor == "graph"

    def lower(self, module: Module, root: Path, env, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        graph = module.graph
        if graph is None:
            raise InvalidInputError(f"{module.name}: graph executor module without a graph")
        prefix = f"mlf_{module.name}"
        param_nodes = {nid: graph.nodes[nid].name for nid in graph.arg_nodes if graph.nodes[nid].name in module.params}
        params, param_symbols, linked = [], {}, []
        if _defines_linked_params(module, root):
            # TVM 0.8 link-params: the weights are compiled into the operators' file and handed out
            # by _lookup_linked_param(storage id); the params file is a copy that is not loaded.
            for nid in sorted(param_nodes):
                eid = graph.entry_id(nid, 0)
                linked.append({"entry": eid, "storage_id": graph.entries[eid].storage_id})
                param_symbols[eid] = "NULL"
            param_nodes_to_copy = {}
        else:
            param_nodes_to_copy = param_nodes
        for index, (nid, name) in enumerate(sorted(param_nodes_to_copy.items())):
            param = module.params[name]
            entry = graph.entries[graph.entry_id(nid, 0)]
            if len(param.data) != entry.nbytes or param.dtype != entry.dtype:
                raise InvalidInputError(f"{module.params_path}: '{name}' is {param.dtype}{list(param.shape)} but the "
                                        f"graph expects {entry.dtype}{list(entry.shape)}")
            symbol = f"{prefix}_param{index}"
            params.append(_Param(symbol, len(param.data), _initializer(param.data)))
            param_symbols[graph.entry_id(nid, 0)] = symbol
        missing = [graph.nodes[nid].name for nid in graph.arg_nodes
                   if nid not in param_nodes and graph.nodes[nid].name not in {s.name for s in module.inputs}]
        if missing:
            raise InvalidInputError(f"{module.name}: graph inputs {missing} are neither model inputs nor in {module.params_path}")

        input_entries = [graph.entry_id(nid, 0) for nid in graph.arg_nodes if nid not in param_nodes]
        steps = _steps(graph, set(param_symbols))
        scratch = _scratch_per_function(module, root, steps, include_dirs)
        memory = _plan(graph, steps, set(param_symbols), input_entries, scratch)
        entries: dict[int, _Entry] = {}

        def entry(eid: int) -> _Entry:
            if eid not in entries:
                e = graph.entries[eid]
                data = (f"(void*){param_symbols[eid]}" if eid in param_symbols
                        else f"(void*)&{prefix}_arena[{memory.offsets[_tensor_buffer(steps, eid)]}]")
                entries[eid] = _Entry(name=f"e{eid}", dtype=e.dtype, shape=tuple(e.shape), nbytes=e.nbytes, data=data, id=eid)
            return entries[eid]

        calls, functions, max_args = [], [], 0
        for index, step in enumerate(steps.calls):
            node = step.node
            if step.kind == "copy":
                src, dst = entry(step.inputs[0]), entry(step.outputs[0])
                calls.append({"kind": "copy", "node": node.name, "function": node.func_name,
                              "src": src.data, "dst": dst.data, "nbytes": min(src.nbytes, dst.nbytes)})
                continue
            for eid in step.inputs + step.outputs:
                entry(eid)
            call = {"kind": "packed", "node": node.name, "function": node.func_name,
                    "entries": step.inputs + step.outputs, "scratch": None}
            if scratch is not None:
                size = scratch.get(node.func_name, 0)
                call["scratch"] = {"offset": memory.offsets[f"scratch{index}"], "size": size} if size else {}
            calls.append(call)
            if node.func_name not in functions:
                functions.append(node.func_name)
            max_args = max(max_args, len(step.inputs) + len(step.outputs))

        inputs = [entry(eid) for eid in input_entries]
        outputs = [entry(graph.entry_id(nid, k)) for nid, k in graph.heads]
        copies_in = [{"field": spec.c_name, "data": e.data, "nbytes": min(e.nbytes, spec.nbytes)}
                     for e, spec in zip(inputs, module.inputs)]
        copies_out = [{"field": spec.c_name, "data": e.data, "nbytes": min(e.nbytes, spec.nbytes)}
                      for e, spec in zip(outputs, module.outputs)]

        arena_bytes = memory.arena_bytes
        if scratch is None:
            workspace = max((op.workspace_size_bytes for op in module.operators), default=0)
            pool = workspace_with_slack(workspace, module, root, include_dirs)
            note = (f"arena {arena_bytes} B for {len(memory.buffers)} tensors (floor {memory.floor_bytes} B); operator "
                    f"scratch from a pool of {pool} B after them (its sizes are not literals in the C code)")
        else:
            pool = 0
            note = (f"arena {arena_bytes} B for {len(memory.buffers)} tensors and operator scratch regions "
                    f"(floor {memory.floor_bytes} B)")
        code = self.render(env, m=module, prefix=prefix, graph_source=module.graph_path, functions=functions,
                           buffers=len(memory.buffers), arena_bytes=arena_bytes, floor_bytes=memory.floor_bytes,
                           params=params, params_bytes=sum(p.nbytes for p in params),
                           entries=sorted(entries.values(), key=lambda e: e.id), calls=calls, max_args=max_args,
                           linked=linked, linked_ids={item["entry"] for item in linked},
                           copies_in=copies_in, copies_out=copies_out,
                           pool_bytes=pool, pool_offset=arena_pool_offset(arena_bytes))
        return Lowered(module=module, symbol=prefix, code=code, workspace_bytes=pool,
                       interface_header=self.interface_header(env, module, "graph executor, lowered to C"),
                       notes=[note + f"; {len(params)} params in flash"], memory_plan=memory.to_json(),
                       planned_scratch=scratch is not None,
                       buffers=[("the arena", arena_bytes, "ram"),
                                ("the weights", sum(p.nbytes for p in params), "flash")])


@dataclass
class _Step:
    kind: str  # packed | copy
    node: Node
    inputs: list[int]
    outputs: list[int]


@dataclass
class _Steps:
    """The calls of the lowered executor in order, and which entries share one buffer (a `__nop`
    output is its input's bytes under another shape)."""

    calls: list[_Step]
    alias: dict[int, int]  # entry -> the entry whose buffer it uses


def _steps(graph: Graph, param_entries: set[int]) -> _Steps:
    calls: list[_Step] = []
    alias: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            continue
        ins = [graph.entry_id(i, k) for i, k in node.inputs]
        outs = [graph.entry_id(nid, k) for k in range(node.num_outputs)]
        if node.func_name == "__nop" and ins[0] not in param_entries:
            alias[outs[0]] = alias.get(ins[0], ins[0])
        elif node.func_name in ("__nop", "__copy"):
            calls.append(_Step("copy", node, ins[:1], outs[:1]))
        else:
            calls.append(_Step("packed", node, ins, outs))
    return _Steps(calls, alias)


def _tensor_buffer(steps: _Steps, eid: int) -> str:
    return f"e{steps.alias.get(eid, eid)}"


def _scratch_per_function(module: Module, root: Path, steps: _Steps,
                          include_dirs: tuple[Path, ...] = ()) -> dict[str, int] | None:
    """Scratch bytes per operator function, or None when they are not proven from the C code (then
    the operators share a pool beside the arena, as TVM's metadata sizes it)."""
    scratch, _ = operator_scratch(module, root, include_dirs)
    if scratch is None:
        return None
    called = {step.node.func_name for step in steps.calls if step.kind == "packed"}
    if allocation_sites(module, root, include_dirs) and not called <= set(scratch):
        return None
    return scratch


def _plan(graph: Graph, steps: _Steps, param_entries: set[int], input_entries: list[int],
          scratch: dict[str, int] | None) -> MemoryPlan:
    """Every tensor that is not a weight is live from the step that writes it to the last step that
    reads it; inputs for the whole run (repeated runs, MLPerf's `infer N W`, read the input the host
    loaded) and outputs to the end (the host reads them afterwards). Each operator's scratch is live
    during its own step. All of them go into one arena (mlfbuild/project/memory_plan.py)."""
    last_step = max(len(steps.calls) - 1, 0)
    spans: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}

    def touch(eid: int, step: int) -> None:
        if eid in param_entries:
            return
        name = _tensor_buffer(steps, eid)
        span = spans.setdefault(name, [step, step])
        span[0], span[1] = min(span[0], step), max(span[1], step)
        sizes[name] = max(sizes.get(name, 0), graph.entries[eid].nbytes)

    for eid in input_entries:
        touch(eid, 0)
        touch(eid, last_step)
    buffers = []
    for index, step in enumerate(steps.calls):
        for eid in step.inputs + step.outputs:
            touch(eid, index)
        size = (scratch or {}).get(step.node.func_name, 0) if step.kind == "packed" else 0
        if size:
            buffers.append(Buffer(f"scratch{index}", size, index, index))
    for nid, k in graph.heads:
        eid = graph.entry_id(nid, k)
        touch(eid, last_step)
    buffers += [Buffer(name, sizes[name], first, last) for name, (first, last) in spans.items()]
    return plan_memory(sorted(buffers, key=lambda b: (b.first, b.name)), WORKSPACE_ALIGNMENT)


def _defines_linked_params(module: Module, root: Path) -> bool:
    if any("_lookup_linked_param" in o.symbols for o in module.objects):
        return True
    return any("_lookup_linked_param(" in (root / rel).read_text(errors="replace") for rel in module.sources)
