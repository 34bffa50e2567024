"""Convolutions, depthwise convolutions and fully connected layers against LiteRT's reference
kernels, with the cases random draws rarely reach listed: dilation with SAME padding on odd sizes,
strides larger than the kernel, 1×N and N×1 kernels, kernels larger than the input with SAME
padding, extreme zero points; fully connected layers on 3-D inputs with keep_num_dims either way,
per-tensor and per-channel weights, without bias; TRANSPOSE_CONV (int8, 16x8), 16x8 CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED (with exact rounding ties), int16 pools, BATCH_MATMUL with
adj_x/adj_y and broadcast batches, grouped convolutions; what stays refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers FULLY_CONNECTED/per_channel
from test_import_operators import _assert_refused, check_against_litert
from tflitewriter import bundle_model


def _window(op: str, shape, kernel, stride=(1, 1), dilation=(1, 1), padding="SAME", **more):
    return (op, {"input_shape": shape, "kernel_h": kernel[0], "kernel_w": kernel[1], "stride_h": stride[0],
                 "stride_w": stride[1], "dilation_h": dilation[0], "dilation_w": dilation[1], "padding": padding,
                 **more})


CONV_RARE = [
    # dilation with SAME padding on odd sizes (the padding is odd: more after than before)
    _window("CONV_2D", (1, 7, 5, 3), (3, 3), dilation=(2, 2)),
    _window("CONV_2D", (1, 9, 7, 2), (3, 2), stride=(2, 1), dilation=(3, 2)),
    _window("CONV_2D", (1, 6, 6, 2), (2, 2), dilation=(2, 3)),  # even kernel, odd effective size
    _window("CONV_2D", (1, 9, 9, 2), (3, 3), dilation=(3, 3), padding="VALID"),
    # strides larger than the kernel
    _window("CONV_2D", (1, 8, 8, 3), (1, 1), stride=(3, 3), padding="VALID"),
    _window("CONV_2D", (1, 9, 7, 2), (2, 2), stride=(3, 3)),
    # 1×N and N×1 kernels
    _window("CONV_2D", (1, 1, 16, 4), (1, 5)),
    _window("CONV_2D", (1, 12, 1, 3), (5, 1), stride=(2, 1), padding="VALID"),
    # kernels larger than the input, SAME padding
    _window("CONV_2D", (1, 3, 3, 2), (5, 5)),
    _window("CONV_2D", (1, 2, 4, 3), (6, 7), stride=(2, 2)),
    # batches, extremes of the zero points, no activation
    _window("CONV_2D", (2, 5, 5, 3), (3, 3), input_zero_point=-128, output_zero_point=127, activation="NONE"),
    _window("CONV_2D", (1, 5, 5, 3), (3, 3), input_zero_point=127, output_zero_point=-128, activation="RELU"),
    # depthwise: the same rare windows, multipliers > 1 (in_c > 1; one input channel is tested elsewhere)
    _window("DEPTHWISE_CONV_2D", (1, 7, 5, 3), (3, 3), dilation=(2, 2)),
    _window("DEPTHWISE_CONV_2D", (1, 9, 7, 2), (3, 2), stride=(2, 1), dilation=(3, 2), depth_multiplier=2),
    _window("DEPTHWISE_CONV_2D", (1, 8, 8, 3), (1, 1), stride=(3, 3), padding="VALID"),
    _window("DEPTHWISE_CONV_2D", (1, 1, 16, 4), (1, 5), depth_multiplier=3),
    _window("DEPTHWISE_CONV_2D", (1, 3, 3, 2), (5, 5)),
    _window("DEPTHWISE_CONV_2D", (2, 4, 3, 3), (6, 5), stride=(2, 3), depth_multiplier=2),
    _window("DEPTHWISE_CONV_2D", (1, 5, 5, 4), (3, 3), input_zero_point=-128, output_zero_point=127),
]

FC_RARE = [
    ("FULLY_CONNECTED", {"input_shape": (1, 4, 8)}),  # 3-D input, keep_num_dims false: [4, units]
    ("FULLY_CONNECTED", {"input_shape": (2, 3, 5), "bias": False}),
    ("FULLY_CONNECTED", {"input_shape": (1, 1, 1, 12), "input_zero_point": -128, "output_zero_point": 127}),
    ("FULLY_CONNECTED", {"input_shape": (3, 1), "units": 1}),
    ("FULLY_CONNECTED/per_channel", {"input_shape": (1, 4, 8), "keep_num_dims": True}),
    ("FULLY_CONNECTED/per_channel", {"input_shape": (1, 4, 8), "keep_num_dims": False}),
    ("FULLY_CONNECTED/per_channel", {"input_shape": (2, 3, 5), "keep_num_dims": True, "bias": False}),
    ("FULLY_CONNECTED/per_channel", {"input_shape": (3, 16), "keep_num_dims": True, "units": 1}),
    ("FULLY_CONNECTED/per_channel", {"input_shape": (2, 2, 2, 6), "keep_num_dims": True,
                                     "input_zero_point": 127, "output_zero_point": -128}),
]


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_rare_convolutions_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(37), CONV_RARE).write(tmp_path / "conv.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.cross
def test_rare_fully_connected_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(38), FC_RARE).write(tmp_path / "fc.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_rare_convolutions_equal_litert_with_cmsis_nn_v4(cmsis_nn, tmp_path):
    """CMSIS-NN v4.1.0 (which does not build for the host) on the Cortex-M3's generic paths."""
    model = bundle_model(np.random.default_rng(39), CONV_RARE + FC_RARE).write(tmp_path / "all.tflite")
    check_against_litert(model, "mps2-an385", cmsis_nn("v4.1.0"), tmp_path / "m3", samples=2)


