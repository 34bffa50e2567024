"""ADD, SUB and MUL with TFLite's broadcasting and constant operands; LOGICAL_AND, LOGICAL_OR and
LOGICAL_NOT on bool tensors.

Operands of one shape go to CMSIS-NN's element-wise kernels (constants as constant arrays), as TFLM's
CMSIS-NN ADD/MUL kernels call the library only without broadcasting; others are a kernel of ours over
the output's elements (elementwise.broadcast_loop: each operand read through strides that are 0 along
its broadcast dimensions, computed at import), with the arithmetic of TFLite's reference integer kernels
(add.h / sub.h / mul.h: two inputs rescaled to twice the larger scale after a 2^20 shift for ADD and
SUB, one multiplier for MUL)."""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import ACTIVATIONS, Graph, Operator, Tensor
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    bare_call,
    c_clamp,
    fused_activation_range,
    refuse,
    require_int8,
    tensor_at,
)
from .elementwise import MAX_BROADCAST_RANK, broadcast_kernel, broadcast_loop


def _operands(graph: Graph, op: Operator) -> tuple[Tensor, Tensor, Tensor]:
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    require_int8(op, a, b, y)
    try:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise refuse(op, f"{a.describe()} and {b.describe()} do not broadcast together") from None
    if shape != y.shape:
        raise refuse(op, f"the output {y.describe()} is not the broadcast shape {list(shape)}")
    if len(shape) > MAX_BROADCAST_RANK:
        raise refuse(op, f"rank {len(shape)} is more than TFLite's {MAX_BROADCAST_RANK}")
    if a.is_constant and b.is_constant:
        raise refuse(op, "both operands are constants (the converter folds such operators)")
    return a, b, y


def _operand(t: Tensor, param: str) -> Operand:
    """A graph tensor, or a constant's values as a constant array of the code."""
    if t.is_constant:
        return Operand("int8_t*", param, constant=np.ascontiguousarray(t.data.astype(np.int8)))
    return Operand("int8_t*", param, t.index)


def _lowered(op: Operator, a: Tensor, b: Tensor, y: Tensor, element: list[str], function: str = "",
             call: str = "") -> Lowered:
    """CMSIS-NN's `call` for operands of one shape; else (or without a call) a loop over the output
    computing `out` from `x1`, `x2`."""
    operands = [_operand(a, "input1_"), _operand(b, "input2_"), Operand("int8_t*", "output_", y.index)]
    same = a.shape == b.shape
    if same and call:
        return Lowered(op, function, operands, bare_call(call), in_place=True)
    return Lowered(op, "", operands, broadcast_loop([a.shape, b.shape], y.shape, element, "int8_t"), kernel=True,
                   in_place=same)


INT16_LEFT_SHIFT = 15  # TFLite's general int16 ADD/SUB (pot_scale_int16 false) shifts by 2^15, not 2^20


def _below_one(op: Operator, real: float) -> tuple[int, int]:
    if not 0.0 < real < 1.0:
        raise refuse(op, f"a rescale of {real} (TFLite requires 0 < multiplier < 1)")
    return q.quantize_multiplier(real)


def _int16(graph: Graph, op: Operator) -> Lowered:
    """int16 ADD, SUB and MUL (16x8 models): TFLite's general int16 arithmetic, zero points 0."""
    a, b, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    for t in (a, b, y):
        if t.dtype != "int16":
            raise refuse(op, f"{t.describe()} is not int16 (int16 {op.name} takes int16 inputs and output)")
        if t.quantization.zero_point != 0:
            raise refuse(op, f"{t.describe()} has zero point {t.quantization.zero_point} (int16 is symmetric)")
    if a.is_constant and b.is_constant:
        raise refuse(op, "both operands are constants (the converter folds such operators)")
    try:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise refuse(op, f"{a.describe()} and {b.describe()} do not broadcast together") from None
    if shape != tuple(y.shape) or len(shape) > MAX_BROADCAST_RANK:
        raise refuse(op, f"the output {y.describe()} is not the broadcast shape {list(shape)} (rank at most "
                         f"{MAX_BROADCAST_RANK})")
    fused_activation_range(op, y)  # refuses an activation TFLite does not fuse
    lo, hi = q.activation_range(ACTIVATIONS[op.options.get("activation", 0)], y.quantization.scale, 0, -32768, 32767)
    s1, s2, so = (float(t.quantization.scale) for t in (a, b, y))
    if op.name == "MUL":
        m, shift = q.mul_multiplier(s1, s2, so)
        if shift > 0:
            raise refuse(op, f"an int16 MUL rescale of 2^{shift} or more overflows TFLite's 32-bit arithmetic")
        element = [f"const int32_t raw = {REQUANTIZE_FUNCTION}(x1 * x2, {m}, {shift});"]
    else:
        if op.options.get("pot_scale_int16", True):
            raise refuse(op, "pot_scale_int16 (TFLite's power-of-two int16 path) is not supported; "
                             "the converter writes false")
        twice = float(np.float32(2) * np.float32(max(s1, s2)))
        m1, h1 = _below_one(op, s1 / twice)
        m2, h2 = _below_one(op, s2 / twice)
        mo, ho = _below_one(op, twice / float(np.float32(1 << INT16_LEFT_SHIFT) * np.float32(so)))
        sign = "-" if op.name == "SUB" else "+"
        element = [f"const int32_t s1 = {REQUANTIZE_FUNCTION}(x1 * {1 << INT16_LEFT_SHIFT}, {m1}, {h1});",
                   f"const int32_t s2 = {REQUANTIZE_FUNCTION}(x2 * {1 << INT16_LEFT_SHIFT}, {m2}, {h2});",
                   f"const int32_t raw = {REQUANTIZE_FUNCTION}(s1 {sign} s2, {mo}, {ho});"]
    element.append(f"const int32_t out = {c_clamp('raw', lo, hi)};")
    operands = [Operand("int16_t*", f"input{k}_", constant=np.ascontiguousarray(t.data.astype(np.int16)))
                if t.is_constant else Operand("int16_t*", f"input{k}_", t.index) for k, t in enumerate((a, b), start=1)]
    operands.append(Operand("int16_t*", "output_", y.index))
    return Lowered(op, "", operands, broadcast_loop([a.shape, b.shape], shape, element, "int16_t"), kernel=True,
                   in_place=tuple(a.shape) == tuple(b.shape))


