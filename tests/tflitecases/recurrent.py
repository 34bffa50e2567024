"""SVDF as TensorFlow's converter writes keyword spotting's SVDF layers: int8 input and output, int8
feature weights, int16 time weights, a variable int16 state (zero point 0), RELU; the output's zero
point -128 as the converter's RELU gives it, or another."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from tflitewriter import Draw, GraphBuilder, _features, register_cases

RELU = 1


def svdf_layer(graph: GraphBuilder, rng: np.random.Generator, x: int, name: str, *, units: int, rank: int,
               memory: int, out_zero_point: int = -128, time_dtype: str = "int16", activation: int = RELU,
               bias: bool = True, state_zero_point: int = 0) -> int:
    """An SVDF after `x` ([batch, depth]); returns its output. Its state `<name>/state` is variable."""
    batch, depth = graph.tensor(x).shape
    filters = units * rank
    input_scale = graph.tensor(x).scale
    feature_scale = float(rng.uniform(3e-3, 1e-2))
    features = graph.add_constant(f"{name}/feature", rng.integers(-127, 128, (filters, depth)).astype(np.int8),
                                  scale=feature_scale, zero_point=0)
    # the feature product of typical inputs spans a few thousand steps of the state
    state_scale = input_scale * feature_scale * 100 * 73 * math.sqrt(depth) / 4000
    limit = 127 if time_dtype == "int8" else 32767
    time_scale = float(rng.uniform(1e-3, 4e-3))
    times = graph.add_constant(f"{name}/time", rng.integers(-limit, limit + 1, (filters, memory)).astype(time_dtype),
                               scale=time_scale, zero_point=0)
    bias_index = -1
    if bias:  # in the state × time weights scale, as the converter writes it
        bias_index = graph.add_constant(f"{name}/bias", rng.integers(-20000, 20000, units).astype(np.int32),
                                        scale=state_scale * time_scale, zero_point=0)
    state = graph.add_tensor(f"{name}/state", time_dtype, (batch, memory * filters), scale=state_scale,
                             zero_point=state_zero_point)
    graph.variable_indices.add(state)
    typical = state_scale * time_scale * 4000 * limit / 2 * math.sqrt(memory * rank)
    y = graph.add_tensor(f"{name}/out", "int8", (batch, units), scale=typical / 100, zero_point=out_zero_point)
    graph.add_operator("SVDF", [x, features, times, bias_index, state], [y],
                       schema.SVDFOptionsT(rank=rank, fusedActivationFunction=activation))
    return y


def add_svdf(graph: GraphBuilder, p: Draw, x: int, name: str = "svdf") -> int:
    return svdf_layer(graph, p.rng, x, name, units=p.integer("units", 1, 12), rank=p.integer("rank", 1, 3),
                      memory=p.integer("memory", 1, 10), out_zero_point=p.choice("out_zero_point", (-128, -60, 0)),
                      bias=p.choice("bias", (True, True, False)))


register_cases({"SVDF": (_features, add_svdf, (1e-2, 1e-1), "int8")})
