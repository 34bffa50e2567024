"""Pooling: CMSIS-NN's pooling calls (16x8 by their s16 kinds)."""

from __future__ import annotations

from .. import quantization as q
from ..tflite import ACTIVATIONS, Graph, Operator
from .base import (
    Lowered,
    Operand,
    c_dims,
    fused_activation_range,
    io_operands,
    nhwc,
    refuse,
    require_int8,
    same_quantization,
    status_check,
    tensor_at,
    window_padding,
)


def _require_int16(op: Operator, x, y) -> None:
    """16x8 activations as TFLite's pooling prepare takes them: int16 in and out, zero point 0."""
    for t in (x, y):
        if t.dtype != "int16":
            raise refuse(op, f"tensor {t.describe()} is {t.dtype}; the input is int16, so must the output be")
        if t.quantization is None or t.quantization.per_channel or not t.quantization.scale > 0:
            raise refuse(op, f"tensor {t.describe()} has no per-tensor quantization with a positive scale")
        if t.quantization.zero_point != 0:
            raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}; "
                              "int16 activations need zero point 0")


def _pool(graph: Graph, op: Operator, function: str) -> Lowered:
    x, y = tensor_at(graph, op, 0), tensor_at(graph, op, 0, output=True)
    int16 = x.dtype == "int16"
    if int16:
        _require_int16(op, x, y)
        function = function.replace("_s8", "_s16")
    else:
        require_int8(op, x, y)
    same_quantization(op, x, y)
    n, in_h, in_w, c = nhwc(op, x)
    _, out_h, out_w, out_c = nhwc(op, y)
    if out_c != c:
        raise refuse(op, f"output {y.describe()} has other channels than input {x.describe()}")
    o = op.options
    pad_h = window_padding(op, in_h, o["filter_h"], o["stride_h"], 1, out_h)
    pad_w = window_padding(op, in_w, o["filter_w"], o["stride_w"], 1, out_w)
    if int16:
        name = ACTIVATIONS.get(o.get("activation", 0), "?")
        if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            raise refuse(op, f"fused activation {name} is not supported")
        lo, hi = q.activation_range(name, y.quantization.scale, 0, -32768, 32767)
    else:
        lo, hi = fused_activation_range(op, y)
    body = ["  cmsis_nn_context context= {NULL,0};",
            f"  cmsis_nn_tile stride = {c_dims((o['stride_w'], o['stride_h']))};",
            f"  cmsis_nn_tile padding = {c_dims((pad_w, pad_h))};",
            f"  cmsis_nn_activation activation = {c_dims((lo, hi))};",
            "  cmsis_nn_pool_params pool_params = {stride, padding, activation};",
            f"  cmsis_nn_dims input_dims = {c_dims((n, in_h, in_w, c))};",
            f"  cmsis_nn_dims filter_dims = {c_dims((1, o['filter_h'], o['filter_w'], 1))};",
            f"  cmsis_nn_dims output_dims = {c_dims((n, out_h, out_w, c))};"]
    body += status_check(f"{function}(&context, &pool_params, &input_dims, input_, &filter_dims, &output_dims, output_)")
    operands = ([Operand("int16_t*", "input_", op.inputs[0]), Operand("int16_t*", "output_", op.outputs[0])]
                if int16 else list(io_operands(graph, op)))
    return Lowered(op, function, operands, body)


def _average_pool(graph: Graph, op: Operator) -> Lowered:
    """`arm_avgpool_s8`, 16x8 `arm_avgpool_s16`; input and output of one quantization (as TFLite requires;
    both divide by the window's count within the input, rounding half away from zero)."""
    return _pool(graph, op, "arm_avgpool_s8")


def _max_pool(graph: Graph, op: Operator) -> Lowered:
    """`arm_max_pool_s8`, 16x8 `arm_max_pool_s16`; input and output of one quantization (as TFLite requires)."""
    return _pool(graph, op, "arm_max_pool_s8")


RULES = {
    "AVERAGE_POOL_2D": _average_pool,
    "MAX_POOL_2D": _max_pool,
}
