"""Unary element-wise operators and activations: small kernels with TFLite's reference semantics
(LiteRT's activations.cc, quantize.cc, exp.cc, elementwise.cc, neg.cc, cast.cc, fill.cc, l2norm.cc),
everything that depends only on the model computed at import — the tables of the 8-bit look-up
kernels, multipliers, folded offsets.

int8 activations take any per-tensor quantization TFLite takes; int16 ones (16x8 models) are
symmetric (zero point 0), as TFLite's int16 kernels require. Operators TFLite runs on float32 only
(FLOOR, SQRT) are float32 here too."""

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
    c_clamp,
    refuse,
    tensor_at,
)

LIMITS = {"int8": (-128, 127), "int16": (-32768, 32767)}
CTYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "float32": "float"}
f32 = np.float32


# --- operands ------------------------------------------------------------------------------------

def quantized(op: Operator, t: Tensor, dtypes: tuple[str, ...] = ("int8", "int16")) -> Tensor:
    """`t`, checked to be one of `dtypes` with a usable per-tensor quantization (int16: symmetric)."""
    if t.dtype not in dtypes:
        also = " (and int16 for 16x8 models)" if "int16" in dtypes else ""
        raise refuse(op, f"tensor {t.describe()} is {t.dtype}; only int8 activations{also} are supported for {op.name}")
    if t.quantization is None or t.quantization.per_channel:
        raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization")
    lo, hi = LIMITS[t.dtype]
    scale, zp = t.quantization.scale, t.quantization.zero_point
    if not (math.isfinite(scale) and scale > 0) or not lo <= zp <= hi:
        raise refuse(op, f"tensor {t.describe()} has scale {scale} and zero point {zp}; "
                         f"{t.dtype} needs a positive finite scale and a zero point in {lo}..{hi}")
    if not 1e-15 <= scale <= 1e15:
        raise refuse(op, f"tensor {t.describe()} has scale {scale}, outside 1e-15..1e15")
    if t.dtype == "int16" and zp != 0:
        raise refuse(op, f"tensor {t.describe()} has zero point {zp}; int16 activations are symmetric (zero point 0)")
    return t


