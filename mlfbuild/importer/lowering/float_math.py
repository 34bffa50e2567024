"""The operators TFLM registers for float32 only, for models whose graph keeps a float part:
FLOOR_DIV, FLOOR_MOD (broadcasting), ROUND, CEIL, SQUARE, L2_POOL_2D — small kernels with
TFLite's reference semantics (reference/floor_div.h, floor_mod.h, round.h, pooling.h's L2Pool,
elementwise.cc), on <math.h>'s float functions that are exact (correctly rounded) in every C
library: floorf, ceilf, fmodf, sqrtf. (LiteRT's reference resolver has no ROUND or CEIL: the tests
hold them to its builtin kernels, which read a subnormal input as zero — CEIL(1e-40) = 0 there,
1 here.)

COS and SIN stay refused: newlib's cosf/sinf give LiteRT's (glibc's) result on the host and the
Cortex-M55 but differ in the last bit on the Cortex-M4 (mps2-an386), in the tests. LOG and SQRT of
float32 belong to unary.py's rules."""

from __future__ import annotations

import numpy as np

from ..tflite import ACTIVATIONS, Graph, Operator, Tensor
from .base import (
    C_HELPERS,
    Lowered,
    Operand,
    refuse,
    strides_of,
    tensor_at,
    window_padding,
)
from .indexing import as_stored, c_float


