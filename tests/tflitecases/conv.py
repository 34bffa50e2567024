"""AVERAGE_POOL_2D and MAX_POOL_2D on 16x8 (int16) tensors; TRANSPOSE_CONV (int8, per-channel filter [out_c, kh, kw, in_c], as the converter writes
Conv2DTranspose): random kernels, strides and paddings, with and without bias."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from tflitewriter import (ACTIVATIONS, PADDINGS, Draw, GraphBuilder, _accumulator_std, _bias, _nhwc, _output,
                          _output_size, _same_quantization, _spatial, _weights, _zero_point, activation_code,
                          padding_code, register_cases)


def _transposed_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """An output extent whose convolution back gives `size` (TensorFlow's deconv_output_length)."""
    return size * stride if padding == "SAME" else size * stride + max(kernel - stride, 0)


def add_transpose_conv(graph: GraphBuilder, p: Draw, x: int, name: str = "transpose_conv") -> int:
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
    std = _accumulator_std(input_scale, filter_scales, max(1, kh * kw * channels // (sh * sw)))
    out_shape = (batch, _transposed_size(height, kh, sh, padding), _transposed_size(width, kw, sw, padding),
                 out_channels)
    shape_index = graph.add_constant(f"{name}/output_shape", np.array(out_shape, np.int32))
    inputs = [shape_index, filter_index, x]
    if p("bias", lambda: True):
        bias_scales = input_scale * filter_scales
        inputs.append(graph.add_constant(f"{name}/bias", _bias(p.rng, std, bias_scales), scale=bias_scales,
                                         zero_point=np.zeros(out_channels, np.int64), quantized_dimension=0))
    y = _output(graph, name, "int8", out_shape, {"scale": std / 32 * p.log_uniform("output_scale_ratio", 0.5, 2),
                                                 "zero_point": _zero_point(p, "output_zero_point")})
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


register_cases({"AVERAGE_POOL_2D/int16": (_nhwc, _int16_pool("AVERAGE_POOL_2D"), (1e-3, 1e-1), "int16"),
                "MAX_POOL_2D/int16": (_nhwc, _int16_pool("MAX_POOL_2D"), (1e-3, 1e-1), "int16")})
register_cases({"TRANSPOSE_CONV": (_nhwc, add_transpose_conv, (1e-3, 1e-1), "int8")})
