"""Each TFLite operator as the CMSIS-NN call TFLM's CMSIS-NN kernels make for the same parameters,
with the operands prepared at import time: per-channel multipliers and shifts, filters laid out for
the faster kernel, activation ranges — everything that depends only on the model.

A lowered operator is C in the shape TVM's CMSIS-NN code generator writes (one function per
operator taking its tensors, locals holding the CMSIS-NN parameter structs, a context left empty), so
the build treats it exactly like TVM's: it sizes the scratch buffer of every call for the board's
core, precomputes kernel sums, and re-plans the pool from the same analysis. Operators CMSIS-NN
does not have are small C kernels with TFLite's reference semantics.

One module per family of operators, each with its RULES (operator name → lowering; the rule's
docstring says in its first line how the operator is compiled, for docs/import.md); anything not
covered is refused with the operator's name and index (UnsupportedModelError): a model is compiled
exactly or not at all.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from ..tflite import Graph, Operator
from .base import BAND_FUNCTION, C_HELPERS, REQUANTIZE_C, REQUANTIZE_FUNCTION, Bands, Lowered, Operand, UnsupportedModelError

__all__ = ["BAND_FUNCTION", "Bands", "C_HELPERS", "REQUANTIZE_C", "REQUANTIZE_FUNCTION", "Lowered", "Operand", "UnsupportedModelError",
           "SUPPORTED_OPERATORS", "lower", "refusal"]

def _family_rules() -> dict[str, Callable[[Graph, Operator], Lowered]]:
    """Every family module's RULES, merged; an operator claimed twice is a programming error."""
    rules: dict[str, Callable[[Graph, Operator], Lowered]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):  # __main__: the table's command, not a family
            continue
        family = importlib.import_module(f"{__name__}.{info.name}")
        for name, rule in getattr(family, "RULES", {}).items():
            if name in rules:
                raise RuntimeError(f"{name} is lowered by two families ({info.name} and another)")
            rules[name] = rule
    return rules


_RULES = _family_rules()
SUPPORTED_OPERATORS = tuple(sorted(_RULES))


def rules() -> dict[str, Callable[[Graph, Operator], Lowered]]:
    """Operator name → its lowering, for every operator mlfbuild compiles."""
    return dict(_RULES)


def refusal(op: Operator) -> UnsupportedModelError | None:
    """Why `op` cannot be compiled whatever its operands are (its operator is not one mlfbuild
    compiles), or None."""
    if op.name in _RULES:
        return None
    from ..coverage import refusal_reason

    return UnsupportedModelError(f"operator {op.index} ({op.name}) is not supported by mlfbuild import: "
                                 f"{refusal_reason(op.name)}", op)


def lower(graph: Graph, op: Operator) -> Lowered:
    refused = refusal(op)
    if refused is not None:
        raise refused
    return _RULES[op.name](graph, op)
