"""ADD_N cases (mlfbuild/importer/lowering/add_n.py): float32 and int32, the case's input and one to
three more operands of its shape, graph inputs or constants (int32 over its whole range: the sums
wrap)."""

from __future__ import annotations

import numpy as np
from tflitewriter import Draw, GraphBuilder, _any_rank, _output, register_cases


def add_add_n(graph: GraphBuilder, p: Draw, x: int, name: str = "add_n") -> int:
    tensor = graph.tensor(x)
    operands = [x]
    for k in range(p.integer("extra_operands", 1, 3)):
        if p(f"constant_{k}", lambda: bool(p.rng.random() < 0.3)):
            if tensor.dtype == "float32":
                data = p.rng.normal(0.0, 1.0, tensor.shape).astype(np.float32)
            else:
                data = p.rng.integers(-2**31, 2**31, tensor.shape, dtype=np.int64).astype(np.int32)
            operands.append(graph.add_constant(f"{name}/operand{k}", data))
        else:
            operands.append(graph.add_input(f"{name}/operand{k}", tensor.dtype, tensor.shape))
    y = _output(graph, name, tensor.dtype, tensor.shape, None)
    graph.add_operator("ADD_N", operands, [y])
    return y


_SCALES = (1e-2, 1e-1)  # unused: the inputs are not quantized
register_cases({f"ADD_N/{dtype}": (_any_rank, add_add_n, _SCALES, dtype) for dtype in ("float32", "int32")})
