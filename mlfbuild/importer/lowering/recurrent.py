"""Recurrent layers: SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM, whose state is a variable tensor kept from one inference to the next.

A variable tensor (the activation state) starts zeroed and keeps its values across invocations, as
in TFLite (one interpreter, invoked sample after sample) and TFLM: here it is a static array of the
operator's own function, zero-initialised in .bss and outside the workspace pool, which holds only
what lives within one inference.
"""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import ACTIVATIONS, Graph, Operator, Tensor
from .base import (
    C_HELPERS,
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    c_clamp,
    constant_data,
    refuse,
    require_int8,
    tensor_at,
)
from .unary import INV_SQRT_FUNCTION


def _effective_scale(op: Operator, a: float, b: float, c: float) -> tuple[int, int]:
    """a × b / c as TFLite's svdf.cc computes it at prepare (in float, each operand a float), then
    QuantizeMultiplier."""
    return _checked_multiplier(op, float(np.float32(np.float32(a) * np.float32(b)) / np.float32(c)), "effective")


def _checked_multiplier(op: Operator, real: float, what: str) -> tuple[int, int]:
    """QuantizeMultiplier of a positive scale below 2^31, or the refusal saying which scale is not."""
    if not np.isfinite(real) or real <= 0:
        raise refuse(op, f"the {what} scale {real} is not a positive number")
    multiplier, shift = q.quantize_multiplier(real)
    if shift > 30:
        raise refuse(op, f"the {what} scale {real:.3g} is 2^31 or more; the 32-bit requantisation cannot shift by it")
    return multiplier, shift


def _state_tensor(graph: Graph, op: Operator, position: int) -> Tensor:
    """The variable tensor at `position`: read and written by this operator alone."""
    index = op.inputs[position] if position < len(op.inputs) else -1
    if index < 0:
        raise refuse(op, f"input {position} (the state) is missing")
    state = graph.tensors[index]
    if not state.is_variable or state.is_constant:
        raise refuse(op, f"the state {state.describe()} is not a variable tensor")
    if index in graph.inputs or index in graph.outputs:
        raise refuse(op, f"the state {state.describe()} is also a graph input or output")
    others = [o.index for o in graph.operators if o.index != op.index and index in list(o.inputs) + list(o.outputs)]
    if others or list(op.inputs).count(index) != 1:
        raise refuse(op, f"the state {state.describe()} is shared with another operand or operator")
    return state


