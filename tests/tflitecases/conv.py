"""FULLY_CONNECTED on 16x8 (int16 activations, int8 weights per tensor or per unit, int64 bias);
AVERAGE_POOL_2D and MAX_POOL_2D on 16x8 (int16) tensors; TRANSPOSE_CONV (int8, per-channel filter [out_c, kh, kw, in_c], as the converter writes
Conv2DTranspose): random kernels, strides and paddings, with and without bias."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import (ACTIVATIONS, PADDINGS, Draw, GraphBuilder, _accumulator_std, _bias, _nhwc, _output,
                          _output_size, _same_quantization, _spatial, _weights, _zero_point, activation_code,
                          padding_code, register_cases)


def _transposed_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """An output extent whose convolution back gives `size` (TensorFlow's deconv_output_length)."""
    return size * stride if padding == "SAME" else size * stride + max(kernel - stride, 0)


def add_transpose_conv(graph: GraphBuilder, p: Draw, x: int, name: str = "transpose_conv") -> int:
    int16 = graph.tensor(x).dtype == "int16"  # 16x8: int64 bias, output zero point 0
    batch, height, width, channels = graph.tensor(x).shape
    out_channels = p.integer("out_channels", 1, 6)
    padding = p.choice("padding", PADDINGS)
    kh, kw = p.integer("kernel_h", 1, 4), p.integer("kernel_w", 1, 4)
    sh, sw = p.integer("stride_h", 1, 3), p.integer("stride_w", 1, 3)
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    filter_scales = np.array([p.log_uniform("filter_scale", 1e-3, 2e-2) for _ in range(out_channels)])
    filter_index = graph.add_constant(f"{name}/filter", _weights(p.rng, (out_channels, kh, kw, channels)),
                                      scale=filter_scales, zero_point=np.zeros(out_channels, np.int64),
                                      quantized_dimension=0)
    # each output sums about kh·kw·channels / (sh·sw) products
    std = _accumulator_std(input_scale * (256 if int16 else 1), filter_scales, max(1, kh * kw * channels // (sh * sw)))
    out_shape = (batch, _transposed_size(height, kh, sh, padding), _transposed_size(width, kw, sw, padding),
                 out_channels)
    shape_index = graph.add_constant(f"{name}/output_shape", np.array(out_shape, np.int32))
    inputs = [shape_index, filter_index, x]
    if p("bias", lambda: True):
        bias_scales = input_scale * filter_scales
        bias = (np.round(p.rng.normal(0.0, std, size=out_channels) / bias_scales).astype(np.int64) if int16
                else _bias(p.rng, std, bias_scales))
        inputs.append(graph.add_constant(f"{name}/bias", bias, scale=bias_scales,
                                         zero_point=np.zeros(out_channels, np.int64), quantized_dimension=0))
    y = _output(graph, name, "int16" if int16 else "int8", out_shape, {
        "scale": std / 32 / (256 if int16 else 1) * p.log_uniform("output_scale_ratio", 0.5, 2),
        "zero_point": 0 if int16 else _zero_point(p, "output_zero_point")})
    graph.add_operator("TRANSPOSE_CONV", inputs, [y], schema.TransposeConvOptionsT(
        padding=padding_code(padding), strideW=sw, strideH=sh, fusedActivationFunction=activation_code(activation)), version=4)
    return y


def _int16_pool(op: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = op.lower()) -> int:
        batch, height, width, channels = graph.tensor(x).shape
        kh, kw, sh, sw, _, _, padding = _spatial(p, height, width, max_dilation=1)
        activation = p.choice("activation", ACTIVATIONS)
        out_shape = (batch, _output_size(height, kh, sh, 1, padding), _output_size(width, kw, sw, 1, padding),
                     channels)
        y = _output(graph, name, "int16", out_shape, _same_quantization(graph, x))
        graph.add_operator(op, [x], [y], schema.Pool2DOptionsT(
            padding=padding_code(padding), strideW=sw, strideH=sh, filterWidth=kw, filterHeight=kh,
            fusedActivationFunction=activation_code(activation)), version=3)
        return y
    return add


def _fully_connected_16x8(per_channel: bool):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = "fully_connected") -> int:
        shape = graph.tensor(x).shape
        depth, units = shape[-1], p.integer("units", 1, 16)
        keep_num_dims = p.choice("keep_num_dims", (False, True))
        activation = p.choice("activation", ACTIVATIONS)
        input_scale = graph.tensor(x).scale
        fixed = p("filter_scale", lambda: None)  # one scale for every unit: exact ratios, to reach ties
        scales = np.array([fixed or p.rng.uniform(1e-3, 2e-2) for _ in range(units if per_channel else 1)])
        quantization = ({"scale": scales, "zero_point": np.zeros(units, np.int64), "quantized_dimension": 0}
                        if per_channel else {"scale": float(scales[0]), "zero_point": 0})
        filter_index = graph.add_constant(f"{name}/weights", _weights(p.rng, (units, depth)), **quantization)
        # int16 values are ~256 times the int8 ones at a 256th of the scale: the real sizes are alike
        std = _accumulator_std(input_scale * 256, scales, depth)
        inputs = [x, filter_index]
        if p("bias", lambda: True):
            bias_scales = input_scale * np.resize(scales, units)
            real = p.rng.normal(0.0, std, size=units)
            bias = np.clip(np.round(real / bias_scales), -2**40, 2**40).astype(np.int64)
            inputs.append(graph.add_constant(f"{name}/bias", bias, scale=bias_scales,
                                             zero_point=np.zeros(units, np.int64), quantized_dimension=0))
        out_shape = (*shape[:-1], units) if keep_num_dims else (math.prod(shape) // depth, units)
        y = _output(graph, name, "int16", out_shape, {"scale": p("output_scale", lambda: std / 32 / 256 * p.log_uniform(
            "output_scale_ratio", 0.5, 2)), "zero_point": 0})
        graph.add_operator("FULLY_CONNECTED", inputs, [y], schema.FullyConnectedOptionsT(
            fusedActivationFunction=activation_code(activation), keepNumDims=keep_num_dims), version=7)
        return y
    return add


def _rows(p: Draw) -> tuple[int, ...]:
    depth = p.integer("depth", 1, 32)
    return (p.integer("batch", 1, 3), depth) if p.choice("rank", (2, 3)) == 2 else (1, p.integer("time", 1, 5), depth)


def _conv_16x8(depthwise: bool):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = "conv") -> int:
        batch, height, width, channels = graph.tensor(x).shape
        multiplier = p.integer("depth_multiplier", 1, 2) if depthwise else 1
        out_channels = channels * multiplier if depthwise else p.integer("out_channels", 1, 6)
        kh, kw, sh, sw, dh, dw, padding = _spatial(p, height, width)
        activation = p.choice("activation", ACTIVATIONS)
        input_scale = graph.tensor(x).scale
        scales = np.array([p.rng.uniform(1e-3, 2e-2) for _ in range(out_channels)])
        shape = (1, kh, kw, out_channels) if depthwise else (out_channels, kh, kw, channels)
        filter_index = graph.add_constant(f"{name}/filter", _weights(p.rng, shape), scale=scales,
                                          zero_point=np.zeros(out_channels, np.int64),
                                          quantized_dimension=3 if depthwise else 0)
        std = _accumulator_std(input_scale * 256, scales, kh * kw * (1 if depthwise else channels))
        inputs = [x, filter_index]
        if p("bias", lambda: True):
            bias_scales = input_scale * scales
            bias = np.round(p.rng.normal(0.0, std, size=out_channels) / bias_scales).astype(np.int64)
            inputs.append(graph.add_constant(f"{name}/bias", bias, scale=bias_scales,
                                             zero_point=np.zeros(out_channels, np.int64), quantized_dimension=0))
        out_shape = (batch, _output_size(height, kh, sh, dh, padding), _output_size(width, kw, sw, dw, padding),
                     out_channels)
        y = _output(graph, name, "int16", out_shape,
                    {"scale": std / 32 / 256 * p.log_uniform("output_scale_ratio", 0.5, 2), "zero_point": 0})
        if depthwise:
            options = schema.DepthwiseConv2DOptionsT(
                padding=padding_code(padding), strideW=sw, strideH=sh, depthMultiplier=multiplier,
                fusedActivationFunction=activation_code(activation), dilationWFactor=dw, dilationHFactor=dh)
        else:
            options = schema.Conv2DOptionsT(
                padding=padding_code(padding), strideW=sw, strideH=sh, fusedActivationFunction=activation_code(activation),
                dilationWFactor=dw, dilationHFactor=dh)
        graph.add_operator("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", inputs, [y], options, version=4)
        return y
    return add


def add_grouped_conv(graph: GraphBuilder, p: Draw, x: int, name: str = "grouped_conv") -> int:
    """int8 CONV_2D whose filter sees channels / groups input channels (groups 2 or 3)."""
    batch, height, width, channels = graph.tensor(x).shape
    groups = p("groups", lambda: 2 if channels % 2 == 0 else 3)
    out_channels = groups * p.integer("filters_per_group", 1, 3)
    kh, kw, sh, sw, dh, dw, padding = _spatial(p, height, width)
    activation = p.choice("activation", ACTIVATIONS)
    input_scale = graph.tensor(x).scale
    scales = np.array([p.rng.uniform(1e-3, 2e-2) for _ in range(out_channels)])
    filter_index = graph.add_constant(f"{name}/filter", _weights(p.rng, (out_channels, kh, kw, channels // groups)),
                                      scale=scales, zero_point=np.zeros(out_channels, np.int64), quantized_dimension=0)
    std = _accumulator_std(input_scale, scales, kh * kw * channels // groups)
    bias_scales = input_scale * scales
    bias_index = graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales), scale=bias_scales,
                                    zero_point=np.zeros(out_channels, np.int64), quantized_dimension=0)
    out_shape = (batch, _output_size(height, kh, sh, dh, padding), _output_size(width, kw, sw, dw, padding),
                 out_channels)
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("CONV_2D", [x, filter_index, bias_index], [y], schema.Conv2DOptionsT(
        padding=padding_code(padding), strideW=sw, strideH=sh, fusedActivationFunction=activation_code(activation),
        dilationWFactor=dw, dilationHFactor=dh), version=3)
    return y


def _grouped_input(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 2), p.integer("height", 1, 8), p.integer("width", 1, 8),
            p.choice("channels", (2, 4, 6, 3, 9)))


register_cases({"CONV_2D/grouped": (_grouped_input, add_grouped_conv, (1e-3, 1e-1), "int8")})
register_cases({"CONV_2D/int16": (_nhwc, _conv_16x8(False), (1e-3, 1e-1), "int16"),
                "DEPTHWISE_CONV_2D/int16": (_nhwc, _conv_16x8(True), (1e-3, 1e-1), "int16")})
register_cases({"FULLY_CONNECTED/int16": (_rows, _fully_connected_16x8(False), (1e-3, 1e-1), "int16"),
                "FULLY_CONNECTED/int16_per_channel": (_rows, _fully_connected_16x8(True), (1e-3, 1e-1), "int16")})
register_cases({"AVERAGE_POOL_2D/int16": (_nhwc, _int16_pool("AVERAGE_POOL_2D"), (1e-3, 1e-1), "int16"),
                "MAX_POOL_2D/int16": (_nhwc, _int16_pool("MAX_POOL_2D"), (1e-3, 1e-1), "int16")})
def _matrices(p: Draw) -> tuple[int, ...]:
    """The left operand of BATCH_MATMUL: [batch..., rows, depth] of rank 2-4."""
    return tuple(p.integer(f"dim{i}", 1, 3) for i in range(p.integer("rank", 2, 4) - 2)) + (
        p.integer("rows", 1, 6), p.integer("depth", 1, 8))


def add_batch_matmul(graph: GraphBuilder, p: Draw, x: int, name: str = "batch_matmul") -> int:
    """The right operand another graph input or a constant, its batch dimensions broadcast against
    the left's (some dropped or 1), adj_x and adj_y drawn (the left input then read transposed)."""
    shape = graph.tensor(x).shape
    adj_x, adj_y = p.choice("adj_x", (False, True)), p.choice("adj_y", (False, True))
    m, k = (shape[-1], shape[-2]) if adj_x else (shape[-2], shape[-1])
    n = p.integer("columns", 1, 6)
    batch = list(shape[:-2])
    rhs_batch = p("rhs_batch", lambda: [1 if p.rng.random() < 0.3 else d for d in batch][
        int(p.rng.integers(len(batch) + 1)):])
    rhs_shape = (*rhs_batch, *((n, k) if adj_y else (k, n)))
    scale = p.log_uniform("rhs_scale", 1e-3, 1e-1)
    quantization = {"scale": scale, "zero_point": _zero_point(p, "rhs_zero_point")}
    if p("constant_rhs", lambda: bool(p.rng.random() < 0.5)):
        rhs = graph.add_constant(f"{name}/rhs", p.rng.integers(-128, 128, rhs_shape).astype(np.int8), **quantization)
    else:
        rhs = graph.add_input(f"{name}/rhs", "int8", rhs_shape, **quantization)
    out_batch = np.broadcast_shapes(tuple(batch), tuple(rhs_batch))
    std = _accumulator_std(graph.tensor(x).scale, np.array([scale]), k) * 100 / 73
    y = _output(graph, name, "int8", (*out_batch, m, n),
                {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                 "zero_point": _zero_point(p, "output_zero_point")})
    graph.add_operator("BATCH_MATMUL", [x, rhs], [y], schema.BatchMatMulOptionsT(adjX=adj_x, adjY=adj_y), version=2)
    return y


register_cases({"BATCH_MATMUL": (_matrices, add_batch_matmul, (1e-3, 1e-1), "int8")})
register_cases({"TRANSPOSE_CONV": (_nhwc, add_transpose_conv, (1e-3, 1e-1), "int8"),
                "TRANSPOSE_CONV/int16": (_nhwc, add_transpose_conv, (1e-3, 1e-1), "int16")})
