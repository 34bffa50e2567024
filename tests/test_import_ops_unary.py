"""The unary element-wise operators and activations (lowering/unary.py, and the int16 kinds of
elementwise.py's RELU, RELU6, LOGISTIC, QUANTIZE, DEQUANTIZE) in the cases random draws rarely
reach — power-of-two int16 scales, negative and large alphas, scales at the edges of the 16-bit
arithmetic, outputs that saturate — bundled into one model per test and compared bit for bit with
LiteRT's reference kernels; and what stays refused, in one line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflitecases  # noqa: F401 - registers the cases
from conftest import cli
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import CASE_SHAPES, GraphBuilder, bundle_model

UNARY = sorted(name for name in CASE_SHAPES if CASE_SHAPES[name][1].__module__ == "tflitecases.unary")

# int16 inputs get input_scale / 256: 2^-4 → 2^-12 (TFLite's power-of-two path, no input shift),
# 2^-3 → 2^-11 (a shift of 1: tanh's power-of-two path, logistic's general one), 2^-2 → 2^-10.
_RARE = [
    *[(op, {"input_scale": s, "input_shape": (4, 64)}) for op in ("TANH/int16", "LOGISTIC/int16")
      for s in (2.0 ** -4, 2.0 ** -3, 2.0 ** -2, 1.0, 1e-4)],
    ("TANH", {"input_scale": 0.5, "input_zero_point": -128}), ("TANH", {"input_scale": 1e-3, "input_zero_point": 127}),
    ("LEAKY_RELU", {"alpha": 0.0}), ("LEAKY_RELU", {"alpha": -0.5}), ("LEAKY_RELU", {"alpha": 3.0}),
    ("LEAKY_RELU", {"alpha": 1.0, "output_scale_ratio": 0.25}), ("LEAKY_RELU/int16", {"alpha": -2.0}),
    ("LEAKY_RELU/int16", {"alpha": 0.1, "output_scale_ratio": 0.5, "input_shape": (3, 50)}),
    ("HARD_SWISH", {"input_scale": 0.2, "output_scale_ratio": 0.5}),
    ("HARD_SWISH", {"input_scale": 1e-3, "output_scale_ratio": 2.0}),
    ("HARD_SWISH", {"input_scale": 0.05, "output_scale_ratio": 1 / 120, "output_zero_point": -128}),
    ("HARD_SWISH", {"input_scale": 0.02, "input_zero_point": 127, "output_zero_point": 127}),
    ("RELU_N1_TO_1", {"input_scale": 1e-3, "output_scale_ratio": 0.5}), ("RELU_N1_TO_1", {"input_scale": 0.1}),
    ("RELU/int16", {"output_scale_ratio": 0.5, "input_shape": (2, 64)}),
    ("RELU6/int16", {"input_scale": 0.1, "output_scale_ratio": 0.5, "input_shape": (2, 64)}),
    ("ABS", {"same_scale": True, "input_zero_point": -128}), ("ABS", {"same_scale": True, "input_zero_point": 127}),
    ("ABS/int16", {"same_scale": False, "output_scale_ratio": 0.5, "input_shape": (2, 64)}),
    ("QUANTIZE/int16_to_int8", {"output_dtype": "int16", "output_scale_ratio": 1.0}),
    ("QUANTIZE/int8_to_int16", {"output_scale_ratio": 1 / 256}),
    ("QUANTIZE/int16", {"output_scale": 1e-5}),
    ("EXP", {"input_scale": 0.1, "input_zero_point": 127}),
    ("L2_NORMALIZATION", {"input_shape": (2, 3, 4, 1)}), ("L2_NORMALIZATION", {"input_shape": (1, 200)}),
    *[(kind, {"output_dtype": out, "input_shape": (2, 32)}) for kind, source in
      (("CAST", "int8"), ("CAST/int16", "int16"), ("CAST/int32", "int32"), ("CAST/float32", "float32"))
      for out in ("int8", "int16", "int32", "float32") if out != source],
    ("FILL/float32", {"shape": (2, 3, 4, 5)}), ("ZEROS_LIKE", {"input_shape": (1, 2, 3, 4)}),
    ("LOG", {"input_zero_point": 100}), ("LOG", {"input_scale": 1e-3, "input_zero_point": -128}),
    ("RELU_0_TO_1", {"input_scale": 1e-3, "output_scale_ratio": 0.5}), ("RELU_0_TO_1", {"input_scale": 0.05}),
    ("LOGISTIC", {"input_scale": 10.0}), ("TANH", {"input_scale": 10.0}),
    ("LOG_SOFTMAX", {"input_scale": 2.0}), ("LOG_SOFTMAX", {"input_scale": 1e-4, "input_shape": (2, 100)}),
    ("LOG_SOFTMAX", {"input_shape": (3, 1)}), ("LOG_SOFTMAX", {"input_shape": (1, 2, 3, 40), "input_scale": 0.2}),
]


@pytest.mark.cross
def test_every_unary_case_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """Several random cases of every unary kind."""
    cases = [name for name in UNARY for _ in range(3)]
    model = bundle_model(np.random.default_rng(11), cases).write(tmp_path / "unary.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


@pytest.mark.cross
def test_rare_unary_parameters_on_the_host_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(12), _RARE).write(tmp_path / "rare.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("version", ["v4.1.0", "v6.0.0"])
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_unary_cases_over_many_seeds(board, version, seed, cmsis_nn, tmp_path):
    cases = [name for name in UNARY for _ in range(3)] + _RARE
    model = bundle_model(np.random.default_rng(seed), cases).write(tmp_path / "unary.tflite")
    check_against_litert(model, board, cmsis_nn(version), tmp_path / board, seed=seed, samples=2)


def _one(op: str, dtype: str = "int8", scale: float = 0.05, zero_point: int = 0, out_dtype: str | None = None,
         out_scale: float | None = None, out_zero_point: int | None = None) -> GraphBuilder:
    graph = GraphBuilder()
    quantized = dtype in ("int8", "int16")
    x = graph.add_input("x", dtype, (1, 8), **({"scale": scale, "zero_point": zero_point} if quantized else {}))
    out_dtype = out_dtype or dtype
    out = {"scale": out_scale if out_scale is not None else scale,
           "zero_point": out_zero_point if out_zero_point is not None else zero_point}
    y = graph.add_tensor("y", out_dtype, (1, 8), **(out if out_dtype in ("int8", "int16") else {}))
    graph.add_operator(op, [x], [y])
    graph.mark_output(y)
    return graph


def _leaky_relu(alpha: float) -> GraphBuilder:
    graph = _one("LEAKY_RELU")
    graph.operators[0] = dataclasses.replace(graph.operators[0], options=schema.LeakyReluOptionsT(alpha=alpha))
    return graph


@pytest.mark.parametrize("graph, said", [
    (_leaky_relu(3e38), "alpha 3.0000000054977558e+38 is not a finite value"),
    (_one("LOGISTIC", "int16", 2 ** -12, out_scale=1 / 256), "output must have scale 1/32768"),
    (_one("TANH", "int16", 2 ** -12, zero_point=3, out_scale=1 / 32768, out_zero_point=0), "symmetric (zero point 0)"),
    (_one("TANH", "int16", 8.0, out_scale=1 / 32768), "overflows TFLite's 32-bit int16 tanh"),
    (_one("L2_NORMALIZATION", out_scale=1 / 256), "scale 1/128 and zero point 0"),
    (_one("HARD_SWISH", "int16", 1e-3), "int16; only int8 activations are supported for HARD_SWISH"),
    (_one("HARD_SWISH", scale=0.5, out_scale=1e-3), "output exponent <= 0"),
    (_one("ZEROS_LIKE"), "int32 and float32, as in TFLite"),
    (_one("FLOOR"), "float32 only"),
    (_one("RELU_N1_TO_1", "int16", 1e-3), "int16; only int8 activations are supported for RELU_N1_TO_1"),
    (_one("RELU", "int16", 1e-3, out_scale=1e-9), "overflows TFLite's 32-bit arithmetic"),
    (_one("LOG_SOFTMAX", scale=0.1, out_scale=1 / 16, out_zero_point=0), "scale 16/256 and zero point 127"),
    (_one("LOG_SOFTMAX", scale=40.0, out_scale=1 / 16, out_zero_point=127), "outside TFLite's int8 log softmax"),
    (_one("ELU", "float32"), "a float32 ELU is not compiled"),
    (_one("RELU", scale=1e-30), "outside 1e-15..1e15"),
    (_one("EXP", scale=0.5, zero_point=-128, out_scale=0.01), "past the int32 arithmetic of TFLite's table"),
    (_one("TANH", "int8", out_dtype="int16", out_scale=1 / 32768), "keeps its type"),
])
def test_unsupported_unary_parameters_are_refused_in_one_line(graph, said, tmp_path):
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


def _elu_bundle(seed: int, count: int = 24) -> GraphBuilder:
    """int8 ELUs side by side, each input scale and zero point its own (negative inputs reach expm1's
    flat part, positive ones the identity)."""
    rng = np.random.default_rng(seed)
    graph = GraphBuilder()
    for k in range(count):
        scale = float(np.exp(rng.uniform(np.log(0.005), np.log(0.2))))
        x = graph.add_input(f"in{k}", "int8", (1, 16), scale=scale, zero_point=int(rng.integers(-128, 128)))
        y = graph.add_tensor(f"elu{k}", "int8", (1, 16), scale=scale * float(rng.uniform(0.5, 2.0)),
                             zero_point=int(rng.integers(-128, 128)))
        graph.add_operator("ELU", [x], [y])
        graph.mark_output(y)
    return graph


@pytest.mark.cross
def test_int8_elu_equals_litert_s_table(cmsis_nn, tmp_path):
    """LiteRT's reference resolver has no ELU; its optimized resolver's kernel (the table TFLite
    prepares) is the oracle, every input byte of every case through it."""
    from litert_oracle import seeded_inputs
    from mlfbuild.reference import litert

    model = _elu_bundle(3).write(tmp_path / "elu.tflite")
    inputs = seeded_inputs(model, seed=4, samples=16)
    outputs = litert.run_model(model, inputs, kernels="optimized")
    np.savez(tmp_path / "elu.npz", **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    run = cli("run", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--reference", str(tmp_path / "elu.npz"), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass"
    assert all(o["max_abs_error"] == 0 for m in result["models"] for o in m["outputs"])
