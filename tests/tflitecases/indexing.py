"""Random cases of the indexing operators (mlfbuild/importer/lowering/indexing.py): GATHER_ND with
constant in-range indices, BROADCAST_TO, REVERSE_V2, SHAPE, BROADCAST_ARGS (of a SHAPE and a
constant), CUMSUM (float32, int32). Int8 outputs keep the input's quantization (nothing is
requantized)."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import DTYPES, Draw, GraphBuilder, _output, _random_factorization, register_cases

_SCALES = (1e-2, 1e-1)


def _small(p: Draw) -> tuple[int, ...]:
    total = int(p.rng.integers(1, 41))
    return _random_factorization(p.rng, total, int(p.rng.integers(1, 5)))


def _same(graph: GraphBuilder, x: int) -> dict | None:
    source = graph.tensor(x)
    return {"scale": source.scale, "zero_point": source.zero_point} if source.quantization else None


def add_gather_nd(graph: GraphBuilder, p: Draw, x: int, name: str = "gather_nd") -> int:
    """`depth` leading dimensions indexed, `slices` random in-range index rows."""
    shape = graph.tensor(x).shape
    depth = p.integer("depth", 1, len(shape))
    slices = p.integer("slices", 1, 6)
    rows = p("indices", lambda: [[int(p.rng.integers(0, d)) for d in shape[:depth]] for _ in range(slices)])
    indices = graph.add_constant(f"{name}/indices", np.array(rows, np.int32).reshape(len(rows), depth))
    y = _output(graph, name, graph.tensor(x).dtype, (len(rows), *shape[depth:]), _same(graph, x))
    graph.add_operator("GATHER_ND", [x, indices], [y], schema.GatherNdOptionsT())
    return y


def add_broadcast_to(graph: GraphBuilder, p: Draw, x: int, name: str = "broadcast_to") -> int:
    """Each dimension of 1 grown to 1-3, and 0-1 leading dimensions added."""
    shape = graph.tensor(x).shape
    lead = p("leading", lambda: [int(p.rng.integers(1, 4)) for _ in range(int(p.rng.integers(0, 2)))])
    grown = p("grown", lambda: [d if d != 1 else int(p.rng.integers(1, 4)) for d in shape])
    target = tuple(lead) + tuple(grown)
    dims = graph.add_constant(f"{name}/shape", np.array(target, np.int32))
    y = _output(graph, name, graph.tensor(x).dtype, target, _same(graph, x))
    graph.add_operator("BROADCAST_TO", [x, dims], [y], version=2)
    return y


def _with_ones(p: Draw) -> tuple[int, ...]:
    """A shape of rank 1-4 with some dimensions of 1 (so that broadcasting grows them)."""
    shape = list(_small(p))
    for k in range(len(shape)):
        if p.rng.random() < 0.4:
            shape[k] = 1
    return tuple(shape)


def add_reverse_v2(graph: GraphBuilder, p: Draw, x: int, name: str = "reverse_v2") -> int:
    rank = len(graph.tensor(x).shape)
    axis = p.integer("axis", -rank, rank - 1)
    axes = graph.add_constant(f"{name}/axis", np.array([axis], np.int32))
    y = _output(graph, name, graph.tensor(x).dtype, graph.tensor(x).shape, _same(graph, x))
    graph.add_operator("REVERSE_V2", [x, axes], [y], schema.ReverseV2OptionsT())
    return y


def add_shape(graph: GraphBuilder, p: Draw, x: int, name: str = "shape") -> int:
    y = _output(graph, name, "int32", (len(graph.tensor(x).shape),), None)
    graph.add_operator("SHAPE", [x], [y], schema.ShapeOptionsT(outType=DTYPES["int32"]))
    return y


def add_broadcast_args(graph: GraphBuilder, p: Draw, x: int, name: str = "broadcast_args") -> int:
    """The shape of `x` (a SHAPE) broadcast with a constant shape of rank 1-4."""
    shape = graph.tensor(x).shape
    of_x = add_shape(graph, p, x, name=f"{name}/shape")
    other = p("other", lambda: [int(p.rng.integers(1, 4)) if d == 1 else int(p.rng.choice([1, d]))
                               for d in shape][int(p.rng.integers(0, len(shape))):])
    constant = graph.add_constant(f"{name}/other", np.array(other, np.int32).reshape(len(other)))
    y = _output(graph, name, "int32", (max(len(shape), len(other)),), None)
    graph.add_operator("BROADCAST_ARGS", [of_x, constant], [y])
    return y


def add_cumsum(graph: GraphBuilder, p: Draw, x: int, name: str = "cumsum") -> int:
    rank = len(graph.tensor(x).shape)
    axis = graph.add_constant(f"{name}/axis", np.array(p.integer("axis", -rank, rank - 1), np.int32))
    options = schema.CumsumOptionsT(exclusive=p.choice("exclusive", (False, True)),
                                    reverse=p.choice("reverse", (False, True)))
    y = _output(graph, name, graph.tensor(x).dtype, graph.tensor(x).shape, None)
    graph.add_operator("CUMSUM", [x, axis], [y], options)
    return y


register_cases({
    "GATHER_ND": (_small, add_gather_nd, _SCALES, "int8"),
    "GATHER_ND/int16": (_small, add_gather_nd, _SCALES, "int16"),
    "GATHER_ND/int32": (_small, add_gather_nd, _SCALES, "int32"),
    "BROADCAST_TO": (_with_ones, add_broadcast_to, _SCALES, "int8"),
    "BROADCAST_TO/int16": (_with_ones, add_broadcast_to, _SCALES, "int16"),
    "BROADCAST_TO/int32": (_with_ones, add_broadcast_to, _SCALES, "int32"),
    "REVERSE_V2": (_small, add_reverse_v2, _SCALES, "int8"),
    "REVERSE_V2/int16": (_small, add_reverse_v2, _SCALES, "int16"),
    "REVERSE_V2/float32": (_small, add_reverse_v2, _SCALES, "float32"),
    "SHAPE": (_small, add_shape, _SCALES, "int8"),
    "BROADCAST_ARGS": (_small, add_broadcast_args, _SCALES, "int8"),
    "CUMSUM/float32": (_small, add_cumsum, _SCALES, "float32"),
    "CUMSUM/int32": (_small, add_cumsum, _SCALES, "int32"),
})