def unary_io(graph: Graph, op: Operator, dtypes: tuple[str, ...] = ("int8", "int16"),
             same_type: bool = True) -> tuple[Tensor, Tensor]:
    """The input and output of a one-input operator, quantized, of one type and one shape."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    quantized(op, x, dtypes)
    quantized(op, y, dtypes)
    if same_type and x.dtype != y.dtype:
        raise refuse(op, f"the input is {x.dtype} and the output {y.dtype}; {op.name} keeps its type")
    if int(np.prod(x.shape)) != int(np.prod(y.shape)):
        raise refuse(op, f"the output {y.describe()} does not have the input's {x.describe()} elements")
    return x, y


def count(t: Tensor) -> int:
    return int(np.prod(t.shape))


def loop(op: Operator, x: Tensor, y: Tensor, expression: list[str], extra: list[Operand] | None = None,
         note: str = "", in_place: bool | None = None) -> Lowered:
    """for each element: `in` (the input's element) → `out` (the output's), computed by `expression`;
    `extra` constant operands go between input and output."""
    cin, cout = CTYPES[x.dtype], CTYPES[y.dtype]
    body = [f"  for (int32_t i = 0; i < {count(x)}; ++i) {{", f"    const {cin} in = input_[i];",
            *[f"    {line}" for line in expression], "    output_[i] = out;", "  }", "  return 0;"]
    operands = [Operand(f"{cin}*", "input_", x.index), *(extra or []), Operand(f"{cout}*", "output_", y.index)]
    same = x.dtype == y.dtype if in_place is None else in_place
    return Lowered(op, "", operands, body, note, kernel=True, in_place=same)


def check_requantize(op: Operator, magnitude: int, shift: int) -> None:
    """mlf_requantize (TFLite's MultiplyByQuantizedMultiplier) left-shifts the value in int32 first:
    a value up to `magnitude` must not overflow."""
    if shift > 0 and magnitude * (1 << shift) > (1 << 31) - 1:
        raise refuse(op, f"a rescale by 2^{shift} overflows TFLite's 32-bit arithmetic")


# --- 8-bit look-up tables --------------------------------------------------------------------------

def lut8(op: Operator, x: Tensor, y: Tensor, transform) -> np.ndarray:
    """TFLite's LUTPopulate<int8_t>: for every input byte, dequantize (float), transform (float),
    × 1/output scale, round half away, + zero point, clamp; indexed by the byte as uint8. `transform`
    maps a float32 to the float32 the C library's float function gives (computed in double, rounded).
    A value past int32 (TFLite's float to int32 conversion is then undefined) is refused."""
    inverse_scale = f32(1) / f32(y.quantization.scale)
    table = np.zeros(256, dtype=np.int8)
    for value in range(-128, 128):
        dequantized = f32(x.quantization.scale) * f32(value - x.quantization.zero_point)
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = float(f32(f32(transform(dequantized)) * inverse_scale))
        if not math.isfinite(scaled) or not -2.0**31 <= scaled + y.quantization.zero_point < 2.0**31:
            raise refuse(op, f"input {value} maps to {scaled:g} output steps, past the int32 arithmetic of TFLite's table")
        rescaled = f32(q.round_half_away(scaled))
        quantized_value = int(f32(rescaled + f32(y.quantization.zero_point)))
        table[value & 0xFF] = max(-128, min(127, quantized_value))
    return table


def table_lookup(op: Operator, x: Tensor, y: Tensor, table: np.ndarray, note: str = "") -> Lowered:
    body = [f"  for (int32_t i = 0; i < {count(x)}; ++i) output_[i] = table_[(uint8_t)input_[i]];", "  return 0;"]
    operands = [Operand("int8_t*", "input_", x.index), Operand("int8_t*", "table_", constant=table),
                Operand("int8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, note, kernel=True, in_place=True)


def _float_fn(fn):
    """A float32 → float32 function as the C library's float version computes it: in double,
    rounded once (the result correctly rounded; the tests hold it to LiteRT's)."""
    def apply(value):
        try:
            return f32(fn(float(value)))
        except OverflowError:
            return f32(math.inf)
    return apply


# --- int16 sigmoid / tanh (TFLite's reference_integer_ops::Logistic / Tanh on int16) ---------------------

_SIGMOID_TABLE = (  # sigmoid(i / 24) in 0.16 fixed point, i = 0..255, as TFLite's int16 kernels tabulate it
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
)


def sigmoid_table_uint16() -> np.ndarray:
    """The interpolation table of TFLite's int16 logistic and tanh (its sigmoid_table_uint16: not the
    rounded sigmoid but values fitted for linear interpolation, so held here as data), as int16 bits."""
    return np.array(_SIGMOID_TABLE, dtype=np.uint16).view(np.int16)


def _checked_log2(value: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2 in float: (is a power of two to within 1e-3 in log2, rounded log2)."""
    log2 = f32(np.log(f32(value))) * (f32(1.0) / f32(np.log(f32(2.0))))
    rounded = f32(q.round_half_away(float(log2)))
    return bool(abs(float(f32(log2 - rounded))) < 1e-3), int(rounded)


def int16_sigmoid_parameters(op: Operator, x: Tensor, y: Tensor, tanh: bool) -> tuple[int, int]:
    """(input multiplier, input left shift) of TFLite's int16 TanhPrepare / SigmoidPrepare, with
    the multiplier a power-of-two scale gets in the kernel (3 << shift) folded in."""
    pot_out, log2_out = _checked_log2(y.quantization.scale)
    if not pot_out or log2_out != -15:
        raise refuse(op, f"an int16 {op.name.lower()}'s output must have scale 1/32768 (as TFLite requires), "
                         f"not {y.quantization.scale}")
    pot, log2_in = _checked_log2(x.quantization.scale)
    shift = 12 + log2_in
    pot = pot and (shift in ((0, 1) if tanh else (0,)))
    if pot:
        multiplier, shift = 3 << shift, 0
    else:
        real, shift = float(x.quantization.scale) * 4096.0 * 3.0, 0
        while real <= 32767.0 / 2.0 and shift <= 30:
            shift += 1
            real *= 2.0
        multiplier = int(real)
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    if 32768 * multiplier + rounding > (1 << 31) - 1:
        raise refuse(op, f"input scale {x.quantization.scale} overflows TFLite's 32-bit int16 {op.name.lower()}")
    return multiplier, shift


SIGMOID16_FUNCTION = "mlf_sigmoid_s16"
SIGMOID16_C = """static inline int16_t mlf_sigmoid_s16(int32_t value, const int16_t* table, int32_t tanh) {
  const uint32_t magnitude = (uint32_t)(value < 0 ? -value : value);
  const uint32_t step = tanh ? 8u : 9u, fraction_mask = (1u << step) - 1u;
  const uint32_t index = magnitude >> step;
  uint32_t interpolated;
  if (index >= 255u) {
    interpolated = tanh ? (0xFFFFu << 8) : (0x7FFFu << 10);
  } else {
    const uint32_t low = (uint16_t)table[index], high = (uint16_t)table[index + 1u];
    interpolated = (low << step) + (magnitude & fraction_mask) * (high - low);
  }
  if (tanh) {
    int32_t result = (int32_t)interpolated;
    result = value >= 0 ? result - (1 << 23) + (1 << 7) : -result + (1 << 23) + (1 << 7) - 1;
    return (int16_t)(result >> 8);
  }
  interpolated = value >= 0 ? interpolated + (1u << 9) : (1u << 25) - interpolated + (1u << 9) - 1u;
  return (int16_t)(interpolated >> 10);
}"""
C_HELPERS[SIGMOID16_FUNCTION] = SIGMOID16_C


def sigmoid_int16(op: Operator, x: Tensor, y: Tensor, tanh: bool) -> Lowered:
    multiplier, shift = int16_sigmoid_parameters(op, x, y, tanh)
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    expression = [f"const int32_t scaled = ((int32_t)in * {multiplier} + {rounding}) >> {shift};",
                  f"const int16_t out = {SIGMOID16_FUNCTION}(scaled, table_, {int(tanh)});"]
    return loop(op, x, y, expression, [Operand("int16_t*", "table_", constant=sigmoid_table_uint16())])


def logistic_int16(graph: Graph, op: Operator) -> Lowered:
    """LOGISTIC on int16 (TFLite's reference_integer_ops::Logistic): the input rescaled as SigmoidPrepare
    says, then the interpolated sigmoid table."""
    x, y = unary_io(graph, op, ("int16",))
    return sigmoid_int16(op, x, y, tanh=False)


def _tanh(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through TFLite's 256-entry table (tanhf, filled at import); int16 by TFLite's interpolated sigmoid table."""
    x, y = unary_io(graph, op)
    if x.dtype == "int16":
        return sigmoid_int16(op, x, y, tanh=True)
    return table_lookup(op, x, y, lut8(op, x, y, _float_fn(math.tanh)))


def _exp(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through TFLite's 256-entry table (expf), filled at import."""
    x, y = unary_io(graph, op, ("int8",))
    return table_lookup(op, x, y, lut8(op, x, y, _float_fn(math.exp)))


def _log(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through TFLite's 256-entry table (logf; the output's minimum for values <= 0), filled at import."""
    x, y = unary_io(graph, op, ("int8",))
    output_min = f32(-128 - y.quantization.zero_point) * f32(y.quantization.scale)
    natural_log = _float_fn(math.log)
    return table_lookup(op, x, y, lut8(op, x, y, lambda v: output_min if v <= 0 else natural_log(v)))


# --- ReLU family and leaky ReLU ---------------------------------------------------------------------------

def relu_x(graph: Graph, op: Operator, bottom: float, top: float | None,
           dtypes: tuple[str, ...] = ("int8", "int16")) -> Lowered:
    """TFLite's QuantizedReluX: rescale by input/output scale (float division, widened), clamp to the
    quantized `bottom` and `top` (roundf of value / output scale, + zero point)."""
    x, y = unary_io(graph, op, dtypes)
    multiplier, shift = q.quantize_multiplier(float(f32(x.quantization.scale) / f32(y.quantization.scale)))
    check_requantize(op, 1 << (8 if x.dtype == "int8" else 16), shift)
    zp, (qmin, qmax) = y.quantization.zero_point, LIMITS[y.dtype]
    lo = max(qmin, zp + q.round_half_away(float(f32(bottom) / f32(y.quantization.scale))))
    hi = qmax if top is None else min(qmax, zp + q.round_half_away(float(f32(top) / f32(y.quantization.scale))))
    ctype = CTYPES[y.dtype]
    expression = [f"const int32_t scaled = {zp} + {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift});", f"const {ctype} out = ({ctype}){c_clamp('scaled', lo, hi)};"]
    return loop(op, x, y, expression)


def _relu_n1_to_1(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 rescaled to the output (TFLite's QuantizedReluX), clamped to the quantized -1 and 1."""
    return relu_x(graph, op, -1.0, 1.0, ("int8",))


def _relu_0_to_1(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 rescaled to the output (TFLite's QuantizedReluX), clamped to the quantized 0 and 1."""
    return relu_x(graph, op, 0.0, 1.0, ("int8",))


def _leaky_relu(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16, TFLite's QuantizeLeakyRelu (an identity and an alpha multiplier by the input's sign)."""
    x, y = unary_io(graph, op)
    alpha = f32(op.options.get("alpha", 0.0))
    if not (math.isfinite(float(alpha)) and abs(float(alpha)) <= 1e15):
        raise refuse(op, f"alpha {float(alpha)} is not a finite value within ±1e15")
    # LeakyReluPrepare: input scale × alpha / output scale in float (all three are floats), widened
    alpha_multiplier, alpha_shift = q.quantize_multiplier(float(f32(x.quantization.scale) * alpha / f32(y.quantization.scale)))
    identity_multiplier, identity_shift = q.quantize_multiplier(float(f32(x.quantization.scale) / f32(y.quantization.scale)))
    magnitude = 1 << (8 if x.dtype == "int8" else 16)
    check_requantize(op, magnitude, alpha_shift)
    check_requantize(op, magnitude, identity_shift)
    zp, (qmin, qmax) = y.quantization.zero_point, LIMITS[y.dtype]
    ctype = CTYPES[y.dtype]
    expression = [f"const int32_t centred = (int32_t)in - ({x.quantization.zero_point});",
                  f"const int32_t scaled = {zp} + (centred >= 0 ? {REQUANTIZE_FUNCTION}(centred, {identity_multiplier}, "
                  f"{identity_shift}) : {REQUANTIZE_FUNCTION}(centred, {alpha_multiplier}, {alpha_shift}));",
                  f"const {ctype} out = ({ctype}){c_clamp('scaled', qmin, qmax)};"]
    return loop(op, x, y, expression)


# --- hard swish ---------------------------------------------------------------------------------------------

def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier (rounded to 16 bits, saturating)."""
    multiplier, exponent = q.quantize_multiplier(real)
    if multiplier >= (1 << 31) - 1 - (1 << 15):
        return 32767, exponent
    return (multiplier + (1 << 15)) >> 16, exponent


HARD_SWISH_FUNCTION = "mlf_hard_swish_s8"
HARD_SWISH_C = """static inline int16_t mlf_saturating_left_shift_s16(int16_t value, int32_t amount) {
  const int64_t result = (int64_t)value * ((int64_t)1 << amount);
  return (int16_t)(result > INT16_MAX ? INT16_MAX : (result < INT16_MIN ? INT16_MIN : result));
}
static inline int8_t mlf_hard_swish_s8(int8_t input, int32_t input_zero_point, int16_t output_multiplier,
                                       int32_t output_exponent, int16_t reluish_multiplier,
                                       int32_t reluish_exponent, int32_t output_zero_point) {
  const int16_t hires = (int16_t)(((int32_t)input - input_zero_point) * (1 << 7));
  const int16_t preshift_output = mlf_srdhm_s16(hires, output_multiplier);
  int16_t reluish = hires;
  if (reluish_exponent > 0) reluish = mlf_saturating_left_shift_s16(reluish, reluish_exponent - 1);
  reluish = mlf_srdhm_s16(reluish, reluish_multiplier);
  if (reluish_exponent > 0) reluish = mlf_saturating_left_shift_s16(reluish, 1);
  if (reluish_exponent < 0) reluish = mlf_rounding_divide_s16(reluish, -reluish_exponent);
  reluish = (int16_t)(((int32_t)reluish + (1 << 15)) >> 1);
  const int16_t product = (int16_t)(((int32_t)reluish * (int32_t)preshift_output) / (1 << 15));
  int32_t out = (int32_t)mlf_rounding_divide_s16(product, -output_exponent) + output_zero_point;
  out = out > 127 ? 127 : (out < -128 ? -128 : out);
  return (int8_t)out;
}"""
C_HELPERS[HARD_SWISH_FUNCTION] = HARD_SWISH_C


def _elu(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8, TFLite's ELU table (its prepare's LUTPopulate of x < 0 ? expm1(x) : x, computed at import); float ELU refused.

    LiteRT's reference resolver has no ELU: its one kernel (activations.cc, the table) is the oracle.
    No LiteRT kernel computes TFLite's float ELU (x < 0 ? expm1(x) : x): its builtin one approximates
    expm1 its own way, an ulp away from the correctly rounded result, and from glibc's expm1f, for
    about one negative input in fifteen — so a float ELU has nothing to be held to, even one whose
    input a DEQUANTIZE gives (256 values, which could be tabulated)."""
    if tensor_at(graph, op, 0).dtype == "float32":
        raise refuse(op, "a float32 ELU is not compiled: no LiteRT kernel computes TFLite's expm1 to hold it to "
                         "(its builtin float ELU is an ulp off at times); the int8 ELU is")
    x, y = unary_io(graph, op, ("int8",))
    return table_lookup(op, x, y, lut8(op, x, y, _float_fn(lambda v: math.expm1(v) if v < 0 else v)))


def _hard_swish(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8, TFLite's reference HardSwish (16-bit fixed point, its prepare-time multipliers computed at import)."""
    x, y = unary_io(graph, op, ("int8",))
    hires_input_scale = f32(1.0 / 128.0) * f32(x.quantization.scale)
    output_multiplier, output_exponent = _int16_multiplier(float(hires_input_scale / f32(y.quantization.scale)))
    reluish_multiplier, reluish_exponent = _int16_multiplier(float(hires_input_scale / f32(3.0 / 32768.0)))
    if output_exponent > 0:
        raise refuse(op, "the output scale is below the input scale / 128 (TFLite requires an output exponent <= 0)")
    if output_exponent < -15 or not -15 <= reluish_exponent <= 30:
        raise refuse(op, f"scales {x.quantization.scale} → {y.quantization.scale} are outside the range of "
                         "TFLite's 16-bit hard swish arithmetic")
    expression = [f"const int8_t out = {HARD_SWISH_FUNCTION}(in, {x.quantization.zero_point}, {output_multiplier}, "
                  f"{output_exponent}, {reluish_multiplier}, {reluish_exponent}, {y.quantization.zero_point});"]
    return loop(op, x, y, expression)


# --- ABS, NEG, CAST, FLOOR, SQRT, ZEROS_LIKE, FILL ---------------------------------------------------------

def _abs(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 |x − zero point|, rescaled when the scales differ (TFLite's AbsEvalQuantized); float32, int32."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype in ("float32", "int32") and y.dtype == x.dtype and x.quantization is None:
        function = "fabsf" if x.dtype == "float32" else None
        out = f"{function}(in)" if function else "in < 0 ? (int32_t)(0u - (uint32_t)in) : in"
        return loop(op, x, y, [f"const {CTYPES[x.dtype]} out = {out};"])
    x, y = unary_io(graph, op)
    zp_in, zp_out, (qmin, qmax) = x.quantization.zero_point, y.quantization.zero_point, LIMITS[y.dtype]
    ctype = CTYPES[y.dtype]
    centred = f"((int32_t)in - ({zp_in}) < 0 ? ({zp_in}) - (int32_t)in : (int32_t)in - ({zp_in}))"
    if f32(x.quantization.scale) == f32(y.quantization.scale):
        scaled = f"{centred} + ({zp_out})"
    else:
        multiplier, shift = q.quantize_multiplier(float(f32(x.quantization.scale) / f32(y.quantization.scale)))
        check_requantize(op, 1 << (8 if x.dtype == "int8" else 16), shift)
        scaled = f"{REQUANTIZE_FUNCTION}({centred}, {multiplier}, {shift}) + ({zp_out})"
    return loop(op, x, y, [f"const int32_t scaled = {scaled};", f"const {ctype} out = ({ctype}){c_clamp('scaled', qmin, qmax)};"])


def _neg(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: −x on the stored values (TFLite's Negate ignores quantization; −(−128) wraps as TFLite's cast does); int8, int16, int32, float32."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype not in ("int8", "int16", "int32", "float32") or y.dtype != x.dtype:
        raise refuse(op, f"NEG of {x.describe()} into {y.describe()} is not supported (int8, int16, int32, float32)")
    _same_size(op, x, y)
    ctype = CTYPES[x.dtype]
    out = "-in" if x.dtype == "float32" else f"({ctype})(0u - (uint32_t)(int32_t)in)"
    return loop(op, x, y, [f"const {ctype} out = {out};"])


def _same_size(op: Operator, x: Tensor, y: Tensor) -> None:
    if count(x) != count(y):
        raise refuse(op, f"the output {y.describe()} does not have the input's {x.describe()} elements")


_INT_LIMITS = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1)}


def _cast(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's CAST between int8, int16, int32 and float32 (integers wrap; floats truncate, saturating, NaN to the maximum)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    for t in (x, y):
        if t.dtype not in CTYPES:
            raise refuse(op, f"CAST of {t.describe()} is not supported (int8, int16, int32, float32)")
    _same_size(op, x, y)
    cout = CTYPES[y.dtype]
    if x.dtype == "float32" and y.dtype != "float32":
        lo, hi = _INT_LIMITS[y.dtype]
        top = float(np.nextafter(f32(hi), f32(0))) if float(f32(hi)) > hi else float(f32(hi))
        expression = [f"const {cout} out = in != in ? {hi} : (in < {float(f32(lo))!r}f ? ({cout})({lo}) : "
                      f"(in > {top!r}f ? {hi} : ({cout})in));"]
    elif y.dtype == "float32":
        expression = ["const float out = (float)in;"]
    else:  # integer to integer: two's complement truncation, as static_cast
        expression = [f"const {cout} out = ({cout})(uint32_t)(int32_t)in;"]
    return loop(op, x, y, expression, in_place=x.dtype == y.dtype)


def _floor(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32 floorf (TFLite's and TFLM's FLOOR are float only)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype != "float32" or y.dtype != "float32":
        raise refuse(op, f"FLOOR of {x.describe()} is not supported (float32 only, as in TFLite)")
    _same_size(op, x, y)
    return loop(op, x, y, ["const float out = floorf(in);"])


def _sqrt(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32 sqrtf (TFLite's SQRT is float only)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype != "float32" or y.dtype != "float32":
        raise refuse(op, f"SQRT of {x.describe()} is not supported (float32 only, as in TFLite)")
    _same_size(op, x, y)
    return loop(op, x, y, ["const float out = sqrtf(in);"])


def _zeros_like(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: every element set to 0 (int32 and float32, the types TFLite's ZerosLike takes)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if y.dtype not in ("int32", "float32") or y.dtype != x.dtype:
        raise refuse(op, f"ZEROS_LIKE of {x.describe()} is not supported (int32 and float32, as in TFLite)")
    _same_size(op, x, y)
    body = ["  (void)input_;", f"  for (int32_t i = 0; i < {count(y)}; ++i) output_[i] = 0;", "  return 0;"]
    operands = [Operand(f"{CTYPES[x.dtype]}*", "input_", x.index), Operand(f"{CTYPES[y.dtype]}*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True, in_place=True)


def _fill(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: every element set to the scalar value (TFLite's Fill copies its bits), dims constant."""
    dims, value, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if not dims.is_constant or dims.dtype not in ("int32", "int64") or len(dims.shape) != 1:
        raise refuse(op, f"the dims {dims.describe()} must be a constant 1-D int32 or int64 tensor")
    if tuple(int(d) for d in dims.data.reshape(-1)) != tuple(y.shape):
        raise refuse(op, f"the dims {list(dims.data.reshape(-1))} are not the output's shape {list(y.shape)}")
    if value.dtype not in CTYPES or value.dtype != y.dtype or len(value.shape) != 0:
        raise refuse(op, f"the value {value.describe()} must be a scalar of the output's type (int8, int16, int32, float32)")
    if (value.quantization is None) != (y.quantization is None) or (
            value.quantization is not None and (value.quantization.scale, value.quantization.zero_point)
            != (y.quantization.scale, y.quantization.zero_point)):
        raise refuse(op, "the value and the output must share one quantization (as TFLite requires)")
    ctype = CTYPES[y.dtype]
    operands = [Operand(f"{ctype}*", "output_", y.index)]
    if value.is_constant:  # folded into the code
        scalar = value.data.reshape(-1)[0]
        if y.dtype == "float32" and not math.isfinite(float(scalar)):
            raise refuse(op, f"the value {float(scalar)} is not finite")
        literal = f"{float(scalar)!r}f" if y.dtype == "float32" else str(int(scalar))
        body = [f"  const {ctype} value = ({ctype})({literal});"]
    else:
        operands.insert(0, Operand(f"{ctype}*", "value_", value.index))
        body = [f"  const {ctype} value = value_[0];"]
    body += [f"  for (int32_t i = 0; i < {count(y)}; ++i) output_[i] = value;", "  return 0;"]
    return Lowered(op, "", operands, body, kernel=True)


# --- RSQRT and L2_NORMALIZATION: TFLite's GetInvSqrtQuantizedMultiplierExp (gemmlowp fixed point) -------------

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _wrap32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _srdhm(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32."""
    if a == b == INT32_MIN:
        return INT32_MAX
    total = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    quotient = abs(total) >> 31
    return quotient if total >= 0 else -quotient


def _rounding_divide(x: int, exponent: int) -> int:
    """gemmlowp's RoundingDivideByPOT on int32."""
    mask = (1 << exponent) - 1
    remainder, threshold = x & mask, (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _saturating_pot(x: int, exponent: int) -> int:
    """gemmlowp's SaturatingRoundingMultiplyByPOT<exponent> on int32."""
    if exponent <= 0:
        return _rounding_divide(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return INT32_MAX if x > threshold else INT32_MIN if x < -threshold else x << exponent


def multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier (two roundings), as mlf_requantize computes it."""
    left, right = max(shift, 0), max(-shift, 0)
    return _rounding_divide(_srdhm(_wrap32(x * (1 << left)), multiplier), right)


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(value, kReverseShift = −1): 1/sqrt(value) as a
    Q31 multiplier and a (left) shift, by five Newton–Raphson steps in gemmlowp's fixed point."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = (32 - value.bit_length() - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = _rounding_divide(value >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # 1.0 with 3 integer bits
    for _ in range(5):
        cube = _saturating_pot(_srdhm(_srdhm(x, x), x), 6)
        x = _saturating_pot(_wrap32(_srdhm(half_three, x) - _srdhm(half_input, cube)), 3)
    x = _srdhm(x, 1518500250)  # × sqrt(2)/2
    if shift < 0:
        x, shift = _wrap32(x << -shift), 0
    return x, -shift


INV_SQRT_FUNCTION = "mlf_inv_sqrt"
INV_SQRT_C = """static inline int32_t mlf_srdhm_s32(int32_t srdhm_a, int32_t srdhm_b) {
  if (srdhm_a == srdhm_b && srdhm_a == INT32_MIN) return INT32_MAX;
  const int64_t product = (int64_t)srdhm_a * (int64_t)srdhm_b;
  const int64_t nudge = product >= 0 ? (1ll << 30) : (1 - (1ll << 30));
  return (int32_t)((product + nudge) / (1ll << 31));
}
static inline int32_t mlf_rounding_divide_s32(int32_t divide_x, int32_t divide_exponent) {
  const int32_t mask = (int32_t)((1u << divide_exponent) - 1u);
  const int32_t remainder = divide_x & mask, threshold = (mask >> 1) + (divide_x < 0 ? 1 : 0);
  return (divide_x >> divide_exponent) + (remainder > threshold ? 1 : 0);
}
static inline int32_t mlf_saturating_shift_s32(int32_t shift_x, int32_t shift_exponent) {
  const int32_t threshold = (int32_t)((1u << (31 - shift_exponent)) - 1u);
  return shift_x > threshold ? INT32_MAX : (shift_x < -threshold ? INT32_MIN : (int32_t)((uint32_t)shift_x << shift_exponent));
}
static inline void mlf_inv_sqrt(int32_t value, int32_t* multiplier, int32_t* shift) {
  if (value <= 1) {
    *multiplier = INT32_MAX;
    *shift = 0;
    return;
  }
  int32_t exponent = 11;
  while (value >= (1 << 29)) {
    value /= 4;
    ++exponent;
  }
  int32_t leading_zeros = 0;
  for (uint32_t probe = (uint32_t)value; !(probe & 0x80000000u); probe <<= 1) ++leading_zeros;
  const int32_t pairs = (leading_zeros - 1) / 2 - 1;
  exponent -= pairs;
  value = (int32_t)((uint32_t)value << (2 * pairs));
  const int32_t half_input = mlf_rounding_divide_s32(value >> 1, 1);
  const int32_t half_three = (1 << 28) + (1 << 27);
  int32_t x = 1 << 28;
  for (int32_t step = 0; step < 5; ++step) {
    const int32_t cube = mlf_saturating_shift_s32(mlf_srdhm_s32(mlf_srdhm_s32(x, x), x), 6);
    const int32_t difference = (int32_t)((uint32_t)mlf_srdhm_s32(half_three, x) - (uint32_t)mlf_srdhm_s32(half_input, cube));
    x = mlf_saturating_shift_s32(difference, 3);
  }
  x = mlf_srdhm_s32(x, 1518500250);
  if (exponent < 0) {
    x = (int32_t)((uint32_t)x << -exponent);
    exponent = 0;
  }
  *multiplier = x;
  *shift = -exponent;
}"""
C_HELPERS[INV_SQRT_FUNCTION] = INV_SQRT_C


def _rsqrt(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through a 256-entry table computed at import with TFLite's integer RSQRT (GetInvSqrtQuantizedMultiplierExp, two rescales)."""
    x, y = unary_io(graph, op, ("int8",))
    # SetRsqrtOutputMultiplier: 1 / (sqrtf(input scale) × output scale), the product in float
    real = 1.0 / float(f32(np.sqrt(f32(x.quantization.scale))) * f32(y.quantization.scale))
    multiplier, shift = q.quantize_multiplier(real)
    if shift > 30 or shift - 20 < -31:  # the Q20 value left-shifted in int32, or a right shift past 31
        raise refuse(op, f"scales {x.quantization.scale} → {y.quantization.scale} are outside TFLite's 32-bit rsqrt arithmetic")
    zp_in, zp_out = x.quantization.zero_point, y.quantization.zero_point
    table = np.zeros(256, dtype=np.int8)
    for value in range(-128, 128):
        centred = value - zp_in
        if centred <= 0:  # 0: the largest output, as TFLite; below the zero point TFLite fails — the same here
            table[value & 0xFF] = 127
            continue
        inv_multiplier, inv_shift = inv_sqrt_multiplier(centred)
        data = multiply_by_quantized_multiplier(1, inv_multiplier, inv_shift + 20)
        out = multiply_by_quantized_multiplier(data, multiplier, shift - 20) + zp_out
        table[value & 0xFF] = max(-128, min(127, out))
    return table_lookup(op, x, y, table, "values below the input's zero point (an error in TFLite) give 127")


def _l2_normalization(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8, TFLite's reference L2Normalization (the sum of squares of each row through GetInvSqrtQuantizedMultiplierExp)."""
    x, y = unary_io(graph, op, ("int8",))
    if op.options.get("activation", 0) != 0:
        raise refuse(op, "a fused activation is not supported (TFLite requires none)")
    if y.quantization.scale != float(f32(1.0 / 128)) or y.quantization.zero_point != 0:
        raise refuse(op, "an int8 L2 normalization's output must have scale 1/128 and zero point 0 (as TFLite requires)")
    if not 1 <= len(x.shape) <= 4 or tuple(x.shape) != tuple(y.shape):
        raise refuse(op, f"the input {x.describe()} must be of rank 1 to 4 and the output's shape")
    depth = int(x.shape[-1])
    rows = count(x) // depth if depth else 0
    if depth * 255 * 255 > INT32_MAX:
        raise refuse(op, f"a row of {depth} values overflows TFLite's 32-bit sum of squares")
    zp = x.quantization.zero_point
    body = [f"  for (int32_t row = 0; row < {rows}; ++row) {{", "    int32_t sum = 0;",
            f"    for (int32_t i = 0; i < {depth}; ++i) {{",
            f"      const int32_t centred = (int32_t)input_[row * {depth} + i] - ({zp});", "      sum += centred * centred;",
            "    }", "    int32_t multiplier, shift;", f"    {INV_SQRT_FUNCTION}(sum, &multiplier, &shift);",
            f"    for (int32_t i = 0; i < {depth}; ++i) {{",
            f"      const int32_t centred = (int32_t)input_[row * {depth} + i] - ({zp});",
            f"      const int32_t scaled = {REQUANTIZE_FUNCTION}(centred, multiplier, shift + 7);",
            f"      output_[row * {depth} + i] = (int8_t){c_clamp('scaled', -128, 127)};", "    }", "  }", "  return 0;"]
    operands = [Operand("int8_t*", "input_", x.index), Operand("int8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


# --- LOG_SOFTMAX: TFLite's reference_integer_ops::LogSoftmax (gemmlowp's exp and TFLite's log in fixed point) ----

LOG_SOFTMAX_FUNCTION = "mlf_log_softmax_s8"
LOG_SOFTMAX_C = """static inline int32_t mlf_pot_s32(int32_t pot_x, int32_t pot_exponent) {
  if (pot_exponent == 0) return pot_x;
  if (pot_exponent < 0) return mlf_rounding_divide_s32(pot_x, -pot_exponent);
  return mlf_saturating_shift_s32(pot_x, pot_exponent);
}
static inline int32_t mlf_wrap_add_s32(int32_t add_a, int32_t add_b) { return (int32_t)((uint32_t)add_a + (uint32_t)add_b); }
static inline int32_t mlf_clamp64_s32(int64_t wide) { return (int32_t)(wide > INT32_MAX ? INT32_MAX : (wide < INT32_MIN ? INT32_MIN : wide)); }
static inline int32_t mlf_leading_zeros_u32(uint32_t bits) {
  int32_t count = 0;
  for (uint32_t bit = 0x80000000u; bit != 0u && !(bits & bit); bit >>= 1) ++count;
  return count;
}
/* exp(a) for a in [-1/4, 0), Q0.31 in and out (sums wrap as gemmlowp's do) */
static inline int32_t mlf_exp_quarter_s32(int32_t quarter_in) {
  const int32_t constant_term = 1895147668, one_third = 715827883;
  const int32_t x = (int32_t)((uint32_t)quarter_in + (1u << 28));
  const int32_t x2 = mlf_srdhm_s32(x, x);
  const int32_t x3 = mlf_srdhm_s32(x2, x);
  const int32_t x4 = mlf_srdhm_s32(x2, x2);
  const int32_t x4_over_4 = mlf_rounding_divide_s32(x4, 2);
  const int32_t third = mlf_srdhm_s32((int32_t)((uint32_t)x4_over_4 + (uint32_t)x3), one_third);
  const int32_t poly = mlf_rounding_divide_s32((int32_t)((uint32_t)third + (uint32_t)x2), 1);
  const int32_t scaled = mlf_srdhm_s32(constant_term, (int32_t)((uint32_t)x + (uint32_t)poly));
  return (int32_t)((uint32_t)constant_term + (uint32_t)scaled);
}
/* exp(a) for a <= 0 given with 5 integer bits (Q5.26), result Q0.31 */
static inline int32_t mlf_exp_negative_q5_s32(int32_t exp_in) {
  static const int32_t multipliers[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int32_t quarter = 1 << 24;
  const int32_t reduced = (int32_t)((uint32_t)(exp_in & (quarter - 1)) - (uint32_t)quarter);
  const int32_t rescaled = mlf_saturating_shift_s32(reduced, 5);
  int32_t result = mlf_exp_quarter_s32(rescaled);
  const int32_t remainder = (int32_t)((uint32_t)reduced - (uint32_t)exp_in);
  for (int32_t k = 0; k < 7; ++k) {
    if (remainder & (int32_t)(1u << (24 + k))) result = mlf_srdhm_s32(result, multipliers[k]);
  }
  return exp_in == 0 ? INT32_MAX : result;
}
/* 1 / (1 + a) for a in [0, 1), Q0.31 in and out: three Newton-Raphson steps */
static inline int32_t mlf_one_over_one_plus_x_s32(int32_t reciprocal_in) {
  const int32_t half_denominator = (int32_t)(((int64_t)reciprocal_in + INT32_MAX + 1) / 2);
  const int32_t start = mlf_srdhm_s32(half_denominator, -1010580540);
  int32_t x = (int32_t)((uint32_t)start + 1515870810u);
  for (int32_t step = 0; step < 3; ++step) {
    const int32_t product = mlf_srdhm_s32(half_denominator, x);
    const int32_t one_minus = (int32_t)((1u << 29) - (uint32_t)product);
    const int32_t correction = mlf_srdhm_s32(x, one_minus);
    const int32_t shifted = mlf_saturating_shift_s32(correction, 2);
    x = mlf_wrap_add_s32(x, shifted);
  }
  return mlf_saturating_shift_s32(x, 1);
}
/* log(x) for x >= 1 given with 12 integer bits, result with 5 integer bits */
static inline int32_t mlf_log_q12_to_q5_s32(int32_t log_in) {
  const int32_t log_2 = 1488522236, sqrt_sqrt_half = 1805811301, sqrt_half = 1518500250;
  const int32_t alpha_n = 117049297, alpha_d = 127690142, alpha_i = 1057819769, alpha_f = 638450708;
  const int32_t shifted_quarter = 1 << 23;
  const int32_t a_headroom_plus_1 = mlf_leading_zeros_u32((uint32_t)log_in);
  const int32_t r_a_tmp = mlf_pot_s32(log_in, a_headroom_plus_1 - 1);
  const int32_t r_a_half = mlf_srdhm_s32(r_a_tmp, sqrt_half);
  const int32_t r_a = mlf_pot_s32(r_a_half, 1);
  const int32_t a_pow_2 = mlf_pot_s32(12 - a_headroom_plus_1, 25);
  const int32_t a_pow_2_adj = mlf_clamp64_s32((int64_t)a_pow_2 + shifted_quarter);
  const int32_t z_b = mlf_srdhm_s32(log_in, sqrt_half);
  const int32_t b_headroom = mlf_leading_zeros_u32((uint32_t)z_b) - 1;
  const int32_t r_b = mlf_pot_s32(log_in, b_headroom);
  const int32_t b_pow_2 = mlf_pot_s32(12 - b_headroom, 25);
  const int32_t b_pow_2_adj = mlf_clamp64_s32((int64_t)b_pow_2 - shifted_quarter);
  const int32_t r = r_a < r_b ? r_a : r_b;
  const int32_t pow_2_adj = a_pow_2_adj > b_pow_2_adj ? a_pow_2_adj : b_pow_2_adj;
  const int64_t half_sum = (int64_t)r + sqrt_sqrt_half;
  const int32_t p = (int32_t)((half_sum + (half_sum >= 0 ? 1 : -1)) / 2);
  const int32_t q_half = (int32_t)((uint32_t)r - (uint32_t)sqrt_sqrt_half);
  const int32_t q = (int32_t)((uint32_t)q_half + (uint32_t)q_half);
  const int32_t common_sq = mlf_srdhm_s32(q, q);
  const int32_t q_r = mlf_srdhm_s32(q, r);
  const int32_t q_cube = mlf_srdhm_s32(q, common_sq);
  const int32_t q_cube_n = mlf_srdhm_s32(q_cube, alpha_n);
  const int32_t num = (int32_t)((uint32_t)q_r + (uint32_t)q_cube_n);
  const int32_t d_sq = mlf_srdhm_s32(alpha_d, common_sq);
  const int32_t inner = (int32_t)((uint32_t)alpha_i + (uint32_t)q + (uint32_t)d_sq);
  const int32_t p_inner = mlf_srdhm_s32(p, inner);
  const int32_t f_q = mlf_srdhm_s32(alpha_f, q);
  const int32_t denominator_minus_one = (int32_t)((uint32_t)p_inner + (uint32_t)f_q);
  const int32_t reciprocal = mlf_one_over_one_plus_x_s32(denominator_minus_one);
  const int32_t num_scaled = mlf_rounding_divide_s32(num, 6);
  const int32_t whole = mlf_srdhm_s32(pow_2_adj, log_2);
  const int32_t fraction = mlf_srdhm_s32(num_scaled, reciprocal);
  return mlf_saturating_shift_s32((int32_t)((uint32_t)whole + (uint32_t)fraction), 1);
}
static inline void mlf_log_softmax_s8(const int8_t* input, int8_t* output, int32_t depth, int32_t input_multiplier,
                                      int32_t input_shift, int32_t reverse_multiplier, int32_t reverse_shift,
                                      int32_t diff_min) {
  int32_t max = -128;
  for (int32_t i = 0; i < depth; ++i) {
    if (input[i] > max) max = input[i];
  }
  int32_t sum = 0;
  for (int32_t i = 0; i < depth; ++i) {
    const int32_t diff = (int32_t)input[i] - max;
    if (diff >= diff_min) {
      const int32_t diff_q5 = mlf_requantize(diff, input_multiplier, input_shift);
      const int32_t exp_q0 = mlf_exp_negative_q5_s32(diff_q5);
      sum = mlf_wrap_add_s32(sum, mlf_rounding_divide_s32(exp_q0, 12));
    }
  }
  const int32_t log_sum = mlf_log_q12_to_q5_s32(sum);
  const int32_t shifted_log_sum = (int32_t)((uint32_t)log_sum + 0x80000000u);
  const int32_t reversed = mlf_requantize(shifted_log_sum, reverse_multiplier, reverse_shift);
  const int32_t adjusted_diff_min = diff_min - 1 > reversed ? diff_min - 1 : reversed;
  for (int32_t i = 0; i < depth; ++i) {
    const int32_t diff = (int32_t)input[i] - max;
    if (diff > adjusted_diff_min) {
      const int32_t diff_q5 = mlf_requantize(diff, input_multiplier, input_shift);
      const int32_t out = mlf_rounding_divide_s32((int32_t)((uint32_t)diff_q5 - (uint32_t)log_sum), 22) + 127;
      output[i] = (int8_t)(out > 127 ? 127 : (out < -128 ? -128 : out));
    } else {
      output[i] = -128;
    }
  }
}"""
C_HELPERS[LOG_SOFTMAX_FUNCTION] = LOG_SOFTMAX_C  # after mlf_inv_sqrt, whose int32 helpers it calls


def _log_softmax(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8, TFLite's reference LogSoftmax (gemmlowp's fixed-point exp and log), its prepare-time scaling computed at import."""
    x, y = unary_io(graph, op, ("int8",))
    if y.quantization.scale != 16.0 / 256 or y.quantization.zero_point != 127:
        raise refuse(op, "an int8 log softmax's output must have scale 16/256 and zero point 127 (as TFLite requires)")
    if not x.shape or tuple(x.shape) != tuple(y.shape):
        raise refuse(op, f"the input {x.describe()} must have a last dimension and the output's shape")
    multiplier, shift, diff_min = q.softmax_parameters(1.0, x.quantization.scale)
    if not 1 <= shift <= 30:
        raise refuse(op, f"input scale {x.quantization.scale} is outside TFLite's int8 log softmax arithmetic")
    # PreprocessLogSoftmaxScalingExp: the inverse of the input scaling, a multiplier below one
    reverse = float(1 << (31 - shift)) / float(multiplier)
    if not 0.0 < reverse < 1.0:
        raise refuse(op, f"input scale {x.quantization.scale} is outside TFLite's int8 log softmax arithmetic")
    reverse_multiplier, reverse_shift = q.quantize_multiplier(reverse)
    depth = int(x.shape[-1])
    rows = count(x) // depth if depth else 0
    body = [f"  for (int32_t row = 0; row < {rows}; ++row) {{",
            f"    {LOG_SOFTMAX_FUNCTION}(&input_[row * {depth}], &output_[row * {depth}], {depth}, {multiplier}, {shift}, "
            f"{reverse_multiplier}, {reverse_shift}, {diff_min});", "  }", "  return 0;"]
    operands = [Operand("int8_t*", "input_", x.index), Operand("int8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True)


# --- RELU, RELU6, QUANTIZE, DEQUANTIZE, LOGISTIC (from elementwise.py, with their int16 kinds) -------------------

def _relu(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 rescaled to the output (TFLite's QuantizedReluX), clamped below at the quantized 0."""
    return relu_x(graph, op, 0.0, None)


def _relu6(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 rescaled to the output (TFLite's QuantizedReluX), clamped to the quantized 0 and 6."""
    return relu_x(graph, op, 0.0, 6.0)


def _check_per_tensor_scale(op: Operator, t: Tensor) -> None:
    """A requantised tensor (int32 ones too) has one finite scale within 1e-15..1e15."""
    if t.quantization is None or t.quantization.per_channel:
        raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization")
    if not (math.isfinite(t.quantization.scale) and 1e-15 <= t.quantization.scale <= 1e15):
        raise refuse(op, f"tensor {t.describe()} has scale {t.quantization.scale}, outside 1e-15..1e15")


def _requantize_int16(op: Operator, x: Tensor, y: Tensor) -> Lowered:
    """TFLite's Requantize from int16 of any zero point (an int8 → int16 softmax's output has -32768)
    to int8 (clamped) or int32 (refused where the result could pass int32: TFLite's sum would overflow)."""
    for t in (x, y):
        _check_per_tensor_scale(op, t)
    x_zp, y_zp = x.quantization.zero_point, y.quantization.zero_point
    if not -32768 <= x_zp <= 32767:
        raise refuse(op, f"tensor {x.describe()} has zero point {x_zp}, outside int16")
    ratio = float(x.quantization.scale) / float(y.quantization.scale)
    multiplier, shift = q.quantize_multiplier(ratio)
    largest = max(32767 - x_zp, x_zp + 32768)  # the largest |input − zero point|
    check_requantize(op, largest, shift)
    scaled = f"{REQUANTIZE_FUNCTION}((int32_t)in - ({x_zp}), {multiplier}, {shift}) + ({y_zp})"
    if y.dtype == "int32":
        if largest * ratio + 1 + abs(y_zp) > (1 << 31) - 1:
            raise refuse(op, f"scales {x.quantization.scale} → {y.quantization.scale} and zero point {y_zp} "
                             "take the result past int32")
        return loop(op, x, y, [f"const int32_t out = {scaled};"], in_place=False)
    quantized(op, y, ("int8",))
    return loop(op, x, y, [f"const int32_t scaled = {scaled};", f"const int8_t out = (int8_t){c_clamp('scaled', -128, 127)};"])


# Requantizations between integer types that TFLM runs and LiteRT checks, beyond int8/int16 ↔ int8/int16
# (LiteRT has no int8 → int32 QUANTIZE: that one stays refused).
_REQUANTIZED_PAIRS = {("int32", "int8"), ("int32", "int16"), ("int8", "uint8"), ("uint8", "int8")}
_INTEGER_LIMITS = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1)}
_INTEGER_CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t"}


def _requantize_pair(op: Operator, x: Tensor, y: Tensor) -> Lowered:
    """TFLite's Requantize from int32 to int8/int16, or between int8 and uint8: (in − zero point)
    rescaled by input/output scale, + the output's zero point, clamped to its type."""
    for t in (x, y):
        _check_per_tensor_scale(op, t)
        lo, hi = _INTEGER_LIMITS[t.dtype]
        if not lo <= t.quantization.zero_point <= hi:
            raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}, outside {t.dtype}")
    x_zp, y_zp = x.quantization.zero_point, y.quantization.zero_point
    if x.dtype == "int32" and x_zp != 0:
        raise refuse(op, f"the int32 input {x.describe()} has zero point {x_zp}; TFLite's int32 (input − zero point) "
                         "would overflow, so only 0 is supported")
    lo, hi = _INTEGER_LIMITS[x.dtype]
    ratio = float(x.quantization.scale) / float(y.quantization.scale)
    multiplier, shift = q.quantize_multiplier(ratio)
    largest = max(hi - x_zp, x_zp - lo)  # the largest |input − zero point|
    check_requantize(op, largest, shift)
    if largest * ratio + 1 + abs(y_zp) > (1 << 31) - 1:
        raise refuse(op, f"scales {x.quantization.scale} → {y.quantization.scale} and zero point {y_zp} take "
                         "TFLite's int32 result past int32")
    out_lo, out_hi = _INTEGER_LIMITS[y.dtype]
    ctype = _INTEGER_CTYPES[y.dtype]
    expression = [f"const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)in - ({x_zp}), {multiplier}, {shift}) + ({y_zp});",
                  f"const {ctype} out = ({ctype}){c_clamp('scaled', out_lo, out_hi)};"]
    cin = _INTEGER_CTYPES[x.dtype]
    body = [f"  for (int32_t i = 0; i < {count(x)}; ++i) {{", f"    const {cin} in = input_[i];",
            *[f"    {line}" for line in expression], "    output_[i] = out;", "  }", "  return 0;"]
    operands = [Operand(f"{cin}*", "input_", x.index), Operand(f"{ctype}*", "output_", y.index)]
    same_size = np.dtype(x.dtype).itemsize == np.dtype(y.dtype).itemsize
    return Lowered(op, "", operands, body, kernel=True, in_place=same_size)


def _quantize(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32 → int8/int16 (TFLite's AffineQuantize, in float), or a requantization (TFLite's Requantize) between int8 and int16, from int16 to int32, from int32 to int8/int16, between int8 and uint8 (int16 → int16 symmetric, int16 → int8/int32 of any zero point, int32 of zero point 0); int8 → int32 refused (LiteRT has none to check it against)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    if x.dtype == "int16" and y.dtype in ("int8", "int32"):
        return _requantize_int16(op, x, y)
    if (x.dtype, y.dtype) in _REQUANTIZED_PAIRS:
        return _requantize_pair(op, x, y)
    if x.dtype == "int8" and y.dtype == "int32":
        raise refuse(op, "an int8 → int32 QUANTIZE is not compiled: LiteRT has none to hold TFLM's to")
    if y.dtype not in ("int8", "int16") or y.quantization is None or y.quantization.per_channel:
        raise refuse(op, f"only quantization to per-tensor int8 or int16 (or from int16 to int32, from int32 to "
                         f"int8/int16, between int8 and uint8) is supported, not {y.describe()}")
    quantized(op, y)
    zp, (qmin, qmax) = y.quantization.zero_point, LIMITS[y.dtype]
    ctype = CTYPES[y.dtype]
    if x.dtype == "float32":
        # AffineQuantize: roundf(value / (float)scale) + zero point, clamped (the integer part clamped
        # before the conversion: the same result, and no out-of-range float to int conversion in C)
        scale = repr(float(y.quantization.scale))
        expression = [f"const float rounded = roundf(in / {scale}f);",
                      f"const {ctype} out = rounded != rounded ? ({ctype})({zp}) : (rounded < {float(qmin - zp)!r}f ? {qmin} : "
                      f"(rounded > {float(qmax - zp)!r}f ? {qmax} : ({ctype})((int32_t)rounded + ({zp}))));"]
        return loop(op, x, y, expression, in_place=False)
    quantized(op, x)
    multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    check_requantize(op, 1 << (8 if x.dtype == "int8" else 16), shift)
    expression = [f"const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift}) + ({zp});", f"const {ctype} out = ({ctype}){c_clamp('scaled', qmin, qmax)};"]
    return loop(op, x, y, expression)


def _dequantize(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8/int16 → float32 (TFLite's Dequantize)."""
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    quantized(op, x)
    if y.dtype != "float32":
        raise refuse(op, f"only dequantization to float32 is supported, not {y.describe()}")
    scale = repr(float(x.quantization.scale))  # Dequantize: (float)(scale as double × (value − zero point))
    expression = [f"const float out = (float)({scale} * (double)((int32_t)in - ({x.quantization.zero_point})));"]
    return loop(op, x, y, expression, in_place=False)


def _logistic(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: int8 through TFLite's 256-entry table (1 / (1 + expf(−x)), filled at import); int16 by TFLite's interpolated sigmoid table.

    TFLite's reference kernel fills the int8 table at prepare time in float (PopulateLookupTable);
    the same table is computed here, at import, into flash."""
    x = tensor_at(graph, op, 0)
    if x.dtype == "int16":
        return logistic_int16(graph, op)
    x, y = unary_io(graph, op, ("int8",))
    if y.quantization.zero_point != -128 or y.quantization.scale != float(np.float32(1.0 / 256)):
        raise refuse(op, "an int8 logistic's output must have scale 1/256 and zero point -128 (as TFLite requires)")
    exp = _float_fn(math.exp)
    with np.errstate(over="ignore"):
        return table_lookup(op, x, y, lut8(op, x, y, lambda v: f32(1) / (f32(1) + exp(-v))))


RULES = {
    "RELU": _relu,
    "RELU6": _relu6,
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "LOGISTIC": _logistic,
    "TANH": _tanh,
    "EXP": _exp,
    "RELU_N1_TO_1": _relu_n1_to_1,
    "RELU_0_TO_1": _relu_0_to_1,
    "LOG": _log,
    "LEAKY_RELU": _leaky_relu,
    "HARD_SWISH": _hard_swish,
    "ELU": _elu,
    "ABS": _abs,
    "NEG": _neg,
    "CAST": _cast,
    "FLOOR": _floor,
    "SQRT": _sqrt,
    "ZEROS_LIKE": _zeros_like,
    "FILL": _fill,
    "RSQRT": _rsqrt,
    "L2_NORMALIZATION": _l2_normalization,
    "LOG_SOFTMAX": _log_softmax,
}
