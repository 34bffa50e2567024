"""The inputs' and outputs' quantization an MLF made by `mlfbuild import` carries in its own .tflite,
for the model headers (mlf_<mod>.h) of an export or of a build with the user's application."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInputError
from .signature import module_quantization
from .tflite import read_tflite


def carried_quantizations(lib, known=()) -> dict[str, dict[str, tuple[float, int]]]:
    """(scale, zero point) by module and tensor name, for every module of `lib` that carries its model
    and is not among `known` (modules whose quantization was given another way)."""
    found = {}
    for module in lib.modules:
        model = lib.carried_model(module)
        if model is not None and module.name not in known:
            found[module.name] = _quantization(model, module)
    return found


def _quantization(model: Path, module) -> dict[str, tuple[float, int]]:
    where = f"module {module.name}: the model its MLF carries ({module.imported_from.get('model_path')})"
    try:
        return module_quantization(read_tflite(model), module.to_json())
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where} is unusable: {str(exc).replace(str(model) + ': ', '')}") from None
    except ValueError as exc:       # it describes another graph: the MLF was altered after import
        raise InvalidInputError(f"{where} describes another graph: {exc}") from None
