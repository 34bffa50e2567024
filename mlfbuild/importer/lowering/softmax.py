"""SOFTMAX over the last dimension: int8 → int8 and int8 → int16 by CMSIS-NN's softmax calls (the
fixed-point exp of TFLite's reference Softmax, its prepare-time scaling computed at import); int16 →
int16 by a kernel of ours with TFLite's SoftmaxInt16 and the two 513-entry tables LiteRT's prepare
fills (exp on [-10, 0], 1 / (1 + x) on [0, 1]), computed at import into flash."""

from __future__ import annotations

import math

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator, Tensor
from .base import (
    C_HELPERS,
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    bare_call,
    c_clamp,
    io_operands,
    refuse,
    require_int8,
    tensor_at,
)

INT16_RANGE = 65535  # int16 max − int16 min, the span LiteRT's softmax tables are drawn over
TABLE_STEPS = 512  # a 513-entry int16 table: 512 segments, interpolated by the low 7 bits


def _rows(op: Operator, x: Tensor, y: Tensor) -> tuple[int, int]:
    """(rows, row length) of a softmax over the last dimension."""
    if tuple(x.shape) != tuple(y.shape) or not x.shape:
        raise refuse(op, "input and output shapes differ")
    depth = int(x.shape[-1])
    return (int(np.prod(x.shape)) // depth if depth else 0), depth


def _near(value: float, target: float) -> bool:
    """TF_LITE_ENSURE_NEAR(value, target, 0.001 × target) in float, as TFLM's softmax prepare checks."""
    return abs(np.float32(value) - np.float32(target)) <= np.float32(0.001) * np.float32(target)


def _softmax_int8(graph: Graph, op: Operator, x: Tensor, y: Tensor) -> Lowered:
    require_int8(op, x)
    if y.quantization is None or y.quantization.per_channel:
        raise refuse(op, f"tensor {y.describe()} has no per-tensor quantization")
    rows, depth = _rows(op, x, y)
    multiplier, shift, diff_min = q.softmax_parameters(op.options["beta"], x.quantization.scale)
    if y.dtype == "int16":
        # LiteRT writes the same numbers whatever the output says; TFLM holds it to what they mean
        if y.quantization.zero_point != -32768 or not _near(y.quantization.scale, 1.0 / 65536):
            raise refuse(op, "an int8 → int16 softmax's output must have scale 1/65536 and zero point -32768 "
                             "(as TFLM requires)")
        body = bare_call(f"arm_softmax_s8_s16(input_, {rows}, {depth}, {multiplier}, {shift}, {diff_min}, output_)")
        operands = [Operand("int8_t*", "input_", op.inputs[0]), Operand("int16_t*", "output_", op.outputs[0])]
        return Lowered(op, "arm_softmax_s8_s16", operands, body)
    require_int8(op, y)
    if y.quantization.zero_point != -128 or y.quantization.scale != float(np.float32(1.0 / 256)):
        raise refuse(op, "an int8 softmax's output must have scale 1/256 and zero point -128 (as TFLite requires)")
    body = bare_call(f"arm_softmax_s8(input_, {rows}, {depth}, {multiplier}, {shift}, {diff_min}, output_)")
    return Lowered(op, "arm_softmax_s8", list(io_operands(graph, op)), body)


# --- int16: TFLite's SoftmaxInt16 ---------------------------------------------------------------

def _round(value: float) -> float:
    """std::round: halves away from zero, exactly (value − floor(value) is exact in double)."""
    magnitude = abs(value)
    whole = math.floor(magnitude)
    return math.copysign(whole + 1.0 if magnitude - whole >= 0.5 else whole, value)


def lut_int16(input_scale: float, input_zero_point: int, output_scale: float, transform) -> np.ndarray:
    """LiteRT's LUTPopulate<int16_t> in double (its softmax passes doubles): 512 samples of `transform`
    over the input's int16 span, each biased by half the error of the interpolation at its segment's
    midpoint, and the span's end; scaled to the output's int16 steps (output zero point 0)."""
    input_min = input_scale * float(-32768 - input_zero_point)
    input_max = input_scale * float(32767 - input_zero_point)
    output_min, output_max = output_scale * -32768.0, output_scale * 32767.0
    step = (input_max - input_min) / TABLE_STEPS
    half_step = step / 2
    scaling = 65536.0 / (output_max - output_min)
    table = np.zeros(TABLE_STEPS + 1, dtype=np.int16)
    for i in range(TABLE_STEPS):
        value = transform(input_min + i * step)
        midpoint = transform(input_min + i * step + half_step)
        following = transform(input_min + (i + 1) * step)
        sample = _round(value * scaling)
        interpolated = _round((following * scaling + _round(value * scaling)) / 2)
        bias = _round((interpolated - _round(midpoint * scaling)) / 2)
        table[i] = int(min(max(sample - bias, -32768.0), 32767.0))
    table[TABLE_STEPS] = int(min(max(_round(transform(input_max) * scaling), -32768.0), 32767.0))
    return table


def softmax_int16_tables() -> tuple[np.ndarray, np.ndarray]:
    """(exp table, 1 / (1 + x) table) as LiteRT's softmax prepare fills them: exp over [-10, 0] (the
    input zero point at int16 max), 1 / (1 + x) over [0, 1] (at int16 min), both onto [-1, 1]."""
    exp_table = lut_int16(10.0 / INT16_RANGE, 32767, 2.0 / INT16_RANGE, math.exp)
    reciprocal_table = lut_int16(1.0 / INT16_RANGE, -32768, 2.0 / INT16_RANGE, lambda v: 1.0 / (1.0 + v))
    return exp_table, reciprocal_table


# TFLite's LUTLookup for int16: the high 9 bits index the table, the low 7 interpolate to the next entry.
LUT16_FUNCTION = "mlf_lut_s16"
LUT16_C = """static inline int16_t mlf_lut_s16(int16_t lut_value, const int16_t *lut_table) {
  const int32_t index = 256 + (lut_value >> 7);
  const int32_t offset = lut_value & 0x7f;
  const int16_t slope = (int16_t)(lut_table[index + 1] - lut_table[index]);
  return (int16_t)(lut_table[index] + ((slope * offset + 64) >> 7));
}"""
C_HELPERS[LUT16_FUNCTION] = LUT16_C

# SoftmaxInt16's reciprocal of the sum of exps (Q16.15): normalised to [1, 2) over 2^16 steps,
# recentred from [65536, 131072] to int16 (saturating), then the 1 / (1 + x) table.
LEADING_ZEROS_FUNCTION = "mlf_leading_zeros"
LEADING_ZEROS_C = """static inline int32_t mlf_leading_zeros(uint32_t clz_bits) {
  int32_t zeros = 0;
  for (uint32_t bit = 0x80000000u; bit != 0u && !(clz_bits & bit); bit >>= 1) ++zeros;
  return zeros;
}"""
C_HELPERS[LEADING_ZEROS_FUNCTION] = LEADING_ZEROS_C

RECIPROCAL16_FUNCTION = "mlf_softmax_reciprocal_s16"
RECIPROCAL16_C = """static inline int16_t mlf_softmax_reciprocal_s16(int32_t recip_sum, int32_t recip_headroom,
                                                 const int16_t *recip_lut) {
  const int32_t shifted = (int32_t)((((int64_t)recip_sum << (recip_headroom - 1)) + (1 << 13)) >> 14);
  const int32_t centred = shifted - ((1 << 15) + (1 << 16));
  return mlf_lut_s16((int16_t)""" + c_clamp("centred", -32768, 32767) + """, recip_lut);
}"""
C_HELPERS[RECIPROCAL16_FUNCTION] = RECIPROCAL16_C


def _require_int16(op: Operator, t: Tensor) -> None:
    if t.dtype != "int16" or t.quantization is None or t.quantization.per_channel:
        raise refuse(op, f"tensor {t.describe()} is not a per-tensor quantized int16")
    if not (math.isfinite(t.quantization.scale) and t.quantization.scale > 0):
        raise refuse(op, f"tensor {t.describe()} has scale {t.quantization.scale}; it needs a positive finite one")
    if t.quantization.zero_point != 0:
        raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}; "
                         "an int16 softmax's tensors are symmetric (zero point 0, as TFLite requires)")


