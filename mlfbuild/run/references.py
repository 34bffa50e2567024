"""Where a run's expected outputs come from: a tensor file (`.npz`: TVM's reference, one written by
`mlfbuild reference`, or your own) or the original model (`.tflite`, run on the host on the same inputs).

`--reference PATH` serves every model of the firmware it fits (a tensor file whose inputs the model
has, a .tflite describing the same graph); `--reference MODEL=PATH` one model by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError
from ..suggest import did_you_mean
from .samples import sample_axis
from .tensorfile import load_tensors

_TFLITE_IDENTIFIER = b"TFL3"
HOST = "host"  # --reference host: the firmware's host twin (run/twin.py)
# Keys of a tensor file written by `mlfbuild reference` that are not tensors: what made the outputs
# (the model's file name), and each quantized tensor's [scale, zero point] (inputs by name, outputs
# as output_<i>, as the tensors are keyed).
SOURCE_KEY = "__source__"
QUANTIZATION_PREFIX = "__quantization__/"


def pick(tensors: dict[str, np.ndarray], model: dict, spec: dict) -> np.ndarray | None:
    """The tensor for input `spec` of `model`: keyed MODEL/NAME, NAME or its C name (a lone .npy
    serves a model of one input)."""
    for key in (f"{model['name']}/{spec['name']}", spec["name"], spec["c_name"]):
        if key in tensors:
            return tensors[key]
    if "" in tensors and len(model["inputs"]) == 1:
        return tensors[""]
    return None


@dataclass
class Reference:
    """Expected outputs of one model. `model_derived`: computed from the original model by another
    runtime (LiteRT), so integer outputs are held to the documented tolerance, not bit-exactness."""

    path: str
    model_derived: bool = False
    # (scale, zero point) of quantized tensors: inputs by name, outputs as output_<i>
    quantization: dict[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """What the expected outputs are, for the report."""
        return "a tensor file"

    def quantization_of(self, model: dict) -> dict[str, tuple[float, int]]:
        """(scale, zero point) of each input and output of `model` it knows, by the MLF's names."""
        keys = [s["name"] for s in model["inputs"]] + [f"output_{i}" for i in range(len(model["outputs"]))]
        names = [s["name"] for s in model["inputs"] + model["outputs"]]
        return {name: self.quantization[key] for key, name in zip(keys, names) if key in self.quantization}

    def inputs(self, model: dict) -> dict[str, np.ndarray]:
        """Inputs the reference brings (name → [samples, *shape]); none for a model file."""
        return {}

    def expected(self, model: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


@dataclass
class TensorFileReference(Reference):
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    source: str | None = None  # the model file `mlfbuild reference` ran to write it

    @property
    def kind(self) -> str:
        if not self.model_derived:
            return "a tensor file"
        return f"outputs of the original model {self.source} by LiteRT, written by `mlfbuild reference`"

    def inputs(self, model: dict) -> dict[str, np.ndarray]:
        found = {spec["name"]: pick(self.tensors, model, spec) for spec in model["inputs"]}
        return {name: sample_axis(value, spec["shape"], self.path, name)
                for (name, value), spec in zip(found.items(), model["inputs"]) if value is not None}

    def expected(self, model: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Every output of `model`, checked: one per output, of its shape (with a sample axis when the
        file holds several), and no more outputs than the model has (a file with more is another model's)."""
        count = len(model["outputs"])
        for key in self.tensors:
            name = key.removeprefix(f"{model['name']}/")
            if name.startswith("output_") and name[7:].isdigit() and int(name[7:]) >= count:
                raise InvalidInputError(f"{self.path}: reference '{key}' has no output to check: model "
                                        f"{model['name']} has {count} output(s)")
        return [self._output(model, i, spec) for i, spec in enumerate(model["outputs"])]

    def _output(self, model: dict, index: int, spec: dict) -> np.ndarray:
        for key in (f"output_{index}", f"{model['name']}/output_{index}", spec["name"], spec["c_name"]):
            if key in self.tensors:
                value = self.tensors[key]
                try:
                    return sample_axis(value, spec["shape"], self.path, key)
                except InvalidInputError:
                    raise InvalidInputError(f"{self.path}: reference '{key}' has shape {list(value.shape)}, the "
                                            f"model's output '{spec['name']}' has shape {spec['shape']}") from None
        raise InvalidInputError(f"{self.path}: no reference for output {index} ('{spec['name']}'); "
                                f"expected key output_{index} or {spec['name']}")


@dataclass
class ModelReference(Reference):
    tflite: object = None  # reference.tflite.TfliteModel
    model_derived: bool = True

    @property
    def kind(self) -> str:
        return "the original model, run with LiteRT"

    def compiled_exactly(self, model: dict) -> bool:
        """True when `model` is this very .tflite compiled by `mlfbuild import` (the same SHA-256):
        its operators are TFLite's reference arithmetic, so no tolerance applies."""
        imported = model.get("imported_from") or {}
        return bool(imported.get("sha256")) and imported.get("rounding", "tflite") == "tflite" and \
            imported["sha256"] == _sha256_of(Path(self.path))

    def expected(self, model: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        from ..reference.litert import run_model

        outputs = run_model(Path(self.path), inputs, kernels="reference")
        return [value.reshape((value.shape[0], *spec["shape"])) for value, spec in zip(outputs, model["outputs"])]


@dataclass
class HostTwinReference(Reference):
    """The firmware's host twin (run/twin.py builds and runs it): exact, whatever the tolerance."""

    path: str = HOST
    outputs: dict[str, list[np.ndarray]] = field(default_factory=dict)  # model → its outputs, all samples

    @property
    def kind(self) -> str:
        return "the same MLF compiled for the host (its own code and plan)"

    def expected(self, model: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.outputs[model["name"]]


def _is_tflite(path: Path) -> bool:
    """By name, or by the FlatBuffer identifier of a regular file (a FIFO is never opened to look)."""
    if path.suffix == ".tflite":
        return True
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as file:
            return file.read(8)[4:8] == _TFLITE_IDENTIFIER
    except OSError:
        return False


def _load(path: str, shared: dict[str, Reference]) -> Reference:
    if path == HOST:
        return shared.setdefault(HOST, HostTwinReference())
    if _is_tflite(Path(path)):
        from ..reference.tflite import read_tflite

        tflite = read_tflite(Path(path))
        return ModelReference(path=path, tflite=tflite, quantization=keyed_quantization(tflite))
    tensors = load_tensors(Path(path))
    source = _source_name(tensors[SOURCE_KEY]) if SOURCE_KEY in tensors else None
    quantization = {key.removeprefix(QUANTIZATION_PREFIX): (float(v[0]), int(v[1]))
                    for key, v in tensors.items() if key.startswith(QUANTIZATION_PREFIX) and v.size == 2}
    tensors = {k: v for k, v in tensors.items() if k != SOURCE_KEY and not k.startswith(QUANTIZATION_PREFIX)}
    return TensorFileReference(path=path, model_derived=source is not None, quantization=quantization,
                               tensors=tensors, source=source)


def _source_name(value: np.ndarray) -> str:
    """The model file a tensor file names (any file may carry the key: one printable line, bounded)."""
    text = str(value.reshape(-1)[0]) if value.size else ""
    return "".join(c if c.isprintable() else "?" for c in text[:120]) or "(unnamed)"


def keyed_quantization(tflite) -> dict[str, tuple[float, int]]:
    """A .tflite's quantization keyed as tensor files key tensors: inputs by name, outputs as output_<i>."""
    keyed = {t.name: (t.scale, t.zero_point) for t in tflite.inputs if t.quantized}
    keyed.update({f"output_{i}": (t.scale, t.zero_point) for i, t in enumerate(tflite.outputs) if t.quantized})
    return keyed


def _fits(reference: Reference, model: dict) -> bool:
    if reference.path == HOST:
        return True
    if isinstance(reference, ModelReference):
        from ..reference.signature import mismatch

        return mismatch(reference.tflite, model) is None
    return all(pick(reference.tensors, model, s) is not None for s in model["inputs"])


def resolve(items: list[str], models: list[dict]) -> dict[str, Reference]:
    """Model name → its reference, from `--reference [MODEL=]PATH` items; every .tflite checked to
    describe the model it serves."""
    from ..reference.signature import mismatch

    chosen: dict[str, Reference] = {}
    shared: dict[str, Reference] = {}  # the host twin: one build and run for every model it serves
    names = [m["name"] for m in models]
    for item in items:
        name, _, path = item.rpartition("=") if "=" in item and not Path(item).exists() else ("", "", item)
        if name and name not in names:
            raise InvalidInputError(f"--reference {item}: this firmware has no model '{name}'"
                                    f"{did_you_mean(name, names)}; its models: {', '.join(names)}")
        reference = _load(path, shared)
        targets = [m for m in models if m["name"] == name] if name else [m for m in models if _fits(reference, m)]
        if isinstance(reference, ModelReference):
            for model in targets or models:
                differs = mismatch(reference.tflite, model)
                if differs:
                    raise InvalidInputError(f"{path}: not the model this firmware was built from: {differs}")
        if not targets:
            raise InvalidInputError(f"{path}: its inputs match no model of this firmware "
                                    f"(models: {', '.join(names)}; use MODEL=PATH)")
        for model in targets:
            chosen[model["name"]] = reference
    return chosen


def model_reference_tensors(model_path: Path, given: dict[str, np.ndarray], source: str, samples: int | None,
                            seed: int) -> dict[str, np.ndarray]:
    """What `mlfbuild reference` writes: the model's inputs (from `given`, else `samples` seeded random
    ones, as `run --samples` makes them) and LiteRT's outputs for them, keyed as a reference file
    is read, with the model's name and quantization."""
    from ..reference.litert import run_model
    from ..reference.tflite import read_tflite
    from .samples import as_input_dtype, check_sample_bytes, random_samples

    model = read_tflite(Path(model_path))
    if not given:
        check_sample_bytes(samples or 1, sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
                                             for t in model.inputs), Path(model_path).name)
    inputs = {}
    for tensor in model.inputs:
        value = given.get(tensor.name, given.get("") if len(model.inputs) == 1 else None)
        if value is None and given:
            raise InvalidInputError(f"{source}: no tensor for the model's input '{tensor.name}' "
                                    f"(its keys: {', '.join(given)})")
        if value is None:
            inputs[tensor.name] = random_samples(tensor.name, tensor.dtype, tensor.shape, samples or 1, seed)
            continue
        quantization = (tensor.scale, tensor.zero_point) if tensor.quantized else None
        inputs[tensor.name] = as_input_dtype(sample_axis(value, tensor.shape, source, tensor.name), tensor.dtype,
                                             quantization, source, tensor.name)
    outputs = run_model(Path(model_path), inputs, kernels="reference")
    tensors = {**inputs, **{f"output_{i}": value for i, value in enumerate(outputs)},
               SOURCE_KEY: np.array(Path(model_path).name)}
    for key, (scale, zero_point) in keyed_quantization(model).items():
        tensors[QUANTIZATION_PREFIX + key] = np.array([scale, zero_point], dtype=np.float64)
    return tensors


def _sha256_of(path: Path) -> str:
    from ..errors import ArchiveError
    from ..mlf.archive import sha256_of

    try:
        return sha256_of(path)
    except ArchiveError:  # unreadable now: then it is not shown to be the model the MLF was made from
        return ""
