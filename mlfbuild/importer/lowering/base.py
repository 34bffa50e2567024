"""What every operator's lowering shares: the lowered call (Lowered, Operand), the refusal, reading
an operator's tensors and checking their types, the window arithmetic of TFLite's padding, and the
C helpers our kernels call (each written once into the generated source, by name, where used)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidInputError
from .. import quantization as q
from ..tflite import ACTIVATIONS, PADDING, Graph, Operator, Tensor


class UnsupportedModelError(InvalidInputError):
    """The model uses an operator, type or property the importer does not compile; `operator` is the
    one refused, where the refusal is about one."""

    def __init__(self, message: str, operator: Operator | None = None):
        super().__init__(message)
        self.operator = operator

    def at(self, where: str) -> "UnsupportedModelError":
        """The same refusal, said of the file `where`."""
        return UnsupportedModelError(f"{where}: {self}", self.operator)


@dataclass(frozen=True)
class Operand:
    """One parameter of an operator function: a tensor of the graph or a constant array."""

    ctype: str
    param: str
    tensor: int | None = None
    constant: np.ndarray | None = field(default=None, compare=False)


# Written where a band function's name is built on its operator function's (emit.py fills it in).
BAND_FUNCTION = "@operator@"


@dataclass
class Bands:
    """The same operator computed one output row at a time into a one-row band on the stack, each row
    copied to its place once computed: correct whatever the output's placement. Top to bottom, the
    output may start up to `reserve` bytes before its input, over it (no row is copied over input
    bytes a later row reads); bottom to top, it may start `allow` bytes before it or later (the
    mirror image: usually after it, `allow` < 0). `functions` are C definitions the bodies call (each
    one CMSIS-NN call, as TVM writes operator functions); names in them start with BAND_FUNCTION."""

    reserve: int
    allow: int
    functions: list[str]
    body: list[str]  # top to bottom ([]: not this way)
    reverse_body: list[str]  # bottom to top ([]: not this way)


@dataclass
class Lowered:
    operator: Operator
    function: str  # the library function the body calls ("" for an alias)
    operands: list[Operand] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    note: str = ""  # why this call, where it is not the obvious one
    alias_of: int | None = None  # no code: the output shares the bytes of this input tensor
    kernel: bool = False  # our own C (TFLite's reference semantics), not a library call
    # Element i of the output is written after element i of each input is read, and of none other:
    # the output may take over the bytes of an input that is not read again.
    in_place: bool = False
    bands: Bands | None = None  # how to compute it row by row over its dying input (memory "min")
    rows: object | None = None  # rows.ConvRows: a convolution computable over any range of output rows
    # C definitions the body calls, written before the operator function (names start with BAND_FUNCTION)
    functions: list[str] = field(default_factory=list)
    band_order: str = ""  # the layout placed the output over the input: "down" or "up" (emit those bands)

    @property
    def band_body(self) -> list[str]:
        return self.bands.body if self.band_order == "down" else self.bands.reverse_body

    @property
    def output(self) -> int:
        return self.operator.outputs[0]

    def constant(self, param: str):
        """The constant operand `param` (a numpy array)."""
        return next(o.constant for o in self.operands if o.param == param)

    @property
    def has_bias(self) -> bool:
        return any(o.param == "bias_" for o in self.operands)


def refuse(op: Operator, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"operator {op.index} ({op.name}): {why}", op)


def tensor_at(graph: Graph, op: Operator, position: int, *, output: bool = False) -> Tensor:
    indices = op.outputs if output else op.inputs
    if position >= len(indices) or indices[position] < 0:
        raise refuse(op, f"{'output' if output else 'input'} {position} is missing")
    return graph.tensors[indices[position]]


def require_int8(op: Operator, *tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype != "int8":
            raise refuse(op, f"tensor {t.describe()} is {t.dtype}; only int8 activations are supported")
        if t.quantization is None or t.quantization.per_channel:
            raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization")
        if not t.quantization.scale > 0 or not -128 <= t.quantization.zero_point <= 127:
            raise refuse(op, f"tensor {t.describe()} has scale {t.quantization.scale} and zero point "
                              f"{t.quantization.zero_point}; int8 needs a positive scale and a zero point in -128..127")


def fused_activation_range(op: Operator, out: Tensor) -> tuple[int, int]:
    name = ACTIVATIONS.get(op.options.get("activation", 0), "?")
    if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise refuse(op, f"fused activation {name} is not supported")
    return q.activation_range(name, out.quantization.scale, out.quantization.zero_point)


def nhwc(op: Operator, t: Tensor) -> tuple[int, int, int, int]:
    if len(t.shape) != 4:
        raise refuse(op, f"tensor {t.describe()} is not 4-D (NHWC)")
    return t.shape  # type: ignore[return-value]


def c_dims(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def constant_data(op: Operator, t: Tensor, dtype: str) -> np.ndarray:
    if not t.is_constant:
        raise refuse(op, f"tensor {t.describe()} must be a constant")
    if t.dtype != dtype:
        raise refuse(op, f"tensor {t.describe()} is {t.dtype}, expected {dtype}")
    return t.data


def bias_data(graph: Graph, op: Operator, channels: int) -> np.ndarray | None:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return None
    bias = constant_data(op, graph.tensors[op.inputs[2]], "int32").reshape(-1)
    if bias.size != channels:
        raise refuse(op, f"the bias has {bias.size} values for {channels} output channels")
    return bias


def window_output_size(padding: str, size: int, kernel: int, stride: int, dilation: int) -> int:
    effective = (kernel - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - effective) // stride


def window_padding(op: Operator, size: int, kernel: int, stride: int, dilation: int, out: int) -> int:
    """The padding before the first element (TFLite's ComputePaddingHeightWidth; the odd one of a
    SAME padding goes after the last, which CMSIS-NN's bounds checks give by themselves)."""
    padding = PADDING.get(op.options.get("padding", 0))
    if padding is None or stride < 1 or dilation < 1 or kernel < 1:
        raise refuse(op, f"invalid window (padding {op.options.get('padding')}, stride {stride}, "
                          f"dilation {dilation}, kernel {kernel})")
    if window_output_size(padding, size, kernel, stride, dilation) != out:
        raise refuse(op, f"the output size {out} does not follow from input {size}, kernel {kernel}, "
                          f"stride {stride}, {padding} padding")
    total = (out - 1) * stride + (kernel - 1) * dilation + 1 - size
    return max(total, 0) // 2


def status_check(call: str) -> list[str]:
    return [f"  arm_cmsis_nn_status status = {call};", "  if (status != ARM_CMSIS_NN_SUCCESS) return -1;",
            "  return 0;"]


def bare_call(call: str) -> list[str]:
    """A call without a context, written as TVM writes it (the element-wise kernels cannot fail)."""
    return [f"  {call};", "  return 0;"]


def io_operands(graph: Graph, op: Operator) -> tuple[Operand, Operand]:
    return (Operand("int8_t*", "input_", op.inputs[0]), Operand("int8_t*", "output_", op.outputs[0]))


REQUANTIZE_FUNCTION = "mlf_requantize"


REQUANTIZE_C = """static inline int32_t mlf_requantize(int32_t value, int32_t multiplier, int32_t shift) {
  const int32_t left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  const int64_t product = (int64_t)(value * (int32_t)(1u << left)) * multiplier;
  const int64_t nudge = product >= 0 ? (1ll << 30) : (1 - (1ll << 30));
  const int32_t high = (int32_t)((product + nudge) / (1ll << 31));
  const int32_t mask = (int32_t)((1u << right) - 1u);
  const int32_t remainder = high & mask, threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (remainder > threshold ? 1 : 0);
}"""


def c_clamp(value: str, lo: int, hi: int) -> str:
    return f"({value} < {lo} ? {lo} : ({value} > {hi} ? {hi} : {value}))"


def elementwise(op: Operator, x: Tensor, y: Tensor, ctype_in: str, ctype_out: str, expression: list[str],
                 note: str) -> Lowered:
    """A loop over every element: `expression` computes `out` from `in`."""
    count = int(np.prod(x.shape))
    body = [f"  for (int32_t i = 0; i < {count}; ++i) {{", f"    const {ctype_in} in = input_[i];",
            *[f"    {line}" for line in expression], "    output_[i] = out;", "  }", "  return 0;"]
    operands = [Operand(f"{ctype_in}*", "input_", op.inputs[0]), Operand(f"{ctype_out}*", "output_", op.outputs[0])]
    return Lowered(op, "", operands, body, note, kernel=True, in_place=ctype_in == ctype_out)


def same_quantization(op: Operator, *tensors: Tensor) -> None:
    first = tensors[0].quantization
    if any(t.quantization != first for t in tensors[1:]):
        raise refuse(op, "every input and the output must share one quantization")


def as_4d(op: Operator, shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) > 4:
        raise refuse(op, f"rank {len(shape)} is not supported (at most 4)")
    return (1,) * (4 - len(shape)) + tuple(shape)


def strides_of(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


# REQUANTIZE_ONCE is the single-rounding MultiplyByQuantizedMultiplier of TFLite's common.h (its
# TFLITE_SINGLE_ROUNDING form), which its reference fully connected layers compute: one 64-bit
# product, one rounding shift (half up). TFLite's QuantizeMultiplier keeps the shift within -31..30.
REQUANTIZE_ONCE_FUNCTION = "mlf_requantize_once"
REQUANTIZE_ONCE_C = """static inline int32_t mlf_requantize_once(int32_t value, int32_t multiplier, int32_t shift) {
  const int32_t total_shift = 31 - shift;
  const int64_t product = (int64_t)value * multiplier + ((int64_t)1 << (total_shift - 1));
  return (int32_t)(product >> total_shift);
}"""

# gemmlowp's fixed point on int16 (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT), which
# TFLite's 16-bit kernels (hard swish, the integer LSTM's gate activations) compute with.
FIXED16_FUNCTION = "mlf_srdhm_s16"
FIXED16_C = """static inline int16_t mlf_srdhm_s16(int16_t a, int16_t b) {
  if (a == b && a == INT16_MIN) return INT16_MAX;
  const int32_t product = (int32_t)a * (int32_t)b;
  const int32_t nudge = product >= 0 ? (1 << 14) : (1 - (1 << 14));
  return (int16_t)((product + nudge) / (1 << 15));
}
static inline int16_t mlf_rounding_divide_s16(int16_t x, int32_t exponent) {
  const int32_t mask = (1 << exponent) - 1;
  const int32_t remainder = x & mask, threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (int16_t)((x >> exponent) + (remainder > threshold ? 1 : 0));
}"""

# C helpers of our kernels, by function name, in an order where each follows those it calls: the
# generated source gets each one a body names (emit.py).
C_HELPERS: dict[str, str] = {REQUANTIZE_FUNCTION: REQUANTIZE_C, REQUANTIZE_ONCE_FUNCTION: REQUANTIZE_ONCE_C,
                             FIXED16_FUNCTION: FIXED16_C}