def _softmax_int16(graph: Graph, op: Operator, x: Tensor, y: Tensor) -> Lowered:
    _require_int16(op, x)
    _require_int16(op, y)
    if not _near(y.quantization.scale, 1.0 / 32768):
        raise refuse(op, "an int16 softmax's output must have scale 1/32768 (as TFLite requires)")
    rows, depth = _rows(op, x, y)
    if depth > 65536:
        raise refuse(op, f"a row of {depth} values overflows TFLite's 32-bit sum of int16 exps")
    # input × beta in float (both are floats in TFLite), then to the exp table's step, 10 / 65535, in double
    rescale = float(np.float32(x.quantization.scale) * np.float32(op.options["beta"])) / (10.0 / INT16_RANGE)
    if not (math.isfinite(rescale) and rescale > 0):
        raise refuse(op, f"beta {op.options['beta']} and input scale {x.quantization.scale} give no positive rescale")
    multiplier, shift = q.quantize_multiplier(rescale)
    if shift > 0 and 65535 * (1 << shift) > (1 << 31) - 1:
        raise refuse(op, f"input scale {x.quantization.scale} × beta overflows TFLite's 32-bit int16 softmax")
    exp_table, reciprocal_table = softmax_int16_tables()
    exps = c_clamp("scaled", -32768, 32767)
    body = [f"  for (int32_t row = 0; row < {rows}; ++row) {{",
            "    int16_t largest = -32768;",
            f"    for (int32_t c = 0; c < {depth}; ++c) {{",
            f"      if (input_[row * {depth} + c] > largest) largest = input_[row * {depth} + c];",
            "    }",
            "    int32_t exp_sum = 0;  /* Q16.15; each exp is kept in the output until the sum is known */",
            f"    for (int32_t c = 0; c < {depth}; ++c) {{",
            (f"      const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)input_[row * {depth} + c] - largest, "
             f"{multiplier}, {shift}) + 32767;"),
            f"      const int16_t exp_value = {LUT16_FUNCTION}((int16_t){exps}, exp_table_);",
            f"      output_[row * {depth} + c] = exp_value;",
            "      exp_sum += exp_value;",
            "    }",
            f"    const int32_t headroom = {LEADING_ZEROS_FUNCTION}((uint32_t)exp_sum);",
            f"    const int16_t reciprocal = {RECIPROCAL16_FUNCTION}(exp_sum, headroom, reciprocal_table_);",
            "    const int32_t right_shift = 31 - headroom;",
            f"    for (int32_t c = 0; c < {depth}; ++c) {{",
            (f"      const int32_t result = (int32_t)(((int64_t)output_[row * {depth} + c] * reciprocal + "
             "((int64_t)1 << (right_shift - 1))) >> right_shift);"),
            f"      output_[row * {depth} + c] = (int16_t){c_clamp('result', 0, 32767)};",
            "    }",
            "  }",
            "  return 0;"]
    operands = [Operand("int16_t*", "input_", x.index), Operand("int16_t*", "exp_table_", constant=exp_table),
                Operand("int16_t*", "reciprocal_table_", constant=reciprocal_table),
                Operand("int16_t*", "output_", y.index)]
    note = ("CMSIS-NN's arm_softmax_s16 wraps the recentred sum where TFLite saturates it (sums just "
            "under a power of two from 2^18 on)")
    return Lowered(op, "", operands, body, note, kernel=True)


def _softmax(graph: Graph, op: Operator) -> Lowered:
    """`arm_softmax_s8`, int8 → int16 `arm_softmax_s8_s16` (multiplier, shift and diff_min as TFLite's reference softmax prepares them); int16: mlfbuild kernel, TFLite's SoftmaxInt16 with LiteRT's exp and 1 / (1 + x) tables computed at import."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype == "int16":
        return _softmax_int16(graph, op, x, y)
    if x.dtype == "int8" and y.dtype in ("int8", "int16"):
        return _softmax_int8(graph, op, x, y)
    raise refuse(op, f"a softmax from {x.dtype} to {y.dtype} is not supported (int8 → int8, int8 → int16, "
                     "int16 → int16 are)")


RULES = {"SOFTMAX": _softmax}
