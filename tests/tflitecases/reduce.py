"""Reductions: REDUCE_MAX and REDUCE_MIN (int8), and MEAN on 16x8 (int16) tensors, over random axes
(some negative) with or without keep_dims."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import Draw, GraphBuilder, _any_rank, _output, _requantized, _same_quantization, register_cases


def _reducer(op: str, same_quantization: bool):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        tensor = graph.tensor(x)
        shape = tensor.shape

        def draw_axes() -> list[int]:
            count = int(p.rng.integers(1, len(shape) + 1))
            chosen = p.rng.choice(len(shape), size=count, replace=False)
            return sorted(int(a) - (len(shape) if p.rng.random() < 0.3 else 0) for a in chosen)  # some negative
        axes = p("axes", draw_axes)
        keep_dims = p("keep_dims", lambda: bool(p.rng.random() < 0.5))
        reduced = {a % len(shape) for a in axes}
        out_shape = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keep_dims or i not in reduced)
        axes_index = graph.add_constant(f"{name}/axes", np.array(axes, np.int32))
        if same_quantization:
            quantization = _same_quantization(graph, x)
        elif tensor.dtype == "int16":
            quantization = {"scale": tensor.scale * p.log_uniform("output_scale_ratio", 0.5, 2.0), "zero_point": 0}
        else:
            quantization = _requantized(p, graph, x)
        y = _output(graph, name, tensor.dtype, out_shape, quantization)
        graph.add_operator(op, [x, axes_index], [y], schema.ReducerOptionsT(keepDims=keep_dims))
        return y
    return add


_SCALES = (1e-3, 1e-1)
register_cases({
    "REDUCE_MAX": (_any_rank, _reducer("REDUCE_MAX", True), _SCALES, "int8"),
    "REDUCE_MIN": (_any_rank, _reducer("REDUCE_MIN", True), _SCALES, "int8"),
    "MEAN/int16": (_any_rank, _reducer("MEAN", False), _SCALES, "int16"),
})