def svdf(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's integer SVDF, int8 input/output, int16 time weights and state, the state a static zeroed array kept across inferences.

    Only LiteRT's integer SVDF is compiled: int8 time weights and state (TFLM's 8-bit SVDF, which
    LiteRT's reference reads as int16) and other fused activations are refused. CMSIS-NN's
    arm_svdf_state_s16_s8 gives the same integers (v4.1.0 and v6.0.0, DSP and MVE, checked), but its
    call is not one the build's call-site analysis knows: a model holding it would lose the scratch
    buffers of its other CMSIS-NN calls, so our kernel it is."""
    x, features, times = (tensor_at(graph, op, i) for i in range(3))
    y = tensor_at(graph, op, 0, output=True)
    state = _state_tensor(graph, op, 4)
    require_int8(op, x, y)
    if times.dtype != "int16" or state.dtype != "int16":
        raise refuse(op, f"time weights {times.dtype} and state {state.dtype}: only int16 ones are supported "
                         "(LiteRT's integer SVDF reads both as int16; TFLM's 8-bit variant has no LiteRT reference)")
    feature_data = constant_data(op, features, "int8")
    time_data = constant_data(op, times, "int16")
    for t in (features, times, state):
        if t.quantization is None or t.quantization.per_channel or not t.quantization.scale > 0:
            raise refuse(op, f"tensor {t.describe()} has no positive per-tensor scale")
        if t.quantization.zero_point != 0:
            raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}; "
                             "LiteRT's integer SVDF takes it as 0")
    activation = ACTIVATIONS.get(op.options.get("activation", 0), "?")
    if activation != "RELU":
        raise refuse(op, f"fused activation {activation}: the integer SVDF is supported with RELU "
                         "(what the converter writes)")
    rank = int(op.options.get("rank", 0))
    if len(x.shape) != 2 or len(features.shape) != 2 or len(times.shape) != 2:
        raise refuse(op, "the input and weights must be 2-D")
    batch, depth = x.shape
    filters, memory = times.shape
    if features.shape != (filters, depth) or rank < 1 or filters % rank or memory < 1:
        raise refuse(op, f"weights {features.describe()} and {times.describe()} with rank {rank} do not fit "
                         f"the input {x.describe()}")
    units = filters // rank
    if y.shape != (batch, units) or state.shape != (batch, memory * filters):
        raise refuse(op, f"output {y.describe()} or state {state.describe()} does not fit {batch} batches of "
                         f"{units} units, {filters} filters of memory {memory}")
    bias = None
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        bias = constant_data(op, graph.tensors[op.inputs[3]], "int32").reshape(-1)
        if bias.size != units:
            raise refuse(op, f"the bias has {bias.size} values for {units} units")
    m1, s1 = _effective_scale(op, x.quantization.scale, features.quantization.scale, state.quantization.scale)
    m2, s2 = _effective_scale(op, state.quantization.scale, times.quantization.scale, y.quantization.scale)
    in_zp, out_zp = x.quantization.zero_point, y.quantization.zero_point
    cells = batch * filters * memory
    state_line = f"  static int16_t state[{cells}];  /* the variable tensor: zeroed at start, kept across inferences */"
    operands = [Operand("int8_t*", "input_", op.inputs[0]),
                Operand("int8_t*", "feature_", constant=np.ascontiguousarray(feature_data)),
                Operand("int16_t*", "time_", constant=np.ascontiguousarray(time_data))]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=np.ascontiguousarray(bias)))
    operands.append(Operand("int8_t*", "output_", op.outputs[0]))
    body = [state_line,
            f"  for (int32_t i = 0; i < {cells - 1}; ++i) state[i] = state[i + 1];",
            f"  for (int32_t b = 0; b < {batch}; ++b) {{",
            f"    for (int32_t f = 0; f < {filters}; ++f) {{",
            "      int32_t acc = 0;",
            (f"      for (int32_t c = 0; c < {depth}; ++c) "
             f"acc += (int32_t)feature_[f * {depth} + c] * ((int32_t)input_[b * {depth} + c] - ({in_zp}));"),
            f"      acc = {REQUANTIZE_FUNCTION}(acc, {m1}, {s1});",
            f"      state[(b * {filters} + f) * {memory} + {memory - 1}] = (int16_t){c_clamp('acc', -32768, 32767)};",
            "    }",
            f"    for (int32_t u = 0; u < {units}; ++u) {{",
            f"      int64_t sum = {'bias_[u]' if bias is not None else '0'};",
            f"      for (int32_t f = u * {rank}; f < (u + 1) * {rank}; ++f) {{",
            (f"        for (int32_t m = 0; m < {memory}; ++m) "
             f"sum += (int32_t)time_[f * {memory} + m] * (int32_t)state[(b * {filters} + f) * {memory} + m];"),
            "      }",
            f"      const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)sum, {m2}, {s2}) + ({out_zp});",
            f"      output_[b * {units} + u] = (int8_t){c_clamp('scaled', -128, 127)};",
            "    }",
            "  }",
            "  return 0;"]
    return Lowered(op, "", operands, body, "mlfbuild kernel: TFLite's integer SVDF, its state kept in a static array",
                   kernel=True)


# --- UNIDIRECTIONAL_SEQUENCE_LSTM: LiteRT's 8x8_16 integer LSTM (lstm_eval.cc's EvalInteger8x8_16) ---------------
#
# The gates are int16 in Q3.12; LiteRT's portable tensor utils apply gemmlowp's fixed-point logistic
# and tanh to them (FixedPoint<int16_t, N>). gemmlowp writes its constants as Q0.31 and rounds them to
# Q0.15 for int16 (RescaleConstantInitializer): the literals below are those rounded values.

LSTM_ACTIVATION_FUNCTION = "mlf_lstm_sigmoid_s16"
LSTM_ACTIVATION_C = """static inline int16_t mlf_wrap_s16(int32_t value) { return (int16_t)(uint16_t)(uint32_t)value; }
static inline int16_t mlf_saturating_add_s16(int16_t a, int16_t b) {
  const int32_t sum = (int32_t)a + b;
  return (int16_t)(sum > INT16_MAX ? INT16_MAX : (sum < INT16_MIN ? INT16_MIN : sum));
}
/* gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent on int16 */
static inline int16_t mlf_saturating_shift_s16(int16_t x, int32_t exponent) {
  const int32_t threshold = (1 << (15 - exponent)) - 1;
  if (x > threshold) return INT16_MAX;
  if (x < -threshold) return INT16_MIN;
  return (int16_t)(x * (1 << exponent));
}
/* exp(a) for a in [-1/4, 0), Q0.15 in and out */
static inline int16_t mlf_exp_quarter_s16(int16_t a) {
  const int16_t constant_term = 28918, one_third = 10923;
  const int16_t x = mlf_wrap_s16(a + (1 << 12));
  const int16_t x2 = mlf_srdhm_s16(x, x), x3 = mlf_srdhm_s16(x2, x), x4 = mlf_srdhm_s16(x2, x2);
  const int16_t x4_over_4 = mlf_rounding_divide_s16(x4, 2);
  const int16_t sum = mlf_wrap_s16(mlf_srdhm_s16(mlf_wrap_s16(x4_over_4 + x3), one_third) + x2);
  const int16_t poly = mlf_rounding_divide_s16(sum, 1);
  return mlf_saturating_add_s16(constant_term, mlf_srdhm_s16(constant_term, mlf_wrap_s16(x + poly)));
}
/* exp(a) for a <= 0 with `integer_bits` integer bits (0..7), result Q0.15 */
static inline int16_t mlf_exp_negative_s16(int16_t a, int32_t integer_bits) {
  static const int16_t multipliers[7] = {25520, 19875, 12055, 4435, 600, 11, 0};  /* exp(-2^k), k = -2..4 */
  const int32_t fractional_bits = 15 - integer_bits;
  const int32_t quarter = 1 << (fractional_bits - 2);
  const int16_t reduced = mlf_wrap_s16((a & (quarter - 1)) - quarter);
  int16_t result = mlf_exp_quarter_s16(integer_bits > 0 ? mlf_saturating_shift_s16(reduced, integer_bits) : reduced);
  const int16_t remainder = mlf_wrap_s16(reduced - a);
  for (int32_t k = 0; k < 7; ++k) {
    if (integer_bits > k - 2 && (remainder & (1 << (fractional_bits + k - 2)))) {
      result = mlf_srdhm_s16(result, multipliers[k]);
    }
  }
  if (integer_bits > 5 && a < -(1 << (20 - integer_bits))) result = 0;  /* below -32 */
  return a == 0 ? INT16_MAX : result;
}
/* 1 / (1 + a) for a in [0, 1) in Q0.15, by three Newton-Raphson steps: x in Q2.13 */
static inline int16_t mlf_newton_reciprocal_s16(int16_t a) {
  const int32_t sum = (int32_t)a + INT16_MAX;
  const int16_t half_denominator = (int16_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
  int16_t x = mlf_wrap_s16(23130 + mlf_srdhm_s16(half_denominator, -15420));  /* 48/17 - 32/17 d */
  for (int32_t step = 0; step < 3; ++step) {
    const int16_t one_minus = mlf_wrap_s16((1 << 13) - mlf_srdhm_s16(half_denominator, x));
    x = mlf_wrap_s16(x + mlf_saturating_shift_s16(mlf_srdhm_s16(x, one_minus), 2));
  }
  return x;
}
/* gemmlowp's logistic of a Q(integer_bits).(15 - integer_bits) value, result Q0.15 */
static inline int16_t mlf_lstm_sigmoid_s16(int16_t a, int32_t integer_bits) {
  if (a == 0) return 16384;
  const int16_t exp_of_negative = mlf_exp_negative_s16(a > 0 ? (int16_t)-a : a, integer_bits);
  const int16_t positive = mlf_saturating_shift_s16(mlf_newton_reciprocal_s16(exp_of_negative), 1);
  return a > 0 ? positive : mlf_wrap_s16(INT16_MAX - positive);
}
/* gemmlowp's tanh of a Q(integer_bits).(15 - integer_bits) value, result Q0.15 */
static inline int16_t mlf_lstm_tanh_s16(int16_t a, int32_t integer_bits) {
  if (a == 0) return 0;
  const int16_t exp_of_double = mlf_exp_negative_s16(a < 0 ? a : (int16_t)-a, integer_bits + 1);
  const int16_t magnitude = mlf_saturating_shift_s16(
      mlf_wrap_s16(mlf_newton_reciprocal_s16(exp_of_double) - (1 << 13)), 2);
  return a < 0 ? mlf_wrap_s16(-magnitude) : magnitude;
}
/* one gate before its activation: the input and recurrent products, each requantised and added in
   int16 with saturation, as LiteRT's MatrixBatchVectorMultiplyAccumulate does them one after the other */
static inline int16_t mlf_lstm_gate_s16(int32_t from_input, int32_t input_multiplier, int32_t input_shift,
                                        int32_t from_state, int32_t state_multiplier, int32_t state_shift) {
  int32_t gate = mlf_requantize(from_input, input_multiplier, input_shift);
  gate = gate > INT16_MAX ? INT16_MAX : (gate < INT16_MIN ? INT16_MIN : gate);
  gate += mlf_requantize(from_state, state_multiplier, state_shift);
  return (int16_t)(gate > INT16_MAX ? INT16_MAX : (gate < INT16_MIN ? INT16_MIN : gate));
}
/* TFLite's RoundingDivideByPOT of an int32 product, narrowed to int16 as CwiseMul casts it */
static inline int16_t mlf_lstm_product_s16(int32_t a, int32_t b, int32_t exponent) {
  const int32_t x = a * b, mask = (int32_t)((1u << exponent) - 1u);
  const int32_t remainder = x & mask, threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return mlf_wrap_s16((x >> exponent) + (remainder > threshold ? 1 : 0));
}"""
C_HELPERS[LSTM_ACTIVATION_FUNCTION] = LSTM_ACTIVATION_C  # after mlf_requantize and mlf_srdhm_s16, which it calls

# LiteRT's integer layer normalisation of a gate (portable_tensor_utils' ApplyLayerNorm): the mean and
# variance over the cells, 1/sqrt(variance) by RSQRT's helper (GetInvSqrtQuantizedMultiplierExp)
LSTM_LAYER_NORM_FUNCTION = "mlf_lstm_layer_norm_s16"
LSTM_LAYER_NORM_C = """static inline void mlf_lstm_layer_norm_s16(int16_t* gate, int32_t count, const int16_t* weights, const int32_t* bias,
                                           int32_t multiplier, int32_t shift, int32_t variance_limit) {
  int64_t sum = 0, sum_of_squares = 0;
  for (int32_t j = 0; j < count; ++j) {
    sum += gate[j];
    sum_of_squares += (int32_t)gate[j] * gate[j];
  }
  const int32_t mean = (int32_t)(sum * 1024 / count);
  const int64_t variance = sum_of_squares * ((1 << 20) / count) - (int64_t)mean * mean;
  int32_t variance_steps = (int32_t)(variance / (1 << 20));
  if (variance_steps < 1) variance_steps = variance_limit;
  int32_t inverse, inverse_shift;
  INV_SQRT(variance_steps, &inverse, &inverse_shift);
  for (int32_t j = 0; j < count; ++j) {
    const int32_t rescaled = mlf_requantize(1024 * gate[j] - mean, inverse, inverse_shift);
    /* LiteRT computes rescaled * weight + bias in int32 before widening it */
    const int64_t weighted = (int32_t)((uint32_t)rescaled * (uint32_t)(int32_t)weights[j] + (uint32_t)bias[j]);
    const int32_t rounded = (int32_t)((weighted > 0 ? weighted + 512 : weighted - 512) / 1024);
    const int32_t value = mlf_requantize(rounded, multiplier, shift + 12);
    gate[j] = (int16_t)(value > INT16_MAX ? INT16_MAX : (value < INT16_MIN ? INT16_MIN : value));
  }
}"""
# RSQRT's helper is registered first (unary is imported above): emit writes it before this one
C_HELPERS[LSTM_LAYER_NORM_FUNCTION] = LSTM_LAYER_NORM_C.replace("INV_SQRT(", f"{INV_SQRT_FUNCTION}(")

# Operand positions of lstm::full (LiteRT's lstm_shared.h)
_INPUT_WEIGHTS, _RECURRENT_WEIGHTS, _PEEPHOLES, _BIASES = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15)
_PROJECTION_WEIGHTS, _PROJECTION_BIAS, _OUTPUT_STATE, _CELL_STATE = 16, 17, 18, 19
_LAYER_NORMS = (20, 21, 22, 23)
_GATES = ("input", "forget", "cell", "output")
_GATE_SCALE = np.float32(2.0 ** -12)  # Q3.12: the gates' scale without layer normalisation


def _wrap_int32(values: np.ndarray) -> np.ndarray:
    """int64 values as LiteRT's int32 arithmetic leaves them (two's complement)."""
    return (((values + 2 ** 31) % 2 ** 32) - 2 ** 31).astype(np.int32)


def _optional(graph: Graph, op: Operator, position: int) -> Tensor | None:
    index = op.inputs[position] if position < len(op.inputs) else -1
    return graph.tensors[index] if index >= 0 else None


def _symmetric_scale(op: Operator, t: Tensor, what: str) -> np.float32:
    """The one scale of a per-tensor tensor of zero point 0 (what LiteRT's integer LSTM reads)."""
    if t.quantization is None or t.quantization.per_channel or not t.quantization.scale > 0 \
            or t.quantization.zero_point != 0:
        raise refuse(op, f"{what} {t.describe()} are not symmetric per-tensor (LiteRT's integer LSTM reads "
                         "one scale and no zero point)")
    return np.float32(t.quantization.scale)


def _weights(op: Operator, t: Tensor | None, rows: int, columns: int) -> np.ndarray:
    if t is None:
        raise refuse(op, "a gate's weights are missing")
    data = constant_data(op, t, "int8")
    if t.shape != (rows, columns):
        raise refuse(op, f"weights {t.describe()} are not [{rows},{columns}]")
    _symmetric_scale(op, t, "weights")
    return data.astype(np.int32)


def _vector(op: Operator, t: Tensor, dtype: str, size: int, what: str) -> np.ndarray:
    data = constant_data(op, t, dtype).reshape(-1)
    if data.size != size:
        raise refuse(op, f"the {what} {t.describe()} has {data.size} values for {size}")
    return data


def _cell_scale_exponent(op: Operator, cell: Tensor) -> int:
    """log2 of the cell state's scale, which LiteRT requires to be a power of two (CheckedLog2)."""
    scale = cell.quantization.scale if cell.quantization is not None else 0.0
    if cell.quantization is None or cell.quantization.per_channel or not scale > 0:
        raise refuse(op, f"the cell state {cell.describe()} has no positive per-tensor scale")
    log2 = np.float32(np.log(np.float32(scale))) * np.float32(1.0 / np.log(np.float32(2.0)))
    exponent = int(np.round(log2))
    if abs(float(log2) - exponent) >= 1e-3:
        raise refuse(op, f"the cell state's scale {scale} is not a power of two")
    if not -15 <= exponent <= -9:
        raise refuse(op, f"the cell state's scale 2^{exponent}: LiteRT's integer LSTM computes tanh of the "
                         "cell with 0 to 6 integer bits (scale 2^-15 to 2^-9)")
    if cell.quantization.zero_point != 0:
        raise refuse(op, f"the cell state {cell.describe()} has a zero point; LiteRT's integer LSTM takes it as 0")
    return exponent


def _lstm_shape(op: Operator, x: Tensor, time_major: bool) -> tuple[int, int, int]:
    """(batches, time steps, input size) of the 3-D input (LiteRT's prepare reads a third dimension
    whatever the rank, so no oracle holds a 2-D one)."""
    if len(x.shape) != 3:
        raise refuse(op, f"the input {x.describe()} must be 3-D ([batch, time, features] or time-major)")
    return (x.shape[1], x.shape[0], x.shape[2]) if time_major else (x.shape[0], x.shape[1], x.shape[2])


def _refuse_lstm_options(op: Operator) -> None:
    if len(op.inputs) not in (20, 24):
        raise refuse(op, f"{len(op.inputs)} inputs: the LSTM has 20 or 24")
    if float(op.options.get("proj_clip", 0.0)) < 0 or float(op.options.get("cell_clip", 0.0)) < 0:
        raise refuse(op, "a negative clip")
    if ACTIVATIONS.get(op.options.get("activation", 0)) != "TANH":
        raise refuse(op, "LiteRT's integer LSTM applies TANH to the cell whatever the fused activation; "
                         f"a model asking for {ACTIVATIONS.get(op.options.get('activation', 0), '?')} is refused")


def _quantized_clip(op: Operator, option: str, scale: float, limit: int) -> int:
    """A clip in steps of `scale`, truncated as LiteRT's prepare casts it (0: none)."""
    clip = np.float32(op.options.get(option, 0.0))
    if not clip > 0:
        return 0
    steps = np.float32(clip / np.float32(scale))
    return int(np.float32(min(max(steps, np.float32(-limit - 1)), np.float32(limit))))


def _intermediate_scale(graph: Graph, op: Operator, k: int) -> np.float32:
    q = graph.tensors[op.intermediates[k]].quantization
    if q is None or q.per_channel or not q.scale > 0:
        raise refuse(op, f"intermediate {k} (the {_GATES[k]} gate's scale under layer normalisation) has no "
                         "positive per-tensor scale")
    return np.float32(q.scale)


class _Lstm:
    """One UNIDIRECTIONAL_SEQUENCE_LSTM's shape, variants and import-time arithmetic (LiteRT's lstm.cc
    prepare: effective scales, zero points folded into the biases)."""

    def __init__(self, graph: Graph, op: Operator):
        _refuse_lstm_options(op)
        self.graph, self.op = graph, op
        self.x, self.y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
        if "int16" in (self.x.dtype, self.y.dtype):
            raise refuse(op, "16-bit activations (TFLM's 16x8 LSTM): LiteRT's LSTM has no 16-bit integer kernel "
                             "to hold it to")
        require_int8(op, self.x, self.y)
        self.hidden = _state_tensor(graph, op, _OUTPUT_STATE)
        self.cell = _state_tensor(graph, op, _CELL_STATE)
        if self.hidden.dtype != "int8" or self.cell.dtype != "int16":
            raise refuse(op, f"states {self.hidden.dtype} and {self.cell.dtype}: LiteRT's integer LSTM keeps an "
                             "int8 output state and an int16 cell state")
        require_int8(op, self.hidden)
        if len(op.intermediates) != 5:
            raise refuse(op, f"{len(op.intermediates)} intermediate tensors: LiteRT's integer LSTM reads 5 "
                             "(the converter's quantization of each gate and of the hidden state)")
        hidden_q = graph.tensors[op.intermediates[4]].quantization
        if hidden_q is None or hidden_q.per_channel or not hidden_q.scale > 0:
            raise refuse(op, "the hidden-state intermediate has no positive per-tensor scale")
        self.hidden_q = hidden_q
        self.time_major = bool(op.options.get("time_major", False))
        self.batches, self.steps, self.depth = _lstm_shape(op, self.x, self.time_major)
        output_weights = tensor_at(graph, op, _INPUT_WEIGHTS[3])
        self.cells = output_weights.shape[0] if len(output_weights.shape) == 2 else 0
        self.projection = _optional(graph, op, _PROJECTION_WEIGHTS)
        if self.projection is None and _optional(graph, op, _PROJECTION_BIAS) is not None:
            raise refuse(op, "a projection bias without projection weights")
        self.outputs = self.projection.shape[0] if self.projection is not None and \
            len(self.projection.shape) == 2 else self.cells
        if self.cells < 1 or self.outputs < 1:
            raise refuse(op, f"weights {output_weights.describe()} give no cells")
        if int(np.prod(self.hidden.shape)) != self.batches * self.outputs or \
                int(np.prod(self.cell.shape)) != self.batches * self.cells:
            raise refuse(op, f"states {self.hidden.describe()} and {self.cell.describe()} do not fit {self.batches} "
                             f"batches of {self.cells} cells and {self.outputs} outputs")
        expected = (*self.x.shape[:-1], self.outputs)
        if tuple(self.y.shape) != expected:
            raise refuse(op, f"the output {self.y.describe()} is not {list(expected)}")
        self.cifg = _optional(graph, op, _INPUT_WEIGHTS[0]) is None
        if self.cifg and (_optional(graph, op, _RECURRENT_WEIGHTS[0]) is not None or
                          _optional(graph, op, _BIASES[0]) is not None):
            raise refuse(op, "an input gate with recurrent weights or a bias but no input weights (LiteRT takes "
                             "all of them or none)")
        self.gates = _GATES[1:] if self.cifg else _GATES
        peepholes = [_optional(graph, op, i) is not None for i in _PEEPHOLES[0 if not self.cifg else 1:]]
        if any(peepholes) and not all(peepholes):
            raise refuse(op, "peephole weights for some gates only (LiteRT takes all of them or none)")
        self.peephole = any(peepholes)
        self.layer_norm = len(op.inputs) == 24 and _optional(graph, op, _LAYER_NORMS[1]) is not None
        if self.peephole and self.outputs != self.cells:
            raise refuse(op, "peepholes with a projection to another size: LiteRT's integer kernel walks the "
                             "cell state by the output size there")
        self.cell_exponent = _cell_scale_exponent(op, self.cell)

    def gate_scale(self, k: int) -> np.float32:
        return _intermediate_scale(self.graph, self.op, k) if self.layer_norm else _GATE_SCALE

    def gate_operands(self, gate: str) -> tuple[list[Operand], dict]:
        """The gate's constant operands and its multipliers: input, recurrent (and peephole, layer norm)."""
        graph, op, k = self.graph, self.op, _GATES.index(gate)
        in_scale, state_scale = np.float32(self.x.quantization.scale), np.float32(self.hidden.quantization.scale)
        in_zp, state_zp = self.x.quantization.zero_point, self.hidden.quantization.zero_point
        w_in_tensor = _optional(graph, op, _INPUT_WEIGHTS[k])
        w_state_tensor = _optional(graph, op, _RECURRENT_WEIGHTS[k])
        w_in = _weights(op, w_in_tensor, self.cells, self.depth)
        w_state = _weights(op, w_state_tensor, self.cells, self.outputs)
        bias_tensor = _optional(graph, op, _BIASES[k])
        if bias_tensor is None:
            raise refuse(op, f"the {gate} gate's bias is missing")
        bias = _vector(op, bias_tensor, "int32", self.cells, f"{gate} gate's bias").astype(np.int64)
        # LiteRT's prepare folds the zero points into the biases (PrecomputeZeroPointTimesWeightWithBias);
        # under layer normalisation the gate's bias is added after normalising instead
        input_bias = _wrap_int32((0 if self.layer_norm else bias) - in_zp * w_in.sum(axis=1))
        state_bias = _wrap_int32(-state_zp * w_state.sum(axis=1))
        gate_scale = self.gate_scale(k)
        w_in_scale = _symmetric_scale(op, w_in_tensor, "weights")
        w_state_scale = _symmetric_scale(op, w_state_tensor, "weights")
        scales = {"in": _checked_multiplier(op, float(np.float32(w_in_scale * in_scale) / gate_scale), f"{gate} input"),
                  "state": _checked_multiplier(op, float(np.float32(w_state_scale * state_scale) / gate_scale),
                                               f"{gate} recurrent")}
        operands = [Operand("int8_t*", f"{gate}_in_w_", constant=np.ascontiguousarray(w_in.astype(np.int8))),
                    Operand("int8_t*", f"{gate}_state_w_", constant=np.ascontiguousarray(w_state.astype(np.int8))),
                    Operand("int32_t*", f"{gate}_in_b_", constant=input_bias),
                    Operand("int32_t*", f"{gate}_state_b_", constant=state_bias)]
        if self.peephole and gate != "cell":
            peephole = _optional(graph, op, _PEEPHOLES[("input", "forget", "output").index(gate)])
            if peephole is None:
                raise refuse(op, f"the {gate} gate's peephole weights are missing")
            weights = _vector(op, peephole, "int16", self.cells, f"{gate} gate's peephole")
            real = np.float32(np.float32(2.0 ** self.cell_exponent) * _symmetric_scale(op, peephole, "peepholes"))
            scales["peephole"] = _checked_multiplier(op, float(real / gate_scale), f"{gate} peephole")
            operands.append(Operand("int16_t*", f"{gate}_peephole_w_", constant=np.ascontiguousarray(weights)))
        if self.layer_norm:
            norm = _optional(graph, op, _LAYER_NORMS[k])
            if norm is None:
                raise refuse(op, f"the {gate} gate's layer-norm coefficients are missing")
            coefficients = _vector(op, norm, "int16", self.cells, f"{gate} gate's layer-norm coefficients")
            norm_scale = _symmetric_scale(op, norm, "layer-norm coefficients")
            scales["norm"] = _checked_multiplier(op, float(norm_scale), f"{gate} layer-norm")
            if scales["norm"][1] + 12 > 30:  # LiteRT shifts the normalised value left by 12 more
                raise refuse(op, f"the {gate} gate's layer-norm scale {float(norm_scale):.3g} is 2^18 or more; "
                                 "the 32-bit requantisation cannot shift by it")
            guard = np.float32(np.float32(10000) * norm_scale)  # LiteRT's variance guard, cast to int32
            if not guard < 2 ** 31:
                raise refuse(op, f"the {gate} gate's layer-norm scale {float(norm_scale):.3g}: 10000 times it "
                                 "(LiteRT's variance guard) overflows int32")
            scales["variance_limit"] = max(1, int(guard))
            operands += [Operand("int16_t*", f"{gate}_norm_w_", constant=np.ascontiguousarray(coefficients)),
                         Operand("int32_t*", f"{gate}_norm_b_", constant=_wrap_int32(bias))]
        return operands, scales

    def projection_operands(self) -> tuple[list[Operand], tuple[int, int], int]:
        op = self.op
        weights = _weights(op, self.projection, self.outputs, self.cells)
        bias_tensor = _optional(self.graph, op, _PROJECTION_BIAS)
        bias = np.zeros(self.outputs, np.int64) if bias_tensor is None else \
            _vector(op, bias_tensor, "int32", self.outputs, "projection bias").astype(np.int64)
        # the hidden values reach the projection less the hidden zero point; its bias adds it back
        folded = _wrap_int32(bias + self.hidden_q.zero_point * weights.sum(axis=1))
        real = np.float32(_symmetric_scale(op, self.projection, "projection weights") *
                          np.float32(self.hidden_q.scale)) / np.float32(self.hidden.quantization.scale)
        multiplier = _checked_multiplier(op, float(real), "projection")
        clip = _quantized_clip(op, "proj_clip", self.y.quantization.scale, 127)
        return ([Operand("int8_t*", "projection_w_", constant=np.ascontiguousarray(weights.astype(np.int8))),
                 Operand("int32_t*", "projection_b_", constant=folded)], multiplier, clip)


def _gate_lines(lstm: _Lstm, gate: str, scales: dict, step: str, cell_state: str) -> list[str]:
    """C computing one gate for every cell of batch b: products, peephole, layer norm, activation."""
    (mi, si), (ms, ss) = scales["in"], scales["state"]
    depth, cells, outputs = lstm.depth, lstm.cells, lstm.outputs
    lines = [f"      for (int32_t c = 0; c < {cells}; ++c) {{",
             f"        int32_t from_input = {gate}_in_b_[c], from_state = {gate}_state_b_[c];",
             (f"        for (int32_t j = 0; j < {depth}; ++j) from_input += (int32_t)input_[{step} * {depth} + j] * "
              f"{gate}_in_w_[c * {depth} + j];"),
             (f"        for (int32_t j = 0; j < {outputs}; ++j) from_state += (int32_t)hidden[b * {outputs} + j] * "
              f"{gate}_state_w_[c * {outputs} + j];"),
             f"        int32_t sum = mlf_lstm_gate_s16(from_input, {mi}, {si}, from_state, {ms}, {ss});"]
    if "peephole" in scales:
        mp, sp = scales["peephole"]
        lines += [(f"        sum += {REQUANTIZE_FUNCTION}((int32_t){gate}_peephole_w_[c] * {cell_state}[b * {cells} + c], "
                   f"{mp}, {sp});"),
                  f"        sum = {c_clamp('sum', -32768, 32767)};"]
    lines += [f"        {gate}_gate[c] = (int16_t)sum;", "      }"]
    if "norm" in scales:
        mn, sn = scales["norm"]
        lines.append(f"      {LSTM_LAYER_NORM_FUNCTION}({gate}_gate, {cells}, {gate}_norm_w_, {gate}_norm_b_, {mn}, "
                     f"{sn}, {scales['variance_limit']});")
    activation = "mlf_lstm_tanh_s16" if gate == "cell" else "mlf_lstm_sigmoid_s16"
    lines.append(f"      for (int32_t c = 0; c < {cells}; ++c) {gate}_gate[c] = {activation}({gate}_gate[c], 3);")
    return lines


def unidirectional_sequence_lstm(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: LiteRT's 8x8_16 integer LSTM (int8 input, output and hidden state, int16 cell state, gemmlowp's fixed-point gate activations; CIFG, peepholes, projection and layer normalisation), the states static arrays kept across inferences.

    Float and hybrid LSTMs are refused, as are 16-bit activations (LiteRT's LSTM has no 16x8 kernel
    to hold one to). CMSIS-NN's arm_lstm_unidirectional_s8 runs TFLM's LSTM, whose gate activations
    are table approximations that differ from LiteRT's by a few steps: our kernel it is."""
    lstm = _Lstm(graph, op)
    batches, steps, cells, outputs = lstm.batches, lstm.steps, lstm.cells, lstm.outputs
    operands = [Operand("int8_t*", "input_", op.inputs[0])]
    scales = {}
    for gate in lstm.gates:
        gate_operands, scales[gate] = lstm.gate_operands(gate)
        operands += gate_operands
    if lstm.projection is not None:
        projection_operands, (mp, sp), proj_clip = lstm.projection_operands()
        operands += projection_operands
    operands.append(Operand("int8_t*", "output_", op.outputs[0]))
    hidden_real = float(np.float32(2.0 ** -15 / float(np.float32(lstm.hidden_q.scale)) * 2.0 ** -15))
    hidden_multiplier, hidden_shift = _checked_multiplier(op, hidden_real, "hidden")
    # with a projection LiteRT's kernel stores the hidden values less their zero point (and folds it
    # back into the projection's bias)
    hidden_zp = -lstm.hidden_q.zero_point if lstm.projection is not None else lstm.hidden_q.zero_point
    cell_exponent = lstm.cell_exponent
    clip = _quantized_clip(op, "cell_clip", lstm.cell.quantization.scale, 32767)
    step = f"(t * {batches} + b)" if lstm.time_major else f"(b * {steps} + t)"
    state_zp = lstm.hidden.quantization.zero_point
    # LiteRT (ResetVariableTensor) and TFLM start an int8 variable tensor at its zero point
    start = "" if state_zp == 0 else " = {" + ", ".join([str(state_zp)] * (batches * outputs)) + "}"
    body = [f"  static int8_t hidden[{batches * outputs}]{start};  /* the output state, kept across inferences */",
            f"  static int16_t cell[{batches * cells}];  /* the cell state: zeroed at start, likewise */",
            *[f"  int16_t {gate}_gate[{cells}];" for gate in lstm.gates]]
    if lstm.projection is not None:
        body.append(f"  int8_t projected[{cells}];")
    body += [f"  for (int32_t b = 0; b < {batches}; ++b) {{",
             f"    for (int32_t t = 0; t < {steps}; ++t) {{"]
    for gate in lstm.gates[:-1]:
        body += _gate_lines(lstm, gate, scales[gate], step, "cell")
    input_gate = "(int16_t)(32767 - forget_gate[c])" if lstm.cifg else "input_gate[c]"
    body += [f"      for (int32_t c = 0; c < {cells}; ++c) {{",
             f"        int16_t* state = &cell[b * {cells} + c];",
             "        const int16_t kept = mlf_lstm_product_s16(forget_gate[c], *state, 15);",
             f"        const int16_t added = mlf_lstm_product_s16({input_gate}, cell_gate[c], {30 + cell_exponent});",
             "        int32_t updated = mlf_saturating_add_s16(kept, added);",
             *([f"        updated = {c_clamp('updated', -clip, clip)};"] if clip > 0 else []),
             "        *state = (int16_t)updated;",
             "      }"]
    body += _gate_lines(lstm, "output", scales["output"], step, "cell")  # its peephole reads the new cell
    target = "projected[c]" if lstm.projection is not None else f"hidden[b * {cells} + c]"
    body += [f"      for (int32_t c = 0; c < {cells}; ++c) {{",
             f"        const int16_t squashed = mlf_lstm_tanh_s16(cell[b * {cells} + c], {15 + cell_exponent});",
             (f"        const int32_t out = {REQUANTIZE_FUNCTION}((int32_t)output_gate[c] * squashed, {hidden_multiplier}, "
              f"{hidden_shift}) + ({hidden_zp});"),
             f"        {target} = (int8_t){c_clamp('out', -128, 127)};",
             "      }"]
    if lstm.projection is not None:
        body += [f"      for (int32_t o = 0; o < {outputs}; ++o) {{",
                 "        int32_t sum = projection_b_[o];",
                 (f"        for (int32_t c = 0; c < {cells}; ++c) sum += (int32_t)projected[c] * "
                  f"projection_w_[o * {cells} + c];"),
                 f"        sum = {REQUANTIZE_FUNCTION}(sum, {mp}, {sp}) + ({state_zp});",
                 f"        sum = {c_clamp('sum', -128, 127)};",
                 *([f"        sum = {c_clamp('sum', -proj_clip, proj_clip)};"] if proj_clip > 0 else []),
                 f"        hidden[b * {outputs} + o] = (int8_t)sum;",
                 "      }"]
    body += [f"      for (int32_t o = 0; o < {outputs}; ++o) output_[{step} * {outputs} + o] = hidden[b * {outputs} + o];",
             "    }",
             "  }",
             "  return 0;"]
    return Lowered(op, "", operands, body, "mlfbuild kernel: LiteRT's 8x8_16 integer LSTM, its states in static arrays",
                   kernel=True)


RULES = {"SVDF": svdf, "UNIDIRECTIONAL_SEQUENCE_LSTM": unidirectional_sequence_lstm}
