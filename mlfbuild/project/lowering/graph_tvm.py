"""Graph executor run by TVM's own CRT graph executor (`--runtime tvm`).

Nothing is planned at build time: the graph JSON and the params blob are embedded verbatim as const
arrays, and the firmware does what TVM's apps/bundle_deploy does (`bundle_static.c`). At the first
run: TVMInitializeRuntime, runtime.SystemLib, TVMGraphExecutor_Create, LoadParams (skipped when the
weights are linked into the code: the executor then takes them from _lookup_linked_param). Every run:
SetInput (the executor reads the input in place from the mlf_tensor_t buffer), Run, GetOutput into
the output buffers. The default graph lowering (graph.py) is untouched.

Memory: everything the executor allocates (node table, parameter copies, activation storage, the
kernels' TVMBackendAllocWorkspace calls) comes from TVM's page allocator (256-B pages) over the
firmware's workspace pool, whose size this lowering returns. TVM's page allocator hands out the first
free block that is large enough, whole, never coalesces, and keeps 88 B of bookkeeping per page, so
the pool is sized from an estimate of the live peak:

  live = graph JSON (copied during Create) + 2 304 B per node (executor state, see NODE_STATE_BYTES)
         + activation storage (per storage id: page-rounded data + a shape block)
         + 2 x parameters (SetupStorage allocates them, LoadParams frees and allocates them again)
         + the largest operator workspace (metadata operator_functions)
  pool = live x 1.25 x (256 + 88) / 256 + 4 KiB, rounded up to 1 KiB

Calibrated on TVM 0.13's CRT with the shared fixtures, whose smallest working pools (what the
firmware reports as the workspace peak) are kws 445 908 B (pool 699 392), kws link-params 194 788 B
(259 072), cnn link-params 75 764 B (104 448), mlp 47 556 B (89 088); on the 64-bit host kws needs
449 432 B. docs/tvm-runtime-footprint.md explains why the page allocator needs about twice the live
bytes it hands out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidInputError
from ...mlf.model import Module
from ..ctext import c_string_body
from .base import CTensor, Lowered, Lowering
from .graph import _defines_linked_params, _initializer

FRAGMENTATION_MARGIN_PERCENT = 125
# Executor state per graph node (graph_executor.c, load_json.c): its TVMGraphExecutorNode (364 B on
# 32-bit), TVMPackedFunc (472 B), inputs list, per-entry NDArray view and its shape block, attributes.
NODE_STATE_BYTES = 2304
PAGE_BYTES, PAGE_METADATA_BYTES = 256, 88


@dataclass
class _Io(CTensor):
    graph_name: str = ""  # the graph's input node name (SetInput looks it up)
    c_name: str = ""  # its field in struct tvmgen_<mod>_inputs/outputs


def _c_string(text: str) -> str:
    """The graph JSON as a C string literal, one source line per JSON line (readable, verbatim)."""
    lines = ['  "' + c_string_body(line) + '"' for line in text.splitlines(keepends=True)]
    return "\n".join(lines) or '  ""'


class GraphTvmExecutor(Lowering):
    template = "graph_tvm.c.j2"

    def applies(self, module: Module) -> bool:
        return module.executor == "graph"

    def lower(self, module: Module, root: Path, env, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        graph = module.graph
        if graph is None or module.graph_path is None:
            raise InvalidInputError(f"{module.name}: graph executor module without a graph")
        prefix = f"mlf_{module.name}"
        json_text = (root / module.graph_path).read_bytes().decode("utf-8", errors="replace")
        # Nothing to load when the weights are in the code: TVM 0.8 link-params (the executor gets them
        # from _lookup_linked_param; the params file is a copy) or an empty params container (0.9+).
        linked = _defines_linked_params(module, root) or not module.params
        blob = b""
        if not linked and module.params_path is not None:
            blob = (root / module.params_path).read_bytes()
        param_names = set(module.params)
        input_nodes = [nid for nid in graph.arg_nodes if graph.nodes[nid].name not in param_names]
        if len(input_nodes) != len(module.inputs):
            raise InvalidInputError(f"{module.name}: the graph has {len(input_nodes)} input(s) that are not parameters, "
                                    f"the metadata lists {len(module.inputs)}")

        def tensor(eid: int, spec, graph_name: str = "") -> _Io:
            entry = graph.entries[eid]
            return _Io(name=spec.name, dtype=entry.dtype, shape=tuple(entry.shape), nbytes=entry.nbytes,
                       data="", graph_name=graph_name, c_name=spec.c_name)

        inputs = [tensor(graph.entry_id(nid, 0), spec, graph.nodes[nid].name)
                  for nid, spec in zip(input_nodes, module.inputs)]
        outputs = [tensor(graph.entry_id(nid, k), spec) for (nid, k), spec in zip(graph.heads, module.outputs)]

        pool, live = pool_estimate(module, len(json_text.encode()), linked)
        code = self.render(env, m=module, prefix=prefix,
                           graph_source=module.graph_path, params_source=module.params_path,
                           json_literal=_c_string(json_text), json_bytes=len(json_text.encode()),
                           params=_initializer(blob) if blob else "", params_bytes=len(blob), linked=linked,
                           pool=pool, live=live, inputs=inputs, outputs=outputs)
        buffers = [("the graph JSON", len(json_text.encode()), "flash"), ("the params blob", len(blob), "flash")]
        return Lowered(module=module, symbol=prefix, code=code, workspace_bytes=pool, buffers=buffers,
                       interface_header=self.interface_header(env, module, "graph executor, TVM's CRT"), notes=[
            f"{module.name}: TVM's graph executor, created at the first run, over a page-allocator pool of {pool} B "
            f"(estimated live peak {live} B + {FRAGMENTATION_MARGIN_PERCENT - 100} % for fragmentation + page bookkeeping); "
            f"graph JSON {len(json_text.encode())} B and params {len(blob)} B in flash, "
            + ("weights linked into the code (no LoadParams)" if linked else "LoadParams copies the weights to RAM")])


def _pages(nbytes: int) -> int:
    return -(-nbytes // PAGE_BYTES) * PAGE_BYTES


def pool_estimate(module: Module, json_bytes: int, linked: bool) -> tuple[int, int]:
    """(pool bytes, estimated live bytes) for TVM's page allocator running this graph."""
    graph = module.graph
    param_ids = {graph.entries[graph.entry_id(nid, 0)].storage_id for nid in graph.arg_nodes
                 if graph.nodes[nid].name in module.params}
    # Every storage id gets an NDArray (data + a shape block); parameter storage is freed and
    # allocated again by LoadParams, so parameters count twice.
    activations = sum(_pages(size) + PAGE_BYTES for sid, size in graph.storage_sizes().items() if sid not in param_ids)
    params = 0 if linked else sum(_pages(p.nbytes) + PAGE_BYTES for p in module.params.values())
    workspace = max((op.workspace_size_bytes for op in module.operators), default=0)
    live = json_bytes + NODE_STATE_BYTES * len(graph.nodes) + activations + 2 * params + workspace
    pool = live * FRAGMENTATION_MARGIN_PERCENT // 100 * (PAGE_BYTES + PAGE_METADATA_BYTES) // PAGE_BYTES + 4096
    return -(-pool // 1024) * 1024, live
