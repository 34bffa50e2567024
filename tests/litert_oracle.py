"""The oracle of TFLite semantics for tests: a .tflite run by LiteRT's reference kernels on seeded inputs.

LiteRT runs in its own process (mlfbuild.reference.litert, kernels="reference"), so a model that
crashes it fails the test that made it rather than the test run.

    inputs = seeded_inputs(path, seed=7, samples=4)
    outputs = run_reference(path, inputs)     # one array per graph output: [samples, *shape]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlfbuild.reference import litert
from mlfbuild.reference.tflite import read_tflite

# Float inputs are drawn from N(0, FLOAT_STD): quantizers of scale 0.01-0.1 see values that use
# their range without mostly saturating.
FLOAT_STD = 1.0


def seeded_inputs(model: Path, seed: int, samples: int = 4) -> dict[str, np.ndarray]:
    """Graph input name → [samples, *shape] of random values: integers over their whole range,
    floats from N(0, FLOAT_STD); the same seed gives the same inputs."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for tensor in read_tflite(Path(model)).inputs:
        shape, dtype = (samples, *tensor.shape), np.dtype(tensor.dtype)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            inputs[tensor.name] = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        elif dtype.kind == "f":
            inputs[tensor.name] = rng.normal(0.0, FLOAT_STD, size=shape).astype(dtype)
        else:
            inputs[tensor.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return inputs


def run_reference(model: Path, inputs: dict[str, np.ndarray], timeout: float = 60.0) -> list[np.ndarray]:
    """Every graph output of `model` for every sample of `inputs`, by LiteRT's reference kernels."""
    return litert.run_model(Path(model), inputs, timeout=timeout, kernels="reference")


def run_seeded(model: Path, seed: int, samples: int = 4) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) of `model` on seeded_inputs(model, seed, samples)."""
    inputs = seeded_inputs(model, seed, samples)
    return inputs, run_reference(model, inputs)
