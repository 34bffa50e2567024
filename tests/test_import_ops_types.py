"""Operators on the less common types — ADD_N of float32 and int32, REDUCE_ALL of bool, QUANTIZE from
int32 and between int8 and uint8 — in the cases random draws rarely reach (every kind also runs in
test_import_operators' every-operator bundles); the int8/int16 SUM of one quantization, held to
LiteRT's builtin kernel (its reference kernel gets quantized SUMs wrong); what stays refused, and the
measurements of LiteRT that the refusals of the rescaling SUM and of the float ELU stand on."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflitecases  # noqa: F401 - registers the cases of every operator family with tflitewriter
from conftest import cli
from mlfbuild.importer import import_tflite
from mlfbuild.importer import quantization as q
from mlfbuild.importer.lowering import UnsupportedModelError
from mlfbuild.reference import litert
from litert_oracle import seeded_inputs
from test_import_operators import _assert_refused
from tflitewriter import GraphBuilder, bundle_model

RARE = [
    # ADD_N: four operands, all constants but the input; one element; rank 4
    ("ADD_N/float32", {"extra_operands": 3, "constant_0": True, "constant_1": True, "constant_2": True}),
    ("ADD_N/float32", {"input_shape": (1,), "extra_operands": 1, "constant_0": False}),
    ("ADD_N/int32", {"input_shape": (2, 3, 2, 5), "extra_operands": 3, "constant_0": False, "constant_1": True,
                     "constant_2": False}),
    # REDUCE_ALL: every axis (to a scalar, or to ones), negative and repeated axes, one element
    ("REDUCE_ALL", {"input_shape": (2, 3, 2), "axes": [0, 1, 2], "keep_dims": False}),
    ("REDUCE_ALL", {"input_shape": (2, 3, 2), "axes": [-3, -2, -1], "keep_dims": True}),
    ("REDUCE_ALL", {"input_shape": (3, 5), "axes": [1, -1], "keep_dims": False}),
    ("REDUCE_ALL", {"input_shape": (1,), "axes": [0], "keep_dims": True}),
    # QUANTIZE: int32 values up to 1e9, the output zero points at their ends; uint8 zero points at 0 and 255
    ("QUANTIZE/int32_to_int8", {"int32_steps_per_input_step": 30000.0, "zero_point": 20}),
    ("QUANTIZE/int32_to_int8", {"int32_steps_per_input_step": 1.0, "zero_point": -20}),
    ("QUANTIZE/int32_to_int16", {"int32_steps_per_input_step": 30000.0, "output_scale_ratio": 0.5}),
    ("QUANTIZE/uint8", {"flip": True, "input_zero_point": 127, "output_scale_ratio": 1.0, "output_zero_point": -128}),
    ("QUANTIZE/uint8", {"flip": False, "uint8_zero_point": 0, "uint8_ratio": 0.5}),
    ("QUANTIZE/uint8", {"flip": False, "uint8_zero_point": 255, "uint8_ratio": 2.0, "output_zero_point": 127}),
]


# SUM of int8/int16, one quantization for input and output: dtype, zero point, input shape, axes, keep_dims
SUMS = [
    ("int8", 0, (3, 5, 2), [1], False), ("int8", 37, (2, 3, 2), [0, 1, 2], True), ("int8", -128, (3, 7), [-1], False),
    ("int8", 127, (2, 3, 2, 2), [3, -3], True), ("int16", 0, (3, 5, 2), [2, 0], True), ("int16", 0, (12,), [0], False),
]


def _rare_and_sums_model(path):
    """The RARE cases, then the SUMS side by side (inputs sum_in<k>, outputs after RARE's)."""
    graph = bundle_model(np.random.default_rng(8), RARE)
    for k, (dtype, zero_point, shape, axes, keep_dims) in enumerate(SUMS):
        x = graph.add_input(f"sum_in{k}", dtype, shape, scale=0.05, zero_point=zero_point)
        reduced = {a % len(shape) for a in axes}
        out_shape = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keep_dims or i not in reduced)
        y = graph.add_tensor(f"sum{k}", dtype, out_shape, scale=0.05, zero_point=zero_point)
        graph.add_operator("SUM", [x, graph.add_constant(f"sum_axes{k}", np.array(axes, np.int32))], [y],
                           schema.ReducerOptionsT(keepDims=keep_dims))
        graph.mark_output(y)
    return graph.write(path)


