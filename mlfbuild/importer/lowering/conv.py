"""Convolutions, fully connected layers, TRANSPOSE_CONV and BATCH_MATMUL: CMSIS-NN's convolution,
depthwise and fully connected calls for int8; kernels of ours (TFLite's reference arithmetic) for
per-channel FC, 16x8, grouped convolutions, TRANSPOSE_CONV and BATCH_MATMUL."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import ACTIVATIONS, PADDING, Graph, Operator, Tensor
from .rows import ConvRows
from .base import (
    BAND_FUNCTION,
    C_HELPERS,
    REQUANTIZE_FUNCTION,
    REQUANTIZE_ONCE_FUNCTION,
    Bands,
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


def _window(op: Operator, x: Tensor, w: Tensor, y: Tensor):
    """A convolution's symmetric int8 filter and its window: (filter, input NHWC, output HWC, filter
    H/W/channels, strides and dilations (h, w, h, w), padding before the first element (h, w))."""
    filters = constant_data(op, w, "int8")
    if w.quantization is None or any(z != 0 for z in w.quantization.zero_points):
        raise refuse(op, "the filter must be quantized symmetrically (zero point 0)")
    n, in_h, in_w, in_c = nhwc(op, x)
    _, out_h, out_w, out_c = nhwc(op, y)
    _, k_h, k_w, f_c = nhwc(op, w)
    o = op.options
    sh, sw, dh, dw = o["stride_h"], o["stride_w"], o["dilation_h"], o["dilation_w"]
    padding = (window_padding(op, in_h, k_h, sh, dh, out_h), window_padding(op, in_w, k_w, sw, dw, out_w))
    return filters, (n, in_h, in_w, in_c), (out_h, out_w, out_c), (k_h, k_w, f_c), (sh, sw, dh, dw), padding


def _check_filter(op: Operator, w: Tensor, depthwise: bool, kernel: tuple[int, int], in_c: int, out_c: int) -> None:
    """The filter's shape fits the channels (a depthwise multiplier, or one group), one scale per
    output channel where per-channel."""
    k_h, k_w = kernel
    if depthwise:
        multiplier = out_c // in_c if in_c else 0
        if w.shape != (1, k_h, k_w, out_c) or multiplier * in_c != out_c:
            raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels")
    elif w.shape != (out_c, k_h, k_w, in_c):
        raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels "
                          "(grouped convolutions are not supported)")
    if w.quantization.per_channel and len(w.quantization.scales) != out_c:
        raise refuse(op, f"the filter has {len(w.quantization.scales)} scales for {out_c} output channels")


def _per_channel_operands(graph: Graph, op: Operator, filters: np.ndarray, multipliers: np.ndarray,
                          bias: np.ndarray | None, shifts: np.ndarray) -> list[Operand]:
    """A per-channel int8 convolution's parameters, in the order CMSIS-NN's calls and our kernels take
    them: input, filter, multipliers, bias (where there is one), shifts, output."""
    x_op, y_op = io_operands(graph, op)
    operands = [x_op, Operand("int8_t*", "filter_", constant=np.ascontiguousarray(filters)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=bias))
    return operands + [Operand("int32_t*", "shift_", constant=shifts), y_op]


def _conv_like(graph: Graph, op: Operator, *, depthwise: bool) -> Lowered:
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    filters, (n, in_h, in_w, in_c), (out_h, out_w, out_c), (k_h, k_w, _), (sh, sw, dh, dw), (pad_h, pad_w) = \
        _window(op, x, w, y)
    bias = bias_data(graph, op, out_c)
    lo, hi = fused_activation_range(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    in_offset, out_offset = -x.quantization.zero_point, y.quantization.zero_point
    _check_filter(op, w, depthwise, (k_h, k_w), in_c, out_c)
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
    operands = _per_channel_operands(graph, op, filters, multipliers, bias, shifts)
    rows = bands = None
    if n == 1:
        rows = ConvRows(function, tuple([window[0], *window[2:], *params]), tuple(filter_dims), bias is not None,
                        (in_h, in_w, in_c), (out_h, out_w, out_c), k_h, sh, dh, pad_h, pad_w)
        bands = _row_bands(rows)
    return Lowered(op, function, operands, body, bands=bands, rows=rows)


def _row_bands(conv: ConvRows) -> Bands | None:
    """The convolution one output row at a time: each run of rows whose windows have the same height
    and padding is one CMSIS-NN call per row on that window, into a one-row band, the row then
    copied to its place. Top to bottom, its output may start `reserve` bytes before its input: row
    r's copy then ends before the first input row row r+1's window reads; bottom to top, the mirror."""
    out_h = conv.out_hwc[0]
    windows = [conv.window(row, row + 1) for row in range(out_h)]
    if out_h < 2 or any(w is None for w in windows):
        return None
    in_row, out_row = conv.in_row, conv.out_row
    reserve = max(0, max((row + 1) * out_row - windows[row + 1][0] * in_row for row in range(out_h - 1)))
    allow = min(row * out_row - (windows[row - 1][0] + windows[row - 1][1]) * in_row for row in range(1, out_h))
    reserve, allow = -(-reserve // 16) * 16, allow // 16 * 16  # the pool's 16-byte alignment, kept
    runs: list[tuple[int, int, tuple[int, int]]] = []  # (first row, end row, (input rows, padding above))
    for row, (_, in_rows, above) in enumerate(windows):
        shape = (in_rows, above)
        if runs and runs[-1][2] == shape and runs[-1][1] == row:
            runs[-1] = (runs[-1][0], row + 1, shape)
        else:
            runs.append((row, row + 1, shape))
    shapes = sorted({shape for _, _, shape in runs})
    functions = [line for index, (in_rows, above) in enumerate(shapes)
                 for line in conv.call_function(f"{BAND_FUNCTION}_band{index}", in_rows, above, 1)]

    def body(order: list[tuple[int, int, tuple[int, int]]], down: bool) -> list[str]:
        lines = [f"  int8_t band[{out_row}];"]
        for first, end, shape in order:
            start = windows[first][0]  # the first input row of row `first`'s window
            offset = f"(r - {first}) * {conv.stride_h}" + (f" + {start}" if start else "")
            loop = f"int32_t r = {first}; r < {end}; ++r" if down else f"int32_t r = {end - 1}; r >= {first}; --r"
            lines += [f"  for ({loop}) {{",
                      f"    if ({BAND_FUNCTION}_band{shapes.index(shape)}(input_ + ({offset}) * {in_row}, band, "
                      f"{conv.operands()}) != 0) return -1;",
                      f"    for (int32_t i = 0; i < {out_row}; ++i) output_[r * {out_row} + i] = band[i];",
                      "  }"]
        return lines + ["  return 0;"]

    return Bands(reserve, allow, functions, body(runs, True), body(runs[::-1], False))


def _conv_16x8(graph: Graph, op: Operator, *, depthwise: bool) -> Lowered:
    """16x8 convolutions: a kernel of ours with int64 sums and TFLite's int64 MultiplyByQuantizedMultiplier
    (the multiplier reduced to 16 bits: REQUANTIZE_REDUCED_C; CMSIS-NN's s16 convolutions compute the
    same, but their bias argument changed type between v4.1.0 and v6.0.0)."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    _int16_tensor(op, x)
    _int16_tensor(op, y)
    filters, (n, in_h, in_w, in_c), (out_h, out_w, out_c), (k_h, k_w, _), (sh, sw, dh, dw), (pad_h, pad_w) = \
        _window(op, x, w, y)
    _check_filter(op, w, depthwise, (k_h, k_w), in_c, out_c)
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        raise refuse(op, "a 16x8 convolution without a bias (LiteRT's prepare requires one)")
    bias = constant_data(op, graph.tensors[op.inputs[2]], "int64").reshape(-1)
    if bias.size != out_c:
        raise refuse(op, f"the bias has {bias.size} values for {out_c} output channels")
    fan_in = k_h * k_w * (1 if depthwise else in_c)
    largest = fan_in * 32768 * int(np.abs(filters.astype(np.int64)).max(initial=0)) + int(np.abs(bias).max(initial=0))
    if largest >= 1 << 47:
        raise refuse(op, f"a sum could reach {largest}, beyond the 2^47 TFLite's int64 requantisation takes")
    lo, hi = _int16_activation_range(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    if any(not -31 <= int(v) <= 30 for v in shifts):
        raise refuse(op, "a requantisation scale is outside 2^-31..2^30")
    if depthwise:
        inner = [f"            acc += (int64_t)((int32_t)filter_[(fy * {k_w} + fx) * {out_c} + oc] * "
                 f"(int32_t)input_[((b * {in_h} + iy) * {in_w} + ix) * {in_c} + oc / {out_c // in_c}]);"]
    else:
        inner = [f"            for (int32_t ic = 0; ic < {in_c}; ++ic) {{",
                 f"              acc += (int64_t)((int32_t)filter_[((oc * {k_h} + fy) * {k_w} + fx) * {in_c} + ic] * "
                 f"(int32_t)input_[((b * {in_h} + iy) * {in_w} + ix) * {in_c} + ic]);", "            }"]
    body = ([f"  for (int32_t b = 0; b < {n}; ++b) {{",
             f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
             f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{",
             f"        for (int32_t oc = 0; oc < {out_c}; ++oc) {{",
             "          int64_t acc = bias_[oc];",
             f"          for (int32_t fy = 0; fy < {k_h}; ++fy) {{",
             f"            const int32_t iy = oy * {sh} - {pad_h} + fy * {dh};",
             f"            if (iy < 0 || iy >= {in_h}) continue;",
             f"            for (int32_t fx = 0; fx < {k_w}; ++fx) {{",
             f"            const int32_t ix = ox * {sw} - {pad_w} + fx * {dw};",
             f"            if (ix < 0 || ix >= {in_w}) continue;"]
            + inner +
            ["            }", "          }",
             f"          const int64_t out = {REQUANTIZE_REDUCED_FUNCTION}(acc, multiplier_[oc], shift_[oc]);",
             f"          output_[((b * {out_h} + oy) * {out_w} + ox) * {out_c} + oc] = "
             f"(int16_t)(out < {lo} ? {lo} : (out > {hi} ? {hi} : out));",
             "        }", "      }", "    }", "  }", "  return 0;"])
    operands = [Operand("int16_t*", "input_", op.inputs[0]),
                Operand("int8_t*", "filter_", constant=np.ascontiguousarray(filters)),
                Operand("int32_t*", "multiplier_", constant=multipliers), Operand("int64_t*", "bias_", constant=bias),
                Operand("int32_t*", "shift_", constant=shifts), Operand("int16_t*", "output_", op.outputs[0])]
    return Lowered(op, "", operands, body, "16x8: TFLite's int64 requantisation", kernel=True)


def _grouped_conv(graph: Graph, op: Operator) -> Lowered:
    """Grouped int8 convolutions (the filter sees in_c / groups channels): a kernel of ours with
    TFLite's reference ConvPerChannel arithmetic (CMSIS-NN's wrapper takes one group)."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, x, y)
    filters, (n, in_h, in_w, in_c), (out_h, out_w, out_c), (k_h, k_w, f_c), (sh, sw, dh, dw), (pad_h, pad_w) = \
        _window(op, x, w, y)
    groups = in_c // f_c if f_c else 0
    if not groups or groups * f_c != in_c or out_c % groups or w.shape[0] != out_c:
        raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels in groups")
    per_group = out_c // groups
    if w.quantization.per_channel and len(w.quantization.scales) != out_c:
        raise refuse(op, f"the filter has {len(w.quantization.scales)} scales for {out_c} output channels")
    bias = bias_data(graph, op, out_c)
    lo, hi = fused_activation_range(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    in_offset, out_offset = -x.quantization.zero_point, y.quantization.zero_point
    body = [f"  for (int32_t b = 0; b < {n}; ++b) {{",
            f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
            f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{",
            f"        for (int32_t oc = 0; oc < {out_c}; ++oc) {{",
            f"          const int32_t first = (oc / {per_group}) * {f_c};",
            f"          int32_t acc = {'bias_[oc]' if bias is not None else '0'};",
            f"          for (int32_t fy = 0; fy < {k_h}; ++fy) {{",
            f"            const int32_t iy = oy * {sh} - {pad_h} + fy * {dh};",
            f"            if (iy < 0 || iy >= {in_h}) continue;",
            f"            for (int32_t fx = 0; fx < {k_w}; ++fx) {{",
            f"              const int32_t ix = ox * {sw} - {pad_w} + fx * {dw};",
            f"              if (ix < 0 || ix >= {in_w}) continue;",
            f"              for (int32_t c = 0; c < {f_c}; ++c) {{",
            f"                acc += ((int32_t)input_[((b * {in_h} + iy) * {in_w} + ix) * {in_c} + first + c] + "
            f"({in_offset})) * (int32_t)filter_[((oc * {k_h} + fy) * {k_w} + fx) * {f_c} + c];",
            "              }", "            }", "          }",
            f"          const int32_t out = {REQUANTIZE_FUNCTION}(acc, multiplier_[oc], shift_[oc]) + ({out_offset});",
            f"          output_[((b * {out_h} + oy) * {out_w} + ox) * {out_c} + oc] = (int8_t){c_clamp('out', lo, hi)};",
            "        }", "      }", "    }", "  }", "  return 0;"]
    operands = _per_channel_operands(graph, op, filters, multipliers, bias, shifts)
    return Lowered(op, "", operands, body, "grouped: TFLite's reference ConvPerChannel", kernel=True)


def _conv2d(graph: Graph, op: Operator) -> Lowered:
    """`arm_convolve_wrapper_s8` (it picks the 1×1, 1×N and im2col kernels), per-channel multipliers
    and shifts computed at import, dilations; 16x8 and grouped: mlfbuild kernels (TFLite's reference
    arithmetic)."""
    x, w = tensor_at(graph, op, 0), tensor_at(graph, op, 1)
    if x.dtype == "int16":
        return _conv_16x8(graph, op, depthwise=False)
    if len(x.shape) == 4 and len(w.shape) == 4 and w.shape[3] != x.shape[3]:
        return _grouped_conv(graph, op)
    return _conv_like(graph, op, depthwise=False)


def _depthwise(graph: Graph, op: Operator) -> Lowered:
    """`arm_depthwise_conv_wrapper_s8` (as TFLM calls it; with one input channel on an MVE core the
    build makes it a convolution, canalysis/cmsis_nn_prepare.py); 16x8: mlfbuild kernel."""
    if tensor_at(graph, op, 0).dtype == "int16":
        return _conv_16x8(graph, op, depthwise=True)
    return _conv_like(graph, op, depthwise=True)


def _fully_connected_shape(op: Operator, x: Tensor, w: Tensor, y: Tensor) -> tuple[np.ndarray, int, int, int]:
    """(weights, units, depth, batches) of a fully connected layer: int8 weights [units, depth],
    symmetric, not shuffled; the input any number of rows of `depth`, the output as many of `units`."""
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
    return weights, units, depth, batches


def _fully_connected(graph: Graph, op: Operator) -> Lowered:
    """`arm_fully_connected_s8` (per-tensor weights; per-channel weights: mlfbuild kernel, one rounding
    as TFLite's; 16x8: mlfbuild kernel, int64 sums); inputs of any rank, keep_num_dims."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if x.dtype == "int16":
        return _fully_connected_16x8(graph, op)
    require_int8(op, x, y)
    weights, units, depth, batches = _fully_connected_shape(op, x, w, y)
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


REQUANTIZE_S64_FUNCTION = "mlf_requantize_s64_away"
# How LiteRT's reference 16x8 FULLY_CONNECTED requantises its int64 sums (measured: the full Q31
# multiplier, one rounding, ties away from zero; CMSIS-NN's arm_fully_connected_s16 reduces the
# multiplier to 16 bits and rounds ties up, 1 LSB off). |value| < 2^32, checked at import, keeps the
# product within int64.
REQUANTIZE_S64_C = """static inline int64_t mlf_requantize_s64_away(int64_t value, int32_t multiplier, int32_t shift) {
  const int32_t total = 31 - shift;
  const int64_t product = value * multiplier;
  const int64_t magnitude = ((product < 0 ? -product : product) + ((int64_t)1 << (total - 1))) >> total;
  return product < 0 ? -magnitude : magnitude;
}"""
C_HELPERS.setdefault(REQUANTIZE_S64_FUNCTION, REQUANTIZE_S64_C)
REQUANTIZE_REDUCED_FUNCTION = "mlf_requantize_s64_reduced"
# TFLite's MultiplyByQuantizedMultiplier for int64 sums, as its reference 16x8 convolutions use it:
# the multiplier rounded to 16 bits, one rounding shift (ties up).
REQUANTIZE_REDUCED_C = """static inline int64_t mlf_requantize_s64_reduced(int64_t value, int32_t multiplier, int32_t shift) {
  const int64_t reduced = multiplier < 0x7FFF0000 ? ((multiplier + (1 << 15)) >> 16) : 0x7FFF;
  const int32_t total = 15 - shift;
  return (value * reduced + ((int64_t)1 << (total - 1))) >> total;
}"""
C_HELPERS.setdefault(REQUANTIZE_REDUCED_FUNCTION, REQUANTIZE_REDUCED_C)


def _int16_activation_range(op: Operator, y: Tensor) -> tuple[int, int]:
    """The fused activation's clamp of a 16x8 layer's output (symmetric int16, zero point 0)."""
    name = ACTIVATIONS.get(op.options.get("activation", 0), "?")
    if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise refuse(op, f"fused activation {name} is not supported")
    return q.activation_range(name, y.quantization.scale, 0, -32768, 32767)


def _int16_tensor(op: Operator, t) -> None:
    if t.dtype != "int16":
        raise refuse(op, f"tensor {t.describe()} is {t.dtype}; with an int16 input the output is int16 (16x8)")
    if t.quantization is None or t.quantization.per_channel or not t.quantization.scale > 0:
        raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization with a positive scale")
    if t.quantization.zero_point != 0:
        raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}; 16x8 needs 0")


def _fully_connected_16x8(graph: Graph, op: Operator) -> Lowered:
    """16x8 FULLY_CONNECTED: mlfbuild kernel (int64 sums, LiteRT's one rounding with ties away from
    zero; CMSIS-NN's arm_fully_connected_s16 rounds otherwise), per-tensor or per-unit weights."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    _int16_tensor(op, x)
    _int16_tensor(op, y)
    weights, units, depth, batches = _fully_connected_shape(op, x, w, y)
    bias = None
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        bias = constant_data(op, graph.tensors[op.inputs[2]], "int64").reshape(-1)
        if bias.size != units:
            raise refuse(op, f"the bias has {bias.size} values for {units} output units")
    largest = depth * 32768 * int(np.abs(weights.astype(np.int64)).max(initial=0)) + (
        int(np.abs(bias).max(initial=0)) if bias is not None else 0)
    if largest >= 1 << 32:
        raise refuse(op, f"a sum could reach {largest}, beyond the 2^32 an int64 requantisation takes")
    lo, hi = _int16_activation_range(op, y)
    if w.quantization.per_channel:
        if len(w.quantization.scales) != units or w.quantization.axis != 0:
            raise refuse(op, f"the weights have {len(w.quantization.scales)} scales along dimension "
                             f"{w.quantization.axis} for {units} output units")
        multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                        y.quantization.scale, units)
    else:
        multiplier, shift = q.fully_connected_multiplier(x.quantization.scale, w.quantization.scale,
                                                         y.quantization.scale)
        multipliers, shifts = np.full(units, multiplier, np.int32), np.full(units, shift, np.int32)
    if any(not -31 <= int(v) <= 30 for v in shifts):
        raise refuse(op, "a requantisation scale is outside 2^-31..2^30")
    body = [f"  for (int32_t b = 0; b < {batches}; ++b) {{", f"    for (int32_t u = 0; u < {units}; ++u) {{",
            f"      int64_t acc = {'bias_[u]' if bias is not None else '0'};",
            f"      for (int32_t d = 0; d < {depth}; ++d) {{",
            f"        acc += (int64_t)((int32_t)filter_[u * {depth} + d] * (int32_t)input_[b * {depth} + d]);",
            "      }",
            f"      const int64_t out = {REQUANTIZE_S64_FUNCTION}(acc, multiplier_[u], shift_[u]);",
            f"      output_[b * {units} + u] = (int16_t)(out < {lo} ? {lo} : (out > {hi} ? {hi} : out));",
            "    }", "  }", "  return 0;"]
    operands = [Operand("int16_t*", "input_", op.inputs[0]),
                Operand("int8_t*", "filter_", constant=np.ascontiguousarray(weights)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand("int64_t*", "bias_", constant=bias))
    operands += [Operand("int32_t*", "shift_", constant=shifts), Operand("int16_t*", "output_", op.outputs[0])]
    return Lowered(op, "", operands, body, "16x8: LiteRT's int16 FullyConnected rounding", kernel=True)


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


def _transpose_conv(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference TransposeConv (int8, and 16x8 with int64 sums; per-channel
    or per-tensor filter), each output gathered from the inputs whose window covers it."""
    if len(op.inputs) < 3:
        raise refuse(op, "the output shape, filter or input is missing")
    shape_t, w, x = (tensor_at(graph, op, i) for i in range(3))
    y = tensor_at(graph, op, 0, output=True)
    int16 = x.dtype == "int16"
    if int16:
        _int16_tensor(op, x)
        _int16_tensor(op, y)
    else:
        require_int8(op, x, y)
    if not shape_t.is_constant:
        raise refuse(op, "the output shape must be a constant")
    filters = constant_data(op, w, "int8")
    if w.quantization is None or any(z != 0 for z in w.quantization.zero_points):
        raise refuse(op, "the filter must be quantized symmetrically (zero point 0)")
    n, in_h, in_w, in_c = nhwc(op, x)
    _, out_h, out_w, out_c = nhwc(op, y)
    if [int(v) for v in np.asarray(shape_t.data).reshape(-1)] != [n, out_h, out_w, out_c]:
        raise refuse(op, f"the output shape {list(np.asarray(shape_t.data).reshape(-1))} is not that of {y.describe()}")
    if len(w.shape) != 4 or w.shape[0] != out_c or w.shape[3] != in_c:
        raise refuse(op, f"filter {w.describe()} does not fit {in_c} input and {out_c} output channels")
    _, k_h, k_w, _ = w.shape
    if w.quantization.per_channel and len(w.quantization.scales) != out_c:
        raise refuse(op, f"the filter has {len(w.quantization.scales)} scales for {out_c} output channels")
    o = op.options
    sh, sw = o["stride_h"], o["stride_w"]
    padding = PADDING.get(o.get("padding", 0))
    if padding is None or sh < 1 or sw < 1 or k_h < 1 or k_w < 1:
        raise refuse(op, f"invalid window (padding {o.get('padding')}, strides {sh}×{sw}, kernel {k_h}×{k_w})")

    def pad(size: int, kernel: int, stride: int) -> int:
        # TFLite's prepare: the padding of a convolution from the output's extent to the input's
        out = (size + stride - 1) // stride if padding == "SAME" else (size - kernel + stride) // stride
        return max((out - 1) * stride + kernel - size, 0) // 2
    pad_h, pad_w = pad(out_h, k_h, sh), pad(out_w, k_w, sw)
    bias = None
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        bias = constant_data(op, graph.tensors[op.inputs[3]], "int64" if int16 else "int32").reshape(-1)
        if bias.size != out_c:
            raise refuse(op, f"the bias has {bias.size} values for {out_c} output channels")
    if int16:
        name = ACTIVATIONS.get(o.get("activation", 0), "?")
        if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            raise refuse(op, f"fused activation {name} is not supported")
        lo, hi = q.activation_range(name, y.quantization.scale, 0, -32768, 32767)
        fan_in = k_h * k_w * in_c
        largest = fan_in * 32768 * int(np.abs(filters.astype(np.int64)).max(initial=0)) + (
            int(np.abs(bias).max(initial=0)) if bias is not None else 0)
        if largest >= 1 << 47:
            raise refuse(op, f"a sum could reach {largest}, beyond the 2^47 TFLite's int64 requantisation takes")
    else:
        lo, hi = fused_activation_range(op, y)
    multipliers, shifts = q.convolution_multipliers(x.quantization.scale, w.quantization.scales,
                                                    y.quantization.scale, out_c)
    in_offset, out_offset = -x.quantization.zero_point, y.quantization.zero_point
    acc_t, out_t = ("int64_t", "int16_t") if int16 else ("int32_t", "int8_t")
    requantize = REQUANTIZE_REDUCED_FUNCTION if int16 else REQUANTIZE_FUNCTION
    body = [f"  for (int32_t b = 0; b < {n}; ++b) {{",
            f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
            f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{",
            f"        for (int32_t oc = 0; oc < {out_c}; ++oc) {{",
            f"          {acc_t} acc = {'bias_[oc]' if bias is not None else '0'};",
            f"          for (int32_t fy = 0; fy < {k_h}; ++fy) {{",
            f"            const int32_t ty = oy + {pad_h} - fy;",
            f"            if (ty < 0 || ty % {sh} != 0 || ty / {sh} >= {in_h}) continue;",
            f"            for (int32_t fx = 0; fx < {k_w}; ++fx) {{",
            f"              const int32_t tx = ox + {pad_w} - fx;",
            f"              if (tx < 0 || tx % {sw} != 0 || tx / {sw} >= {in_w}) continue;",
            f"              for (int32_t ic = 0; ic < {in_c}; ++ic) {{",
            f"                acc += ({acc_t})(((int32_t)input_[((b * {in_h} + ty / {sh}) * {in_w} + tx / {sw}) * {in_c} + ic] + "
            f"({in_offset})) * (int32_t)filter_[((oc * {k_h} + fy) * {k_w} + fx) * {in_c} + ic]);",
            "              }", "            }", "          }",
            f"          const {acc_t} out = {requantize}(acc, multiplier_[oc], shift_[oc]) + ({out_offset});",
            f"          output_[((b * {out_h} + oy) * {out_w} + ox) * {out_c} + oc] = ({out_t})"
            f"(out < {lo} ? {lo} : (out > {hi} ? {hi} : out));",
            "        }", "      }", "    }", "  }", "  return 0;"]
    x_op = Operand(f"{out_t}*", "input_", op.inputs[2])
    y_op = Operand(f"{out_t}*", "output_", op.outputs[0])
    operands = [x_op, Operand("int8_t*", "filter_", constant=np.ascontiguousarray(filters)),
                Operand("int32_t*", "multiplier_", constant=multipliers)]
    if bias is not None:
        operands.append(Operand(f"{acc_t}*", "bias_", constant=bias))
    operands += [Operand("int32_t*", "shift_", constant=shifts), y_op]
    return Lowered(op, "", operands, body, kernel=True)


def _batch_matmul(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's reference BatchMatMul (int8; adj_x, adj_y, batch dimensions
    broadcast, either operand constant)."""
    lhs, rhs, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, lhs, rhs, y)
    if not 2 <= len(lhs.shape) <= 5 or not 2 <= len(rhs.shape) <= 5:
        raise refuse(op, f"operands {lhs.describe()} and {rhs.describe()} are not of rank 2 to 5")
    adj_x, adj_y = bool(op.options.get("adj_x")), bool(op.options.get("adj_y"))
    m, k = (lhs.shape[-1], lhs.shape[-2]) if adj_x else (lhs.shape[-2], lhs.shape[-1])
    k2, n = (rhs.shape[-1], rhs.shape[-2]) if adj_y else (rhs.shape[-2], rhs.shape[-1])
    if k != k2:
        raise refuse(op, f"{lhs.describe()} and {rhs.describe()} do not share a depth (adj_x {adj_x}, adj_y {adj_y})")
    rank = max(len(lhs.shape), len(rhs.shape))
    lb = (1,) * (rank - len(lhs.shape)) + tuple(lhs.shape[:-2])
    rb = (1,) * (rank - len(rhs.shape)) + tuple(rhs.shape[:-2])
    if any(a != b and 1 not in (a, b) for a, b in zip(lb, rb)):
        raise refuse(op, f"the batch dimensions of {lhs.describe()} and {rhs.describe()} do not broadcast")
    batch = tuple(max(a, b) for a, b in zip(lb, rb))
    if tuple(y.shape) != batch + (m, n):
        raise refuse(op, f"output {y.describe()} is not {list(batch + (m, n))}")
    pad = 3 - len(batch)
    batch3, lb3, rb3 = (1,) * pad + batch, (1,) * pad + lb, (1,) * pad + rb

    def strides(dims: tuple[int, ...], matrix: int) -> list[int]:
        out, step = [], matrix
        for d in reversed(dims):
            out.append(step if d != 1 else 0)
            step *= d
        return list(reversed(out))
    ls, rs = strides(lb3, m * k), strides(rb3, k * n)
    multiplier, shift = q.fully_connected_multiplier(lhs.quantization.scale, rhs.quantization.scale,
                                                     y.quantization.scale)
    lhs_index = "k * {m} + i".format(m=m) if adj_x else f"i * {k} + k"
    rhs_index = f"j * {k} + k" if adj_y else f"k * {n} + j"
    lo_off, ro_off = -lhs.quantization.zero_point, -rhs.quantization.zero_point
    body = [f"  for (int32_t b0 = 0; b0 < {batch3[0]}; ++b0) {{",
            f"    for (int32_t b1 = 0; b1 < {batch3[1]}; ++b1) {{",
            f"      for (int32_t b2 = 0; b2 < {batch3[2]}; ++b2) {{",
            f"        const int32_t l = b0 * {ls[0]} + b1 * {ls[1]} + b2 * {ls[2]};",
            f"        const int32_t r = b0 * {rs[0]} + b1 * {rs[1]} + b2 * {rs[2]};",
            f"        const int32_t o = ((b0 * {batch3[1]} + b1) * {batch3[2]} + b2) * {m * n};",
            f"        for (int32_t i = 0; i < {m}; ++i) {{",
            f"          for (int32_t j = 0; j < {n}; ++j) {{",
            "            int32_t acc = 0;",
            f"            for (int32_t k = 0; k < {k}; ++k) {{",
            f"              acc += ((int32_t)lhs_[l + {lhs_index}] + ({lo_off})) * ((int32_t)rhs_[r + {rhs_index}] + ({ro_off}));",
            "            }",
            f"            const int32_t out = {REQUANTIZE_FUNCTION}(acc, {multiplier}, {shift}) + ({y.quantization.zero_point});",
            f"            output_[o + i * {n} + j] = (int8_t){c_clamp('out', -128, 127)};",
            "          }", "        }", "      }", "    }", "  }", "  return 0;"]
    operands = []
    for name, t, index in (("lhs_", lhs, op.inputs[0]), ("rhs_", rhs, op.inputs[1])):
        operands.append(Operand("int8_t*", name, constant=np.ascontiguousarray(constant_data(op, t, "int8")))
                        if t.is_constant else Operand("int8_t*", name, index))
    operands.append(Operand("int8_t*", "output_", op.outputs[0]))
    return Lowered(op, "", operands, body, kernel=True)


RULES = {
    "BATCH_MATMUL": _batch_matmul,
    "TRANSPOSE_CONV": _transpose_conv,
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
}
