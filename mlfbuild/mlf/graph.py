"""The graph executor's config (`executor-config/graph/<mod>.graph`, v5 `graph.json`): read it safely.

The JSON is untrusted input: every field is type-checked and every index range-checked, so a
malformed or inconsistent graph is one `GraphError` with a one-line message, never a TypeError,
KeyError or IndexError. Format: the reader of TVM's
`src/runtime/graph_executor/graph_executor.h` (GraphExecutor::Load and its attribute parser).

Vocabulary: a node has `num_outputs` outputs; each output is an *entry* (entry id =
node_row_ptr[node] + output index) with a shape, dtype and storage id. Entries sharing a storage
id share one buffer, sized for the largest of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..checked import describe_value
from ..errors import GraphError
from .dtypes import DTYPE_BYTES
from .limits import (DEFAULT_MAX_GRAPH_NODES, GRAPH_BYTES_PER_NODE, MAX_BYTES, is_c_identifier, name_problem,
                     size_problem)

_TOP_LEVEL_KEYS = ("nodes", "arg_nodes", "heads", "attrs", "node_row_ptr")
_ATTR_TAGS = {"dltype": "list_str", "shape": "list_shape", "storage_id": "list_int", "device_index": "list_int"}
_NODE_OPS = ("null", "tvm_op")
_COUNT = re.compile(r"[0-9]{1,9}")
MAX_NDIM = 32
_INT64_END = MAX_BYTES + 1  # every number in a graph is an int64 in TVM


@dataclass(frozen=True)
class Entry:
    """One node output: a tensor of `shape`/`dtype` living in buffer `storage_id`."""

    shape: tuple[int, ...]
    dtype: str
    storage_id: int
    device_type: int | None  # DLPack device type from attrs.device_index, None when absent
    nbytes: int


@dataclass(frozen=True)
class Node:
    op: str  # "null" (graph input or parameter) or "tvm_op" (kernel call)
    name: str
    func_name: str | None  # None for null nodes; may be "__nop" / "__copy"
    inputs: tuple[tuple[int, int], ...]  # (node_id, output_index)
    num_outputs: int
    flatten_data: bool


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    arg_nodes: tuple[int, ...]
    heads: tuple[tuple[int, int], ...]  # (node_id, output_index), in output order
    node_row_ptr: tuple[int, ...]
    entries: tuple[Entry, ...]

    def entry_id(self, node_id: int, index: int) -> int:
        """The entry id of output `index` of node `node_id` (IndexError when there is none)."""
        if not 0 <= node_id < len(self.nodes) or not 0 <= index < self.nodes[node_id].num_outputs:
            raise IndexError(f"node {node_id} has no output {index}")
        return self.node_row_ptr[node_id] + index

    def input_names(self, params: set[str] | frozenset[str] | dict[str, Any]) -> list[str]:
        """Names of the arg nodes that are real inputs (not parameters), in arg_nodes order."""
        return [self.nodes[i].name for i in self.arg_nodes if self.nodes[i].name not in params]

    def storage_sizes(self) -> dict[int, int]:
        """{storage id: bytes}, the largest entry per storage id, ordered by storage id.

        Computed from the entries, not from metadata's `sids` (which can under-report)."""
        sizes: dict[int, int] = {}
        for entry in self.entries:
            sizes[entry.storage_id] = max(sizes.get(entry.storage_id, 0), entry.nbytes)
        return dict(sorted(sizes.items()))

    def kernel_nodes(self) -> list[Node]:
        """The tvm_op nodes, in execution (= node) order."""
        return [node for node in self.nodes if node.op == "tvm_op"]

    def kernel_node_ids(self) -> list[int]:
        """Node ids of the tvm_op nodes, in execution order (parallel to kernel_nodes())."""
        return [i for i, node in enumerate(self.nodes) if node.op == "tvm_op"]

    def output_entries(self) -> list[Entry]:
        """The entries of the graph outputs (heads), in output order."""
        return [self.entries[self.entry_id(nid, index)] for nid, index in self.heads]


def read_graph(text: str | bytes, *, source: str = "graph", max_nodes: int = DEFAULT_MAX_GRAPH_NODES) -> Graph:
    """Parse and validate graph-executor JSON of at most `max_nodes` nodes (and at most
    GRAPH_BYTES_PER_NODE bytes per allowed node). Raises GraphError."""
    return _Parser(source, max_nodes).parse(text)


