"""Random cases of the indexing operators (mlfbuild/importer/lowering/indexing.py): GATHER_ND with
constant in-range indices, BROADCAST_TO, REVERSE_V2, SHAPE, BROADCAST_ARGS (of a SHAPE and a
constant), CUMSUM (float32, int32). Int8 outputs keep the input's quantization (nothing is
requantized)."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from tflitewriter import (
    DTYPES,
    Draw,
    GraphBuilder,
    _output,
    _random_factorization,
    register_cases,
)

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
    out = p("out_type", lambda: "int32")
    y = _output(graph, name, out, (len(graph.tensor(x).shape),), None)
    graph.add_operator("SHAPE", [x], [y], schema.ShapeOptionsT(outType=DTYPES[out]))
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


def _ids(p: Draw) -> tuple[int, ...]:
    return (p.integer("ids", 1, 8),)


def add_embedding_lookup(graph: GraphBuilder, p: Draw, x: int, name: str = "embedding_lookup") -> int:
    """Ids 0..127 computed in the graph (|x - zero point| as int8 of zero point 0, CAST to int32)
    into 128 constant rows; `output` int8 (a copy), float32 (int8 rows dequantized) or float32
    rows (`values` float32)."""
    source = graph.tensor(x)
    magnitude = _output(graph, f"{name}/abs", "int8", source.shape, {"scale": source.scale, "zero_point": 0})
    graph.add_operator("ABS", [x], [magnitude])
    ids = _output(graph, f"{name}/ids", "int32", source.shape, None)
    graph.add_operator("CAST", [magnitude], [ids], schema.CastOptionsT(inDataType=DTYPES["int8"], outDataType=DTYPES["int32"]))
    kind = p.choice("kind", ("int8", "hybrid", "float32"))
    columns = tuple(p("columns", lambda: _random_factorization(p.rng, int(p.rng.integers(1, 7)), int(p.rng.integers(1, 3)))))
    if kind == "float32":
        rows = graph.add_constant(f"{name}/values", p.rng.normal(0, 1, (128, *columns)).astype(np.float32))
    else:
        zero_point = 0 if kind == "hybrid" else p.integer("values_zero_point", -20, 20)
        quantization = {"scale": p.log_uniform("values_scale", 1e-3, 1e-1), "zero_point": zero_point}
        if p("values_input", lambda: False):  # the rows a graph input, not a constant
            rows = graph.add_input(f"{name}/values", "int8", (128, *columns), **quantization)
        else:
            rows = graph.add_constant(f"{name}/values", p.rng.integers(-128, 128, (128, *columns)).astype(np.int8),
                                      **quantization)
    out = "int8" if kind == "int8" else "float32"
    quantization = {"scale": graph.tensor(rows).scale, "zero_point": graph.tensor(rows).zero_point} if out == "int8" else None
    y = _output(graph, name, out, (source.shape[0], *columns), quantization)
    graph.add_operator("EMBEDDING_LOOKUP", [ids, rows], [y])
    return y


def add_dynamic_update_slice(graph: GraphBuilder, p: Draw, x: int, name: str = "dynamic_update_slice") -> int:
    """An update (another graph input) of a shape within x's at start indices that are constants
    (some past the edges, which TFLite clamps) or a graph input (random int32: clamped)."""
    source = graph.tensor(x)
    shape = tuple(p("update_shape", lambda: [int(p.rng.integers(1, d + 1)) for d in source.shape]))
    quantization = {"scale": source.scale, "zero_point": source.zero_point} if source.quantization else {}
    update = graph.add_input(f"{name}/update", source.dtype, shape, **quantization)
    if p("constant_start", lambda: bool(p.rng.random() < 0.7)):
        start = graph.add_constant(f"{name}/start", np.array(
            p("start", lambda: [int(p.rng.integers(-1, d - u + 2)) for d, u in zip(source.shape, shape)]), np.int32))
    else:
        start = graph.add_input(f"{name}/start", "int32", (len(shape),))
    y = _output(graph, name, source.dtype, source.shape, quantization or None)
    graph.add_operator("DYNAMIC_UPDATE_SLICE", [x, update, start], [y])
    return y


def _index_rows(p: Draw) -> tuple[int, ...]:
    return (p.integer("slices", 1, 8), 1)


def add_gather_nd_run_time(graph: GraphBuilder, p: Draw, x: int, name: str = "gather_nd") -> int:
    """Indices computed in the graph (|x - zero point| as int8 of zero point 0, CAST to int32: 0..127,
    one per row of `x`) into params that are another graph input of 128 rows."""
    source = graph.tensor(x)
    magnitude = _output(graph, f"{name}/abs", "int8", source.shape, {"scale": source.scale, "zero_point": 0})
    graph.add_operator("ABS", [x], [magnitude])
    indices = _output(graph, f"{name}/indices", "int32", source.shape, None)
    graph.add_operator("CAST", [magnitude], [indices], schema.CastOptionsT(inDataType=DTYPES["int8"], outDataType=DTYPES["int32"]))
    dtype = p.choice("params_dtype", ("int8", "int16", "int32"))
    rank = int(p.rng.integers(0, 3))  # a rank-0 row (one element) has no factors to draw
    columns = tuple(p("columns", lambda: _random_factorization(p.rng, int(p.rng.integers(1, 5)), rank) if rank else ()))
    quantization = {"scale": 0.05, "zero_point": 0} if dtype != "int32" else {}
    params = graph.add_input(f"{name}/params", dtype, (128, *columns), **quantization)
    y = _output(graph, name, dtype, (source.shape[0], *columns), quantization or None)
    graph.add_operator("GATHER_ND", [params, indices], [y], schema.GatherNdOptionsT())
    return y


register_cases({
    "GATHER_ND/run_time": (_index_rows, add_gather_nd_run_time, _SCALES, "int8"),
    "EMBEDDING_LOOKUP": (_ids, add_embedding_lookup, _SCALES, "int8"),
    "DYNAMIC_UPDATE_SLICE": (_small, add_dynamic_update_slice, _SCALES, "int8"),
    "DYNAMIC_UPDATE_SLICE/int16": (_small, add_dynamic_update_slice, _SCALES, "int16"),
    "DYNAMIC_UPDATE_SLICE/int32": (_small, add_dynamic_update_slice, _SCALES, "int32"),
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


# --- float32 operators (mlfbuild/importer/lowering/float_math.py) ---------------------------------------

def _float_unary(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        """`squarings` SQUAREs before the operator, to reach large values (float32 MUL is not compiled)."""
        source = graph.tensor(x)
        for k in range(p("squarings", lambda: 0)):
            squared = _output(graph, f"{name}/square{k}", "float32", source.shape, None)
            graph.add_operator("SQUARE", [x], [squared])
            x = squared
        y = _output(graph, name, "float32", source.shape, None)
        graph.add_operator(op, [x], [y])
        return y
    add.__name__ = f"add_{op.lower()}"
    return add


def add_floor_binary(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        """The denominator another graph input (`constant_operand`: a constant), of a shape that
        broadcasts against x's (dimensions set to 1, leading ones dropped); `swap`: x divides."""
        shape = graph.tensor(x).shape
        other_shape = p("operand_shape", lambda: tuple(
            1 if p.rng.random() < 0.3 else d for d in shape)[int(p.rng.integers(0, len(shape))):])
        if p("constant_operand", lambda: bool(p.rng.random() < 0.3)):
            values = p.rng.normal(0, 1, other_shape).astype(np.float32)
            values[values == 0] = 1.0
            other = graph.add_constant(f"{name}/operand", values.reshape(other_shape))
        else:
            other = graph.add_input(f"{name}/operand", "float32", other_shape)
        operands = [other, x] if p("swap", lambda: bool(p.rng.random() < 0.3)) else [x, other]
        out = tuple(np.broadcast_shapes(shape, tuple(other_shape)))
        y = _output(graph, name, "float32", out, None)
        options = {"FLOOR_DIV": schema.FloorDivOptionsT, "FLOOR_MOD": schema.FloorModOptionsT,
                   "DIV": schema.DivOptionsT}[op]()
        graph.add_operator(op, operands, [y], options)
        return y
    add.__name__ = f"add_{op.lower()}"
    return add


