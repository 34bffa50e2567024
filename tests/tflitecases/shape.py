"""Operators that move bytes (lowering/shape.py) beyond tflitewriter's int8 cases: PADV2, and int16,
rank-5 PAD, rank-5/6 TRANSPOSE, RESHAPE, SQUEEZE and CONCATENATION of any element type."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from tflitewriter import (
    Draw,
    GraphBuilder,
    _any_rank,
    _nhwc,
    _output,
    _random_factorization,
    _same_quantization,
    _with_ones,
    register_cases,
)


def _quantization(graph: GraphBuilder, x: int) -> dict:
    """`x`'s quantization as keywords (none for a float tensor)."""
    return _same_quantization(graph, x) if graph.tensor(x).quantization is not None else {}


def _out(graph: GraphBuilder, x: int, name: str, shape) -> int:
    return _output(graph, name, graph.tensor(x).dtype, tuple(shape), _quantization(graph, x))


def _rank5(p: Draw) -> tuple[int, ...]:
    return tuple(int(d) for d in p.rng.integers(1, 5, size=5))


def _rank5_or_6(p: Draw) -> tuple[int, ...]:
    return tuple(int(d) for d in p.rng.integers(1, 4, size=int(p.rng.integers(5, 7))))


def _pad_operator(graph: GraphBuilder, p: Draw, x: int, name: str, v2: bool) -> int:
    shape = graph.tensor(x).shape
    paddings = np.asarray(p("paddings", lambda: p.rng.integers(0, 3, size=(len(shape), 2))), np.int32)
    out_shape = [d + int(a) + int(b) for d, (a, b) in zip(shape, paddings)]
    y = _out(graph, x, name, out_shape)
    inputs = [x, graph.add_constant(f"{name}/paddings", paddings)]
    if not v2:
        graph.add_operator("PAD", inputs, [y], schema.PadOptionsT())
        return y
    dtype = graph.tensor(x).dtype
    if dtype == "float32":
        value = p("value", lambda: float(np.float32(p.rng.normal(0, 10))))
    else:
        info = np.iinfo(dtype)
        value = p("value", lambda: int(p.rng.integers(info.min, int(info.max) + 1)))
    inputs.append(graph.add_constant(f"{name}/value", np.array([value], dtype), **_quantization(graph, x)))
    graph.add_operator("PADV2", inputs, [y], schema.PadV2OptionsT())
    return y


def add_pad(graph: GraphBuilder, p: Draw, x: int, name: str = "pad") -> int:
    return _pad_operator(graph, p, x, name, v2=False)


def add_padv2(graph: GraphBuilder, p: Draw, x: int, name: str = "padv2") -> int:
    return _pad_operator(graph, p, x, name, v2=True)


def add_transpose(graph: GraphBuilder, p: Draw, x: int, name: str = "transpose") -> int:
    shape = graph.tensor(x).shape
    perm = [int(a) for a in p("perm", lambda: p.rng.permutation(len(shape)))]
    y = _out(graph, x, name, [shape[a] for a in perm])
    graph.add_operator("TRANSPOSE", [x, graph.add_constant(f"{name}/perm", np.array(perm, np.int32))], [y],
                       schema.TransposeOptionsT())
    return y


def add_reshape(graph: GraphBuilder, p: Draw, x: int, name: str = "reshape") -> int:
    total = math.prod(graph.tensor(x).shape)
    new_shape = tuple(p("new_shape", lambda: _random_factorization(p.rng, total, int(p.rng.integers(1, 5)))))
    y = _out(graph, x, name, new_shape)
    graph.add_operator("RESHAPE", [x, graph.add_constant(f"{name}/shape", np.array(new_shape, np.int32))], [y],
                       schema.ReshapeOptionsT(newShape=list(new_shape)))
    return y


def add_squeeze(graph: GraphBuilder, p: Draw, x: int, name: str = "squeeze") -> int:
    shape = graph.tensor(x).shape
    ones = [i for i, d in enumerate(shape) if d == 1][:len(shape) - 1]  # rank 1 at least
    y = _out(graph, x, name, [d for i, d in enumerate(shape) if i not in ones])
    graph.add_operator("SQUEEZE", [x], [y], schema.SqueezeOptionsT(squeezeDims=ones))
    return y


def add_concatenation(graph: GraphBuilder, p: Draw, x: int, name: str = "concatenation") -> int:
    tensor = graph.tensor(x)
    shape = tensor.shape
    axis = p.integer("axis", -len(shape), len(shape) - 1)
    parts = [x]
    for i in range(1, p.integer("operands", 2, 3)):
        part_shape = tuple(int(p.rng.integers(1, 5)) if a == axis % len(shape) else d for a, d in enumerate(shape))
        parts.append(graph.add_input(f"{name}/operand{i}", tensor.dtype, part_shape, **_quantization(graph, x)))
    out_shape = [sum(graph.tensor(t).shape[a] for t in parts) if a == axis % len(shape) else d
                 for a, d in enumerate(shape)]
    y = _out(graph, x, name, out_shape)
    graph.add_operator("CONCATENATION", parts, [y], schema.ConcatenationOptionsT(axis=axis, fusedActivationFunction=0))
    return y


_SCALES = (1e-3, 1e-1)

register_cases({
    "PADV2": (_any_rank, add_padv2, _SCALES, "int8"),
    "PADV2/int16": (_nhwc, add_padv2, _SCALES, "int16"),
    "PAD/int16": (_any_rank, add_pad, _SCALES, "int16"),
    "PAD/rank5": (_rank5, add_pad, _SCALES, "int8"),
    "TRANSPOSE/int16": (_any_rank, add_transpose, _SCALES, "int16"),
    "TRANSPOSE/rank6": (_rank5_or_6, add_transpose, _SCALES, "int8"),
    "RESHAPE/int16": (_any_rank, add_reshape, _SCALES, "int16"),
    "SQUEEZE/int16": (_with_ones, add_squeeze, _SCALES, "int16"),
    "CONCATENATION/int16": (_any_rank, add_concatenation, _SCALES, "int16"),
    "PADV2/float32": (_any_rank, add_padv2, _SCALES, "float32"),
    "TRANSPOSE/float32": (_rank5_or_6, add_transpose, _SCALES, "float32"),
    "CONCATENATION/float32": (_any_rank, add_concatenation, _SCALES, "float32"),
})
