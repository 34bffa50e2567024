"""mlfbuild.mlf.graph: graph-executor JSON — real files, every check, fuzzing."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlfbuild.errors import EXIT_INVALID_INPUT, GraphError
from mlfbuild.mlf.graph import Entry, Graph, Node, read_graph
from mlfbuild.mlf.params import read_params

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- helpers ----------------------------------------------------------------------------------------

def tar_members(tar_path: Path, suffix: str) -> dict[str, bytes]:
    with tarfile.open(tar_path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile() and m.name.endswith(suffix)}


def fixture_graphs(fixtures_dir: Path) -> list[tuple[Path, str, bytes]]:
    """(tarball, member, graph bytes) for every graph-executor config in the fixture sets."""
    found = []
    for tar_path in sorted(fixtures_dir.glob("tvm-*/*.tar")):
        for member, data in tar_members(tar_path, "").items():
            if member.startswith("./executor-config/graph/") or member.startswith("executor-config/graph/"):
                found.append((tar_path, member, data))
    return found


def manifest_entry(tar_path: Path) -> dict:
    manifest = json.loads((tar_path.parent / "manifest.json").read_text())
    return next(f for f in manifest["fixtures"] if f["file"] == tar_path.name)


def metadata_sids(tar_path: Path) -> list[dict]:
    (raw,) = tar_members(tar_path, "metadata.json").values()
    meta = json.loads(raw)
    memory = meta["memory"] if "memory" in meta else next(iter(meta["modules"].values()))["memory"]
    return memory["sids"]


def small_graph() -> dict:
    """x, w -> k0 (2 outputs) -> k1; outputs k1:0 and k0:1; entry 4 shares storage 2 with entry 2."""
    return {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "null", "name": "w", "inputs": []},
            {"op": "tvm_op", "name": "k0", "attrs": {"func_name": "tvmgen_default_k0", "num_inputs": "2",
                                                      "num_outputs": "2", "flatten_data": "0", "hash": "ab12",
                                                      "data_layout": "NHWC"},
             "inputs": [[0, 0, 0], [1, 0, 0]]},
            {"op": "tvm_op", "name": "k1", "attrs": {"func_name": "tvmgen_default_k1", "num_inputs": "2",
                                                      "num_outputs": "1", "flatten_data": "0"},
             "inputs": [[2, 0, 0], [2, 1, 0]]},
        ],
        "arg_nodes": [0, 1],
        "heads": [[3, 0, 0], [2, 1, 0]],
        "attrs": {
            "dltype": ["list_str", ["int8", "int8", "int32", "float32", "int8"]],
            "shape": ["list_shape", [[1, 4], [4, 4], [1, 4], [1, 4], [1, 4]]],
            "storage_id": ["list_int", [0, 1, 2, 3, 2]],
            "device_index": ["list_int", [1, 1, 1, 1, 1]],
        },
        "node_row_ptr": [0, 1, 2, 4, 5],
        "metadata": {"anything": "tolerated"},
    }


def changed(edit: Callable[[dict], Any]) -> str:
    """small_graph() with `edit` applied to it, as JSON text."""
    graph = small_graph()
    edit(graph)
    return json.dumps(graph)


def _set(path: tuple, value: Any) -> Callable[[dict], None]:
    def edit(g):
        target = g
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _delete(path: tuple) -> Callable[[dict], None]:
    def edit(g):
        target = g
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


def rejects(text: str | bytes, *fragments: str, source: str = "g.graph") -> str:
    """read_graph must raise GraphError with a one-line message holding every fragment."""
    with pytest.raises(GraphError) as info:
        read_graph(text, source=source)
    message = str(info.value)
    assert "\n" not in message and len(message.splitlines()) == 1, message
    assert message.startswith(f"{source}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert info.value.exit_code == EXIT_INVALID_INPUT
    return message


def check_outcome(text: str | bytes) -> None:
    """Fuzz oracle: GraphError (one line), or a Graph whose helpers all work."""
    try:
        graph = read_graph(text)
    except GraphError as exc:
        assert len(str(exc).splitlines()) == 1
        return
    assert len(graph.node_row_ptr) == len(graph.nodes) + 1 and graph.node_row_ptr[-1] == len(graph.entries)
    for nid, node in enumerate(graph.nodes):
        for src, index in node.inputs:
            assert src < nid and graph.entry_id(src, index) < len(graph.entries)
    graph.output_entries()
    graph.storage_sizes()
    graph.input_names(set())
    assert len(graph.kernel_nodes()) == len(graph.kernel_node_ids())
    for nid in graph.arg_nodes:
        assert graph.nodes[nid].op == "null"


# --- real files -------------------------------------------------------------------------------------

def test_every_fixture_graph_parses(fixtures_dir):
    graphs = fixture_graphs(fixtures_dir)
    versions = {tar.parent.name for tar, _, _ in graphs}
    assert len(graphs) >= 11 and versions == {"tvm-0.8", "tvm-0.13", "tvm-0.18"}
    for tar_path, member, data in graphs:
        where = f"{tar_path.name}:{member}"
        entry = manifest_entry(tar_path)
        assert entry["executor"] == "graph"
        graph = read_graph(data, source=where)
        assert read_graph(data.decode("utf-8"), source=where) == graph
        check_outcome(data)
        # outputs: count, shapes and dtypes as recorded by the fixture generator
        outputs = [(tuple(o["shape"]), o["dtype"]) for o in entry["outputs"]]
        assert [(e.shape, e.dtype) for e in graph.output_entries()] == outputs, where
        # inputs: arg nodes that are neither in the params file nor linked
        (params_data,) = tar_members(tar_path, ".params").values()
        params = read_params(params_data)
        inputs = [i["name"] for i in entry["inputs"]]
        if params:
            assert graph.input_names(set(params)) == inputs, where
        for name, nid in zip(inputs, graph.arg_nodes):
            e = graph.entries[graph.entry_id(nid, 0)]
            spec = next(i for i in entry["inputs"] if i["name"] == graph.nodes[nid].name)
            assert (e.shape, e.dtype) == (tuple(spec["shape"]), spec["dtype"]), where
        # kernels: generated functions, or TVM's special no-op
        for node in graph.kernel_nodes():
            assert node.func_name.startswith("tvmgen_") or node.func_name in ("__nop", "__copy"), node.func_name
            assert not node.flatten_data and node.num_outputs >= 1
        assert all(e.device_type == 1 for e in graph.entries)


def test_v5_and_v7_mlp_graphs_are_the_same(fixtures_dir):
    (v5,) = tar_members(fixtures_dir / "tvm-0.8" / "mlp_graph_c.tar", "graph.json").values()
    (v7,) = tar_members(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar", ".graph").values()
    assert read_graph(v5) == read_graph(v7)


def test_mlp_graph_details(fixtures_dir):
    (data,) = tar_members(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar", ".graph").values()
    graph = read_graph(data)
    assert [graph.nodes[i].name for i in graph.arg_nodes] == ["x", "y", "p0", "p1", "p2", "p3"]
    assert graph.input_names({"p0", "p1", "p2", "p3"}) == ["x", "y"]
    assert [n.func_name for n in graph.kernel_nodes()] == [
        "tvmgen_default_fused_concatenate", "tvmgen_default_fused_nn_contrib_dense_pack_add_nn_relu",
        "tvmgen_default_fused_nn_contrib_dense_pack_add", "tvmgen_default_fused_nn_softmax"]
    assert graph.kernel_node_ids() == [2, 5, 8, 9]
    assert graph.nodes[5].inputs == ((2, 0), (3, 0), (4, 0))
    assert graph.heads == ((9, 0),)
    assert graph.entries[3] == Entry(shape=(4, 64, 8), dtype="float32", storage_id=3, device_type=1, nbytes=8192)
    # storage ids 2 and 5 are each reused once; here metadata's sids happen to be right
    assert graph.storage_sizes() == {s["storage_id"]: s["size_bytes"]
                                     for s in metadata_sids(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar")}


def test_storage_sizes_do_not_trust_metadata_sids(fixtures_dir):
    """§4.3 caveat: metadata sids index shapes by storage id; kws shows both under- and over-reports."""
    tar_path = fixtures_dir / "tvm-0.13" / "kws_graph_c.tar"
    (data,) = tar_members(tar_path, ".graph").values()
    graph = read_graph(data)
    sizes = graph.storage_sizes()
    sids = {s["storage_id"]: s["size_bytes"] for s in metadata_sids(tar_path)}
    assert set(sizes) == set(sids)
    assert any(sizes[k] > sids[k] for k in sids)  # metadata would under-allocate this buffer
    for e in graph.entries:
        assert sizes[e.storage_id] >= e.nbytes
    assert len(graph.entries) == 65 and len(sizes) == 56


def test_cnn_graph_has_a_nop_kernel(fixtures_dir):
    (data,) = tar_members(fixtures_dir / "tvm-0.13" / "cnn_graph_c_cm4_linkparams.tar", ".graph").values()
    graph = read_graph(data)
    assert "__nop" in [n.func_name for n in graph.kernel_nodes()]
    assert len(graph.heads) == 2 and graph.input_names(set()) == ["image"]


# --- the small hand-made graph ----------------------------------------------------------------------

def test_small_graph_parses_to_the_expected_model():
    graph = read_graph(json.dumps(small_graph()), source="small")
    assert isinstance(graph, Graph)
    assert graph.nodes[0] == Node(op="null", name="x", func_name=None, inputs=(), num_outputs=1, flatten_data=False)
    assert graph.nodes[2] == Node(op="tvm_op", name="k0", func_name="tvmgen_default_k0",
                                  inputs=((0, 0), (1, 0)), num_outputs=2, flatten_data=False)
    assert graph.arg_nodes == (0, 1) and graph.heads == ((3, 0), (2, 1))
    assert graph.node_row_ptr == (0, 1, 2, 4, 5)
    assert graph.entry_id(2, 1) == 3 and graph.entry_id(3, 0) == 4
    assert graph.entries[3] == Entry(shape=(1, 4), dtype="float32", storage_id=3, device_type=1, nbytes=16)
    assert graph.storage_sizes() == {0: 4, 1: 16, 2: 16, 3: 16}  # storage 2: max(int32[1,4], int8[1,4])
    assert graph.input_names({"w"}) == ["x"] and graph.input_names(set()) == ["x", "w"]
    assert [n.name for n in graph.kernel_nodes()] == ["k0", "k1"] and graph.kernel_node_ids() == [2, 3]
    assert graph.output_entries() == [graph.entries[4], graph.entries[3]]


def test_bytes_input_and_optional_parts():
    assert read_graph(json.dumps(small_graph()).encode()) == read_graph(json.dumps(small_graph()))
    graph = read_graph(changed(lambda g: g["attrs"].pop("device_index")))
    assert all(e.device_type is None for e in graph.entries)
    # two-element references (no version) are what older writers emit; other attrs are ignored
    graph = read_graph(changed(lambda g: (g["heads"].__setitem__(0, [3, 0]),
                                          g["attrs"].__setitem__("storage_scope", ["list_str", ["global"] * 5]))))
    assert graph.heads[0] == (3, 0)


def test_entry_id_is_range_checked():
    graph = read_graph(json.dumps(small_graph()))
    for nid, index in [(0, 1), (4, 0), (-1, 0), (2, 2)]:
        with pytest.raises(IndexError):
            graph.entry_id(nid, index)


def test_special_func_names_accepted_and_flatten_data():
    def edit(g):
        g["nodes"][3]["attrs"]["func_name"] = "__nop"
        g["nodes"][3]["attrs"]["flatten_data"] = "1"
        g["nodes"][2]["attrs"]["func_name"] = "__copy"
    graph = read_graph(changed(edit))
    assert [n.func_name for n in graph.kernel_nodes()] == ["__copy", "__nop"]
    assert graph.nodes[3].flatten_data is True


def test_bool_and_every_supported_dtype():
    for dtype, size in [("bool", 1), ("uint16", 2), ("float16", 2), ("int64", 8), ("float64", 8), ("uint64", 8)]:
        graph = read_graph(changed(lambda g: g["attrs"]["dltype"][1].__setitem__(3, dtype)))
        assert graph.entries[3].dtype == dtype and graph.entries[3].nbytes == 4 * size


def test_zero_sized_and_scalar_shapes():
    graph = read_graph(changed(_set(("attrs", "shape", 1), [[1, 4], [4, 4], [], [0, 7], [1, 4]])))
    assert graph.entries[2].shape == () and graph.entries[2].nbytes == 4
    assert graph.entries[3].shape == (0, 7) and graph.entries[3].nbytes == 0


# --- every check, by hand ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,fragments", [
    ("", ("not valid JSON",)),
    ("{", ("not valid JSON",)),
    ("{\"nodes\": [}", ("not valid JSON",)),
    ("[1, 2]", ("expected an object, got a list",)),
    ("null", ("expected an object, got null",)),
    ("\"nodes\"", ("expected an object, got a string",)),
    ("[" * 100_000 + "]" * 100_000, ("nested too deeply",)),
    ("{\"nodes\": " + "1" * 5000 + "}", ("not valid JSON",)),
    ("{\"nodes\": NaN}", ("missing 'arg_nodes'",)),
])
def test_not_json_or_not_an_object(text, fragments):
    rejects(text, *fragments)


def test_not_utf8():
    rejects(b"{\"nodes\": \"\xff\"}", "not UTF-8 text (byte 11)")
    rejects(json.dumps(small_graph()).encode("utf-16"), "not UTF-8")


def test_not_text():
    rejects(12345, "expected JSON text, got int")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"])
def test_missing_top_level_key(key):
    rejects(changed(_delete((key,))), f"top level: missing '{key}'")


@pytest.mark.parametrize("key,value,fragment", [
    ("nodes", {}, "nodes: expected a list, got an object"),
    ("nodes", "abc", "nodes: expected a list, got a string 'abc'"),
    ("nodes", [], "nodes: the graph has no nodes"),
    ("arg_nodes", 3, "arg_nodes: expected a list, got an integer 3"),
    ("heads", None, "heads: expected a list, got null"),
    ("heads", [], "heads: the graph has no outputs"),
    ("attrs", [], "attrs: expected an object, got a list"),
    ("node_row_ptr", "0,1", "node_row_ptr: expected a list"),
])
def test_top_level_types(key, value, fragment):
    rejects(changed(_set((key,), value)), fragment)


@pytest.mark.parametrize("edit,fragments", [
    (_set(("nodes", 0), "x"), ("nodes[0]: expected an object, got a string",)),
    (_delete(("nodes", 2, "op")), ("nodes[2]: missing 'op'",)),
    (_delete(("nodes", 2, "name")), ("nodes[2]: missing 'name'",)),
    (_delete(("nodes", 2, "inputs")), ("nodes[2] ('k0'): missing 'inputs'",)),
    (_set(("nodes", 2, "op"), 7), ("nodes[2].op: expected a string, got an integer 7",)),
    (_set(("nodes", 2, "name"), ["k0"]), ("nodes[2].name: expected a string, got a list",)),
    (_set(("nodes", 2, "op"), "conv2d"), ("nodes[2] ('k0').op: unknown op 'conv2d'",)),
    (_set(("nodes", 2, "inputs"), {"0": 0}), ("nodes[2] ('k0').inputs: expected a list",)),
    (_set(("nodes", 2, "attrs"), "func_name=f"), ("nodes[2] ('k0').attrs: expected an object",)),
    (_delete(("nodes", 2, "attrs")), ("nodes[2] ('k0').attrs: missing 'func_name'",)),
    (_delete(("nodes", 2, "attrs", "num_outputs")), ("missing 'num_outputs'",)),
    (_delete(("nodes", 2, "attrs", "flatten_data")), ("missing 'flatten_data'",)),
    (_set(("nodes", 2, "attrs", "func_name"), 3), ("attrs.func_name: expected a string",)),
    (_set(("nodes", 2, "attrs", "func_name"), ""), ("attrs.func_name: is empty",)),
    (_set(("nodes", 2, "attrs", "num_inputs"), 2), ("attrs.num_inputs: expected a string, got an integer 2",)),
    (_set(("nodes", 2, "attrs", "num_inputs"), "two"), ("attrs.num_inputs: expected a decimal count, got 'two'",)),
    (_set(("nodes", 2, "attrs", "num_inputs"), "-2"), ("expected a decimal count",)),
    (_set(("nodes", 2, "attrs", "num_outputs"), "9" * 5000), ("expected a decimal count",)),
    (_set(("nodes", 2, "attrs", "num_outputs"), " 2"), ("expected a decimal count",)),
    (_set(("nodes", 2, "attrs", "num_outputs"), "0"), ("a kernel needs at least 1 output",)),
    (_set(("nodes", 2, "attrs", "flatten_data"), "yes"), ("flatten_data: expected \"0\" or \"1\"",)),
    (_set(("nodes", 2, "attrs", "flatten_data"), 0), ("flatten_data: expected a string",)),
    (_set(("nodes", 2, "attrs", "num_inputs"), "3"), ("num_inputs is 3 but the node lists 2 input(s)",)),
])
def test_node_checks(edit, fragments):
    rejects(changed(edit), *fragments)


@pytest.mark.parametrize("edit,fragments", [
    (_set(("nodes", 0, "inputs"), [[1, 0, 0]]), ("nodes[0] ('x').inputs[0]", "does not come earlier")),
    (_set(("nodes", 1, "inputs"), [[0, 0, 0]]), ("nodes[1] ('w').inputs", "has 1 input(s)")),
    (_set(("nodes", 0, "attrs"), {"num_outputs": "2"}), ("an input node ('null') has exactly 1 output",)),
    (_set(("nodes", 2, "inputs", 0), [2, 0, 0]), ("inputs[0]", "refers to node 2, which does not come earlier")),
    (_set(("nodes", 2, "inputs", 0), [3, 0, 0]), ("does not come earlier",)),  # a cycle 2 <-> 3
    (_set(("nodes", 2, "inputs", 0), [99, 0, 0]), ("does not come earlier",)),
    (_set(("nodes", 2, "inputs", 0), [-1, 0, 0]), ("inputs[0][0]: -1 is out of range",)),
    (_set(("nodes", 3, "inputs", 0), [2, 2, 0]), ("nodes[3] ('k1').inputs[0]", "node 2 has 2 output(s), no output 2")),
    (_set(("nodes", 3, "inputs", 0), [0, 1, 0]), ("node 0 has 1 output(s), no output 1",)),
    (_set(("nodes", 3, "inputs", 0), [2, -1, 0]), ("inputs[0][1]: -1 is out of range",)),
    (_set(("nodes", 3, "inputs", 0), [2]), ("expected [node_id, output_index, version], got 1 item(s)",)),
    (_set(("nodes", 3, "inputs", 0), [2, 0, 0, 0]), ("got 4 item(s)",)),
    (_set(("nodes", 3, "inputs", 0), "2:0"), ("inputs[0]: expected a list, got a string",)),
    (_set(("nodes", 3, "inputs", 0), [2.0, 0, 0]), ("inputs[0][0]: expected an integer, got a number 2.0",)),
    (_set(("nodes", 3, "inputs", 0), [True, 0, 0]), ("expected an integer, got a boolean True",)),
    (_set(("nodes", 3, "inputs", 0), [2, "0", 0]), ("inputs[0][1]: expected an integer, got a string",)),
    (_set(("nodes", 3, "inputs", 0), [2, 0, None]), ("inputs[0][2]: expected an integer, got null",)),
])
def test_input_reference_checks(edit, fragments):
    rejects(changed(edit), *fragments)


@pytest.mark.parametrize("value,fragments", [
    ([0, 1, 2], ("arg_nodes[2]", "node 2 ('k0') is a kernel, not an input")),
    ([0], ("arg_nodes", "does not list input node 1 ('w')")),
    ([0, 1, 1], ("arg_nodes[2]", "lists node 1 a second time")),
    ([0, 1, 4], ("arg_nodes[2]: 4 is out of range (valid: in 0..3)",)),
    ([0, -1], ("arg_nodes[1]: -1 is out of range",)),
    ([0, "1"], ("arg_nodes[1]: expected an integer, got a string",)),
])
def test_arg_node_checks(value, fragments):
    rejects(changed(_set(("arg_nodes",), value)), *fragments)


def test_arg_node_names_must_be_unique():
    rejects(changed(_set(("nodes", 1, "name"), "x")), "arg_nodes[1]", "repeats the input name 'x'")


def test_arg_nodes_order_is_kept():
    graph = read_graph(changed(_set(("arg_nodes",), [1, 0])))
    assert graph.arg_nodes == (1, 0) and graph.input_names(set()) == ["w", "x"]


@pytest.mark.parametrize("value,fragments", [
    ([[4, 0, 0]], ("heads[0][0]: 4 is out of range",)),
    ([[3, 1, 0]], ("heads[0]", "node 3 has 1 output(s), no output 1")),
    ([[3, -1, 0]], ("heads[0][1]: -1 is out of range",)),
    ([[3, 0, 0], 7], ("heads[1]: expected a list, got an integer 7",)),
    ([[3, 0, 0, 0]], ("heads[0]: expected [node_id, output_index, version]",)),
    ([["3", 0, 0]], ("heads[0][0]: expected an integer, got a string",)),
])
def test_head_checks(value, fragments):
    rejects(changed(_set(("heads",), value)), *fragments)


@pytest.mark.parametrize("value,fragments", [
    ([0, 1, 2, 4], ("node_row_ptr: has 4 values; expected 5",)),
    ([0, 1, 2, 4, 5, 6], ("has 6 values; expected 5",)),
    ([1, 2, 3, 5, 6], ("node_row_ptr[0]: must be 0, got 1",)),
    ([0, 1, 2, 3, 4], ("node_row_ptr[3]", "node 2 ('k0') spans 1 entries (2..3) but has 2 output(s)",)),
    ([0, 1, 1, 3, 4], ("node_row_ptr[2]", "node 1 ('w') spans 0 entries",)),
    ([0, 2, 1, 3, 4], ("node_row_ptr[1]", "spans 2 entries",)),  # decreasing
    ([0, 1, 2, 4, 7], ("node_row_ptr[4]", "node 3 ('k1') spans 3 entries",)),
    ([0, 1, 2, 4, "5"], ("node_row_ptr[4]: expected an integer, got a string",)),
    ([0, 1, 2, 4, 5.0], ("node_row_ptr[4]: expected an integer, got a number",)),
    ([0, -1, 2, 4, 5], ("node_row_ptr[1]: -1 is out of range",)),
])
def test_node_row_ptr_checks(value, fragments):
    rejects(changed(_set(("node_row_ptr",), value)), *fragments)


@pytest.mark.parametrize("key", ["dltype", "shape", "storage_id"])
def test_mandatory_attrs(key):
    rejects(changed(_delete(("attrs", key))), f"attrs: missing '{key}'")


@pytest.mark.parametrize("key,value,fragments", [
    ("dltype", "float32", ("attrs.dltype: expected a list, got a string",)),
    ("dltype", ["list_str"], ("attrs.dltype: expected [\"list_str\", [...]], got a list of 1 item(s)",)),
    ("dltype", ["list_int", ["int8"] * 5], ("attrs.dltype[0]: expected type tag \"list_str\", got a string 'list_int'",)),
    ("dltype", ["list_str", "int8"], ("attrs.dltype[1]: expected a list, got a string",)),
    ("dltype", ["list_str", ["int8"] * 4], ("attrs.dltype[1]: has 4 value(s); the graph has 5 entries",)),
    ("shape", ["list_shape", [[1]] * 6], ("attrs.shape[1]: has 6 value(s)",)),
    ("storage_id", ["list_int", [0, 1, 2]], ("attrs.storage_id[1]: has 3 value(s)",)),
    ("storage_id", [None, [0, 1, 2, 3, 4]], ("attrs.storage_id[0]: expected type tag \"list_int\", got null",)),
    ("device_index", ["list_int", [1, 1]], ("attrs.device_index[1]: has 2 value(s)",)),
    ("device_index", ["list_str", ["cpu"] * 5], ("attrs.device_index[0]: expected type tag",)),
    ("device_index", ["list_int", [1, 1, 1, "1", 1]], ("attrs.device_index[1][3]: expected an integer",)),
    ("device_index", ["list_int", [1, 1, 1, -1, 1]], ("attrs.device_index[1][3]: -1 is out of range",)),
])
def test_attr_layout_checks(key, value, fragments):
    rejects(changed(_set(("attrs", key), value)), *fragments)


@pytest.mark.parametrize("dtype", ["bfloat16", "int4", "float8", "handle", "float32x4", "Int8", "", "uint1"])
def test_unsupported_dtypes(dtype):
    rejects(changed(_set(("attrs", "dltype", 1, 2), dtype)), "attrs.dltype[1][2]", "unsupported dtype")


@pytest.mark.parametrize("value,fragments", [
    (7, ("attrs.dltype[1][2]: expected a string, got an integer 7",)),
    (None, ("expected a string, got null",)),
])
def test_dtype_types(value, fragments):
    rejects(changed(_set(("attrs", "dltype", 1, 2), value)), *fragments)


@pytest.mark.parametrize("value,fragments", [
    ([1, -4], ("attrs.shape[1][2][1]: -4 is out of range",)),
    ([1, 4.0], ("attrs.shape[1][2][1]: expected an integer, got a number 4.0",)),
    ([1, "4"], ("expected an integer, got a string",)),
    ([1, True], ("expected an integer, got a boolean",)),
    ([1, [4]], ("attrs.shape[1][2][1]: expected an integer, got a list",)),
    ("1x4", ("attrs.shape[1][2]: expected a list, got a string",)),
    ([1, 2**63], ("out of range",)),
    ([1] * 33, ("33 dimensions is more than 32",)),
])
def test_shape_checks(value, fragments):
    rejects(changed(_set(("attrs", "shape", 1, 2), value)), *fragments)


@pytest.mark.parametrize("value,fragments", [
    (-1, ("attrs.storage_id[1][2]: -1 is out of range",)),
    ("2", ("attrs.storage_id[1][2]: expected an integer, got a string",)),
    (2.5, ("expected an integer, got a number 2.5",)),
])
def test_storage_id_checks(value, fragments):
    rejects(changed(_set(("attrs", "storage_id", 1, 2), value)), *fragments)


def test_all_entries_may_share_one_storage_id():
    graph = read_graph(changed(_set(("attrs", "storage_id", 1), [4] * 5)))
    assert graph.storage_sizes() == {4: 16}


def test_hostile_names_stay_on_one_line():
    name = "evil\nname\u2028\r" + "x" * 1000

    def edit(g):
        g["nodes"][2]["name"] = name
        g["nodes"][2]["op"] = "bad"
    message = rejects(changed(edit), "unknown op 'bad'")
    assert "evil\\nname" in message and len(message) < 400


def test_no_type_errors_for_special_floats():
    text = changed(_set(("arg_nodes",), [0, float("inf")]))
    assert "Infinity" in text
    rejects(text, "arg_nodes[1]: expected an integer, got a number inf")
    rejects(changed(_set(("attrs", "shape", 1, 0), [1, float("nan")])), "attrs.shape[1][0][1]: expected an integer")


# --- fuzzing ----------------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**64), st.floats(allow_nan=True),
                     st.text(max_size=8), st.sampled_from(["null", "tvm_op", "list_int", "list_str", "list_shape",
                                                           "int8", "float32", "0", "1", "2"]))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)), max_leaves=30)
_top_keys = st.sampled_from(["nodes", "arg_nodes", "heads", "attrs", "node_row_ptr", "metadata", "extra"])


@FUZZ
@given(_json)
def test_fuzz_arbitrary_json_values(value):
    check_outcome(json.dumps(value))


@FUZZ
@given(st.dictionaries(_top_keys, _json, min_size=3))
def test_fuzz_arbitrary_values_under_the_right_keys(value):
    check_outcome(json.dumps(value))


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes(data):
    check_outcome(data)


def _slots(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (to a dict value or a list item)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _slots(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _slots(item, path + (index,))
    return found


def _near(value: Any) -> st.SearchStrategy:
    """Plausible wrong values: off-by-one ints, numbers as strings, other kinds."""
    options = [_json]
    if type(value) is int:
        options.append(st.sampled_from([value - 1, value + 1, -1, 0, 2**31, value * 1000]))
        options.append(st.just(str(value)))
    if isinstance(value, str) and value.isdigit():
        options.append(st.sampled_from([str(int(value) + 1), str(max(int(value) - 1, 0)), "", "x", int(value)]))
    return st.one_of(options)


def _mutate_graph(data: st.DataObject, graph: dict) -> dict:
    graph = copy.deepcopy(graph)
    for _ in range(data.draw(st.integers(1, 3))):
        slots = _slots(graph)
        if not slots:
            break
        path = data.draw(st.sampled_from(slots))
        parent = graph
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        action = data.draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if action == "replace":
            parent[key] = data.draw(_near(parent[key]))
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = [parent[key], parent[key]]
    return graph


@FUZZ
@given(st.data())
def test_fuzz_mutations_of_the_small_graph(data):
    check_outcome(json.dumps(_mutate_graph(data, small_graph())))


_REAL: dict[Path, dict] = {}


def _real_graph(fixtures_dir: Path) -> dict:
    if fixtures_dir not in _REAL:
        (raw,) = tar_members(fixtures_dir / "tvm-0.13" / "cnn_graph_c_cm4_linkparams.tar", ".graph").values()
        _REAL[fixtures_dir] = json.loads(raw)
    return _REAL[fixtures_dir]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutations_of_a_real_graph(fixtures_dir, data):
    check_outcome(json.dumps(_mutate_graph(data, _real_graph(fixtures_dir))))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_text_mutations_of_a_real_graph(fixtures_dir, data):
    text = bytearray(json.dumps(_real_graph(fixtures_dir)).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text) - 1))
        kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        if kind == "flip":
            text[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "truncate":
            del text[pos:]
        elif kind == "insert":
            text[pos:pos] = data.draw(st.sampled_from([b"[", b"]", b"{", b"}", b",", b"0", b"-", b"\"", b"9" * 30,
                                                       b"null", b"\xff"]))
        else:
            del text[pos:pos + data.draw(st.integers(1, 8))]
        if not text:
            break
    check_outcome(bytes(text))


def test_mutation_oracle_sees_valid_graphs():
    """The fuzz oracle's success branch works on graphs that stay valid."""
    check_outcome(json.dumps(small_graph()))