def _add_or_sub(graph: Graph, op: Operator) -> Lowered:
    """ADD: `arm_elementwise_add_s8` (operands of one shape), broadcasting: mlfbuild kernel; SUB:
    mlfbuild kernel (TFLite's reference sub: the second input's rescale rounded as a positive product,
    which CMSIS-NN's add with a negated multiplier would round otherwise at ties); int16: mlfbuild kernel
    (TFLite's general int16 path, a 2^15 shift)."""
    if tensor_at(graph, op, 0).dtype == "int16":
        return _int16(graph, op)
    a, b, y = _operands(graph, op)
    p = q.add_parameters(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    sign = "-" if op.name == "SUB" else "+"
    shifted = f"* (1 << {p['left_shift']})"
    element = [f"const int32_t s1 = {REQUANTIZE_FUNCTION}((x1 + ({-a.quantization.zero_point})) {shifted}, "
               f"{p['input1_mult']}, {p['input1_shift']});",
               f"const int32_t s2 = {REQUANTIZE_FUNCTION}((x2 + ({-b.quantization.zero_point})) {shifted}, "
               f"{p['input2_mult']}, {p['input2_shift']});",
               f"const int32_t raw = {REQUANTIZE_FUNCTION}(s1 {sign} s2, {p['out_mult']}, {p['out_shift']}) + "
               f"({y.quantization.zero_point});", f"const int32_t out = {c_clamp('raw', lo, hi)};"]
    if op.name == "SUB":
        return _lowered(op, a, b, y, element)
    call = (f"arm_elementwise_add_s8(input1_, input2_, {-a.quantization.zero_point}, {p['input1_mult']}, "
            f"{p['input1_shift']}, {-b.quantization.zero_point}, {p['input2_mult']}, {p['input2_shift']}, "
            f"{p['left_shift']}, output_, {y.quantization.zero_point}, {p['out_mult']}, {p['out_shift']}, "
            f"{lo}, {hi}, {int(np.prod(y.shape))})")
    return _lowered(op, a, b, y, element, "arm_elementwise_add_s8", call)


def _mul(graph: Graph, op: Operator) -> Lowered:
    """`arm_elementwise_mul_s8` (operands of one shape); broadcasting: mlfbuild kernel, TFLite's
    reference mul arithmetic; int16: mlfbuild kernel (one multiplier, zero points 0)."""
    if tensor_at(graph, op, 0).dtype == "int16":
        return _int16(graph, op)
    a, b, y = _operands(graph, op)
    multiplier, shift = q.mul_multiplier(a.quantization.scale, b.quantization.scale, y.quantization.scale)
    lo, hi = fused_activation_range(op, y)
    element = [f"const int32_t raw = {REQUANTIZE_FUNCTION}((x1 + ({-a.quantization.zero_point})) * "
               f"(x2 + ({-b.quantization.zero_point})), {multiplier}, {shift}) + ({y.quantization.zero_point});",
               f"const int32_t out = {c_clamp('raw', lo, hi)};"]
    call = (f"arm_elementwise_mul_s8(input1_, input2_, {-a.quantization.zero_point}, {-b.quantization.zero_point}, "
            f"output_, {y.quantization.zero_point}, {multiplier}, {shift}, {lo}, {hi}, {int(np.prod(y.shape))})")
    return _lowered(op, a, b, y, element, "arm_elementwise_mul_s8", call)


LOGICAL_MAX_RANK = 4  # TFLite's logical.cc broadcasts through BroadcastBinaryFunction4DSlow


def _logical(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: bool (one byte, 0 or 1) AND / OR of two bool tensors, broadcasting (TFLite's
    logical.cc); NOT of one."""
    inputs = [tensor_at(graph, op, i) for i in range(1 if op.name == "LOGICAL_NOT" else 2)]
    y = tensor_at(graph, op, 0, output=True)
    for t in (*inputs, y):
        if t.dtype != "bool":
            raise refuse(op, f"{t.describe()} is not bool")
    for t in inputs:
        if t.is_constant:
            raise refuse(op, f"the constant bool operand {t.describe()} (only tensors computed in the graph)")
    if len(inputs) == 2 and tuple(inputs[0].shape) != tuple(inputs[1].shape) and len(y.shape) > LOGICAL_MAX_RANK:
        raise refuse(op, f"broadcasting at rank {len(y.shape)} (TFLite's logical kernels broadcast up to "
                         f"{LOGICAL_MAX_RANK} dimensions)")
    element = {"LOGICAL_AND": "const int32_t out = x1 && x2;", "LOGICAL_OR": "const int32_t out = x1 || x2;",
               "LOGICAL_NOT": "const int32_t out = !x1;"}[op.name]
    return broadcast_kernel(op, inputs, y, [element], ["uint8_t"] * len(inputs), "uint8_t")


RULES = {
    "ADD": _add_or_sub,
    "SUB": _add_or_sub,
    "MUL": _mul,
    "LOGICAL_AND": _logical,
    "LOGICAL_OR": _logical,
    "LOGICAL_NOT": _logical,
}
