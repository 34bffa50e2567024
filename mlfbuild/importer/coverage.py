"""Which TFLite operators `mlfbuild import` compiles, and why it refuses the others: the reason a
refusal gives and the operator table of docs/import.md (generated from the lowering rules, checked
by the tests).

TFLM_OPERATORS are the builtin operators TensorFlow Lite Micro's MicroMutableOpResolver can register
(tensorflow/lite/micro/micro_mutable_op_resolver.h, tflite-micro main of November 2026): the ones a
model made for a microcontroller can hold.
"""

from __future__ import annotations


TFLM_OPERATORS = (
    "ABS", "ADD", "ADD_N", "ARG_MAX", "ARG_MIN", "ASSIGN_VARIABLE", "AVERAGE_POOL_2D", "BATCH_MATMUL",
    "BATCH_TO_SPACE_ND", "BROADCAST_ARGS", "BROADCAST_TO", "CALL_ONCE", "CAST", "CEIL", "CONCATENATION", "CONV_2D",
    "COS", "CUMSUM", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "DEQUANTIZE", "DIV", "DYNAMIC_UPDATE_SLICE", "ELU",
    "EMBEDDING_LOOKUP", "EQUAL", "EXP", "EXPAND_DIMS", "FILL", "FLOOR", "FLOOR_DIV", "FLOOR_MOD", "FULLY_CONNECTED",
    "GATHER", "GATHER_ND", "GREATER", "GREATER_EQUAL", "HARD_SWISH", "IF", "L2_NORMALIZATION", "L2_POOL_2D",
    "LEAKY_RELU", "LESS", "LESS_EQUAL", "LOG", "LOGICAL_AND", "LOGICAL_NOT", "LOGICAL_OR", "LOGISTIC", "LOG_SOFTMAX",
    "MAXIMUM", "MAX_POOL_2D", "MEAN", "MINIMUM", "MIRROR_PAD", "MUL", "NEG", "NOT_EQUAL", "PACK", "PAD", "PADV2",
    "PRELU", "QUANTIZE", "READ_VARIABLE", "REDUCE_ALL", "REDUCE_MAX", "REDUCE_MIN", "RELU", "RELU6", "RESHAPE",
    "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "REVERSE_V2", "ROUND", "RSQRT", "SELECT_V2", "SHAPE", "SIN",
    "SLICE", "SOFTMAX", "SPACE_TO_BATCH_ND", "SPACE_TO_DEPTH", "SPLIT", "SPLIT_V", "SQRT", "SQUARE",
    "SQUARED_DIFFERENCE", "SQUEEZE", "STRIDED_SLICE", "SUB", "SUM", "SVDF", "TANH", "TRANSPOSE", "TRANSPOSE_CONV",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNPACK", "VAR_HANDLE", "WHILE", "ZEROS_LIKE",
)

_SUBGRAPHS = "control flow and resource variables need several subgraphs; mlfbuild compiles one"
# Why a TFLM operator is refused (an operator both compiled and listed here is a mistake the tests catch).
REFUSED = {
    "COS": "newlib's cosf differs from LiteRT's by an ulp on the Cortex-M4F: not exact on every board",
    "SIN": "newlib's sinf differs from LiteRT's by an ulp on the Cortex-M4F: not exact on every board",
    "IF": _SUBGRAPHS, "WHILE": _SUBGRAPHS, "CALL_ONCE": _SUBGRAPHS, "VAR_HANDLE": _SUBGRAPHS,
    "READ_VARIABLE": _SUBGRAPHS, "ASSIGN_VARIABLE": _SUBGRAPHS,
}
NOT_IN_TFLM = "TFLM does not run it either"


def refusal_reason(name: str) -> str:
    """Why the operator `name` (TFLite's name, or "CUSTOM '<name>'") is not compiled."""
    if name.startswith("CUSTOM"):
        return "a custom operator: its kernel is not TFLite's, so mlfbuild cannot know its arithmetic"
    return REFUSED.get(name, "not yet" if name in TFLM_OPERATORS else NOT_IN_TFLM)


def operator_table(rules: dict) -> list[tuple[str, str]]:
    """(operator, how it is compiled or why it is refused) for every TFLM operator and every compiled
    one, by name: the first paragraph of the rule's docstring, or the refusal's reason."""
    rows = []
    for name in sorted(set(TFLM_OPERATORS) | set(rules)):
        if name in rules:
            paragraph = (rules[name].__doc__ or "").strip().split("\n\n")[0]
            rows.append((name, " ".join(line.strip() for line in paragraph.splitlines())))
        else:
            rows.append((name, f"refused: {refusal_reason(name)}"))
    return rows


def markdown_table(rules: dict) -> str:
    """The operator table of docs/import.md (`python -m mlfbuild.importer.lowering` prints it)."""
    lines = ["| TFLite operator | compiled to (or why refused) |", "|---|---|"]
    lines += ["| " + name + " | " + how.replace("|", "\\|") + " |" for name, how in operator_table(rules)]
    return "\n".join(lines) + "\n"

