"""Each TFLite operator as the CMSIS-NN call TFLM's CMSIS-NN kernels make for the same parameters,
with the operands prepared at import time: per-channel multipliers and shifts, filters laid out for
the faster kernel, activation ranges — everything that depends only on the model.

A lowered operator is C in the shape TVM's CMSIS-NN code generator writes (one function per
operator taking its tensors, locals holding the CMSIS-NN parameter structs, a context left empty), so
the build treats it exactly like TVM's: it sizes the scratch buffer of every call for the board's
core, precomputes kernel sums, and re-plans the pool from the same analysis.

Anything not covered is refused with the operator's name and index (UnsupportedModelError): a model
is compiled exactly or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import InvalidInputError
from . import quantization as q
from .tflite import ACTIVATIONS, PADDING, Graph, Operator, Tensor


class UnsupportedModelError(InvalidInputError):
    """The model uses an operator, type or property the importer does not compile."""


@dataclass(frozen=True)
class Operand:
    """One parameter of an operator function: a tensor of the graph or a constant array."""

    ctype: str
    param: str
    tensor: int | None = None
    constant: np.ndarray | None = field(default=None, compare=False)


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

    @property
    def output(self) -> int:
        return self.operator.outputs[0]


def lower(graph: Graph, op: Operator) -> Lowered:
    rule = _RULES.get(op.name)
    if rule is None:
        raise UnsupportedModelError(f"operator {op.index} ({op.name}) is not supported by mlfbuild import")
    return rule(graph, op)


# --- helpers ---------------------------------------------------------------------------------------

def _refuse(op: Operator, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"operator {op.index} ({op.name}): {why}")


def _tensor(graph: Graph, op: Operator, position: int, *, output: bool = False) -> Tensor:
    indices = op.outputs if output else op.inputs
    if position >= len(indices) or indices[position] < 0:
        raise _refuse(op, f"{'output' if output else 'input'} {position} is missing")
    return graph.tensors[indices[position]]


def _int8(op: Operator, *tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype != "int8":
            raise _refuse(op, f"tensor {t.describe()} is {t.dtype}; only int8 activations are supported")
        if t.quantization is None or t.quantization.per_channel:
            raise _refuse(op, f"tensor {t.describe()} has no per-tensor quantization")
        if not t.quantization.scale > 0 or not -128 <= t.quantization.zero_point <= 127:
            raise _refuse(op, f"tensor {t.describe()} has scale {t.quantization.scale} and zero point "
                              f"{t.quantization.zero_point}; int8 needs a positive scale and a zero point in -128..127")


def _activation(op: Operator, out: Tensor) -> tuple[int, int]:
    name = ACTIVATIONS.get(op.options.get("activation", 0), "?")
    if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise _refuse(op, f"fused activation {name} is not supported")
    return q.activation_range(name, out.quantization.scale, out.quantization.zero_point)


def _nhwc(op: Operator, t: Tensor) -> tuple[int, int, int, int]:
    if len(t.shape) != 4:
        raise _refuse(op, f"tensor {t.describe()} is not 4-D (NHWC)")
    return t.shape  # type: ignore[return-value]


def _dims(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def _constant(op: Operator, t: Tensor, dtype: str) -> np.ndarray:
    if not t.is_constant:
        raise _refuse(op, f"tensor {t.describe()} must be a constant")
    if t.dtype != dtype:
        raise _refuse(op, f"tensor {t.describe()} is {t.dtype}, expected {dtype}")
    return t.data


def _bias(graph: Graph, op: Operator, channels: int) -> np.ndarray | None:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return None
    bias = _constant(op, graph.tensors[op.inputs[2]], "int32").reshape(-1)
    if bias.size != channels:
        raise _refuse(op, f"the bias has {bias.size} values for {channels} output channels")
    return bias


def _out_size(padding: str, size: int, kernel: int, stride: int, dilation: int) -> int:
    effective = (kernel - 1) * dilation + 1
    return (size + stride - 1) // stride if padding == "SAME" else (size + stride - effective) // stride


def _padding(op: Operator, size: int, kernel: int, stride: int, dilation: int, out: int) -> int:
    """The padding before the first element (TFLite's ComputePaddingHeightWidth; the odd one of a
    SAME padding goes after the last, which CMSIS-NN's bounds checks give by themselves)."""
    padding = PADDING.get(op.options.get("padding", 0))
    if padding is None or stride < 1 or dilation < 1 or kernel < 1:
        raise _refuse(op, f"invalid window (padding {op.options.get('padding')}, stride {stride}, "
                          f"dilation {dilation}, kernel {kernel})")
    if _out_size(padding, size, kernel, stride, dilation) != out:
        raise _refuse(op, f"the output size {out} does not follow from input {size}, kernel {kernel}, "
                          f"stride {stride}, {padding} padding")
    total = (out - 1) * stride + (kernel - 1) * dilation + 1 - size
    return max(total, 0) // 2


def _status_check(call: str) -> list[str]:
    return [f"  arm_cmsis_nn_status status = {call};", "  if (status != ARM_CMSIS_NN_SUCCESS) return -1;",
            "  return 0;"]


def _bare_call(call: str) -> list[str]:
    """A call without a context, written as TVM writes it (the element-wise kernels cannot fail)."""
    return [f"  {call};", "  return 0;"]


def _io(graph: Graph, op: Operator) -> tuple[Operand, Operand]:
    return (Operand("int8_t*", "input_", op.inputs[0]), Operand("int8_t*", "output_", op.outputs[0]))


# --- convolutions ----------------------------------------------------------------------------------

def _conv_like(graph: Graph, op: Operator, *, depthwise: bool) -> Lowered:
    x, w, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    filters = _constant(op, w, "int8")
    if w.quantization is None or any(z != 0 for z in w.quantization.zero_points):
        raise _refuse(op, "the filter must be quantized symmetrically (zero point 0)")
    n, in_h, in_w, in_c = _nhwc(op, x)
    _, out_h, out_w, out_c = _nhwc(op, y)
    _, k_h, k_w, _ = _nhwc(op, w)
    o = op.options
    sh, sw, dh, dw = o["stride_h"], o["stride_w"], o["dilation_h"], o["dilation_w"]
    pad_h = _padding(op, in_h, k_h, sh, dh, out_h)
    pad_w = _padding(op, in_w, k_w, sw, dw, out_w)
    bias = _bias(graph, op, out_c)
    lo, hi = _activation(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    in_offset, out_offset = -x.quantization.zero_point, y.quantization.zero_point
    note = ""
    if depthwise:
        multiplier = out_c // in_c if in_c else 0
        if w.shape != (1, k_h, k_w, out_c) or multiplier * in_c != out_c:
            raise _refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels")
        if in_c == 1:
            # One input channel: the same sums as a convolution whose filters are the depthwise
            # filter's channels, and CMSIS-NN's convolution is the faster kernel (im2col + SIMD).
            filters = np.ascontiguousarray(filters.reshape(k_h, k_w, out_c).transpose(2, 0, 1)).reshape(out_c, k_h, k_w, 1)
            depthwise = False
            note = "depthwise convolution with one input channel runs as arm_convolve_wrapper_s8 (filter transposed at import)"
    elif w.shape != (out_c, k_h, k_w, in_c):
        raise _refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels "
                          "(grouped convolutions are not supported)")
    if w.quantization.per_channel and len(w.quantization.scales) != out_c:
        raise _refuse(op, f"the filter has {len(w.quantization.scales)} scales for {out_c} output channels")
    window = [f"  cmsis_nn_tile stride = {_dims((sw, sh))};", f"  cmsis_nn_tile padding = {_dims((pad_w, pad_h))};",
              f"  cmsis_nn_tile dilation = {_dims((dw, dh))};", f"  cmsis_nn_activation activation = {_dims((lo, hi))};"]
    if depthwise:
        function = "arm_depthwise_conv_wrapper_s8"
        params = [f"  cmsis_nn_dw_conv_params conv_params = {{{in_offset}, {out_offset}, {out_c // in_c}, stride, "
                  "padding, dilation, activation};"]
        filter_dims = (1, k_h, k_w, out_c)
    else:
        function = "arm_convolve_wrapper_s8"
        params = [f"  cmsis_nn_conv_params conv_params = {{{in_offset}, {out_offset}, stride, padding, dilation, "
                  "activation};"]
        filter_dims = (out_c, k_h, k_w, filters.shape[3])
    body = (["  cmsis_nn_context context= {NULL,0};"] + window + params +
            ["  cmsis_nn_per_channel_quant_params quant_params = {multiplier_, shift_};",
             f"  cmsis_nn_dims input_dims = {_dims((n, in_h, in_w, in_c))};",
             f"  cmsis_nn_dims filter_dims = {_dims(filter_dims)};",
             f"  cmsis_nn_dims bias_dims = {_dims((1, 1, 1, out_c))};",
             f"  cmsis_nn_dims output_dims = {_dims((n, out_h, out_w, out_c))};"]
            + _status_check(f"{function}(&context, &conv_params, &quant_params, &input_dims, input_, &filter_dims, "
                            f"filter_, &bias_dims, {'bias_' if bias is not None else 'NULL'}, &output_dims, output_)"))
    x_op, y_op = _io(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=np.ascontiguousarray(filters)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    operands += [Operand("int32_t*", "shift_", constant=shifts), y_op]
    return Lowered(op, function, operands, body, note)


def _conv2d(graph: Graph, op: Operator) -> Lowered:
    return _conv_like(graph, op, depthwise=False)


def _depthwise(graph: Graph, op: Operator) -> Lowered:
    return _conv_like(graph, op, depthwise=True)


# --- fully connected -------------------------------------------------------------------------------

def _fully_connected(graph: Graph, op: Operator) -> Lowered:
    x, w, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    weights = _constant(op, w, "int8")
    if op.options.get("weights_format", 0) != 0:
        raise _refuse(op, "shuffled weights are not supported")
    if w.quantization is None or w.quantization.per_channel or w.quantization.zero_point != 0:
        raise _refuse(op, "the weights must be quantized per tensor with zero point 0")
    if len(w.shape) != 2:
        raise _refuse(op, f"weights {w.describe()} are not 2-D")
    units, depth = w.shape
    elements = int(np.prod(x.shape))
    if depth == 0 or elements % depth:
        raise _refuse(op, f"input {x.describe()} is not a whole number of rows of {depth}")
    batches = elements // depth
    if int(np.prod(y.shape)) != batches * units:
        raise _refuse(op, f"output {y.describe()} does not hold {batches}×{units} values")
    bias = _bias(graph, op, units)
    lo, hi = _activation(op, y)
    multiplier, shift = q.fully_connected_multiplier(x.quantization.scale, w.quantization.scale, y.quantization.scale)
    call = ("arm_fully_connected_s8(&context, &fc_params, &quant_params, &input_dims, input_, &filter_dims, filter_, "
            f"&bias_dims, {'bias_' if bias is not None else 'NULL'}, &output_dims, output_)")
    body = ["  cmsis_nn_context context= {NULL,0};",
            f"  cmsis_nn_activation activation = {_dims((lo, hi))};",
            f"  cmsis_nn_fc_params fc_params = {{{-x.quantization.zero_point}, 0, {y.quantization.zero_point}, activation}};",
            f"  cmsis_nn_per_tensor_quant_params quant_params = {{{multiplier}, {shift}}};",
            f"  cmsis_nn_dims input_dims = {_dims((batches, 1, 1, depth))};",
            f"  cmsis_nn_dims filter_dims = {_dims((depth, 1, 1, units))};",
            f"  cmsis_nn_dims bias_dims = {_dims((1, 1, 1, units))};",
            f"  cmsis_nn_dims output_dims = {_dims((batches, 1, 1, units))};"] + _status_check(call)
    x_op, y_op = _io(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=weights)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    return Lowered(op, "arm_fully_connected_s8", operands + [y_op], body)


# --- pooling ---------------------------------------------------------------------------------------

def _pool(graph: Graph, op: Operator, function: str) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    _same_quantization(op, x, y)
    n, in_h, in_w, c = _nhwc(op, x)
    _, out_h, out_w, out_c = _nhwc(op, y)
    if out_c != c:
        raise _refuse(op, f"output {y.describe()} has other channels than input {x.describe()}")
    o = op.options
    pad_h = _padding(op, in_h, o["filter_h"], o["stride_h"], 1, out_h)
    pad_w = _padding(op, in_w, o["filter_w"], o["stride_w"], 1, out_w)
    lo, hi = _activation(op, y)
    body = ["  cmsis_nn_context context= {NULL,0};",
            f"  cmsis_nn_tile stride = {_dims((o['stride_w'], o['stride_h']))};",
            f"  cmsis_nn_tile padding = {_dims((pad_w, pad_h))};",
            f"  cmsis_nn_activation activation = {_dims((lo, hi))};",
            "  cmsis_nn_pool_params pool_params = {stride, padding, activation};",
            f"  cmsis_nn_dims input_dims = {_dims((n, in_h, in_w, c))};",
            f"  cmsis_nn_dims filter_dims = {_dims((1, o['filter_h'], o['filter_w'], 1))};",
            f"  cmsis_nn_dims output_dims = {_dims((n, out_h, out_w, c))};"]
    body += _status_check(f"{function}(&context, &pool_params, &input_dims, input_, &filter_dims, &output_dims, output_)")
    return Lowered(op, function, list(_io(graph, op)), body)


def _average_pool(graph: Graph, op: Operator) -> Lowered:
    return _pool(graph, op, "arm_avgpool_s8")


def _max_pool(graph: Graph, op: Operator) -> Lowered:
    return _pool(graph, op, "arm_max_pool_s8")


# --- softmax ---------------------------------------------------------------------------------------

def _softmax(graph: Graph, op: Operator) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    if y.quantization.zero_point != -128 or y.quantization.scale != float(np.float32(1.0 / 256)):
        raise _refuse(op, "an int8 softmax's output must have scale 1/256 and zero point -128 (as TFLite requires)")
    if x.shape != y.shape or not x.shape:
        raise _refuse(op, "input and output shapes differ")
    row = x.shape[-1]
    rows = int(np.prod(x.shape)) // row if row else 0
    multiplier, shift, diff_min = q.softmax_parameters(op.options["beta"], x.quantization.scale)
    body = _bare_call(f"arm_softmax_s8(input_, {rows}, {row}, {multiplier}, {shift}, {diff_min}, output_)")
    return Lowered(op, "arm_softmax_s8", list(_io(graph, op)), body)


# --- element-wise ----------------------------------------------------------------------------------

def _binary_operands(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, Tensor]:
    a, b, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, a, b, y)
    if a.shape != b.shape or a.shape != y.shape:
        raise _refuse(op, f"broadcasting ({a.describe()} with {b.describe()}) is not supported")
    for t in (a, b):
        if t.is_constant:
            raise _refuse(op, f"a constant operand ({t.describe()}) is not supported")
    return a, b, y


def _binary_operand_list(op: Operator) -> list[Operand]:
    return [Operand("int8_t*", "input1_", op.inputs[0]), Operand("int8_t*", "input2_", op.inputs[1]),
            Operand("int8_t*", "output_", op.outputs[0])]


def _add(graph: Graph, op: Operator) -> Lowered:
    a, b, y = _binary_operands(graph, op)
    p = q.add_parameters(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = _activation(op, y)
    size = int(np.prod(y.shape))
    call = (f"arm_elementwise_add_s8(input1_, input2_, {-a.quantization.zero_point}, {p['input1_mult']}, "
            f"{p['input1_shift']}, {-b.quantization.zero_point}, {p['input2_mult']}, {p['input2_shift']}, "
            f"{p['left_shift']}, output_, {y.quantization.zero_point}, {p['out_mult']}, {p['out_shift']}, "
            f"{lo}, {hi}, {size})")
    return Lowered(op, "arm_elementwise_add_s8", _binary_operand_list(op), _bare_call(call), in_place=True)


def _mul(graph: Graph, op: Operator) -> Lowered:
    a, b, y = _binary_operands(graph, op)
    multiplier, shift = q.mul_multiplier(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = _activation(op, y)
    size = int(np.prod(y.shape))
    call = (f"arm_elementwise_mul_s8(input1_, input2_, {-a.quantization.zero_point}, {-b.quantization.zero_point}, "
            f"output_, {y.quantization.zero_point}, {multiplier}, {shift}, {lo}, {hi}, {size})")
    return Lowered(op, "arm_elementwise_mul_s8", _binary_operand_list(op), _bare_call(call), in_place=True)


# --- shape only ------------------------------------------------------------------------------------

def _reshape(graph: Graph, op: Operator) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    if x.dtype != y.dtype or x.nbytes != y.nbytes:
        raise _refuse(op, f"{x.describe()} cannot be viewed as {y.describe()}")
    _same_quantization(op, x, y)
    if x.is_constant:
        raise _refuse(op, f"a reshape of the constant {x.describe()} is not supported")
    if y.index in graph.outputs:  # a graph output has its own bytes (the application's)
        body = [f"  memcpy(output_, input_, {y.nbytes});", "  return 0;"]
        return Lowered(op, "", list(_io(graph, op)), body, kernel=True)
    return Lowered(op, "", alias_of=x.index)


# --- operators CMSIS-NN does not have: small kernels of ours, TFLite's reference semantics --------------
#
# REQUANTIZE is TFLite's MultiplyByQuantizedMultiplier (kernels/internal/common.h): a saturating
# rounding doubling high multiply, then a rounding right shift — the rounding CMSIS-NN's kernels use
# too (arm_nn_requantize without CMSIS_NN_USE_SINGLE_ROUNDING).

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


def _clamp(value: str, lo: int, hi: int) -> str:
    return f"({value} < {lo} ? {lo} : ({value} > {hi} ? {hi} : {value}))"


def _elementwise(op: Operator, x: Tensor, y: Tensor, ctype_in: str, ctype_out: str, expression: list[str],
                 note: str) -> Lowered:
    """A loop over every element: `expression` computes `out` from `in`."""
    count = int(np.prod(x.shape))
    body = [f"  for (int32_t i = 0; i < {count}; ++i) {{", f"    const {ctype_in} in = input_[i];",
            *[f"    {line}" for line in expression], "    output_[i] = out;", "  }", "  return 0;"]
    operands = [Operand(f"{ctype_in}*", "input_", op.inputs[0]), Operand(f"{ctype_out}*", "output_", op.outputs[0])]
    return Lowered(op, "", operands, body, note, kernel=True, in_place=ctype_in == ctype_out)


def _relu_like(graph: Graph, op: Operator, top: float | None) -> Lowered:
    """RELU / RELU6 (TFLite's activations.cc, QuantizedReluX): rescale by input/output (float
    division, then widened), clamp to the quantized 0 and 6."""
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    multiplier, shift = q.quantize_multiplier(float(np.float32(x.quantization.scale) / np.float32(y.quantization.scale)))
    zp = y.quantization.zero_point
    lo = max(-128, zp + q.round_half_away(0.0))
    hi = 127 if top is None else min(127, zp + q.round_half_away(float(np.float32(top) / np.float32(y.quantization.scale))))
    expression = [f"const int32_t scaled = {zp} + {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift});", f"const int8_t out = (int8_t){_clamp('scaled', lo, hi)};"]
    return _elementwise(op, x, y, "int8_t", "int8_t", expression, "")


def _relu(graph: Graph, op: Operator) -> Lowered:
    return _relu_like(graph, op, None)


def _relu6(graph: Graph, op: Operator) -> Lowered:
    return _relu_like(graph, op, 6.0)


def _quantize(graph: Graph, op: Operator) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    if y.dtype != "int8" or y.quantization is None or y.quantization.per_channel:
        raise _refuse(op, f"only quantization to per-tensor int8 is supported, not {y.describe()}")
    zp = y.quantization.zero_point
    if x.dtype == "float32":
        # AffineQuantize: round(value / scale) in double (QuantizationParams.scale is a double) + zero point
        scale = repr(float(y.quantization.scale))
        expression = [f"const int32_t scaled = (int32_t)round((double)in / {scale}) + ({zp});",
                      f"const int8_t out = (int8_t){_clamp('scaled', -128, 127)};"]
        return _elementwise(op, x, y, "float", "int8_t", expression, "")
    _int8(op, x)
    multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
    expression = [f"const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)in - ({x.quantization.zero_point}), "
                  f"{multiplier}, {shift}) + ({zp});", f"const int8_t out = (int8_t){_clamp('scaled', -128, 127)};"]
    return _elementwise(op, x, y, "int8_t", "int8_t", expression, "")


def _dequantize(graph: Graph, op: Operator) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    _int8(op, x)
    if y.dtype != "float32":
        raise _refuse(op, f"only dequantization to float32 is supported, not {y.describe()}")
    scale = repr(float(x.quantization.scale))  # Dequantize: (float)(scale as double × (value − zero point))
    expression = [f"const float out = (float)({scale} * (double)((int32_t)in - ({x.quantization.zero_point})));"]
    return _elementwise(op, x, y, "int8_t", "float", expression, "")


def _same_quantization(op: Operator, *tensors: Tensor) -> None:
    first = tensors[0].quantization
    if any(t.quantization != first for t in tensors[1:]):
        raise _refuse(op, "every input and the output must share one quantization")


def _as_4d(op: Operator, shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) > 4:
        raise _refuse(op, f"rank {len(shape)} is not supported (at most 4)")
    return (1,) * (4 - len(shape)) + tuple(shape)


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def _pad(graph: Graph, op: Operator) -> Lowered:
    x, paddings, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    _same_quantization(op, x, y)
    pads = _constant(op, paddings, paddings.dtype).astype(np.int64).reshape(-1, 2)
    if pads.shape[0] != len(x.shape) or (pads < 0).any():
        raise _refuse(op, "the paddings must be one non-negative (before, after) pair per dimension")
    value = y.quantization.zero_point
    if op.name == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = int(_constant(op, graph.tensors[op.inputs[2]], "int8").reshape(-1)[0])
    if tuple(int(d + a + b) for d, (a, b) in zip(x.shape, pads)) != y.shape:
        raise _refuse(op, f"the output {y.describe()} is not the padded input")
    src, dst = _as_4d(op, x.shape), _as_4d(op, y.shape)
    before = (0,) * (4 - len(x.shape)) + tuple(int(a) for a, _ in pads)
    out_strides = _strides(dst)
    offset = sum(b * s for b, s in zip(before, out_strides))
    body = [f"  memset(output_, {value}, {int(np.prod(dst))});",
            f"  for (int32_t a = 0; a < {src[0]}; ++a)", f"    for (int32_t b = 0; b < {src[1]}; ++b)",
            f"      for (int32_t c = 0; c < {src[2]}; ++c)",
            f"        memcpy(output_ + {offset} + a * {out_strides[0]} + b * {out_strides[1]} + c * {out_strides[2]}, "
            f"input_ + ((a * {src[1]} + b) * {src[2]} + c) * {src[3]}, {src[3]});", "  return 0;"]
    return Lowered(op, "", list(_io(graph, op)), body, kernel=True)


def _transpose(graph: Graph, op: Operator) -> Lowered:
    x, perm_tensor, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    _same_quantization(op, x, y)
    perm = [int(v) for v in _constant(op, perm_tensor, perm_tensor.dtype).reshape(-1)]
    if sorted(perm) != list(range(len(x.shape))) or tuple(x.shape[p] for p in perm) != y.shape:
        raise _refuse(op, f"permutation {perm} does not turn {x.describe()} into {y.describe()}")
    shift = 4 - len(perm)
    perm4 = list(range(shift)) + [p + shift for p in perm]
    out4, in_strides = _as_4d(op, y.shape), _strides(_as_4d(op, x.shape))
    strides = [in_strides[p] for p in perm4]  # input stride of each output dimension
    body = [f"  int8_t* out = output_;", f"  for (int32_t a = 0; a < {out4[0]}; ++a)",
            f"    for (int32_t b = 0; b < {out4[1]}; ++b)", f"      for (int32_t c = 0; c < {out4[2]}; ++c)",
            f"        for (int32_t d = 0; d < {out4[3]}; ++d)",
            f"          *out++ = input_[a * {strides[0]} + b * {strides[1]} + c * {strides[2]} + d * {strides[3]}];",
            "  return 0;"]
    return Lowered(op, "", list(_io(graph, op)), body, kernel=True)


def _concatenation(graph: Graph, op: Operator) -> Lowered:
    inputs = [_tensor(graph, op, i) for i in range(len(op.inputs))]
    y = _tensor(graph, op, 0, output=True)
    _int8(op, y, *inputs)
    _same_quantization(op, y, *inputs)
    if ACTIVATIONS.get(op.options.get("activation", 0)) != "NONE":
        raise _refuse(op, "a fused activation on CONCATENATION is not supported")
    axis = op.options["axis"] % max(len(y.shape), 1)
    outer = int(np.prod(y.shape[:axis]))
    widths = [int(np.prod(t.shape[axis:])) for t in inputs]
    if sum(widths) * outer != int(np.prod(y.shape)) or any(t.shape[:axis] != y.shape[:axis] for t in inputs):
        raise _refuse(op, "the inputs do not concatenate into the output")
    operands, lines, position = [], [f"  for (int32_t o = 0; o < {outer}; ++o) {{"], 0
    for i, (tensor, width) in enumerate(zip(inputs, widths)):
        operands.append(Operand("int8_t*", f"input{i}_", tensor.index))
        lines.append(f"    memcpy(output_ + o * {sum(widths)} + {position}, input{i}_ + o * {width}, {width});")
        position += width
    operands.append(Operand("int8_t*", "output_", y.index))
    return Lowered(op, "", operands, lines + ["  }", "  return 0;"], kernel=True)


def _mean(graph: Graph, op: Operator) -> Lowered:
    """MEAN as LiteRT's reduce.cc dispatches it for int8: keep_dims over H and W of a 4-D tensor →
    reference_integer_ops::Mean (requantise the zero-point-corrected sum, then divide rounding half
    away); else, with one quantization in and out → reference_ops::Mean (the raw sum divided,
    truncating); else → QuantizedMeanOrSum (the rescale's multiplier takes 1/count in, up to 2^32)."""
    x, axes_tensor, y = _tensor(graph, op, 0), _tensor(graph, op, 1), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    rank = len(x.shape)
    axes = sorted({int(a) % rank for a in _constant(op, axes_tensor, "int32").reshape(-1)} if rank else set())
    shape = _as_4d(op, x.shape)
    reduced = [False] * (4 - rank) + [i in axes for i in range(rank)]
    count = int(np.prod([d for d, r in zip(shape, reduced) if r]))
    kept = tuple(1 if r else d for d, r in zip(shape, reduced))
    if int(np.prod(kept)) != int(np.prod(y.shape)) or count == 0:
        raise _refuse(op, f"the output {y.describe()} is not the mean of {x.describe()} over axes {axes}")
    in_zp, out_zp = x.quantization.zero_point, y.quantization.zero_point
    if op.options.get("keep_dims") and rank == 4 and axes == [1, 2]:
        multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
        accumulate = f"(int32_t)input_[i] - ({in_zp})"
        finish = [f"sum = {REQUANTIZE_FUNCTION}(sum, {multiplier}, {shift});",
                  f"sum = (sum > 0 ? sum + {count // 2} : sum - {count // 2}) / {count} + ({out_zp});",
                  f"*out++ = (int8_t){_clamp('sum', -128, 127)};"]
    elif x.quantization == y.quantization:
        accumulate = "(int32_t)input_[i]"
        finish = [f"*out++ = (int8_t)(sum / {count});"]
    else:  # QuantizedMeanOrSum: the input/output rescale with 1/count folded into its multiplier
        multiplier, shift = q.quantize_multiplier(float(x.quantization.scale) / float(y.quantization.scale))
        fold = min(count.bit_length() - 1, 32, 31 + shift)
        multiplier, shift = int((multiplier << fold) // count), shift - fold
        accumulate = "(int32_t)input_[i]"
        finish = [f"sum = {REQUANTIZE_FUNCTION}(sum - ({in_zp}) * {count}, {multiplier}, {shift}) + ({out_zp});",
                  f"*out++ = (int8_t){_clamp('sum', -128, 127)};"]
    strides = _strides(shape)
    outer = [f"for (int32_t o{d} = 0; o{d} < {1 if r else n}; ++o{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    inner = [f"for (int32_t r{d} = 0; r{d} < {n if r else 1}; ++r{d})" for d, (n, r) in enumerate(zip(shape, reduced))]
    index = " + ".join(f"(o{d} + r{d}) * {strides[d]}" for d in range(4))
    body = ["  int8_t* out = output_;", "  " + " ".join(outer) + " {", "    int32_t sum = 0;",
            "    " + " ".join(inner) + " {", f"      const int32_t i = {index};", f"      sum += {accumulate};",
            "    }", *[f"    {line}" for line in finish], "  }", "  return 0;"]
    return Lowered(op, "", list(_io(graph, op)), body, kernel=True)


def _logistic(graph: Graph, op: Operator) -> Lowered:
    """LOGISTIC: for int8, TFLite's reference kernel looks up a 256-entry table it fills at prepare
    time in float (activations.cc, PopulateLookupTable with 1 / (1 + exp(-x))); the same table is
    computed here, at import, into flash."""
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    _int8(op, x, y)
    if y.quantization.zero_point != -128 or y.quantization.scale != float(np.float32(1.0 / 256)):
        raise _refuse(op, "an int8 logistic's output must have scale 1/256 and zero point -128 (as TFLite requires)")
    table = q.logistic_table(x.quantization.scale, x.quantization.zero_point, y.quantization.scale,
                             y.quantization.zero_point)
    count = int(np.prod(x.shape))
    body = [f"  for (int32_t i = 0; i < {count}; ++i) output_[i] = table_[(uint8_t)input_[i]];", "  return 0;"]
    operands = [Operand("int8_t*", "input_", x.index), Operand("int8_t*", "table_", constant=table),
                Operand("int8_t*", "output_", y.index)]
    return Lowered(op, "", operands, body, kernel=True, in_place=True)


_RULES: dict[str, Callable[[Graph, Operator], Lowered]] = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _average_pool,
    "MAX_POOL_2D": _max_pool,
    "SOFTMAX": _softmax,
    "ADD": _add,
    "MUL": _mul,
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "RELU": _relu,
    "RELU6": _relu6,
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "PAD": _pad,
    "PADV2": _pad,
    "TRANSPOSE": _transpose,
    "CONCATENATION": _concatenation,
    "MEAN": _mean,
    "LOGISTIC": _logistic,
}
SUPPORTED_OPERATORS = tuple(sorted(_RULES))