def _inputs(model, samples: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs; a SUM's within a few steps of its zero point (sums that mostly stay in range) but
    in the last sample, over the whole range (sums that saturate)."""
    inputs = seeded_inputs(model, seed=seed, samples=samples)
    rng = np.random.default_rng(seed)
    for k, (dtype, zero_point, shape, _, _) in enumerate(SUMS):
        info, span = np.iinfo(dtype), (6 if dtype == "int8" else 3000)
        near = rng.integers(zero_point - span, zero_point + span, (samples - 1, *shape))
        wide = rng.integers(info.min, info.max, (1, *shape), endpoint=True)
        inputs[f"sum_in{k}"] = np.clip(np.concatenate([near, wide]), info.min, info.max).astype(dtype)
    return inputs


def _check_rare_and_sums(board: str, tree, out, samples: int) -> None:
    """One build: the RARE cases held to LiteRT's reference kernels, the SUMS to its builtin kernel
    (TFLM's QuantizedMeanOrSum rescales them by one, exactly, as the builtin kernel's float rescale does
    then; the reference kernel reads them as uint8)."""
    model = _rare_and_sums_model(out.with_suffix(".tflite"))
    inputs = _inputs(model, samples, seed=9)
    reference = litert.run_model(model, inputs, kernels="reference")[:len(RARE)]
    builtin = litert.run_model(model, inputs, kernels="optimized")[len(RARE):]
    assert len(builtin) == len(SUMS) and any(len(np.unique(o)) > 4 for o in builtin)  # not all saturated
    np.savez(out.with_suffix(".npz"), **inputs, **{f"output_{i}": o for i, o in enumerate(reference + builtin)})
    run = cli("run", str(model), "-b", board, "--cmsis-nn", str(tree), "-o", str(out), "--reference",
              str(out.with_suffix(".npz")), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    compared = [o for m in json.loads(run.stdout)["models"] for o in m["outputs"]]
    assert len(compared) == len(RARE) + len(SUMS) and all(o["max_abs_error"] == 0 for o in compared)


@pytest.mark.cross
def test_rare_cases_and_sums_of_one_quantization_equal_litert(cmsis_nn, tmp_path):
    _check_rare_and_sums("host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_rare_cases_and_sums_equal_litert_on_the_cortex_m(board, cmsis_nn, tmp_path):
    _check_rare_and_sums(board, cmsis_nn("v6.0.0"), tmp_path / board, samples=3)


# --- refusals -----------------------------------------------------------------------------------------

def _add_n(dtype: str, shapes, **quantization) -> GraphBuilder:
    graph = GraphBuilder()
    operands = [graph.add_input(f"x{k}", dtype, shape, **quantization) for k, shape in enumerate(shapes)]
    y = graph.add_tensor("y", dtype, shapes[0], **quantization)
    graph.add_operator("ADD_N", operands, [y])
    graph.mark_output(y)
    return graph


def _quantize(source: tuple[str, int], target: tuple[str, int]) -> GraphBuilder:
    graph = GraphBuilder()
    x = graph.add_input("x", source[0], (4,), scale=0.05, zero_point=source[1])
    y = graph.add_tensor("y", target[0], (4,), scale=0.5, zero_point=target[1])
    graph.add_operator("QUANTIZE", [x], [y], schema.QuantizeOptionsT())
    graph.mark_output(y)
    return graph


def _reducer(op: str, dtype: str, output_scale: float | None = None, **quantization) -> GraphBuilder:
    graph = GraphBuilder()
    x = graph.add_input("x", dtype, (2, 3), **quantization)
    axes = graph.add_constant("axes", np.array([1], np.int32))
    rescaled = {**quantization, "scale": output_scale} if output_scale else quantization
    y = graph.add_tensor("y", dtype, (2,), **rescaled)
    graph.add_operator(op, [x, axes], [y], schema.ReducerOptionsT(keepDims=False))
    graph.mark_output(y)
    return graph


REFUSALS = [
    (_add_n("int8", [(4,), (4,)], scale=0.1, zero_point=0), "LiteRT has no int8 ADD_N"),
    (_add_n("float32", [(4,), (1,)]), "ADD_N does not broadcast"),
    (_quantize(("int8", 0), ("int32", 0)), "LiteRT has none to hold TFLM's to"),
    (_quantize(("int32", 3), ("int8", 0)), "only 0 is supported"),
    (_reducer("REDUCE_ALL", "int8", scale=0.1, zero_point=0), "is not bool"),
    (_reducer("SUM", "int8", 0.3, scale=0.1, zero_point=0), "its builtin one rescales in float"),
    (_reducer("SUM", "int16", 0.3, scale=0.1, zero_point=0), "a SUM that rescales"),
    (_reducer("REDUCE_ANY", "bool"), "(REDUCE_ANY) is not supported"),
]


def test_what_stays_refused_says_why(tmp_path):
    for k, (graph, said) in enumerate(REFUSALS):
        with pytest.raises(UnsupportedModelError, match=re.escape(said)):
            import_tflite(graph.write(tmp_path / f"m{k}.tflite"), tmp_path / f"m{k}.tar")
        assert not (tmp_path / f"m{k}.tar").exists()


def test_a_refusal_is_one_line_and_exit_3(tmp_path):
    graph, said = REFUSALS[-2]
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


# --- why SUM and the float ELU stay refused: LiteRT's kernels, measured ----------------------------------

def _tflm_sum(values: np.ndarray, input_scale: float, input_zero_point: int, output_scale: float,
              output_zero_point: int) -> np.ndarray:
    """TFLM's int8 SUM over the last axis: QuantizedMeanOrSum's zero-point-corrected int32 sum, rescaled
    by MultiplyByQuantizedMultiplier (exact integer arithmetic here), + zero point, clamped."""
    multiplier, shift = q.quantize_multiplier(input_scale / output_scale)
    sums = values.astype(np.int64).sum(axis=-1) - input_zero_point * values.shape[-1]

    def rescale(value: int) -> int:
        product = value * (1 << max(shift, 0)) * multiplier
        high = (product + (1 << 30)) >> 31 if product >= 0 else -((-product + (1 << 30) - 1) >> 31)
        right = max(-shift, 0)
        remainder, threshold = high & ((1 << right) - 1), ((1 << right) - 1) >> 1
        return (high >> right) + (1 if remainder > threshold + (1 if high < 0 else 0) else 0)
    return np.clip(np.vectorize(rescale)(sums) + output_zero_point, -128, 127)


def test_no_litert_kernel_sums_int8_as_tflm_does(tmp_path):
    """SUM's refusal: LiteRT's reference kernel is far off TFLM's integer sum, its builtin one (float
    rescale) a step off at times. Should a LiteRT release compute it, this fails: compile SUM then."""
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (64, 12), scale=0.05, zero_point=3)
    axes = graph.add_constant("axes", np.array([1], np.int32))
    y = graph.add_tensor("y", "int8", (64,), scale=0.31, zero_point=-5)
    graph.add_operator("SUM", [x, axes], [y], schema.ReducerOptionsT(keepDims=False))
    graph.mark_output(y)
    model = graph.write(tmp_path / "sum.tflite")
    values = np.random.default_rng(2).integers(-128, 128, (4, 64, 12)).astype(np.int8)
    tflm = _tflm_sum(values, float(np.float32(0.05)), 3, float(np.float32(0.31)), -5)
    off = {kernels: np.abs(litert.run_model(model, {"x": values}, kernels=kernels)[0].astype(np.int64) - tflm)
           for kernels in ("reference", "optimized")}
    assert off["reference"].max() > 1
    assert off["optimized"].max() == 1 and np.count_nonzero(off["optimized"]) < off["optimized"].size // 4


def test_no_litert_kernel_computes_tflite_s_float_elu(tmp_path):
    """The float ELU's refusal: LiteRT's reference resolver has no ELU, and its builtin float ELU is an
    ulp off the correctly rounded expm1 for some inputs. Should it become exact, this fails."""
    graph = GraphBuilder()
    x = graph.add_input("x", "float32", (2000,))
    y = graph.add_tensor("y", "float32", (2000,))
    graph.add_operator("ELU", [x], [y])
    graph.mark_output(y)
    model = graph.write(tmp_path / "elu.tflite")
    values = -np.random.default_rng(3).uniform(0.0, 4.0, (1, 2000)).astype(np.float32)
    computed = litert.run_model(model, {"x": values}, kernels="optimized")[0].reshape(-1)
    exact = np.array([np.float32(math.expm1(float(v))) for v in values.reshape(-1)], np.float32)
    ulps = np.abs(computed.view(np.int32).astype(np.int64) - exact.view(np.int32))
    assert ulps.max() == 1 and 0 < np.count_nonzero(ulps) < ulps.size // 4
    with pytest.raises(Exception, match="ELU"):
        litert.run_model(model, {"x": values}, kernels="reference")
