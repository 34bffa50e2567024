"""The graph executor's one-arena memory plan: the packer, the scratch read from generated C, and a
replay of every graph fixture's plan against its own graph (independent of the planner's code)."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlfbuild.mlf.reader import read_mlf
from mlfbuild.project import render_project
from mlfbuild.boards import load_board
from mlfbuild.project.lowering.base import operator_scratch
from mlfbuild.project.memory_plan import Buffer, floor_bytes, plan_memory

GRAPH_FIXTURES = ["tvm-0.13/kws_graph_c", "tvm-0.13/kws_graph_c_linkparams", "tvm-0.13/mlp_graph_c",
                  "tvm-0.13/cnn_graph_c_cm4_linkparams", "tvm-0.18/kws_graph_c", "tvm-0.8/kws_graph_c",
                  "tvm-0.8/kws_graph_c_linkparams", "tvm-0.8/cnn_graph_c", "tvm-0.8/mlp_graph_c",
                  "tvm-0.8/mlp_graph_c_linkparams"]

# RAM of each graph fixture's model (arena + scratch pool, bytes) with TVM's storage plan laid out as
# one arena beside a separate scratch pool, as mlfbuild built them before the integrated plan.
STORAGE_PLAN_RAM = {"tvm-0.13/kws_graph_c": 105_936, "tvm-0.13/kws_graph_c_linkparams": 106_064,
                    "tvm-0.13/mlp_graph_c": 640, "tvm-0.13/cnn_graph_c_cm4_linkparams": 34_595,
                    "tvm-0.18/kws_graph_c": 105_936, "tvm-0.8/kws_graph_c": 169_952,
                    "tvm-0.8/kws_graph_c_linkparams": 172_232, "tvm-0.8/cnn_graph_c": 42_832,
                    "tvm-0.8/mlp_graph_c": 640, "tvm-0.8/mlp_graph_c_linkparams": 800}


def replay(plan) -> list[tuple[str, str]]:
    """Pairs of buffers live at one step whose bytes overlap, found by brute force over every byte
    range at every step (a second opinion on MemoryPlan.conflicts)."""
    bad = []
    for a_index, a in enumerate(plan.buffers):
        for b in plan.buffers[a_index + 1:]:
            if not (a.size and b.size and a.first <= b.last and b.first <= a.last):
                continue
            a0, b0 = plan.offsets[a.name], plan.offsets[b.name]
            if a0 < b0 + b.size and b0 < a0 + a.size:
                bad.append((a.name, b.name))
    return bad


# --- the packer ------------------------------------------------------------------------------------

def test_scratch_shares_bytes_with_dead_activations():
    # step 0: in -> t (scratch 100); step 1: t -> out (scratch 300). `in` is dead at step 1.
    buffers = [Buffer("in", 64, 0, 0), Buffer("t", 64, 0, 1), Buffer("out", 64, 1, 1),
               Buffer("s0", 100, 0, 0), Buffer("s1", 300, 1, 1)]
    plan = plan_memory(buffers)
    assert plan.floor_bytes == 64 + 64 + 304
    assert plan.arena_bytes == plan.floor_bytes
    assert replay(plan) == [] and plan.conflicts() == []


def test_replay_finds_an_overlap():
    plan = plan_memory([Buffer("a", 32, 0, 1), Buffer("b", 32, 1, 2)])
    plan.offsets["b"] = plan.offsets["a"] + 16
    assert replay(plan) == [("a", "b")] and plan.conflicts() == [("a", "b")]


def test_plan_is_deterministic():
    buffers = [Buffer(f"b{i}", (i * 37) % 200 + 1, i % 5, i % 5 + i % 3) for i in range(40)]
    first = plan_memory(buffers)
    assert plan_memory(list(reversed(buffers))).offsets == first.offsets


def test_bad_buffers_are_refused():
    with pytest.raises(ValueError):
        plan_memory([Buffer("a", 1, 2, 1)])
    with pytest.raises(ValueError):
        plan_memory([Buffer("a", 1, 0, 0), Buffer("a", 2, 0, 0)])


buffer_lists = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 20), st.integers(0, 6)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(buffer_lists)
@example([(10, 0, 0), (10, 0, 0), (0, 0, 3)])
@example([(16, 0, 2), (1, 1, 0), (32, 2, 1), (17, 1, 0)])
def test_any_plan_replays_clean_and_reaches_at_least_the_floor(items):
    buffers = [Buffer(f"b{i}", size, first, first + length) for i, (size, first, length) in enumerate(items)]
    plan = plan_memory(buffers)
    assert replay(plan) == [] and plan.conflicts() == []
    assert all(offset % 16 == 0 for offset in plan.offsets.values())
    assert plan.floor_bytes == floor_bytes(buffers, 16) <= plan.arena_bytes
    assert all(plan.offsets[b.name] + b.size <= plan.arena_bytes for b in buffers)


# --- scratch read from the generated C -------------------------------------------------------------

def test_scratch_is_the_lifo_peak_of_each_function(fixtures_dir, tmp_path):
    lib = read_mlf(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", tmp_path / "x")
    scratch, why = operator_scratch(lib.modules[0], lib.root)
    assert not why
    # TVM's metadata: 56,192 B for the depthwise conv (24,192 + 32,000 held together); the 16,256 B
    # of the others include 256 B that the C code keeps on the stack, not in the workspace.
    conv1 = next(name for name in scratch if name.endswith("cast_cast_subtract_1"))
    assert scratch[conv1] == 24_192 + 32_000
    assert sorted(v for v in scratch.values() if v) == [1_392, 16_000, 16_000, 56_192]


_ALLOCATING = """#include <tvm/runtime/c_backend_api.h>
int32_t f(void* args, int32_t n) {
  void* a = TVMBackendAllocWorkspace(1, 0, (uint64_t)10, 0, 8);
  if (a == NULL) { return -1; }
  void* b = TVMBackendAllocWorkspace(1, 0, (uint64_t)40, 0, 8);
  %s
  TVMBackendFreeWorkspace(1, 0, b);
  TVMBackendFreeWorkspace(1, 0, a);
  for (int32_t i = 0; i < 4; ++i) {
    void* c = TVMBackendAllocWorkspace(1, 0, (uint64_t)100, 0, 8);
    TVMBackendFreeWorkspace(1, 0, c);
  }
  return 0;
}
int32_t g(void* args) {
  void* held = TVMBackendAllocWorkspace(1, 0, (uint64_t)64, 0, 8);
  int32_t status = f(args, 3);
  TVMBackendFreeWorkspace(1, 0, held);
  return status;
}
"""


@pytest.mark.parametrize("middle, peaks", [
    ("", {"f": 112, "g": 64 + 112}),  # blocks round up to 16 B; a callee's peak counts on top of what is held
    ("if (n > 2) { void* d = TVMBackendAllocWorkspace(1, 0, (uint64_t)n * 4, 0, 8); "
     "TVMBackendFreeWorkspace(1, 0, d); }", None),  # n is any int32: no bound
    ("if (n > 2) { TVMBackendFreeWorkspace(1, 0, a); }", None),  # not the last block
    ("if (n > 2) { void* d = TVMBackendAllocWorkspace(1, 0, (uint64_t)8, 0, 8); }", None),  # paths differ
])
def test_the_allocator_peak_is_proven_on_every_path_or_not_known(middle, peaks):
    from mlfbuild.canalysis.allocator import allocation_peaks

    found, why = allocation_peaks({"lib.c": _ALLOCATING % middle})
    assert found == peaks and (bool(why) == (peaks is None))


# --- every graph fixture: the lowered plan replayed against the graph ------------------------------

def _live_steps(graph, param_entries: set[int]):
    """Independent liveness: for each entry, the indices of the calls that write and read it, with
    `__nop` outputs followed back to the bytes they alias."""
    calls, alias = [], {}
    for nid, node in enumerate(graph.nodes):
        if node.op == "null":
            continue
        ins = [graph.entry_id(i, k) for i, k in node.inputs]
        outs = [graph.entry_id(nid, k) for k in range(node.num_outputs)]
        if node.func_name == "__nop" and ins[0] not in param_entries:
            alias[outs[0]] = alias.get(ins[0], ins[0])
            continue
        calls.append((node, ins, outs))
    return calls, alias


@pytest.mark.cross
@pytest.mark.parametrize("name", GRAPH_FIXTURES)
def test_graph_fixture_plan_replays(fixtures_dir, tmp_path, name):
    lib = read_mlf(fixtures_dir / f"{name}.tar", tmp_path / "x")
    project = render_project(lib, load_board("mps2-an386"), tmp_path / "p")
    lowered = project.lowered[0]
    module, plan = lowered.module, lowered.memory_plan
    graph = module.graph
    code = lowered.code
    prefix = f"mlf_{module.name}"
    # Where the emitted C puts each entry and each call's scratch region.
    where = {int(eid): int(off) for eid, off in
             re.findall(rf"DLTensor {prefix}_e(\d+) = {{ \(void\*\)&{prefix}_arena\[(\d+)\]", code)}
    regions = [(int(off), int(size)) for off, size in
               re.findall(rf"mlfrt_workspace_region\(&{prefix}_arena\[(\d+)\], (\d+)u\)", code)]
    header = (tmp_path / "p" / "include" / f"mlf_{module.name}.h").read_text()
    arena = int(re.search(rf"#define MLF_{module.name.upper()}_ARENA_BYTES (\d+)", header).group(1))
    assert arena == lowered.arena_bytes == plan["arena_bytes"] + (lowered.workspace_bytes and
                                                               arena - plan["arena_bytes"])
    assert plan["arena_bytes"] >= plan["floor_bytes"]
    param_entries = {eid for eid in range(len(graph.entries)) if eid not in where}
    calls, alias = _live_steps(graph, param_entries)
    inputs = {graph.entry_id(nid, 0) for nid in graph.arg_nodes} - param_entries
    outputs = {graph.entry_id(nid, k) for nid, k in graph.heads} - param_entries
    last_read = {}
    for index, (_, ins, _) in enumerate(calls):
        for eid in ins:
            last_read[alias.get(eid, eid)] = index
    written_at = {alias.get(eid, eid): index for index, (_, _, outs) in enumerate(calls) for eid in outs}
    for eid in inputs:
        written_at[alias.get(eid, eid)] = -1
    end = len(calls)
    for eid in outputs:
        last_read[alias.get(eid, eid)] = end
    for eid in inputs:
        last_read[alias.get(eid, eid)] = end

    def span(eid):
        return where[eid], where[eid] + graph.entries[eid].nbytes

    region_iter = iter(regions)
    scratch, _ = operator_scratch(module, lib.root)
    for index, (node, ins, outs) in enumerate(calls):
        # What this call writes: its outputs and its scratch region.
        writes = [span(eid) for eid in outs if eid in where]
        if node.func_name not in ("__copy", "__nop") and scratch.get(node.func_name):
            writes.append(next(region_iter))
            assert writes[-1][1] == scratch[node.func_name]
            writes[-1] = (writes[-1][0], writes[-1][0] + writes[-1][1])
        # What must survive it: every buffer written before and read at or after this call.
        keep = [span(eid) for eid in where if alias.get(eid, eid) == eid
                and written_at.get(eid, end + 1) < index and last_read.get(eid, -1) >= index]
        for low, high in writes:
            for keep_low, keep_high in keep:
                assert high <= keep_low or keep_high <= low, f"{name}: call {index} ({node.name}) overwrites live bytes"
    assert next(region_iter, None) is None
    # Never worse than TVM's storage plan beside a separate scratch pool.
    assert plan["arena_bytes"] + lowered.workspace_bytes <= STORAGE_PLAN_RAM[name]


@pytest.mark.cross
def test_kws_arena_is_the_floor(fixtures_dir, tmp_path):
    lib = read_mlf(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", tmp_path / "x")
    lowered = render_project(lib, load_board("mps2-an386"), tmp_path / "p").lowered[0]
    # 88,192 B is the most live at once with the input dead after the first operator; the firmware
    # keeps the 490 B input (496 aligned) for repeated runs, so its floor is 88,688 B.
    assert lowered.memory_plan["floor_bytes"] == 88_192 + 496
    assert lowered.memory_plan["arena_bytes"] == lowered.memory_plan["floor_bytes"]
    assert lowered.workspace_bytes == 0 and lowered.planned_scratch
