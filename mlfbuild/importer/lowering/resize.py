"""Resampling of NHWC images: RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR (int8 and int16), with the
source rows and columns (and bilinear's 10-bit weights) computed at import as TFLite's reference kernels
compute them (resize_nearest_neighbor.h's float GetNearestNeighbor, resize_bilinear.h's
ResizeBilinearInteger)."""

from __future__ import annotations

import math

import numpy as np

from ..tflite import Graph, Operator, Tensor
from .base import Lowered, Operand, constant_data, nhwc, refuse, same_quantization, tensor_at
from .unary import CTYPES, quantized

f32 = np.float32


def _resize(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, int, int]:
    """(input, output, output height, output width), checked."""
    x, size, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    quantized(op, x)
    quantized(op, y, (x.dtype,))
    same_quantization(op, x, y)
    n, h, w, c = nhwc(op, x)
    values = [int(v) for v in constant_data(op, size, "int32").reshape(-1)]
    if len(values) != 2 or min(values) < 1:
        raise refuse(op, f"the size {values} is not two positive integers")
    if tuple(y.shape) != (n, values[0], values[1], c):
        raise refuse(op, f"the output {y.describe()} is not {x.describe()} resized to {values}")
    if op.options.get("align_corners") and op.options.get("half_pixel_centers"):
        raise refuse(op, "align_corners and half_pixel_centers together (TFLite refuses them)")
    if h * w * c >= 2 ** 31 or max(values) >= 2 ** 20 or max(h, w) >= 2 ** 20:
        raise refuse(op, "sizes too large for TFLite's 32-bit index arithmetic")
    return x, y, values[0], values[1]


def _within(index: str, size: int) -> str:
    """A tabulated source index (always within 0..size-1) reduced modulo `size`: the same value, in a
    form the build's pool analysis can bound."""
    return f"(({index} % {size} + {size}) % {size})"


def _nearest_index(out: int, in_size: int, out_size: int, align: bool, half: bool) -> int:
    """GetNearestNeighbor in float32, as TFLite computes it."""
    scale = f32(in_size - 1) / f32(out_size - 1) if align and out_size > 1 else f32(in_size) / f32(out_size)
    value = f32(f32(out) + f32(0.5 if half else 0.0)) * scale
    v = float(value)
    index = int(math.copysign(math.floor(abs(v) + 0.5), v)) if align else math.floor(v)
    index = min(index, in_size - 1)
    return max(0, index) if half else index


def _nearest(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference ResizeNearestNeighbor (source rows and columns tabulated at
    import in float32 as GetNearestNeighbor computes them), one quantization in and out."""
    x, y, out_h, out_w = _resize(graph, op)
    n, h, w, c = x.shape
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    rows = np.array([_nearest_index(i, h, out_h, align, half) for i in range(out_h)], np.int32)
    cols = np.array([_nearest_index(i, w, out_w, align, half) for i in range(out_w)], np.int32)
    if rows.min() < 0 or cols.min() < 0:
        raise refuse(op, "a source row or column falls before the image")
    ctype = CTYPES[x.dtype]
    body = [            f"  for (int32_t b = 0; b < {n}; ++b)",
            f"    for (int32_t i = 0; i < {out_h}; ++i) {{",
            f"      const int32_t row = {_within('rows_[i]', h)};",
            f"      for (int32_t j = 0; j < {out_w}; ++j) {{",
            f"        const int32_t source = ((b * {h} + row) * {w} + {_within('cols_[j]', w)}) * {c};",
            f"        for (int32_t k = 0; k < {c}; ++k)",
            f"          output_[((b * {out_h} + i) * {out_w} + j) * {c} + k] = input_[source + k];",
            "      }", "    }",
            "  return 0;"]
    operands = [Operand(f"{ctype}*", "input_", x.index), Operand("int32_t*", "rows_", constant=rows),
                Operand("int32_t*", "cols_", constant=cols), Operand(f"{ctype}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


def _c_divide(a: int, b: int) -> int:
    """C's integer division (toward zero) of `a` by a positive `b`."""
    return abs(a) // b * (1 if a >= 0 else -1)


def _bilinear_axis(in_size: int, out_size: int, align: bool, half: bool) -> tuple[np.ndarray, ...]:
    """ComputeInterpolationValuesInteger for every output position: (lower, upper, 10-bit offset of
    the position past the lower source)."""
    scale = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    lower, upper, frac = [], [], []
    for i in range(out_size):
        scaled = i * scale + scale // 2 - (1 << 9) if half else i * scale
        lo = max(_c_divide(scaled, 1 << 10), 0)
        hi = min(_c_divide(scaled + (1 << 10) - 1, 1 << 10), in_size - 1)
        lower.append(lo), upper.append(hi), frac.append(scaled - (1 << 10) * lo)
    return tuple(np.array(v, np.int32) for v in (lower, upper, frac))


def _bilinear(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference ResizeBilinearInteger (10-bit fixed-point positions and weights
    tabulated at import, a 64-bit sum of the four weighted neighbours rounded half away from zero),
    one quantization in and out."""
    x, y, out_h, out_w = _resize(graph, op)
    n, h, w, c = x.shape
    align, half = bool(op.options.get("align_corners")), bool(op.options.get("half_pixel_centers"))
    y0, y1, fy = _bilinear_axis(h, out_h, align, half)
    x0, x1, fx = _bilinear_axis(w, out_w, align, half)
    if min(y0.min(), y1.min(), x0.min(), x1.min()) < 0 or max(abs(fy).max(), abs(fx).max()) > 1 << 20:
        raise refuse(op, "a source row or column falls outside the image")
    ctype = CTYPES[x.dtype]
    body = [            f"  for (int32_t b = 0; b < {n}; ++b)",
            f"    for (int32_t i = 0; i < {out_h}; ++i) {{",
            "      const int64_t dy = fy_[i];",
            f"      const int32_t top = (b * {h} + {_within('y0_[i]', h)}) * {w * c};",
            f"      const int32_t bottom = (b * {h} + {_within('y1_[i]', h)}) * {w * c};",
            f"      for (int32_t j = 0; j < {out_w}; ++j) {{",
            "        const int64_t dx = fx_[j];",
            f"        const int32_t l = {_within('x0_[j]', w)} * {c};",
            f"        const int32_t r = {_within('x1_[j]', w)} * {c};",
            f"        for (int32_t k = 0; k < {c}; ++k) {{",
            ("          const int64_t sum = input_[top + l + k] * (1024 - dy) * (1024 - dx)"
             " + input_[bottom + l + k] * dy * (1024 - dx) + input_[top + r + k] * (1024 - dy) * dx"
             " + input_[bottom + r + k] * dy * dx;"),
            (f"          output_[((b * {out_h} + i) * {out_w} + j) * {c} + k] = "
             f"({ctype})((sum + (sum > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20));"),
            "        }", "      }", "    }",
            "  return 0;"]
    operands = [Operand(f"{ctype}*", "input_", x.index)]
    for name, table in (("y0_", y0), ("y1_", y1), ("fy_", fy), ("x0_", x0), ("x1_", x1), ("fx_", fx)):
        operands.append(Operand("int32_t*", name, constant=table))
    operands.append(Operand(f"{ctype}*", "output_", y.index))
    return Lowered(op, "", operands, body, kernel=True)


RULES = {
    "RESIZE_NEAREST_NEIGHBOR": _nearest,
    "RESIZE_BILINEAR": _bilinear,
}
