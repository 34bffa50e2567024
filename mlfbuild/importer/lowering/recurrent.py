"""Recurrent layers: SVDF (UNIDIRECTIONAL_SEQUENCE_LSTM is not compiled yet), whose state is a variable tensor kept from one inference to the next.

A variable tensor (the activation state) starts zeroed and keeps its values across invocations, as
in TFLite (one interpreter, invoked sample after sample) and TFLM: here it is a static array of the
operator's own function, zero-initialised in .bss and outside the workspace pool, which holds only
what lives within one inference.
"""

from __future__ import annotations

import numpy as np

from .. import quantization as q
from ..tflite import ACTIVATIONS, Graph, Operator, Tensor
from .base import (
    REQUANTIZE_FUNCTION,
    Lowered,
    Operand,
    c_clamp,
    constant_data,
    refuse,
    require_int8,
    tensor_at,
)


def _effective_scale(op: Operator, a: float, b: float, c: float) -> tuple[int, int]:
    """a × b / c as TFLite's svdf.cc computes it at prepare (in float, each operand a float), then
    QuantizeMultiplier."""
    real = float(np.float32(np.float32(a) * np.float32(b)) / np.float32(c))
    if not np.isfinite(real) or real <= 0:
        raise refuse(op, f"its effective scale {real} is not a positive number")
    multiplier, shift = q.quantize_multiplier(real)
    if shift > 30:
        raise refuse(op, f"its effective scale {real:.3g} is 2^31 or more; the 32-bit requantisation cannot shift by it")
    return multiplier, shift


def _state_tensor(graph: Graph, op: Operator, position: int) -> Tensor:
    """The variable tensor at `position`: read and written by this operator alone."""
    index = op.inputs[position] if position < len(op.inputs) else -1
    if index < 0:
        raise refuse(op, f"input {position} (the state) is missing")
    state = graph.tensors[index]
    if not state.is_variable or state.is_constant:
        raise refuse(op, f"the state {state.describe()} is not a variable tensor")
    if index in graph.inputs or index in graph.outputs:
        raise refuse(op, f"the state {state.describe()} is also a graph input or output")
    others = [o.index for o in graph.operators if o.index != op.index and index in list(o.inputs) + list(o.outputs)]
    if others or list(op.inputs).count(index) != 1:
        raise refuse(op, f"the state {state.describe()} is shared with another operand or operator")
    return state


