"""FULLY_CONNECTED as TensorFlow's converter writes Dense layers since 2.16: per-channel weights
(one scale per output unit, quantized dimension 0), on 2-D or 3-D inputs, keep_num_dims either way."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import (ACTIVATIONS, Draw, GraphBuilder, _accumulator_std, _bias, _output, _weights, _zero_point,
                          activation_code, register_cases)


def add_per_channel_fully_connected(graph: GraphBuilder, p: Draw, x: int, name: str = "fully_connected") -> int:
    shape = graph.tensor(x).shape
    depth, units = shape[-1], p.integer("units", 1, 16)
    keep_num_dims = p.choice("keep_num_dims", (False, True))
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    filter_scales = np.array([p.rng.uniform(1e-3, 2e-2) for _ in range(units)])
    filter_index = graph.add_constant(f"{name}/weights", _weights(p.rng, (units, depth)), scale=filter_scales,
                                      zero_point=np.zeros(units, np.int64), quantized_dimension=0)
    std = _accumulator_std(input_scale, filter_scales, depth)
    bias_index = -1
    if p("bias", lambda: True):
        bias_scales = input_scale * filter_scales
        bias_index = graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales), scale=bias_scales,
                                        zero_point=np.zeros(units, np.int64), quantized_dimension=0)
    out_shape = (*shape[:-1], units) if keep_num_dims else (math.prod(shape) // depth, units)
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("FULLY_CONNECTED", [x, filter_index, bias_index], [y], schema.FullyConnectedOptionsT(
        fusedActivationFunction=activation_code(activation), keepNumDims=keep_num_dims))
    return y


def _rows(p: Draw) -> tuple[int, ...]:
    """2-D [batch, depth] or 3-D [batch, time, depth] (Dense on a sequence)."""
    depth = p.integer("depth", 1, 32)
    return (p.integer("batch", 1, 3), depth) if p.choice("rank", (2, 3)) == 2 else (1, p.integer("time", 1, 5), depth)


register_cases({"FULLY_CONNECTED/per_channel": (_rows, add_per_channel_fully_connected, (1e-3, 1e-1), "int8")})
