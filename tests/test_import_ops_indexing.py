"""The indexing operators (lowering/indexing.py) in the cases random draws rarely reach — gathers of
whole tensors and of single elements, broadcasts to rank 5, reversals of size-1 axes, cumulative
sums along every axis in both directions — bundled into one model per test and compared bit for bit
with LiteRT's reference kernels; and what stays refused, in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases
from conftest import cli
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import CASE_SHAPES, GraphBuilder, bundle_model

INDEXING = sorted(name for name in CASE_SHAPES if CASE_SHAPES[name][1].__module__ == "tflitecases.indexing")

_RARE = [
    ("GATHER_ND", {"input_shape": (2, 3, 4), "depth": 3, "slices": 5}),
    ("GATHER_ND", {"input_shape": (5,), "depth": 1, "indices": [[4], [0], [4]]}),
    ("GATHER_ND/int32", {"input_shape": (3, 4), "depth": 1, "indices": [[2], [2], [0], [1]]}),
    ("GATHER_ND/run_time", {"slices": 8, "params_dtype": "int16", "columns": (2, 3)}),
    ("GATHER_ND/run_time", {"slices": 3, "params_dtype": "int8", "columns": ()}),
    ("BROADCAST_TO", {"input_shape": (1,), "leading": [2, 1, 3, 2], "grown": [3]}),
    ("BROADCAST_TO/int16", {"input_shape": (3, 1, 2), "leading": [2], "grown": [3, 4, 2]}),
    ("BROADCAST_TO", {"input_shape": (2, 3), "leading": [], "grown": [2, 3]}),
    ("REVERSE_V2", {"input_shape": (2, 1, 3), "axis": 1}),
    ("REVERSE_V2/int16", {"input_shape": (4, 5), "axis": -1}),
    ("REVERSE_V2/float32", {"input_shape": (3, 2, 2, 2), "axis": 0}),
    ("SHAPE", {"input_shape": (1, 2, 3, 4)}),
    ("EMBEDDING_LOOKUP", {"ids": 8, "kind": "hybrid", "values_scale": 0.1, "columns": [2, 3]}),
    ("EMBEDDING_LOOKUP", {"ids": 1, "kind": "float32", "columns": [5]}),
    ("EMBEDDING_LOOKUP", {"ids": 6, "kind": "int8", "values_zero_point": 3, "columns": [2], "values_input": True}),
    ("EMBEDDING_LOOKUP", {"ids": 3, "kind": "hybrid", "columns": [3], "values_input": True}),
    ("EMBEDDING_LOOKUP", {"ids": 5, "kind": "int8", "values_zero_point": -20, "columns": [1, 1]}),
    ("DYNAMIC_UPDATE_SLICE", {"input_shape": (3, 4, 5), "update_shape": [2, 2, 3], "constant_start": True, "start": [-5, 100, 1]}),
    ("DYNAMIC_UPDATE_SLICE", {"input_shape": (3, 4, 5), "update_shape": [1, 3, 5], "constant_start": False}),
    ("DYNAMIC_UPDATE_SLICE/int16", {"input_shape": (2, 3), "update_shape": [2, 3], "constant_start": True, "start": [1, 1]}),
    ("DYNAMIC_UPDATE_SLICE/int32", {"input_shape": (2, 1, 3, 2), "update_shape": [1, 1, 2, 1], "constant_start": True, "start": [1, 0, 1, 1]}),
    ("BROADCAST_ARGS", {"input_shape": (1, 3), "other": [4, 2, 1]}),
    *[("CUMSUM/float32", {"input_shape": (2, 3, 4), "axis": a, "exclusive": e, "reverse": r})
      for a in (0, 1, -1) for e in (False, True) for r in (False, True)],
    ("CUMSUM/int32", {"input_shape": (3, 5), "axis": 1, "exclusive": True, "reverse": True}),
    ("CUMSUM/int32", {"input_shape": (6,), "axis": 0, "exclusive": False, "reverse": False}),
    ("SQUARE", {"input_shape": (2, 8), "squarings": 4}),
    ("FLOOR_DIV", {"input_shape": (2, 3, 4), "operand_shape": (3, 1), "constant_operand": False, "swap": True}),
    ("FLOOR_MOD", {"input_shape": (2, 3, 4), "operand_shape": (4,), "constant_operand": True, "swap": False}),
    ("FLOOR_MOD", {"input_shape": (5, 4), "operand_shape": (5, 1), "constant_operand": False, "swap": True}),
    ("FLOOR_DIV", {"input_shape": (1, 6), "operand_shape": (), "constant_operand": True, "swap": False}),
    ("L2_POOL_2D", {"input_shape": (1, 5, 6, 2), "padding": "SAME", "filter_h": 3, "filter_w": 2, "stride_h": 2,
                    "stride_w": 1, "activation": "RELU_N1_TO_1"}),
    ("L2_POOL_2D", {"input_shape": (2, 4, 4, 1), "padding": "VALID", "filter_h": 4, "filter_w": 4, "stride_h": 1,
                    "stride_w": 1, "activation": "RELU6"}),
]


@pytest.mark.cross
def test_every_indexing_case_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """Several random cases of every indexing kind."""
    cases = [name for name in INDEXING for _ in range(3)]
    model = bundle_model(np.random.default_rng(31), cases).write(tmp_path / "indexing.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


@pytest.mark.cross
def test_rare_indexing_parameters_on_the_host_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(32), _RARE).write(tmp_path / "rare.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("seed", [33, 34])
def test_indexing_cases_over_many_seeds(board, seed, cmsis_nn, tmp_path):
    cases = [name for name in INDEXING for _ in range(3)] + _RARE
    model = bundle_model(np.random.default_rng(seed), cases).write(tmp_path / "indexing.tflite")
    check_against_litert(model, board, cmsis_nn("v6.0.0"), tmp_path / board, seed=seed, samples=2)


def _one(tmp_path, build) -> str:
    graph = GraphBuilder()
    build(graph)
    return graph.write(tmp_path / "refused.tflite")


def test_gather_nd_with_indices_out_of_range_or_not_int32_at_run_time_is_refused(tmp_path):
    """A constant index past the params fails in TFLite: refused at import; indices computed at run
    time are int32 only."""
    def out_of_range(graph):
        x = graph.add_input("x", "int8", (3, 4), scale=0.1, zero_point=0)
        indices = graph.add_constant("indices", np.array([[1], [3]], np.int32))
        y = graph.add_tensor("y", "int8", (2, 4), scale=0.1, zero_point=0)
        graph.add_operator("GATHER_ND", [x, indices], [y])
        graph.mark_output(y)
    _assert_refused(_one(tmp_path, out_of_range), "operator 0 (GATHER_ND): index [3] is out of range", tmp_path / "a")

    def run_time(graph):
        x = graph.add_input("x", "int8", (3, 4), scale=0.1, zero_point=0)
        indices = graph.add_input("indices", "int16", (2, 1))
        y = graph.add_tensor("y", "int8", (2, 4), scale=0.1, zero_point=0)
        graph.add_operator("GATHER_ND", [x, indices], [y])
        graph.mark_output(y)
    _assert_refused(_one(tmp_path, run_time), "operator 0 (GATHER_ND): indices computed at run time must be int32",
                    tmp_path / "b")


def test_int8_cumsum_is_refused(tmp_path):
    """TFLM requantizes an int8 CUMSUM; LiteRT's CUMSUM has no int8 kernel to hold it to: refused."""
    def build(graph):
        x = graph.add_input("x", "int8", (2, 5), scale=0.05, zero_point=3)
        axis = graph.add_constant("axis", np.array(1, np.int32))
        y = graph.add_tensor("y", "int8", (2, 5), scale=0.2, zero_point=-4)
        graph.add_operator("CUMSUM", [x, axis], [y])
        graph.mark_output(y)
    _assert_refused(_one(tmp_path, build), "operator 0 (CUMSUM): tensor int8[2,5] 'x' is int8", tmp_path)


