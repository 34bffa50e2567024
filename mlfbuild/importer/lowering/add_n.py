"""ADD_N: the element-wise sum of any number of tensors of one shape, for the types LiteRT's kernel
takes (float32, int32). TFLM's int8 ADD_N stays refused: LiteRT has no int8 ADD_N to hold it to."""

from __future__ import annotations

import numpy as np

from ..tflite import Graph, Operator, Tensor
from .base import Lowered, Operand, refuse, tensor_at
from .indexing import as_stored

_CTYPES = {"float32": "float", "int32": "int32_t"}


def _operand(t: Tensor, ctype: str, param: str) -> Operand:
    if t.is_constant:
        return Operand(f"{ctype}*", param, constant=as_stored(t.data))
    return Operand(f"{ctype}*", param, t.index)


def _add_n(graph: Graph, op: Operator) -> Lowered:
    """mlfbuild kernel: float32, int32 (wrapping), each element summed from zero over the inputs in order (TFLite's reference AddN); int8 refused (LiteRT has no int8 ADD_N).

    Float addition is not associative: the order is TFLite's, so the sums are LiteRT's to the bit."""
    inputs = [tensor_at(graph, op, i) for i in range(len(op.inputs))]
    y = tensor_at(graph, op, 0, output=True)
    if not inputs:
        raise refuse(op, "it has no input")
    if y.dtype not in _CTYPES:
        raise refuse(op, f"the output {y.describe()} is {y.dtype}; ADD_N is compiled for float32 and int32 "
                         "(LiteRT has no int8 ADD_N to check TFLM's against)")
    for t in inputs:
        if t.dtype != y.dtype or tuple(t.shape) != tuple(y.shape):
            raise refuse(op, f"the input {t.describe()} is not of the output's type and shape {y.describe()} "
                             "(ADD_N does not broadcast)")
    ctype = _CTYPES[y.dtype]
    count = int(np.prod(y.shape, dtype=np.int64))
    if y.dtype == "float32":
        accumulate, start, store = "sum += input{k}_[i];", "float sum = 0.0f;", "sum"
    else:  # int32 wraps as TFLite's int32 sum does on two's complement machines
        accumulate, start, store = "sum += (uint32_t)input{k}_[i];", "uint32_t sum = 0u;", "(int32_t)sum"
    body = [f"  for (int32_t i = 0; i < {count}; ++i) {{", f"    {start}",
            *[f"    {accumulate.format(k=k)}" for k in range(len(inputs))],
            f"    output_[i] = {store};", "  }", "  return 0;"]
    operands = [_operand(t, ctype, f"input{k}_") for k, t in enumerate(inputs)]
    operands.append(Operand(f"{ctype}*", "output_", y.index))
    return Lowered(op, "", operands, body, kernel=True, in_place=True)


RULES = {"ADD_N": _add_n}