def svdf(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: TFLite's integer SVDF, int8 input/output, int16 time weights and state, the state a static zeroed array kept across inferences.

    Only LiteRT's integer SVDF is compiled: int8 time weights and state (TFLM's 8-bit SVDF, which
    LiteRT's reference reads as int16) and other fused activations are refused. CMSIS-NN's
    arm_svdf_state_s16_s8 gives the same integers (v4.1.0 and v6.0.0, DSP and MVE, checked), but its
    call is not one the build's call-site analysis knows: a model holding it would lose the scratch
    buffers of its other CMSIS-NN calls, so our kernel it is."""
    x, features, times = (tensor_at(graph, op, i) for i in range(3))
    y = tensor_at(graph, op, 0, output=True)
    state = _state_tensor(graph, op, 4)
    require_int8(op, x, y)
    if times.dtype != "int16" or state.dtype != "int16":
        raise refuse(op, f"time weights {times.dtype} and state {state.dtype}: only int16 ones are supported "
                         "(LiteRT's integer SVDF reads both as int16; TFLM's 8-bit variant has no LiteRT reference)")
    feature_data = constant_data(op, features, "int8")
    time_data = constant_data(op, times, "int16")
    for t in (features, times, state):
        if t.quantization is None or t.quantization.per_channel or not t.quantization.scale > 0:
            raise refuse(op, f"tensor {t.describe()} has no positive per-tensor scale")
        if t.quantization.zero_point != 0:
            raise refuse(op, f"tensor {t.describe()} has zero point {t.quantization.zero_point}; "
                             "LiteRT's integer SVDF takes it as 0")
    activation = ACTIVATIONS.get(op.options.get("activation", 0), "?")
    if activation != "RELU":
        raise refuse(op, f"fused activation {activation}: the integer SVDF is supported with RELU "
                         "(what the converter writes)")
    rank = int(op.options.get("rank", 0))
    if len(x.shape) != 2 or len(features.shape) != 2 or len(times.shape) != 2:
        raise refuse(op, "the input and weights must be 2-D")
    batch, depth = x.shape
    filters, memory = times.shape
    if features.shape != (filters, depth) or rank < 1 or filters % rank or memory < 1:
        raise refuse(op, f"weights {features.describe()} and {times.describe()} with rank {rank} do not fit "
                         f"the input {x.describe()}")
    units = filters // rank
    if y.shape != (batch, units) or state.shape != (batch, memory * filters):
        raise refuse(op, f"output {y.describe()} or state {state.describe()} does not fit {batch} batches of "
                         f"{units} units, {filters} filters of memory {memory}")
    bias = None
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        bias = constant_data(op, graph.tensors[op.inputs[3]], "int32").reshape(-1)
        if bias.size != units:
            raise refuse(op, f"the bias has {bias.size} values for {units} units")
    m1, s1 = _effective_scale(op, x.quantization.scale, features.quantization.scale, state.quantization.scale)
    m2, s2 = _effective_scale(op, state.quantization.scale, times.quantization.scale, y.quantization.scale)
    in_zp, out_zp = x.quantization.zero_point, y.quantization.zero_point
    cells = batch * filters * memory
    state_line = f"  static int16_t state[{cells}];  /* the variable tensor: zeroed at start, kept across inferences */"
    operands = [Operand("int8_t*", "input_", op.inputs[0]),
                Operand("int8_t*", "feature_", constant=np.ascontiguousarray(feature_data)),
                Operand("int16_t*", "time_", constant=np.ascontiguousarray(time_data))]
    if bias is not None:
        operands.append(Operand("int32_t*", "bias_", constant=np.ascontiguousarray(bias)))
    operands.append(Operand("int8_t*", "output_", op.outputs[0]))
    body = [state_line,
            f"  for (int32_t i = 0; i < {cells - 1}; ++i) state[i] = state[i + 1];",
            f"  for (int32_t b = 0; b < {batch}; ++b) {{",
            f"    for (int32_t f = 0; f < {filters}; ++f) {{",
            "      int32_t acc = 0;",
            (f"      for (int32_t c = 0; c < {depth}; ++c) "
             f"acc += (int32_t)feature_[f * {depth} + c] * ((int32_t)input_[b * {depth} + c] - ({in_zp}));"),
            f"      acc = {REQUANTIZE_FUNCTION}(acc, {m1}, {s1});",
            f"      state[(b * {filters} + f) * {memory} + {memory - 1}] = (int16_t){c_clamp('acc', -32768, 32767)};",
            "    }",
            f"    for (int32_t u = 0; u < {units}; ++u) {{",
            f"      int64_t sum = {'bias_[u]' if bias is not None else '0'};",
            f"      for (int32_t f = u * {rank}; f < (u + 1) * {rank}; ++f) {{",
            (f"        for (int32_t m = 0; m < {memory}; ++m) "
             f"sum += (int32_t)time_[f * {memory} + m] * (int32_t)state[(b * {filters} + f) * {memory} + m];"),
            "      }",
            f"      const int32_t scaled = {REQUANTIZE_FUNCTION}((int32_t)sum, {m2}, {s2}) + ({out_zp});",
            f"      output_[b * {units} + u] = (int8_t){c_clamp('scaled', -128, 127)};",
            "    }",
            "  }",
            "  return 0;"]
    return Lowered(op, "", operands, body, "mlfbuild kernel: TFLite's integer SVDF, its state kept in a static array",
                   kernel=True)


RULES = {"SVDF": svdf}
