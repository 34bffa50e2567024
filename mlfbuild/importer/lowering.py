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
    if x.quantization != y.quantization:
        raise _refuse(op, "input and output must share one quantization")
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
    return Lowered(op, "arm_elementwise_add_s8", _binary_operand_list(op), _bare_call(call))


def _mul(graph: Graph, op: Operator) -> Lowered:
    a, b, y = _binary_operands(graph, op)
    multiplier, shift = q.mul_multiplier(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = _activation(op, y)
    size = int(np.prod(y.shape))
    call = (f"arm_elementwise_mul_s8(input1_, input2_, {-a.quantization.zero_point}, {-b.quantization.zero_point}, "
            f"output_, {y.quantization.zero_point}, {multiplier}, {shift}, {lo}, {hi}, {size})")
    return Lowered(op, "arm_elementwise_mul_s8", _binary_operand_list(op), _bare_call(call))


# --- shape only ------------------------------------------------------------------------------------

def _reshape(graph: Graph, op: Operator) -> Lowered:
    x, y = _tensor(graph, op, 0), _tensor(graph, op, 0, output=True)
    if x.dtype != y.dtype or x.nbytes != y.nbytes:
        raise _refuse(op, f"{x.describe()} cannot be viewed as {y.describe()}")
    if x.quantization != y.quantization:
        raise _refuse(op, "input and output must share one quantization")
    return Lowered(op, "", alias_of=x.index)


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
}
SUPPORTED_OPERATORS = tuple(sorted(_RULES))
