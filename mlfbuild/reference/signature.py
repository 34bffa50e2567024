"""Do a .tflite and a model of an MLF describe the same graph? Inputs by name, outputs by position
(by name too where the MLF kept TFLite's), each with the same dtype and shape.

TVM's TFLite frontend keeps TFLite's tensor names for inputs (`input_1`, `input_1_int8`). Outputs keep
theirs (`Identity`) in the C interface header of TVM 0.9–0.18; TVM 0.8 and the packed interface name
them by position (`output`, `output0`, `output1`, ...), so those are matched by their place.
"""

from __future__ import annotations

import re

from .tflite import TensorInfo, TfliteModel

_POSITIONAL = re.compile(r"output_?\d*")


def _describe(spec: dict) -> str:
    if spec["shape"] is None:
        return f"{spec['dtype']}[shape not stated]"
    return f"{spec['dtype']}[{','.join(str(d) for d in spec['shape'])}]"


def _same_tensor(info: TensorInfo, spec: dict) -> bool:
    return info.dtype == spec["dtype"] and spec["shape"] is not None and list(info.shape) == list(spec["shape"])


def mismatch(tflite: TfliteModel, model: dict) -> str | None:
    """What differs between `tflite` and `model` (an MLF model: name, inputs and outputs with name,
    dtype, shape), or None when they describe the same graph."""
    ours = {t.name: t for t in tflite.inputs}
    theirs = {s["name"]: s for s in model["inputs"]}
    for name in theirs.keys() - ours.keys():
        return f"model {model['name']} has input '{name}', the .tflite has {_names(tflite.inputs)}"
    for name in ours.keys() - theirs.keys():
        return f"the .tflite has input '{name}', model {model['name']} has {_names_of(model['inputs'])}"
    for name, spec in theirs.items():
        if not _same_tensor(ours[name], spec):
            return (f"input '{name}' is {ours[name].describe()} in the .tflite, {_describe(spec)} in "
                    f"model {model['name']}")
    if len(tflite.outputs) != len(model["outputs"]):
        return (f"the .tflite has {len(tflite.outputs)} output(s), model {model['name']} has "
                f"{len(model['outputs'])}")
    for index, (info, spec) in enumerate(zip(tflite.outputs, model["outputs"])):
        if spec["name"] != info.name and not _POSITIONAL.fullmatch(spec["name"]):
            return (f"output {index} is '{info.name}' in the .tflite, '{spec['name']}' in model {model['name']}")
        if not _same_tensor(info, spec):
            return (f"output {index} ('{info.name}') is {info.describe()} in the .tflite, {_describe(spec)} in "
                    f"model {model['name']}")
    return None


def module_quantization(tflite: TfliteModel, model: dict) -> dict[str, tuple[float, int]]:
    """(scale, zero point) of each quantized input and output of an MLF module, keyed by the module's
    own tensor names (outputs matched by position), from its original model; ValueError naming the
    difference when the .tflite describes another graph."""
    differs = mismatch(tflite, model)
    if differs:
        raise ValueError(differs)
    found = {t.name: (t.scale, t.zero_point) for t in tflite.inputs if t.quantized}
    found.update({spec["name"]: (t.scale, t.zero_point)
                  for t, spec in zip(tflite.outputs, model["outputs"]) if t.quantized})
    return found


def _names(tensors) -> str:
    return ", ".join(f"'{t.name}'" for t in tensors)


def _names_of(specs) -> str:
    return ", ".join(f"'{s['name']}'" for s in specs)