def _float(op: Operator, *tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype != "float32":
            raise refuse(op, f"tensor {t.describe()} is {t.dtype}; {op.name} is supported for float32 only (as TFLM)")


def _operand(t: Tensor, param: str) -> Operand:
    if t.is_constant:
        return Operand("float*", param, constant=as_stored(t.data.astype(np.float32)))
    return Operand("float*", param, t.index)


def _unary(expression: str, doc: str):
    def rule(graph: Graph, op: Operator) -> Lowered:
        x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
        _float(op, x, y)
        if x.shape != y.shape:
            raise refuse(op, f"the output {y.describe()} is not of the input's shape")
        if x.is_constant:
            raise refuse(op, f"the constant input {x.describe()} is not supported (the converter folds it)")
        count = int(np.prod(x.shape, dtype=np.int64))
        body = [f"  for (int32_t i = 0; i < {count}; ++i) {{", "    const float in = input_[i];",
                f"    output_[i] = {expression};", "  }", "  return 0;"]
        return Lowered(op, "", [_operand(x, "input_"), _operand(y, "output_")], body, kernel=True, in_place=True)
    rule.__doc__ = doc
    return rule


ROUND_FUNCTION = "mlf_round_half_even_f32"
# TFLite's RoundToNearest: floor, then up when the rest is over a half, or a half and the floor odd.
ROUND_C = """static inline float mlf_round_half_even_f32(float value) {
  const float floor_value = floorf(value);
  const float rest = value - floor_value;
  if (rest < 0.5f || (rest == 0.5f && (int32_t)floor_value % 2 == 0)) return floor_value;
  return floor_value + 1.0f;
}"""
C_HELPERS[ROUND_FUNCTION] = ROUND_C


def _binary(kind: str):
    def rule(graph: Graph, op: Operator) -> Lowered:
        a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
        _float(op, a, b, y)
        if a.is_constant and b.is_constant:
            raise refuse(op, "both inputs are constants (the converter folds them)")
        rank = max(len(a.shape), len(b.shape))
        if rank > 6:
            raise refuse(op, f"rank {rank} is not supported (at most 6)")
        pa, pb = (1,) * (rank - len(a.shape)) + tuple(a.shape), (1,) * (rank - len(b.shape)) + tuple(b.shape)
        if any(p != q and p != 1 and q != 1 for p, q in zip(pa, pb)):
            raise refuse(op, f"{a.describe()} and {b.describe()} do not broadcast")
        out = tuple(max(p, q) for p, q in zip(pa, pb))
        if out != y.shape:
            raise refuse(op, f"the output {y.describe()} is not of the broadcast shape {list(out)}")
        if b.is_constant and (b.data == 0).any() and kind == "div":
            raise refuse(op, "a constant denominator holds 0 (TFLite's FLOOR_DIV fails on it)")
        sa = [0 if d == 1 else s for d, s in zip(pa, strides_of(pa))]
        sb = [0 if d == 1 else s for d, s in zip(pb, strides_of(pb))]
        so = strides_of(out)
        body = []
        if kind == "div" and not b.is_constant:  # TFLite checks every denominator before dividing
            body += [f"  for (int32_t i = 0; i < {int(np.prod(b.shape, dtype=np.int64))}; ++i)",
                     "    if (input2_[i] == 0.0f) return -1;"]
        indent, ta, tb, to = "  ", ["0"], ["0"], ["0"]
        for k, dim in enumerate(out):
            if dim == 1:
                continue
            body.append(f"{indent}for (int32_t i{k} = 0; i{k} < {dim}; ++i{k}) {{")
            indent += "  "
            to.append(f"i{k} * {so[k]}")
            if sa[k]:
                ta.append(f"i{k} * {sa[k]}")
            if sb[k]:
                tb.append(f"i{k} * {sb[k]}")
        body += [f"{indent}const float x = input1_[{' + '.join(ta)}], y = input2_[{' + '.join(tb)}];"]
        if kind == "div":
            body += [f"{indent}output_[{' + '.join(to)}] = floorf(x / y);"]
        elif kind == "quotient":  # TFLite's float DIV: IEEE division, a zero denominator gives ±inf or NaN
            body += [f"{indent}output_[{' + '.join(to)}] = x / y;"]
        else:  # TFLite's FloorMod: the truncated remainder, moved to the divisor's sign
            body += [f"{indent}const float rest = fmodf(x, y);",
                     f"{indent}output_[{' + '.join(to)}] = (rest != 0.0f && ((y < 0.0f) != (rest < 0.0f))) ? rest + y : rest;"]
        closing = [f"{'  ' * (k + 1)}}}" for k in reversed(range(sum(1 for d in out if d != 1)))]
        body += closing + ["  return 0;"]
        operands = [_operand(a, "input1_"), _operand(b, "input2_"), Operand("float*", "output_", y.index)]
        return Lowered(op, "", operands, body, kernel=True)
    rule.__doc__ = {"div": "mlfbuild kernel: floorf(x / y), broadcasting; a zero denominator fails the run (as TFLite).",
                    "quotient": "mlfbuild kernel: float32 x / y, broadcasting (TFLM's DIV is float32 only).",
                    "mod": "mlfbuild kernel: fmodf, moved to the divisor's sign (TFLite's FloorMod), broadcasting."}[kind]
    return rule


def _l2_pool_2d(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: sqrtf of the mean of squares over the window (TFLite's reference L2Pool)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    _float(op, x, y)
    if len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != y.shape[0] or x.shape[3] != y.shape[3]:
        raise refuse(op, f"{x.describe()} → {y.describe()} is not an NHWC pooling")
    batch, height, width, depth = x.shape
    _, out_h, out_w, _ = y.shape
    o = op.options
    kh, kw, sh, sw = o.get("filter_h", 0), o.get("filter_w", 0), o.get("stride_h", 0), o.get("stride_w", 0)
    pad_h = window_padding(op, height, kh, sh, 1, out_h)
    pad_w = window_padding(op, width, kw, sw, 1, out_w)
    activation = ACTIVATIONS.get(o.get("activation", 0), "?")
    bounds = {"NONE": None, "RELU": (0.0, None), "RELU_N1_TO_1": (-1.0, 1.0), "RELU6": (0.0, 6.0)}
    if activation not in bounds:
        raise refuse(op, f"fused activation {activation} is not supported")
    clamp = []
    if bounds[activation] is not None:
        lo, hi = bounds[activation]
        clamp.append(f"        result = result < {c_float(lo)} ? {c_float(lo)} : result;")
        if hi is not None:
            clamp.append(f"        result = result > {c_float(hi)} ? {c_float(hi)} : result;")
    body = [f"  for (int32_t b = 0; b < {batch}; ++b)",
            f"    for (int32_t oy = 0; oy < {out_h}; ++oy)",
            f"      for (int32_t ox = 0; ox < {out_w}; ++ox)",
            f"        for (int32_t c = 0; c < {depth}; ++c) {{",
            f"          const int32_t y0 = oy * {sh} - {pad_h}, x0 = ox * {sw} - {pad_w};",
            "          float sum = 0.0f;",
            "          int32_t count = 0;",
            f"          for (int32_t ky = 0; ky < {kh}; ++ky)",
            f"            for (int32_t kx = 0; kx < {kw}; ++kx) {{",
            "              const int32_t iy = y0 + ky, ix = x0 + kx;",
            f"              if (iy < 0 || iy >= {height} || ix < 0 || ix >= {width}) continue;",
            f"              const float value = input_[((b * {height} + iy) * {width} + ix) * {depth} + c];",
            "              volatile float square = value * value;  /* rounded: no fused multiply-add */",
            "              sum += square;",
            "              ++count;",
            "            }",
            "          float result = sqrtf(sum / (float)count);",
            *[line[:8] + "  " + line[8:] for line in clamp],
            f"          output_[((b * {out_h} + oy) * {out_w} + ox) * {depth} + c] = result;",
            "        }", "  return 0;"]
    return Lowered(op, "", [_operand(x, "input_"), Operand("float*", "output_", y.index)], body, kernel=True)


RULES = {
    "FLOOR_DIV": _binary("div"),
    "FLOOR_MOD": _binary("mod"),
    "DIV": _binary("quotient"),
    "ROUND": _unary(f"{ROUND_FUNCTION}(in)", "mlfbuild kernel: floorf, then half to even (TFLite's RoundToNearest)."),
    "CEIL": _unary("ceilf(in)", "mlfbuild kernel: ceilf."),
    "SQUARE": _unary("in * in", "mlfbuild kernel: x * x."),
    "L2_POOL_2D": _l2_pool_2d,
}
