"""Read the signature of `@main` from the Relay text TVM stores in src/ (informational, but the only
place an AOT export of TVM < 0.11 records input and output shapes)."""

from __future__ import annotations

import re

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_TENSOR = re.compile(r"Tensor\[\(([^)]*)\),\s*([A-Za-z0-9_]+)\]")
_PARAM = re.compile(r"%([^\s:,()]+)\s*:\s*Tensor\[\(([^)]*)\),\s*([A-Za-z0-9_]+)\]")


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def main_signature(text: str) -> tuple[list[tuple[str, tuple[int, ...], str]], list[tuple[tuple[int, ...], str]]]:
    """Return ([(param name, shape, dtype)...], [(output shape, dtype)...]) of `def @main`.

    Returns empty lists when the text has no parsable main (the file is optional and informational).
    """
    start = text.find("def @main(")
    if start < 0:
        return [], []
    header_end = text.find("{", start)
    if header_end < 0:
        return [], []
    header = _COMMENT.sub("", text[start:header_end])
    arrow = header.rfind("->")
    params_part, result_part = (header[:arrow], header[arrow + 2:]) if arrow >= 0 else (header, "")
    try:
        params = [(m.group(1), _shape(m.group(2)), m.group(3)) for m in _PARAM.finditer(params_part)]
        outputs = [(_shape(m.group(1)), m.group(2)) for m in _TENSOR.finditer(result_part)]
    except ValueError:  # a symbolic dimension ("?" or "n"): treat as unknown
        return [], []
    return params, outputs


# Operators that keep the shape of their first argument (enough to walk back from a TFLite model's
# quantize/softmax tail to the operator that fixes the output shape).
_SHAPE_PRESERVING = {"qnn.quantize", "qnn.dequantize", "qnn.requantize", "clip", "cast", "nn.softmax",
                     "nn.bias_add", "nn.relu", "sigmoid", "tanh", "add", "subtract", "multiply", "fixed_point_multiply"}
_STATEMENT = re.compile(r"^\s*%(\d+)\s*=\s*(.*?);?\s*$")


def infer_single_output(text: str, element_count: int | None, batch: int = 1) -> tuple[tuple[int, ...] | None, str | None]:
    """(shape, dtype) of `@main`'s single output for untyped Relay text (TVM's TFLite import prints
    no return type): walk back from the final expression through shape-preserving operators to a
    dense (units=N) or reshape (newshape=[...]). The element count, when known, resolves the batch
    and -1 dimensions; otherwise the batch is that of the first input. The dtype is the first
    `out_dtype` met on the way (e.g. the final qnn.quantize)."""
    start = text.find("def @main(")
    if start < 0:
        return None, None
    body = _COMMENT.sub("", text[text.find("{", start) + 1:])
    lines = [line.strip() for line in body.splitlines() if line.strip() and line.strip() != "}"]
    if not lines:
        return None, None
    statements = {}
    for line in lines[:-1]:
        match = _STATEMENT.match(line)
        if match:
            statements[match.group(1)] = match.group(2)
    expression, dtype = lines[-1], None
    for _ in range(len(statements) + 1):
        if dtype is None:
            out_dtype = re.search(r'out_dtype="([a-z0-9]+)"', expression)
            dtype = out_dtype.group(1) if out_dtype else None
        op = expression.split("(", 1)[0].strip()
        if op in _SHAPE_PRESERVING:
            ref = re.match(r"[^(]*\(\s*%(\d+)", expression)
            if not ref or ref.group(1) not in statements:
                return None, dtype
            expression = statements[ref.group(1)]
            continue
        return _shape_of_op(op, expression, element_count, batch), dtype
    return None, dtype


def _shape_of_op(op: str, expression: str, element_count: int | None, batch: int) -> tuple[int, ...] | None:
    if op in ("qnn.dense", "nn.dense", "nn.matmul"):
        units = re.search(r"units=(\d+)", expression)
        if not units or int(units.group(1)) == 0:
            return None
        n = int(units.group(1))
        if element_count is None:
            return batch, n
        return (element_count // n, n) if element_count % n == 0 else None
    if op == "reshape":
        newshape = re.search(r"newshape=\[([^\]]*)\]", expression)
        if not newshape:
            return None
        dims = [int(d) for d in newshape.group(1).replace(" ", "").split(",") if d]
        if -1 not in dims:
            return tuple(dims)
        if element_count is None:
            return None
        known = 1
        for d in dims:
            known *= d if d > 0 else 1
        if known == 0 or element_count % known:
            return None
        return tuple(d if d > 0 else element_count // known for d in dims)
    return None
