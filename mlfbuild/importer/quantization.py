"""TFLite's integer arithmetic parameters, computed as LiteRT computes them, so that the CMSIS-NN
calls given them reproduce LiteRT's reference kernels bit for bit.

Sources (TensorFlow Lite): kernels/internal/quantization_util.cc (QuantizeMultiplier,
PreprocessSoftmaxScaling, CalculateInputRadius), kernels/kernel_util.cc
(PopulateConvolutionQuantizationParams, GetQuantizedConvolutionMultipler,
CalculateActivationRangeQuantized), kernels/add.cc and kernels/mul.cc (the int8 prepare). Each
float is the file's float32; where TFLite multiplies two floats as `float` before widening, so does
this module (numpy float32), because the products round differently.
"""

from __future__ import annotations

import math

import numpy as np

INT8_MIN, INT8_MAX = -128, 127


def round_half_away(value: float) -> int:
    """std::round / TfLiteRound: halves away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(Q31 significand, shift) with real ≈ significand × 2^(shift − 31): QuantizeMultiplier."""
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    q_fixed = round_half_away(fraction * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(q_fixed), int(shift)


def convolution_multipliers(input_scale: float, filter_scales: tuple[float, ...], output_scale: float,
                            channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multipliers, shifts) of CONV_2D and DEPTHWISE_CONV_2D: the effective scale
    is input × filter / output in double (a per-tensor filter scale serves every channel)."""
    multipliers, shifts = [], []
    for channel in range(channels):
        filter_scale = filter_scales[channel if len(filter_scales) > 1 else 0]
        m, s = quantize_multiplier(float(input_scale) * float(filter_scale) / float(output_scale))
        multipliers.append(m)
        shifts.append(s)
    return np.array(multipliers, dtype=np.int32), np.array(shifts, dtype=np.int32)


def fully_connected_multiplier(input_scale: float, filter_scale: float, output_scale: float) -> tuple[int, int]:
    """FULLY_CONNECTED (per tensor): the input × filter product is taken in float, then widened."""
    product = float(np.float32(input_scale) * np.float32(filter_scale))
    return quantize_multiplier(product / float(output_scale))


def quantize_float(value: float, scale: float, zero_point: int) -> int:
    """zero_point + round(value / scale), the division in float as TFLite's Quantize lambda does."""
    return zero_point + round_half_away(float(np.float32(value) / np.float32(scale)))


def activation_range(activation: str, scale: float, zero_point: int,
                     qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for a fused activation on the output's quantization."""
    if activation == "NONE":
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, quantize_float(0.0, scale, zero_point)), qmax
    if activation == "RELU6":
        return max(qmin, quantize_float(0.0, scale, zero_point)), min(qmax, quantize_float(6.0, scale, zero_point))
    if activation == "RELU_N1_TO_1":
        return (max(qmin, quantize_float(-1.0, scale, zero_point)),
                min(qmax, quantize_float(1.0, scale, zero_point)))
    raise ValueError(activation)


SOFTMAX_DIFF_INTEGER_BITS = 5  # kScaledDiffIntegerBits of TFLite's int8 softmax


def softmax_parameters(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(input multiplier, input left shift, diff_min) of the int8 softmax: PreprocessSoftmaxScaling
    with 5 integer bits, then −CalculateInputRadius(5, shift)."""
    integer_bits = SOFTMAX_DIFF_INTEGER_BITS
    real = min(float(beta) * float(input_scale) * (1 << (31 - integer_bits)), float((1 << 31) - 1))
    multiplier, shift = quantize_multiplier(real)
    radius = math.floor(((1 << integer_bits) - 1) * (1 << (31 - integer_bits)) / (1 << shift))
    return multiplier, shift, -radius


ADD_LEFT_SHIFT = 20  # int8 ADD scales both inputs up by 2^20 before adding (TFLite's add.cc)


def add_parameters(scale1: float, scale2: float, output_scale: float) -> dict[str, int]:
    """Multipliers and shifts of int8 ADD: each input is rescaled to twice the larger input scale."""
    twice_max = float(np.float32(2) * np.float32(max(scale1, scale2)))
    out = float(np.float32(1 << ADD_LEFT_SHIFT) * np.float32(output_scale))
    m1, s1 = _smaller_than_one(float(scale1) / twice_max)
    m2, s2 = _smaller_than_one(float(scale2) / twice_max)
    mo, so = _smaller_than_one(twice_max / out)
    return {"input1_mult": m1, "input1_shift": s1, "input2_mult": m2, "input2_shift": s2,
            "out_mult": mo, "out_shift": so, "left_shift": ADD_LEFT_SHIFT}


def mul_multiplier(scale1: float, scale2: float, output_scale: float) -> tuple[int, int]:
    """int8 MUL: input1 × input2 / output, the product of the inputs in float as TFLite's mul.cc."""
    product = float(np.float32(scale1) * np.float32(scale2))
    return quantize_multiplier(product / float(output_scale))


def _smaller_than_one(real: float) -> tuple[int, int]:
    if not 0.0 < real < 1.0:
        raise ValueError(f"a rescale of {real} (TFLite requires 0 < multiplier < 1)")
    return quantize_multiplier(real)


def logistic_table(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> np.ndarray:
    """int8 LOGISTIC's table, indexed by the input's byte (uint8 of the int8 value), computed in float
    as TFLite's PopulateLookupTable does: dequantize, 1 / (1 + exp(-x)), × 1/scale, round, + zero
    point, clamp. exp is the correctly rounded float32 exp (the C library's expf is, to within the
    last bit; the tests hold the result to LiteRT's)."""
    f32 = np.float32
    inverse_scale = f32(1) / f32(output_scale)
    table = np.zeros(256, dtype=np.int8)
    for value in range(-128, 128):
        dequantized = f32(input_scale) * f32(value - input_zero_point)
        transformed = f32(1) / (f32(1) + f32(math.exp(-float(dequantized))))
        rescaled = f32(round_half_away(float(f32(transformed * inverse_scale))))
        quantized = int(f32(rescaled + f32(output_zero_point)))
        table[value & 0xFF] = max(-128, min(127, quantized))
    return table