def _nhwc(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 2), p.integer("height", 1, 6), p.integer("width", 1, 6), p.integer("channels", 1, 3))


def add_l2_pool_2d(graph: GraphBuilder, p: Draw, x: int, name: str = "l2_pool_2d") -> int:
    batch, height, width, channels = graph.tensor(x).shape
    padding = p.choice("padding", ("SAME", "VALID"))
    kh, kw = p.integer("filter_h", 1, height if padding == "VALID" else 3), p.integer("filter_w", 1, width if padding == "VALID" else 3)
    sh, sw = p.integer("stride_h", 1, 2), p.integer("stride_w", 1, 2)
    activation = p.choice("activation", ("NONE", "RELU", "RELU_N1_TO_1", "RELU6"))
    size = (lambda n, k, s: (n + s - 1) // s) if padding == "SAME" else (lambda n, k, s: (n - k + s) // s)
    y = _output(graph, name, "float32", (batch, size(height, kh, sh), size(width, kw, sw), channels), None)
    codes = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
    options = schema.Pool2DOptionsT(padding=0 if padding == "SAME" else 1, strideW=sw, strideH=sh, filterWidth=kw,
                                    filterHeight=kh, fusedActivationFunction=codes[activation])
    graph.add_operator("L2_POOL_2D", [x], [y], options)
    return y


add_round, add_ceil = _float_unary("ROUND"), _float_unary("CEIL")  # not registered: LiteRT's reference resolver lacks them

register_cases({
    "FLOOR_DIV": (_small, add_floor_binary("FLOOR_DIV"), _SCALES, "float32"),
    "FLOOR_MOD": (_small, add_floor_binary("FLOOR_MOD"), _SCALES, "float32"),
    "DIV": (_small, add_floor_binary("DIV"), _SCALES, "float32"),
    "SQUARE": (_small, _float_unary("SQUARE"), _SCALES, "float32"),
    "L2_POOL_2D": (_nhwc, add_l2_pool_2d, _SCALES, "float32"),
})
