"""Operators that pick, repeat or reorder elements, or compute from shapes: GATHER_ND, BROADCAST_TO,
REVERSE_V2, SHAPE, BROADCAST_ARGS, CUMSUM. Small kernels with TFLite's reference semantics
(reference/gather_nd.h, broadcast_to.h, reverse.h, cumsum.h); the element offsets they read depend
only on the model, so they are computed at import: a copy with constant strides, or a constant
table of slice offsets. No requantization: the bytes are moved as TFLite moves them.

Operands that must be known at import (indices, shapes, axes) are refused when they are not
constants (or, for BROADCAST_ARGS, the output of a SHAPE)."""

from __future__ import annotations

import numpy as np

from ..tflite import Graph, Operator, Tensor
from .base import Lowered, Operand, refuse, strides_of, tensor_at

CTYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "float32": "float", "int64": "int64_t",
          "uint8": "uint8_t", "bool": "bool"}
_MOVED = ("int8", "int16", "int32", "float32")  # element types the copy kernels take


def _typed(op: Operator, t: Tensor, dtypes: tuple[str, ...]) -> str:
    if t.dtype not in dtypes:
        raise refuse(op, f"tensor {t.describe()} is {t.dtype}; {op.name} supports {', '.join(dtypes)}")
    return CTYPES[t.dtype]


def _activation(op: Operator, t: Tensor) -> Tensor:
    if t.is_constant:
        raise refuse(op, f"the constant input {t.describe()} is not supported (the converter folds it)")
    return t


def _known_vector(graph: Graph, op: Operator, t: Tensor, what: str) -> list[int]:
    """The integer values of `t`, known at import: a constant, or the output of a SHAPE."""
    if t.is_constant:
        if t.dtype not in ("int32", "int64") and not (t.dtype == "int16" and what == "indices"):
            raise refuse(op, f"the {what} {t.describe()} is {t.dtype}, not an integer type TFLite takes")
        return [int(v) for v in t.data.reshape(-1)]
    producer = next((o for o in graph.operators if t.index in o.outputs), None)
    if producer is not None and producer.name == "SHAPE":
        return list(graph.tensors[producer.inputs[0]].shape)
    raise refuse(op, f"the {what} {t.describe()} must be a constant (it is computed at run time)")


def _copy(op: Operator, x: Tensor, y: Tensor, ctype: str, strides: list[int], base: int) -> Lowered:
    """output[i0..in] (row-major over y's shape) = input[base + Σ i_d × strides[d]]: nested loops of
    constant bounds (dimensions of size 1 dropped), both indices affine in the loop counters."""
    out_strides = strides_of(tuple(y.shape))
    dims = [(d, s, t) for d, s, t in zip(y.shape, strides, out_strides) if d != 1]
    lines, indent, terms, out_terms = [], "  ", [str(base)], ["0"]
    for k, (dim, stride, out_stride) in enumerate(dims):
        lines.append(f"{indent}for (int32_t i{k} = 0; i{k} < {dim}; ++i{k})")
        indent += "  "
        if stride:
            terms.append(f"i{k} * {stride}" if stride > 0 else f"i{k} * ({stride})")
        out_terms.append(f"i{k} * {out_stride}")
    lines += [f"{indent}output_[{' + '.join(out_terms)}] = input_[{' + '.join(terms)}];", "  return 0;"]
    operands = [Operand(f"{ctype}*", "input_", x.index), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, lines, kernel=True)