TRANSPOSE_RARE = [
    ("TRANSPOSE_CONV", {"input_shape": (1, 4, 4, 3), "kernel_h": 3, "kernel_w": 3, "stride_h": 2, "stride_w": 2,
                        "padding": "SAME"}),
    ("TRANSPOSE_CONV", {"input_shape": (1, 3, 5, 2), "kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2,
                        "padding": "VALID"}),
    ("TRANSPOSE_CONV", {"input_shape": (2, 3, 3, 2), "kernel_h": 4, "kernel_w": 3, "stride_h": 2, "stride_w": 3,
                        "padding": "SAME", "bias": False}),
    ("TRANSPOSE_CONV", {"input_shape": (1, 4, 3, 2), "kernel_h": 1, "kernel_w": 1, "stride_h": 3, "stride_w": 2,
                        "padding": "VALID"}),  # stride larger than the kernel: outputs no window reaches
    ("TRANSPOSE_CONV", {"input_shape": (1, 5, 5, 2), "kernel_h": 3, "kernel_w": 3, "stride_h": 1, "stride_w": 1,
                        "padding": "SAME", "activation": "RELU"}),
    ("TRANSPOSE_CONV", {"input_shape": (1, 2, 2, 4), "kernel_h": 5, "kernel_w": 5, "stride_h": 1, "stride_w": 1,
                        "padding": "VALID", "input_zero_point": -128, "output_zero_point": 127}),
    ("TRANSPOSE_CONV", {"input_shape": (1, 1, 6, 3), "kernel_h": 1, "kernel_w": 4, "stride_h": 1, "stride_w": 2,
                        "padding": "SAME", "activation": "RELU6"}),
    ("TRANSPOSE_CONV/int16", {"input_shape": (1, 4, 4, 3), "kernel_h": 3, "kernel_w": 3, "stride_h": 2,
                              "stride_w": 2, "padding": "SAME"}),
    ("TRANSPOSE_CONV/int16", {"input_shape": (1, 3, 5, 2), "kernel_h": 2, "kernel_w": 3, "stride_h": 2,
                              "stride_w": 1, "padding": "VALID", "activation": "RELU"}),
    ("TRANSPOSE_CONV/int16", {"input_shape": (2, 3, 3, 2), "kernel_h": 4, "kernel_w": 3, "stride_h": 2,
                              "stride_w": 3, "padding": "SAME", "bias": False}),
]


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_rare_transpose_convolutions_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(40), TRANSPOSE_RARE).write(tmp_path / "tconv.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


POOL16_RARE = [
    (f"{op}/int16", {"input_shape": shape, "kernel_h": k[0], "kernel_w": k[1], "stride_h": s[0], "stride_w": s[1],
                     "padding": padding, "activation": activation})
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D")
    for shape, k, s, padding, activation in [
        ((1, 7, 5, 3), (3, 3), (2, 2), "SAME", "NONE"),  # windows cut by the edges: fewer elements averaged
        ((1, 8, 8, 2), (2, 2), (2, 2), "VALID", "RELU"),
        ((2, 5, 5, 4), (5, 5), (1, 1), "VALID", "RELU6"),  # global
        ((1, 3, 3, 2), (4, 4), (1, 1), "SAME", "RELU_N1_TO_1"),  # window larger than the input
        ((1, 9, 7, 3), (1, 3), (3, 2), "SAME", "NONE"),
    ]
] + [("AVERAGE_POOL_2D/int16", {"input_shape": (1, 6, 6, 2), "input_scale": 1.0})]  # large values, ties


@pytest.mark.cross
def test_rare_int16_pools_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(41), POOL16_RARE).write(tmp_path / "pool16.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


FC16_RARE = [
    ("FULLY_CONNECTED/int16", {"input_shape": (2, 8)}),
    ("FULLY_CONNECTED/int16", {"input_shape": (1, 4, 8), "keep_num_dims": True, "bias": False}),
    ("FULLY_CONNECTED/int16", {"input_shape": (1, 3, 5), "keep_num_dims": False, "activation": "RELU"}),
    ("FULLY_CONNECTED/int16_per_channel", {"input_shape": (2, 8)}),
    ("FULLY_CONNECTED/int16_per_channel", {"input_shape": (1, 4, 8), "keep_num_dims": True, "bias": False}),
    ("FULLY_CONNECTED/int16_per_channel", {"input_shape": (2, 2, 16), "keep_num_dims": False, "activation": "RELU6"}),
    # input × filter / output = 1/256 exactly: half of the odd-even sums are ties, where rounding once
    # (half up) and twice (half away from zero) part
    *[(f"FULLY_CONNECTED/{kind}", {"input_shape": (16, 8), "input_scale": 2.0 ** -2, "filter_scale": 2.0 ** -7,
                                    "output_scale": 2.0 ** -9, "activation": "NONE", "bias": False})
      for kind in ("int16", "int16_per_channel")],
]


@pytest.mark.cross
def test_rare_16x8_fully_connected_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(42), FC16_RARE).write(tmp_path / "fc16.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


CONV16_RARE = [(f"{op}/int16", overrides) for op in ("CONV_2D", "DEPTHWISE_CONV_2D") for overrides in [
    {"input_shape": (1, 6, 6, 3), "kernel_h": 3, "kernel_w": 3, "stride_h": 1, "stride_w": 1, "dilation_h": 1,
     "dilation_w": 1, "padding": "SAME"},
    {"input_shape": (1, 7, 5, 2), "kernel_h": 3, "kernel_w": 2, "stride_h": 2, "stride_w": 1, "dilation_h": 2,
     "dilation_w": 2, "padding": "SAME", "activation": "RELU"},
    {"input_shape": (2, 5, 5, 2), "kernel_h": 2, "kernel_w": 2, "stride_h": 3, "stride_w": 3, "dilation_h": 1,
     "dilation_w": 1, "padding": "VALID"},
    {"input_shape": (1, 1, 9, 4), "kernel_h": 1, "kernel_w": 4, "stride_h": 1, "stride_w": 2, "dilation_h": 1,
     "dilation_w": 1, "padding": "SAME", "activation": "RELU6"},
    {"input_shape": (1, 3, 3, 2), "kernel_h": 5, "kernel_w": 5, "stride_h": 1, "stride_w": 1, "dilation_h": 1,
     "dilation_w": 1, "padding": "SAME"},
]]


@pytest.mark.cross
def test_rare_16x8_convolutions_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(43), CONV16_RARE).write(tmp_path / "conv16.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


def _refused_cases():
    """(graph, what the refusal says) for what stays refused."""
    rng = np.random.default_rng(44)
    no_bias = bundle_model(rng, [("CONV_2D/int16", {"input_shape": (1, 4, 4, 2), "bias": False})])
    # int16 activations into an int8 output
    mixed = bundle_model(rng, [("MAX_POOL_2D/int16", {"input_shape": (1, 4, 4, 2)})])
    mixed.tensors[-1] = dataclasses.replace(mixed.tensors[-1], dtype="int8")
    # a 16x8 fully connected layer whose sums could leave what its requantisation takes
    wide = bundle_model(rng, [("FULLY_CONNECTED/int16", {"input_shape": (1, 2000), "units": 2})])
    return [(no_bias, "a 16x8 convolution without a bias"), (mixed, "the input is int16, so must the output be"),
            (wide, "beyond the 2^32")]


@pytest.mark.parametrize("case", range(3))
def test_what_stays_refused_is_refused_in_one_line(case, tmp_path):
    graph, said = _refused_cases()[case]
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


MATMUL_RARE = [
    ("BATCH_MATMUL", {"input_shape": (4, 5), "adj_x": False, "adj_y": False, "columns": 3}),
    ("BATCH_MATMUL", {"input_shape": (5, 4), "adj_x": True, "adj_y": False, "columns": 3, "constant_rhs": True}),
    ("BATCH_MATMUL", {"input_shape": (2, 3, 4), "adj_x": False, "adj_y": True, "columns": 2, "rhs_batch": []}),
    ("BATCH_MATMUL", {"input_shape": (2, 4, 3), "adj_x": True, "adj_y": True, "columns": 5, "rhs_batch": [2]}),
    ("BATCH_MATMUL", {"input_shape": (2, 1, 3, 4), "adj_x": False, "adj_y": False, "columns": 2,
                      "rhs_batch": [1, 3], "constant_rhs": False}),  # both sides broadcast
    ("BATCH_MATMUL", {"input_shape": (1, 3, 2, 4), "adj_x": False, "adj_y": True, "columns": 3,
                      "rhs_batch": [2, 3], "constant_rhs": True}),
    ("BATCH_MATMUL", {"input_shape": (3, 8), "adj_x": False, "adj_y": False, "columns": 4, "input_zero_point": -128,
                      "rhs_zero_point": 127, "output_zero_point": -128}),
]


@pytest.mark.cross
def test_rare_batch_matmuls_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(45), MATMUL_RARE).write(tmp_path / "matmul.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(4))
def test_many_random_cases_of_the_family_equal_litert(seed, cmsis_nn, tmp_path):
    kinds = ["TRANSPOSE_CONV", "TRANSPOSE_CONV/int16", "BATCH_MATMUL", "CONV_2D/grouped", "CONV_2D/int16", "DEPTHWISE_CONV_2D/int16",
             "FULLY_CONNECTED/int16", "FULLY_CONNECTED/int16_per_channel", "FULLY_CONNECTED/per_channel",
             "AVERAGE_POOL_2D/int16", "MAX_POOL_2D/int16"]
    model = bundle_model(np.random.default_rng(100 + seed), kinds * 3).write(tmp_path / "family.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4, seed=seed)


GROUPED_RARE = [
    ("CONV_2D/grouped", {"input_shape": (1, 5, 5, 4), "groups": 2, "kernel_h": 3, "kernel_w": 3, "stride_h": 1,
                         "stride_w": 1, "dilation_h": 1, "dilation_w": 1, "padding": "SAME"}),
    ("CONV_2D/grouped", {"input_shape": (1, 6, 5, 6), "groups": 3, "kernel_h": 2, "kernel_w": 3, "stride_h": 2,
                         "stride_w": 1, "dilation_h": 2, "dilation_w": 1, "padding": "VALID"}),
    ("CONV_2D/grouped", {"input_shape": (2, 4, 4, 9), "groups": 3, "kernel_h": 1, "kernel_w": 1, "stride_h": 1,
                         "stride_w": 1, "dilation_h": 1, "dilation_w": 1, "padding": "SAME", "filters_per_group": 3}),
    ("CONV_2D/grouped", {"input_shape": (1, 3, 3, 4), "groups": 4, "kernel_h": 3, "kernel_w": 3, "stride_h": 1,
                         "stride_w": 1, "dilation_h": 1, "dilation_w": 1, "padding": "SAME"}),  # as depthwise
]


@pytest.mark.exhaustive  # every kind of it also runs in CI: test_every_operator_on_the_host_equals_litert
@pytest.mark.cross
def test_rare_grouped_convolutions_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(47), GROUPED_RARE + ["CONV_2D/grouped"] * 4).write(tmp_path / "g.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)
