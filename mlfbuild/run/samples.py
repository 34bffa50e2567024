"""The inputs of a run: arrays with a leading sample axis, from a tensor file or seeded random values,
and float values quantized for a quantized input.

Random samples depend only on the seed, the input's name, dtype and shape and their count, so
`mlfbuild reference --samples N` and `mlfbuild run --samples N` with the same seed make the same ones.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..errors import InvalidInputError, UsageError

MAX_SAMPLE_BYTES = 256 << 20  # inputs of one model held at once for a run or a reference file


def check_sample_bytes(count: int, bytes_per_sample: int, model: str) -> None:
    """Refuse more samples than fit MAX_SAMPLE_BYTES (one line, exit 2), before any is made."""
    wanted = count * bytes_per_sample
    if wanted > MAX_SAMPLE_BYTES:
        raise UsageError(f"--samples {count}: {wanted:,} bytes of inputs for model {model}, more than "
                         f"{MAX_SAMPLE_BYTES >> 20} MiB; run fewer samples at a time")


def random_samples(name: str, dtype: str, shape, count: int, seed: int) -> np.ndarray:
    """`count` seeded random values of one input: [count, *shape], over the dtype's whole range for
    integers, standard normal for floats."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    full = (count, *shape)
    kind = np.dtype(dtype)
    if kind == np.bool_:
        return rng.integers(0, 2, size=full).astype(bool)
    if np.issubdtype(kind, np.integer):
        info = np.iinfo(kind)
        return rng.integers(info.min, info.max, size=full, dtype=kind, endpoint=True)
    return rng.standard_normal(full).astype(kind)


def sample_axis(value: np.ndarray, shape, source: str, name: str) -> np.ndarray:
    """`value` as [samples, *shape]: one sample of the input's size (any shape), or arrays whose
    leading axis counts samples ([N, *shape], or [N, *shape[1:]] for a model with a batch axis of 1)."""
    shape = tuple(shape)
    per = int(np.prod(shape, dtype=np.int64))
    if value.size == per:
        return value.reshape((1, *shape))
    if value.ndim >= 1 and value.shape[0] > 0 and (value.shape[1:] == shape or
                                                   (shape[:1] == (1,) and value.shape[1:] == shape[1:])):
        return value.reshape((value.shape[0], *shape))
    raise InvalidInputError(f"{source}: input '{name}' has shape {list(value.shape)}, the model expects "
                            f"{list(shape)} (or a leading sample axis: [N, {', '.join(str(d) for d in shape)}])")


def quantize(values: np.ndarray, dtype: str, scale: float, zero_point: int) -> np.ndarray:
    """Float values in the integer dtype of a quantized tensor: round(x / scale) + zero point, clipped
    to the dtype's range (TFLite's affine quantization)."""
    info = np.iinfo(np.dtype(dtype))
    quantized = np.round(values.astype(np.float64) / scale) + zero_point
    return np.clip(quantized, info.min, info.max).astype(dtype)


def dequantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """(q - zero point) * scale, in float32."""
    return ((values.astype(np.float64) - zero_point) * scale).astype(np.float32)


def as_input_dtype(value: np.ndarray, dtype: str, quantization: tuple[float, int] | None, source: str,
                   name: str) -> np.ndarray:
    """`value` in the input's dtype: float values for an integer input are quantized with the model's
    parameters, and refused where no model gives them."""
    wanted = np.dtype(dtype)
    floating = np.issubdtype(value.dtype, np.floating)
    if floating and not np.all(np.isfinite(value)):
        raise InvalidInputError(f"{source}: input '{name}' holds NaN or infinite values")
    if np.issubdtype(value.dtype, np.integer) and np.issubdtype(wanted, np.integer) and value.size:
        info = np.iinfo(wanted)
        if value.min() < info.min or value.max() > info.max:
            raise InvalidInputError(f"{source}: input '{name}' holds values from {value.min()} to {value.max()}, "
                                    f"outside {dtype}'s {info.min}..{info.max}")
    if floating and np.issubdtype(wanted, np.integer):
        if quantization is None:
            raise InvalidInputError(f"{source}: input '{name}' holds {value.dtype} values, the model takes "
                                    f"{dtype}: give the model (--reference MODEL.tflite) to quantize them, "
                                    f"or {dtype} values")
        return quantize(value, dtype, *quantization)
    return value.astype(wanted, copy=False)