def test_embedding_lookup_of_a_constant_id_out_of_range_is_refused(tmp_path):
    def build(graph):
        ids = graph.add_constant("ids", np.array([0, 7], np.int32))
        rows = graph.add_input("rows", "int8", (4, 3), scale=0.1, zero_point=0)
        y = graph.add_tensor("y", "int8", (2, 3), scale=0.1, zero_point=0)
        graph.add_operator("EMBEDDING_LOOKUP", [ids, rows], [y])
        graph.mark_output(y)
    _assert_refused(_one(tmp_path, build), "operator 0 (EMBEDDING_LOOKUP): an id of", tmp_path)


@pytest.mark.parametrize("op", ["COS", "SIN"])
def test_float_cos_and_sin_are_refused(op, tmp_path):
    """newlib's cosf and sinf differ from LiteRT's (glibc's) in the last bit on the Cortex-M4."""
    def build(graph):
        x = graph.add_input("x", "float32", (4,))
        y = graph.add_tensor("y", "float32", (4,))
        graph.add_operator(op, [x], [y])
        graph.mark_output(y)
    _assert_refused(_one(tmp_path, build), f"operator 0 ({op}) is not supported", tmp_path)


def _round_and_ceil_model(path):
    """ROUND and CEIL of one float32 input (LiteRT's reference resolver has neither: the oracle is
    LiteRT's builtin kernels, TFLite's RoundToNearest and std::ceil as well)."""
    graph = GraphBuilder()
    x = graph.add_input("x", "float32", (40,))
    for op in ("ROUND", "CEIL"):
        y = graph.add_tensor(op.lower(), "float32", (40,))
        graph.add_operator(op, [x], [y])
        graph.mark_output(y)
    return graph.write(path)


_HALVES = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0, 0.0, 0.49999997, -0.49999997, 0.50000006,
                    4194303.5, 4194304.5, 8388607.5, 8388609.0, -8388607.5, 1e30, -1e30, 3.4e38, -3.4e38, 1e-37, -1e-37,
                    2.0, -2.0, 0.25, -0.75, 1.0000001, -1.0000001, 1234.5, -1234.5, 1235.5, 100.49999, 7.5, -7.5,
                    2147483520.0, -2147483648.0, 0.99999994, -0.99999994], np.float32)


@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", pytest.param("mps3-an547", marks=pytest.mark.qemu)])
def test_round_half_to_even_and_ceil_equal_litert(board, cmsis_nn, tmp_path):
    """Halves on both sides of even and odd, the edge of float32's fractions (2^22, 2^23), huge and
    tiny values, signed zeros; then random values. (Not subnormals: LiteRT's CEIL reads them as zero,
    CEIL(1e-40) = 0, where ceilf gives 1.)"""
    from mlfbuild.reference import litert

    model = _round_and_ceil_model(tmp_path / "round.tflite")
    rng = np.random.default_rng(41)
    inputs = {"x": np.stack([_HALVES, (rng.normal(0, 4, 40)).astype(np.float32)])}
    outputs = litert.run_model(model, inputs, kernels="optimized")
    np.savez(tmp_path / "ref.npz", **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    assert outputs[0][0][:8].tolist() == [-4.0, -2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0]
    run = cli("run", str(model), "-b", board, "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "out"),
              "--reference", str(tmp_path / "ref.npz"), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    compared = [o for m in json.loads(run.stdout)["models"] for o in m["outputs"]]
    assert len(compared) == 2 and all(o["max_abs_error"] == 0 for o in compared)