class _Parser:
    def __init__(self, source: str, max_nodes: int):
        self.source = source
        self.max_nodes = max_nodes

    def fail(self, where: str, message: str) -> GraphError:
        return GraphError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")

    # --- typed access ----------------------------------------------------------------------------

    def list(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {describe_value(value)}")
        return value

    def obj(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {describe_value(value)}")
        return value

    def str(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {describe_value(value)}")
        return value

    def int(self, value: Any, where: str, *, low: int = 0, high: int = _INT64_END) -> int:
        if type(value) is not int:
            raise self.fail(where, f"expected an integer, got {describe_value(value)}")
        if value < low or high is not None and value >= high:
            valid = f"in {low}..{high - 1}" if high > low else "none (nothing to refer to)"
            shown = value if abs(value) < 10**24 else f"about {'-' if value < 0 else ''}10^{len(str(abs(value))) - 1}"
            raise self.fail(where, f"{shown} is out of range (valid: {valid})")
        return value

    def key(self, mapping: dict, key: str, where: str) -> Any:
        if key not in mapping:
            raise self.fail(where, f"missing '{key}'")
        return mapping[key]

    # --- the graph -------------------------------------------------------------------------------

    def parse(self, text: str | bytes) -> Graph:
        max_bytes = self.max_nodes * GRAPH_BYTES_PER_NODE
        if isinstance(text, (str, bytes, bytearray, memoryview)) and len(text) > max_bytes:
            raise self.fail("", f"{len(text)} bytes is more than a graph of at most {self.max_nodes} nodes may take "
                                f"({max_bytes} bytes; raise the node limit with --max-nodes)")
        root = self.obj(self.load(text), "")
        for key in _TOP_LEVEL_KEYS:
            self.key(root, key, "top level")
        raw_nodes = self.list(root["nodes"], "nodes")
        if not raw_nodes:
            raise self.fail("nodes", "the graph has no nodes")
        if len(raw_nodes) > self.max_nodes:
            raise self.fail("nodes", f"{len(raw_nodes)} nodes is more than the limit of {self.max_nodes} "
                                     "(raise it with --max-nodes)")
        nodes = tuple(self.node(raw, i) for i, raw in enumerate(raw_nodes))
        # inputs refer to earlier nodes only (topological order, hence acyclic); check output indices
        for nid, node in enumerate(nodes):
            for k, (src, index) in enumerate(node.inputs):
                if index >= nodes[src].num_outputs:
                    raise self.fail(f"nodes[{nid}] ({_quote(node.name)}).inputs[{k}]",
                                    f"node {src} has {nodes[src].num_outputs} output(s), no output {index}")

        row_ptr = self.row_ptr(root["node_row_ptr"], nodes)
        n_entries = row_ptr[-1]
        entries = self.entries(self.obj(root["attrs"], "attrs"), n_entries)
        arg_nodes = self.arg_nodes(root["arg_nodes"], nodes)
        heads = tuple(self.ref(raw, f"heads[{i}]", len(nodes), earlier=False)
                      for i, raw in enumerate(self.list(root["heads"], "heads")))
        for i, (nid, index) in enumerate(heads):
            if index >= nodes[nid].num_outputs:
                raise self.fail(f"heads[{i}]", f"node {nid} has {nodes[nid].num_outputs} output(s), no output {index}")
        if not heads:
            raise self.fail("heads", "the graph has no outputs")
        return Graph(nodes=nodes, arg_nodes=arg_nodes, heads=heads, node_row_ptr=row_ptr, entries=entries)

    def load(self, text: str | bytes) -> Any:
        try:
            if isinstance(text, (bytes, bytearray, memoryview)):
                text = bytes(text).decode("utf-8")
            if not isinstance(text, str):
                raise self.fail("", f"expected JSON text, got {type(text).__name__}")
            return json.loads(text)
        except UnicodeDecodeError as exc:
            raise self.fail("", f"not UTF-8 text (byte {exc.start})") from None
        except RecursionError:
            raise self.fail("", "not usable JSON (nested too deeply)") from None
        except ValueError as exc:  # JSONDecodeError, and Python's limit on huge integer literals
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise self.fail("", f"not valid JSON ({first})") from None

    def node(self, raw: Any, nid: int) -> Node:
        where = f"nodes[{nid}]"
        raw = self.obj(raw, where)
        op = self.str(self.key(raw, "op", where), f"{where}.op")
        name = self.str(self.key(raw, "name", where), f"{where}.name")
        where = f"nodes[{nid}] ({_quote(name)})"
        if op not in _NODE_OPS:
            raise self.fail(f"{where}.op", f"unknown op {_quote(op)} (expected 'null' or 'tvm_op')")
        problem = name_problem(name)
        if problem:
            raise self.fail(f"nodes[{nid}].name", f"{_quote(name)} {problem}")
        raw_inputs = self.list(self.key(raw, "inputs", where), f"{where}.inputs")
        inputs = tuple(self.ref(item, f"{where}.inputs[{k}]", nid, earlier=True)
                       for k, item in enumerate(raw_inputs))
        attrs = self.obj(raw.get("attrs", {}), f"{where}.attrs")
        if op == "null":
            if inputs:
                raise self.fail(f"{where}.inputs", f"an input node ('null') has {len(inputs)} input(s)")
            if "num_outputs" in attrs and self.count(attrs, "num_outputs", where) != 1:
                raise self.fail(f"{where}.attrs.num_outputs", "an input node ('null') has exactly 1 output")
            return Node(op=op, name=name, func_name=None, inputs=(), num_outputs=1, flatten_data=False)

        for key in ("func_name", "num_inputs", "num_outputs", "flatten_data"):
            self.key(attrs, key, f"{where}.attrs")
        func_name = self.str(attrs["func_name"], f"{where}.attrs.func_name")
        if not func_name:
            raise self.fail(f"{where}.attrs.func_name", "is empty")
        if not is_c_identifier(func_name):
            raise self.fail(f"{where}.attrs.func_name", f"{_quote(func_name)} is not a C identifier")
        num_inputs = self.count(attrs, "num_inputs", where)
        num_outputs = self.count(attrs, "num_outputs", where)
        flatten = self.str(attrs["flatten_data"], f"{where}.attrs.flatten_data")
        if flatten not in ("0", "1"):
            raise self.fail(f"{where}.attrs.flatten_data", f"expected \"0\" or \"1\", got {_quote(flatten)}")
        if num_inputs != len(inputs):
            raise self.fail(where, f"num_inputs is {num_inputs} but the node lists {len(inputs)} input(s)")
        if num_outputs < 1:
            raise self.fail(f"{where}.attrs.num_outputs", "a kernel needs at least 1 output")
        return Node(op=op, name=name, func_name=func_name, inputs=inputs, num_outputs=num_outputs,
                    flatten_data=flatten == "1")

    def count(self, attrs: dict, key: str, where: str) -> int:
        """A node attr holding a count; TVM writes these as decimal strings."""
        value = self.str(attrs[key], f"{where}.attrs.{key}")
        if not _COUNT.fullmatch(value):
            raise self.fail(f"{where}.attrs.{key}", f"expected a decimal count, got {_quote(value)}")
        return int(value)

    def ref(self, raw: Any, where: str, limit: int, *, earlier: bool) -> tuple[int, int]:
        """[node_id, output_index] or [node_id, output_index, version] with node_id < limit.

        `earlier`: the reference is a node input, which must name an earlier node."""
        items = self.list(raw, where)
        if len(items) not in (2, 3):
            raise self.fail(where, f"expected [node_id, output_index, version], got {len(items)} item(s)")
        if earlier and type(items[0]) is int and items[0] >= limit:
            raise self.fail(where, f"refers to node {items[0]}, which does not come earlier "
                                   "(inputs must refer to earlier nodes)")
        nid = self.int(items[0], f"{where}[0]", high=limit)
        index = self.int(items[1], f"{where}[1]")
        if len(items) == 3:
            self.int(items[2], f"{where}[2]")
        return nid, index

    def row_ptr(self, raw: Any, nodes: tuple[Node, ...]) -> tuple[int, ...]:
        values = self.list(raw, "node_row_ptr")
        if len(values) != len(nodes) + 1:
            raise self.fail("node_row_ptr", f"has {len(values)} values; expected {len(nodes) + 1} "
                                            f"(one per node, plus one)")
        row = tuple(self.int(v, f"node_row_ptr[{i}]") for i, v in enumerate(values))
        if row[0] != 0:
            raise self.fail("node_row_ptr[0]", f"must be 0, got {row[0]}")
        for nid, node in enumerate(nodes):
            span = row[nid + 1] - row[nid]
            if span != node.num_outputs:
                raise self.fail(f"node_row_ptr[{nid + 1}]",
                                f"node {nid} ({_quote(node.name)}) spans {span} entries "
                                f"({row[nid]}..{row[nid + 1]}) but has {node.num_outputs} output(s)")
        return row

    def entries(self, attrs: dict, n_entries: int) -> tuple[Entry, ...]:
        columns = {}
        for key, tag in _ATTR_TAGS.items():
            if key not in attrs:
                if key == "device_index":
                    continue
                raise self.fail("attrs", f"missing '{key}'")
            where = f"attrs.{key}"
            pair = self.list(attrs[key], where)
            if len(pair) != 2:
                raise self.fail(where, f"expected [\"{tag}\", [...]], got a list of {len(pair)} item(s)")
            if pair[0] != tag:
                raise self.fail(f"{where}[0]", f"expected type tag \"{tag}\", got {describe_value(pair[0])}")
            values = self.list(pair[1], f"{where}[1]")
            if len(values) != n_entries:
                raise self.fail(f"{where}[1]", f"has {len(values)} value(s); the graph has {n_entries} entries")
            columns[key] = values

        entries = []
        for e in range(n_entries):
            dtype = self.str(columns["dltype"][e], f"attrs.dltype[1][{e}]")
            if dtype not in DTYPE_BYTES:
                raise self.fail(f"attrs.dltype[1][{e}]", f"unsupported dtype {_quote(dtype)} "
                                f"(supported: {', '.join(DTYPE_BYTES)})")
            where = f"attrs.shape[1][{e}]"
            dims = self.list(columns["shape"][e], where)
            if len(dims) > MAX_NDIM:
                raise self.fail(where, f"{len(dims)} dimensions is more than {MAX_NDIM}")
            shape = tuple(self.int(d, f"{where}[{i}]") for i, d in enumerate(dims))
            # TVM's planner numbers storage from 0, one id at most per entry
            storage_id = self.int(columns["storage_id"][e], f"attrs.storage_id[1][{e}]", high=n_entries)
            device = (self.int(columns["device_index"][e], f"attrs.device_index[1][{e}]")
                      if "device_index" in columns else None)
            count = 1
            for dim in shape:
                count *= dim
            nbytes = count * DTYPE_BYTES[dtype]
            problem = size_problem(nbytes)
            if problem:
                raise self.fail(where, f"{dtype}{list(shape)} takes {problem}")
            entries.append(Entry(shape=shape, dtype=dtype, storage_id=storage_id, device_type=device, nbytes=nbytes))
        return tuple(entries)

    def arg_nodes(self, raw: Any, nodes: tuple[Node, ...]) -> tuple[int, ...]:
        values = self.list(raw, "arg_nodes")
        args = tuple(self.int(v, f"arg_nodes[{i}]", high=len(nodes)) for i, v in enumerate(values))
        seen: dict[str, int] = {}
        listed: set[int] = set()
        for i, nid in enumerate(args):
            node = nodes[nid]
            if nid in listed:
                raise self.fail(f"arg_nodes[{i}]", f"lists node {nid} a second time")
            listed.add(nid)
            if node.op != "null":
                raise self.fail(f"arg_nodes[{i}]", f"node {nid} ({_quote(node.name)}) is a kernel, not an input")
            if node.name in seen:
                raise self.fail(f"arg_nodes[{i}]", f"node {nid} repeats the input name {_quote(node.name)} "
                                f"(already node {seen[node.name]})")
            seen[node.name] = nid
        for nid, node in enumerate(nodes):
            if node.op == "null" and nid not in listed:
                raise self.fail("arg_nodes", f"does not list input node {nid} ({_quote(node.name)})")
        return args


def _quote(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."