def _gather_nd(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: one memcpy per slice, at offsets folded at import (constant indices) or summed at run time (an offset out of range fails the run)."""
    params, indices, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _typed(op, _activation(op, params), _MOVED)
    if y.dtype != params.dtype:
        raise refuse(op, f"the output {y.describe()} is not of the params' type {params.dtype}")
    if indices.dtype not in ("int16", "int32", "int64") or len(indices.shape) < 1:
        raise refuse(op, f"the indices {indices.describe()} must be an integer tensor of rank >= 1")
    nd = indices.shape[-1]
    if not 1 <= nd <= len(params.shape):
        raise refuse(op, f"index depth {nd} is not within the params' rank {len(params.shape)}")
    slice_size = int(np.prod(params.shape[nd:], dtype=np.int64))
    total = int(np.prod(params.shape, dtype=np.int64))
    if tuple(indices.shape[:-1]) + tuple(params.shape[nd:]) != y.shape:
        raise refuse(op, f"the output {y.describe()} is not indices.shape[:-1] + params.shape[{nd}:]")
    dims_to_count = strides_of(tuple(params.shape))[:nd]
    if not indices.is_constant:
        return _gather_nd_at_run_time(op, params, indices, y, ctype, nd, slice_size, total, dims_to_count)
    rows = indices.data.astype(np.int64).reshape(-1, nd)
    offsets = [int(sum(int(v) * int(c) for v, c in zip(row, dims_to_count))) for row in rows]
    bad = [k for k, f in enumerate(offsets) if f < 0 or f + slice_size > total]
    if bad:
        raise refuse(op, f"index {rows[bad[0]].tolist()} is out of range of params {list(params.shape)} "
                         "(TFLite's GATHER_ND fails on it)")
    size = np.dtype(params.dtype).itemsize
    body = [f"  memcpy(output_ + {k * slice_size}, params_ + {offset}, {slice_size * size});"
            for k, offset in enumerate(offsets) if slice_size]
    body.append("  return 0;")
    operands = [Operand(f"{ctype}*", "params_", params.index), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _gather_nd_at_run_time(op: Operator, params: Tensor, indices: Tensor, y: Tensor, ctype: str, nd: int,
                           slice_size: int, total: int, dims_to_count) -> Lowered:
    """Each slice's flat offset summed from its index row (in 64 bits); an offset out of range fails
    the run, as TFLite's GatherNd fails. The slice is found by a loop over the possible offsets, so
    that every address is affine in loop counters of constant bounds."""
    if indices.dtype != "int32":
        raise refuse(op, f"indices computed at run time must be int32, not {indices.dtype}")
    slices = int(np.prod(indices.shape[:-1], dtype=np.int64))
    size = np.dtype(params.dtype).itemsize
    terms = " + ".join(f"(int64_t)indices_[s * {nd} + {j}] * {int(c)}" for j, c in enumerate(dims_to_count))
    body = [f"  for (int32_t s = 0; s < {slices}; ++s) {{", f"    const int64_t from = {terms};",
            f"    if (from < 0 || from + {slice_size} > {total}) return -1;",
            f"    for (int32_t f = 0; f <= {total - slice_size}; f += {slice_size}) {{",
            "      if (f != from) continue;",
            f"      memcpy(output_ + s * {slice_size}, params_ + f, {slice_size * size});", "    }", "  }", "  return 0;"]
    if slice_size == 0 or slices == 0:
        body = ["  return 0;"]
    operands = [Operand(f"{ctype}*", "params_", params.index), Operand("int32_t*", "indices_", indices.index),
                Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _broadcast_to(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a copy looping over the output, stride 0 along the broadcast dimensions."""
    x, shape_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _typed(op, _activation(op, x), _MOVED)
    shape = _known_vector(graph, op, shape_tensor, "shape")
    if y.dtype != x.dtype or tuple(shape) != y.shape:
        raise refuse(op, f"the output {y.describe()} is not {x.dtype} of the shape {shape}")
    if len(shape) < len(x.shape) or len(shape) > 8:
        raise refuse(op, f"cannot broadcast {x.describe()} to rank {len(shape)} (TFLite: input rank <= output rank <= 8)")
    padded = (1,) * (len(shape) - len(x.shape)) + tuple(x.shape)
    if any(d != 1 and d != s for d, s in zip(padded, shape)):
        raise refuse(op, f"{x.describe()} does not broadcast to {shape}")
    strides = [0 if d == 1 else s for d, s in zip(padded, strides_of(padded))]
    return _copy(op, x, y, ctype, strides, 0)


def _reverse_v2(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a copy looping over the output, negative strides along the reversed axes."""
    x, axis_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _typed(op, _activation(op, x), _MOVED + ("uint8", "int64", "bool"))
    if y.dtype != x.dtype or y.shape != x.shape:
        raise refuse(op, f"the output {y.describe()} is not the input's type and shape")
    rank = len(x.shape)
    axes = _known_vector(graph, op, axis_tensor, "axis")
    if any(not -rank <= a < rank for a in axes) or not axes:
        raise refuse(op, f"axes {axes} are not axes of {x.describe()}")
    axes = sorted({a % rank for a in axes})
    strides, base = list(strides_of(tuple(x.shape))), 0
    for a in axes:
        base += (x.shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    return _copy(op, x, y, ctype, strides, base)


def _shape(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a copy of the input's static shape, a constant of the import."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if y.dtype not in ("int32", "int64") or y.shape != (len(x.shape),):
        raise refuse(op, f"the output {y.describe()} is not an int32/int64 vector of the input's rank {len(x.shape)}")
    return _constant_output(op, y, np.array(x.shape, dtype=y.dtype))


def _constant_output(op: Operator, y: Tensor, value: np.ndarray) -> Lowered:
    ctype = CTYPES[y.dtype]
    if value.size == 0:
        return Lowered(op, "", [Operand(f"{ctype}*", "output_", y.index)], ["  (void)output_;", "  return 0;"],
                       kernel=True)
    body = [f"  memcpy(output_, value_, {value.nbytes});", "  return 0;"]
    operands = [Operand(f"{ctype}*", "value_", constant=as_stored(value)), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _broadcast_args(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: a copy of the broadcast shape, computed at import from shapes known there."""
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    first, second = _known_vector(graph, op, a, "shape"), _known_vector(graph, op, b, "shape")
    if a.dtype != b.dtype or y.dtype != a.dtype or y.dtype not in ("int32", "int64"):
        raise refuse(op, "both shapes and the output must be int32 (or int64) alike")
    rank = max(len(first), len(second))
    first, second = [1] * (rank - len(first)) + first, [1] * (rank - len(second)) + second
    if any(p != q and p != 1 and q != 1 for p, q in zip(first, second)):
        raise refuse(op, f"shapes {first} and {second} do not broadcast (TFLite fails on them)")
    result = [q if p == 1 else p for p, q in zip(first, second)]
    if y.shape != (rank,):
        raise refuse(op, f"the output {y.describe()} does not hold {rank} dimensions")
    return _constant_output(op, y, np.array(result, dtype=y.dtype))


def _cumsum(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference CumSum (float32, int32 wrapping) along a constant axis."""
    x, axis_tensor, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    ctype = _typed(op, _activation(op, x), ("int32", "float32"))
    if y.dtype != x.dtype or y.shape != x.shape:
        raise refuse(op, f"the output {y.describe()} is not the input's type and shape")
    if axis_tensor.dtype != "int32":
        raise refuse(op, f"the axis {axis_tensor.describe()} is not int32")
    values = _known_vector(graph, op, axis_tensor, "axis")
    rank = len(x.shape)
    if len(values) != 1 or not -rank <= values[0] < rank:
        raise refuse(op, f"axis {values} is not one axis of {x.describe()}")
    axis = values[0] % rank
    inner = int(np.prod(x.shape[:axis], dtype=np.int64))
    depth = x.shape[axis]
    outer = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    exclusive, reverse = bool(op.options.get("exclusive")), bool(op.options.get("reverse"))
    acc_type, add = ("float", "acc + input_[k]") if ctype == "float" else \
        ("uint32_t", "acc + (uint32_t)input_[k]")  # TFLite's AddTensorValuesWithExpectedOverflow: wraps
    store = "(int32_t)acc" if ctype != "float" else "acc"
    start, step = (f"{(depth - 1) * outer}", f"-{outer}") if reverse else ("0", f"{outer}")
    if exclusive:
        update = [f"output_[k] = {store};", f"acc = {add};"]
    else:
        update = [f"acc = {add};", f"output_[k] = {store};"]
    body = [f"  for (int32_t a = 0; a < {inner}; ++a)", f"    for (int32_t c = 0; c < {outer}; ++c) {{",
            f"      {acc_type} acc = 0;",
            f"      for (int32_t d = 0; d < {depth}; ++d) {{",
            f"        const int32_t k = a * {depth * outer} + c + {start} + d * ({step});",
            *[f"        {line}" for line in update], "      }", "    }", "  return 0;"]
    operands = [Operand(f"{ctype}*", "input_", x.index), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _tensor_or_constant(op: Operator, t: Tensor, ctype: str, param: str) -> Operand:
    """A graph tensor as an operand; a constant of the graph as a constant array."""
    if t.is_constant:
        return Operand(f"{ctype}*", param, constant=as_stored(t.data))
    return Operand(f"{ctype}*", param, t.index)


def as_stored(array: np.ndarray) -> np.ndarray:
    """`array` as the integer array of the same bytes (little-endian, as host and Cortex-M store
    them): emit writes constants as integer initializers, so a float32 or int64 array goes in as its
    32-bit words (bool and other 1-byte types as uint8)."""
    array = np.ascontiguousarray(array)
    if array.dtype.name in ("int8", "int16", "int32", "uint8"):
        return array
    raw = array.astype(array.dtype.newbyteorder("<"), copy=False).view(np.uint8).reshape(-1)
    return raw.view("<i4").astype(np.int32) if raw.size % 4 == 0 else raw.copy()


def c_float(value: float) -> str:
    """A float32 as an exact C literal."""
    return f"{float(np.float32(value)).hex()}f"


def _embedding_lookup(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: one row copied per id (int8 → float32: dequantized by the values' scale), an id out of range fails the run."""
    ids, value, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if ids.dtype != "int32" or len(ids.shape) != 1:
        raise refuse(op, f"the ids {ids.describe()} must be a 1-D int32 tensor")
    ctype = _typed(op, value, ("int8", "float32"))
    if len(value.shape) < 2:
        raise refuse(op, f"the values {value.describe()} must have rank >= 2")
    rows, columns = value.shape[0], int(np.prod(value.shape[1:], dtype=np.int64))
    if y.shape != (ids.shape[0], *value.shape[1:]):
        raise refuse(op, f"the output {y.describe()} is not one row of {value.describe()} per id")
    hybrid = value.dtype == "int8" and y.dtype == "float32"
    if not hybrid and y.dtype != value.dtype:
        raise refuse(op, f"a {value.dtype} lookup into {y.dtype} is not supported (TFLM: float32 → float32, int8 → int8 or float32)")
    if ids.is_constant and ((ids.data < 0) | (ids.data >= rows)).any():
        raise refuse(op, f"an id of {ids.describe()} is out of range of {rows} rows (TFLite's EMBEDDING_LOOKUP fails on it)")
    if hybrid:
        quantization = value.quantization
        if quantization is None or quantization.per_channel or quantization.zero_point != 0:
            raise refuse(op, "int8 → float32 lookups need values quantized per tensor with zero point 0 (as TFLM requires)")
        scale = float(np.float32(quantization.scale))
        if not np.isfinite(scale):
            raise refuse(op, f"the values' scale {scale} is not finite")
        copy = [f"    for (int32_t j = 0; j < {columns}; ++j)",
                f"      output_[i * {columns} + j] = (float)value_[id * {columns} + j] * {c_float(scale)};"]
    else:
        size = np.dtype(value.dtype).itemsize
        copy = [f"    memcpy(output_ + i * {columns}, value_ + id * {columns}, {columns * size});"]
    head = [f"  for (int32_t i = 0; i < {ids.shape[0]}; ++i) {{", "    const int32_t id_ = ids_[i];",
            f"    if (id_ < 0 || id_ >= {rows}) return -1;"]
    if value.is_constant:
        body = [*head, "    const int32_t id = id_;", *copy, "  }", "  return 0;"]
    else:  # the row found by a loop of constant bounds: addresses in the pool affine in loop counters
        body = [*head, f"    for (int32_t id = 0; id < {rows}; ++id) {{", "      if (id != id_) continue;",
                *[f"  {line}" for line in copy], "    }", "  }", "  return 0;"]
    operands = [_tensor_or_constant(op, ids, "int32_t", "ids_"), _tensor_or_constant(op, value, ctype, "value_"),
                Operand(f"{'float' if hybrid else ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _dynamic_update_slice(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: the operand copied, then the update's rows at the start indices clamped as TFLite clamps them."""
    x, update, start, y = (tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 2),
                           tensor_at(graph, op, 0, output=True))
    ctype = _typed(op, x, _MOVED)
    if update.dtype != x.dtype or y.dtype != x.dtype or y.shape != x.shape:
        raise refuse(op, f"the update {update.describe()} and output {y.describe()} must be of the operand's type and shape")
    rank = len(x.shape)
    if len(update.shape) != rank or any(u > d for u, d in zip(update.shape, x.shape)) or rank < 1:
        raise refuse(op, f"the update {update.describe()} does not fit in {x.describe()}")
    if start.dtype not in ("int32", "int64") or start.shape != (rank,):
        raise refuse(op, f"the start indices {start.describe()} must be {rank} int32/int64 values")
    size = np.dtype(x.dtype).itemsize
    strides, total = strides_of(tuple(x.shape)), int(np.prod(x.shape, dtype=np.int64))
    limits = [d - u for d, u in zip(x.shape, update.shape)]
    if int(np.prod(update.shape, dtype=np.int64)) == 0:
        body = [f"  memcpy(output_, operand_, {total * size});", "  return 0;"]
        operands = [_tensor_or_constant(op, x, ctype, "operand_"), Operand(f"{ctype}*", "output_", y.index)]
        return Lowered(op, "", operands, body, kernel=True)
    row = update.shape[-1]
    outer = list(update.shape[:-1])
    update_strides = strides_of(tuple(update.shape))
    lines = [f"  memcpy(output_, operand_, {total * size});"]
    operands = [_tensor_or_constant(op, x, ctype, "operand_"), _tensor_or_constant(op, update, ctype, "update_")]
    loops, indent, out_terms, in_terms = [], "  ", [], ["0"]
    if start.is_constant:
        first = [min(max(0, int(v)), limit) for v, limit in zip(start.data.reshape(-1), limits)]
        out_terms.append(str(sum(f * s for f, s in zip(first, strides))))
    else:
        # Each clamped start s_d is found by a loop t_d over 0..limit_d, so that every address is
        # affine in loop counters of constant bounds (the pool analysis proves it in bounds).
        stype = "int32_t" if start.dtype == "int32" else "int64_t"
        operands.append(Operand(f"{stype}*", "start_", start.index))
        out_terms.append("0")
        for d, (limit, stride) in enumerate(zip(limits, strides)):
            if limit == 0:
                continue
            lines.append(f"  const int32_t s{d} = start_[{d}] < 0 ? 0 : (start_[{d}] > {limit} ? {limit} : (int32_t)start_[{d}]);")
            loops += [f"{indent}for (int32_t t{d} = 0; t{d} <= {limit}; ++t{d}) {{", f"{indent}  if (t{d} != s{d}) continue;"]
            indent += "  "
            out_terms.append(f"t{d} * {stride}")
    closing = [f"{'  ' * (k + 1)}}}" for k in reversed(range(len(loops) // 2))]
    for k, dim in enumerate(outer):
        if dim == 1:
            continue
        loops.append(f"{indent}for (int32_t i{k} = 0; i{k} < {dim}; ++i{k})")
        indent += "  "
        out_terms.append(f"i{k} * {strides[k]}")
        in_terms.append(f"i{k} * {update_strides[k]}")
    lines += loops + [f"{indent}memcpy(output_ + {' + '.join(out_terms)}, update_ + {' + '.join(in_terms)}, {row * size});",
                      *closing, "  return 0;"]
    operands.append(Operand(f"{ctype}*", "output_", y.index))
    return Lowered(op, "", operands, lines, kernel=True)


RULES = {
    "EMBEDDING_LOOKUP": _embedding_lookup,
    "DYNAMIC_UPDATE_SLICE": _dynamic_update_slice,
    "GATHER_ND": _gather_nd,
    "BROADCAST_TO": _broadcast_to,
    "REVERSE_V2": _reverse_v2,
    "SHAPE": _shape,
    "BROADCAST_ARGS": _broadcast_args,
    "CUMSUM": _cumsum,
}
