"""Convolutions and fully connected layers: CMSIS-NN's convolution, depthwise and fully connected calls."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import Graph, Operator
from .base import (
    REQUANTIZE_ONCE_FUNCTION,
    Lowered,
    Operand,
    bias_data,
    c_clamp,
    c_dims,
    constant_data,
    fused_activation_range,
    io_operands,
    nhwc,
    refuse,
    require_int8,
    status_check,
    tensor_at,
    window_padding,
)


def _conv_like(graph: Graph, op: Operator, *, depthwise: bool) -> Lowered:
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    filters = constant_data(op, w, "int8")
    if w.quantization is None or any(z != 0 for z in w.quantization.zero_points):
        raise refuse(op, "the filter must be quantized symmetrically (zero point 0)")
    n, in_h, in_w, in_c = nhwc(op, x)
    _, out_h, out_w, out_c = nhwc(op, y)
    _, k_h, k_w, _ = nhwc(op, w)
    o = op.options
    sh, sw, dh, dw = o["stride_h"], o["stride_w"], o["dilation_h"], o["dilation_w"]
    pad_h = window_padding(op, in_h, k_h, sh, dh, out_h)
    pad_w = window_padding(op, in_w, k_w, sw, dw, out_w)
    bias = bias_data(graph, op, out_c)
    lo, hi = fused_activation_range(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    in_offset, out_offset = -x.quantization.zero_point, y.quantization.zero_point
    if depthwise:
        multiplier = out_c // in_c if in_c else 0
        if w.shape != (1, k_h, k_w, out_c) or multiplier * in_c != out_c:
            raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels")
    elif w.shape != (out_c, k_h, k_w, in_c):
        raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels "
                          "(grouped convolutions are not supported)")
    if w.quantization.per_channel and len(w.quantization.scales) != out_c:
        raise refuse(op, f"the filter has {len(w.quantization.scales)} scales for {out_c} output channels")
    window = [f"  cmsis_nn_tile stride = {c_dims((sw, sh))};", f"  cmsis_nn_tile padding = {c_dims((pad_w, pad_h))};",
              f"  cmsis_nn_tile dilation = {c_dims((dw, dh))};", f"  cmsis_nn_activation activation = {c_dims((lo, hi))};"]
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
             f"  cmsis_nn_dims input_dims = {c_dims((n, in_h, in_w, in_c))};",
             f"  cmsis_nn_dims filter_dims = {c_dims(filter_dims)};",
             f"  cmsis_nn_dims bias_dims = {c_dims((1, 1, 1, out_c))};",
             f"  cmsis_nn_dims output_dims = {c_dims((n, out_h, out_w, out_c))};"]
            + status_check(f"{function}(&context, &conv_params, &quant_params, &input_dims, input_, &filter_dims, "
                            f"filter_, &bias_dims, {'bias_' if bias is not None else 'NULL'}, &output_dims, output_)"))
    x_op, y_op = io_operands(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=np.ascontiguousarray(filters)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    operands += [Operand("int32_t*", "shift_", constant=shifts), y_op]
    return Lowered(op, function, operands, body)


def _conv2d(graph: Graph, op: Operator) -> Lowered:
    """`arm_convolve_wrapper_s8` (it picks the 1×1, 1×N and im2col kernels), per-channel multipliers
    and shifts computed at import, dilations."""
    return _conv_like(graph, op, depthwise=False)


def _depthwise(graph: Graph, op: Operator) -> Lowered:
    """`arm_depthwise_conv_wrapper_s8` (as TFLM calls it; with one input channel on an MVE core the
    build makes it a convolution, canalysis/cmsis_nn_prepare.py)."""
    return _conv_like(graph, op, depthwise=True)


def _fully_connected(graph: Graph, op: Operator) -> Lowered:
    """`arm_fully_connected_s8` (per-tensor weights; per-channel weights: mlfbuild kernel, one rounding
    as TFLite's); inputs of any rank, keep_num_dims."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    weights = constant_data(op, w, "int8")
    if op.options.get("weights_format", 0) != 0:
        raise refuse(op, "shuffled weights are not supported")
    if len(w.shape) != 2:
        raise refuse(op, f"weights {w.describe()} are not 2-D")
    if w.quantization is None or any(z != 0 for z in w.quantization.zero_points):
        raise refuse(op, "the weights must be quantized symmetrically (zero point 0)")
    units, depth = w.shape
    elements = int(np.prod(x.shape))
    if depth == 0 or elements % depth:
        raise refuse(op, f"input {x.describe()} is not a whole number of rows of {depth}")
    batches = elements // depth
    if int(np.prod(y.shape)) != batches * units:
        raise refuse(op, f"output {y.describe()} does not hold {batches}×{units} values")
    bias = bias_data(graph, op, units)
    lo, hi = fused_activation_range(op, y)
    if w.quantization.per_channel:
        return _per_channel_fully_connected(graph, op, weights, bias, batches, (lo, hi))
    multiplier, shift = q.fully_connected_multiplier(x.quantization.scale, w.quantization.scale, y.quantization.scale)
    call = ("arm_fully_connected_s8(&context, &fc_params, &quant_params, &input_dims, input_, &filter_dims, filter_, "
            f"&bias_dims, {'bias_' if bias is not None else 'NULL'}, &output_dims, output_)")
    body = ["  cmsis_nn_context context= {NULL,0};",
            f"  cmsis_nn_activation activation = {c_dims((lo, hi))};",
            f"  cmsis_nn_fc_params fc_params = {{{-x.quantization.zero_point}, 0, {y.quantization.zero_point}, activation}};",
            f"  cmsis_nn_per_tensor_quant_params quant_params = {{{multiplier}, {shift}}};",
            f"  cmsis_nn_dims input_dims = {c_dims((batches, 1, 1, depth))};",
            f"  cmsis_nn_dims filter_dims = {c_dims((depth, 1, 1, units))};",
            f"  cmsis_nn_dims bias_dims = {c_dims((1, 1, 1, units))};",
            f"  cmsis_nn_dims output_dims = {c_dims((batches, 1, 1, units))};"] + status_check(call)
    x_op, y_op = io_operands(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=weights)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    return Lowered(op, "arm_fully_connected_s8", operands + [y_op], body)


def _per_channel_fully_connected(graph: Graph, op: Operator, weights: np.ndarray, bias: np.ndarray | None,
                                 batches: int, activation: tuple[int, int]) -> Lowered:
    """TFLite's FullyConnectedPerChannel: per-unit multipliers as its convolutions compute them
    (input × filter / output in double), applied with one rounding as its fully connected layers do
    (REQUANTIZE_ONCE). CMSIS-NN has no per-channel fully connected kernel, and its convolutions
    round twice: a kernel of ours. TensorFlow's converter quantizes Dense layers this way by default
    since 2.16."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    units, depth = weights.shape
    if len(w.quantization.scales) != units or w.quantization.axis != 0:
        raise refuse(op, f"the weights have {len(w.quantization.scales)} scales along dimension "
                         f"{w.quantization.axis} for {units} output units")
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, units)
    lo, hi = activation
    body = [f"  for (int32_t b = 0; b < {batches}; ++b) {{", f"    for (int32_t u = 0; u < {units}; ++u) {{",
            f"      int32_t acc = {'bias_[u]' if bias is not None else '0'};",
            f"      for (int32_t d = 0; d < {depth}; ++d) {{",
            f"        acc += (int32_t)filter_[u * {depth} + d] * ((int32_t)input_[b * {depth} + d] + "
            f"({-x.quantization.zero_point}));", "      }",
            f"      const int32_t out = {REQUANTIZE_ONCE_FUNCTION}(acc, multiplier_[u], shift_[u]) + "
            f"({y.quantization.zero_point});",
            f"      output_[b * {units} + u] = (int8_t){c_clamp('out', lo, hi)};", "    }", "  }", "  return 0;"]
    x_op, y_op = io_operands(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=np.ascontiguousarray(weights)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    operands += [Operand("int32_t*", "shift_", constant=shifts), y_op]
    return Lowered(op, "", operands, body, kernel=True)


RULES = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
}
