"""Graph executor lowered at build time: the graph JSON becomes straight-line C.

TVM's storage plan is kept (entries sharing a storage id share bytes), laid out as offsets in one
arena; parameters become const arrays in flash that the operators read in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidInputError
from ...mlf.graph import Graph
from ...mlf.model import Module
from .base import WORKSPACE_ALIGNMENT, CTensor, Lowered, Lowering, _align, workspace_with_slack


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

    def lower(self, module: Module, root: Path, env) -> Lowered:
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

        input_entries = {graph.entry_id(nid, 0) for nid in graph.arg_nodes if nid not in param_nodes}
        slots, offsets, arena_bytes = self._plan(graph, set(param_symbols), input_entries)
        entries: dict[int, _Entry] = {}

        def entry(eid: int) -> _Entry:
            if eid not in entries:
                e = graph.entries[eid]
                data = (f"(void*){param_symbols[eid]}" if eid in param_symbols
                        else f"(void*)&{prefix}_arena[{offsets[slots[eid]]}]")
                entries[eid] = _Entry(name=f"e{eid}", dtype=e.dtype, shape=tuple(e.shape), nbytes=e.nbytes, data=data, id=eid)
            return entries[eid]

        calls, functions, max_args = [], [], 0
        for nid, node in enumerate(graph.nodes):
            if node.op == "null":
                continue
            ins = [graph.entry_id(i, k) for i, k in node.inputs]
            outs = [graph.entry_id(nid, k) for k in range(node.num_outputs)]
            if node.func_name in ("__nop", "__copy"):
                src, dst = entry(ins[0]), entry(outs[0])
                if src.data != dst.data:
                    calls.append({"kind": "copy", "node": node.name, "function": node.func_name,
                                  "src": src.data, "dst": dst.data, "nbytes": min(src.nbytes, dst.nbytes)})
                continue
            for eid in ins + outs:
                entry(eid)
            calls.append({"kind": "packed", "node": node.name, "function": node.func_name, "entries": ins + outs})
            if node.func_name not in functions:
                functions.append(node.func_name)
            max_args = max(max_args, len(ins) + len(outs))

        inputs = [entry(graph.entry_id(nid, 0)) for nid in graph.arg_nodes if nid not in param_nodes]
        outputs = [entry(graph.entry_id(nid, k)) for nid, k in graph.heads]
        for tensor, spec in zip(inputs, module.inputs):
            tensor.name = spec.name
        output_views = [_Entry(name=spec.name, dtype=e.dtype, shape=e.shape, nbytes=e.nbytes, data=e.data, id=e.id)
                        for e, spec in zip(outputs, module.outputs)]

        code = self.render(env, m=module, prefix=prefix, symbol=f"mlf_model_{module.name}",
                           graph_source=module.graph_path, functions=functions, storage=offsets,
                           arena_bytes=arena_bytes, params=params, params_bytes=sum(p.nbytes for p in params),
                           entries=sorted(entries.values(), key=lambda e: e.id), calls=calls, max_args=max_args,
                           linked=linked, linked_ids={item["entry"] for item in linked},
                           inputs=inputs, outputs=output_views)
        workspace = max((op.workspace_size_bytes for op in module.operators), default=0)
        return Lowered(module=module, symbol=f"mlf_model_{module.name}", code=code,
                       workspace_bytes=workspace_with_slack(workspace, module, root),
                       notes=[f"arena {arena_bytes} B for {len(offsets)} storage ids; {len(params)} params in flash"],
                       buffers=[("the activation arena", arena_bytes, "ram"),
                                ("the weights", sum(p.nbytes for p in params), "flash")])

    @staticmethod
    def _plan(graph: Graph, param_entries: set[int], input_entries: set[int]) -> tuple[dict[int, int], dict[int, int], int]:
        """Arena layout: (entry → slot, slot → offset, arena bytes). Slots are TVM's storage ids,
        sized from the graph itself (the metadata's `sids` under-reports shared storage). An input
        whose storage TVM lets a later entry reuse gets a slot of its own, so that repeated runs
        (MLPerf's `infer N W`) see the input the host loaded."""
        users: dict[int, list[int]] = {}
        for eid, e in enumerate(graph.entries):
            if eid not in param_entries:
                users.setdefault(e.storage_id, []).append(eid)
        slots: dict[int, int] = {}
        for sid, eids in users.items():
            for eid in eids:
                shared_input = eid in input_entries and len(eids) > 1
                slots[eid] = -1 - eid if shared_input else sid
        sizes: dict[int, int] = {}
        for eid, slot in slots.items():
            sizes[slot] = max(sizes.get(slot, 0), graph.entries[eid].nbytes)
        offsets, cursor = {}, 0
        for slot in sorted(sizes, key=lambda s: (s < 0, abs(s))):
            offsets[slot] = cursor
            cursor = _align(cursor + sizes[slot], WORKSPACE_ALIGNMENT)
        return slots, offsets, cursor


def _defines_linked_params(module: Module, root: Path) -> bool:
    if any("_lookup_linked_param" in o.symbols for o in module.objects):
        return True
    return any("_lookup_linked_param(" in (root / rel).read_text(errors="replace") for rel in module.sources)
