"""Layer kernels generated at import (`--kernels generated`): C specialised to one layer's shapes and
quantization, faster on a Cortex-M core with the DSP extension than the CMSIS-NN call it replaces.

Each generated layer keeps its operator function's operands (the CMSIS-NN call's: input, int8 filter
as TFLite lays it out, multipliers, bias, shifts, output) and its CMSIS-NN call: the function body is

    #if MLF_GENERATED_KERNELS   (DSP without MVE: the ACLE intrinsics; a host: their plain-C twins)
      the generated kernel
    #else                       (the M55's MVE, the M0's and M3's generic C: CMSIS-NN is faster or equal)
      the CMSIS-NN call
    #endif

so the MLF stays board-independent, and the host runs the generated kernel's exact arithmetic
(the same layout, the same sums) where QEMU runs the intrinsics. Each output value is TFLite's
reference value: int32 sums of (input + input offset) × filter plus the bias (modulo 2^32, as TFLite's
int32 sums), requantised as the build already requantises — convolutions by mlf_requantize (TFLite's
two roundings; CMSIS-NN's convolutions round the same way, so both `--rounding` choices give the same
convolution), fully connected layers by mlf_requantize_once with `--rounding tflite` (TFLite's one
rounding, as the build compiles CMSIS-NN's for such an MLF) and mlf_requantize with `cmsis-nn` —
the output offset added, clamped.

Row bands and patches (`--memory min`) keep their CMSIS-NN calls: only the whole-layer body is
generated, and a layer the memory plan computes row by row runs its band functions as before.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import mve_kernels
from . import quantization as q
from .lowering.base import (
    C_HELPERS,
    REQUANTIZE_FUNCTION,
    REQUANTIZE_ONCE_FUNCTION,
    Lowered,
    fused_activation_range,
    tensor_at,
)
from .tflite import Graph
from .window import batch_one_layer, Window, layer_window

GENERATED_KERNELS, CMSIS_NN_KERNELS = "generated", "cmsis-nn"
KERNEL_CHOICES = (GENERATED_KERNELS, CMSIS_NN_KERNELS)

# The intrinsics the generated kernels use: ACLE's on a core with DSP and no MVE (named by macros, so
# each function is defined once), the same arithmetic in plain C on a host (no __arm__), and neither
# elsewhere (MLF_GENERATED_KERNELS 0: CMSIS-NN's calls).
# Words are read with memcpy (an unaligned LDR on the M4; the pool analysis follows it).
DSP_FUNCTION = "mlf_dsp_read4"
DSP_C = """#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_FEATURE_MVE)
#include <arm_acle.h>
#define MLF_GENERATED_KERNELS 1
#define mlf_dsp_sxtb16 __sxtb16
#define mlf_dsp_smlad __smlad
#define mlf_dsp_sxtab16 __sxtab16
#define mlf_dsp_smlabb __smlabb
#define mlf_dsp_smlatt __smlatt
#elif !defined(__arm__)
#define MLF_GENERATED_KERNELS 1
static inline int32_t mlf_dsp_sxtb16(int32_t x) {
  return (int32_t)(((uint32_t)(uint16_t)(int16_t)(int8_t)x) | ((uint32_t)(uint16_t)(int16_t)(int8_t)(x >> 16) << 16));
}
static inline int32_t mlf_dsp_smlad(int32_t x, int32_t y, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)((int32_t)(int16_t)x * (int16_t)y) +
                   (uint32_t)((int32_t)(int16_t)(x >> 16) * (int16_t)(y >> 16)));
}
static inline int32_t mlf_dsp_sxtab16(int32_t pair, int32_t x) {
  const uint32_t low = (uint32_t)(uint16_t)((int16_t)pair + (int8_t)x);
  const uint32_t high = (uint32_t)(uint16_t)((int16_t)(pair >> 16) + (int8_t)(x >> 16));
  return (int32_t)(low | (high << 16));
}
static inline int32_t mlf_dsp_smlabb(int32_t x, int32_t y, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)((int32_t)(int16_t)x * (int16_t)y));
}
static inline int32_t mlf_dsp_smlatt(int32_t x, int32_t y, int32_t acc) {
  return (int32_t)((uint32_t)acc + (uint32_t)((int32_t)(int16_t)(x >> 16) * (int16_t)(y >> 16)));
}
#else
#define MLF_GENERATED_KERNELS 0
#endif
#if MLF_GENERATED_KERNELS
static inline int32_t mlf_dsp_ror8(int32_t x) { return (int32_t)(((uint32_t)x >> 8) | ((uint32_t)x << 24)); }
static inline int32_t mlf_dsp_read4(const int8_t* p) { int32_t word; memcpy(&word, p, 4); return word; }
/* mlf_requantize for a shift of -1 or less (right = -shift, half = 2^(right - 1)), for sums below 2^30
   in magnitude. TFLite's rounding doubling high multiply nudges a negative product toward zero,
   which equals adding 2^30 and shifting: floor((p + 2^30) / 2^31) is trunc((p + 1 - 2^30) / 2^31)
   for p < 0. Its rounding divide by 2^right (ties away from zero) is (high + half - (high < 0)) >> right:
   a remainder above the threshold (half - 1, or half for a negative high) carries into the quotient.
   Inlined: gcc -Os calls mlf_requantize, 34 instructions an output with the call (kws, Cortex-M4F). */
static inline __attribute__((always_inline)) int32_t mlf_dsp_requantize(int32_t value, int32_t multiplier,
                                                                        int32_t right, int32_t half) {
  const int32_t high = (int32_t)(((int64_t)value * multiplier + (1ll << 30)) >> 31);
  return (high + half + (high >> 31)) >> right;
}
#if defined(__ARM_FEATURE_DSP)
/* ACLE's __ssat is a statement expression in gcc's arm_acle.h, which the pool analysis does not follow */
#define mlf_dsp_ssat8(x) __builtin_arm_ssat((x), 8)
#else
static inline int32_t mlf_dsp_ssat8(int32_t x) { return x < -128 ? -128 : (x > 127 ? 127 : x); }
#endif
#endif"""

# Registered once with the helpers the emitter writes where a body names them (before the functions).
C_HELPERS.setdefault(DSP_FUNCTION, DSP_C)


def specialise(graph: Graph, steps: list[Lowered], kernels: str, rounding: str = "tflite") -> list[Lowered]:
    """`steps` with the layers a generated kernel serves made generated (`kernels` "generated"), or as
    they are ("cmsis-nn"); `rounding` (emit.ROUNDINGS) chooses the fully connected requantisation."""
    if kernels == CMSIS_NN_KERNELS:
        return steps
    return [_generated(graph, step, rounding) or step for step in steps]


def generated_layers(steps: list[Lowered]) -> int:
    """The layers whose code is a generated kernel (not those the memory plan runs as CMSIS-NN row bands)."""
    return sum(1 for step in steps if not step.band_order and
               ("#if MLF_GENERATED_KERNELS" in step.body or "#if MLF_MVE_KERNELS" in step.body))


def _generated(graph: Graph, step: Lowered, rounding: str) -> Lowered | None:
    if step.alias_of is not None or step.function not in _GENERATORS:
        return None
    kernel = _GENERATORS[step.function](graph, step, rounding)
    mve = mve_kernels.generated(graph, step, rounding)
    if kernel is None and mve is None:
        return None
    body = step.body if kernel is None else ["#if MLF_GENERATED_KERNELS", *kernel, "#else", *step.body, "#endif"]
    return replace(step, body=body if mve is None else ["#if MLF_MVE_KERNELS", *mve, "#else", *body, "#endif"])


def _convolution(graph: Graph, step: Lowered, rounding: str) -> list[str] | None:
    """A 1x1 convolution of stride 1 (the pointwise kernel), or any other of batch 1 (the windowed
    kernel: input channels short of a multiple of 4 by at most a quarter, a tap's last 1-3 read byte by
    byte), output channels multiples of 4; a layer of other input channels short of a multiple of 4
    (the first layer over an image or a spectrogram: the patch kernel, faster there); None for any
    other. Convolutions round twice whatever `rounding` (TFLite's and CMSIS-NN's convolutions agree)."""
    return _pointwise(graph, step) or _patch(graph, step) or _windowed(graph, step)


def _patch(graph: Graph, step: Lowered, rounding: str = "tflite") -> list[str] | None:
    """A convolution of batch 1 whose input channels are too few for the channel-wise kernels (1 to 3:
    the first layer over an image or a spectrogram), or a depthwise one of one input channel (the
    same arithmetic: each output channel a filter over the one channel); output channels a multiple
    of 4 and a window of at most MAX_PATCH values."""
    op = step.operator
    layer = batch_one_layer(graph, op)
    if layer is None:
        return None
    x, w, y = layer
    _, in_h, in_w, in_c = x.shape
    _, out_h, out_w, out_c = y.shape
    _, k_h, k_w, _ = w.shape
    filters = step.constant("filter_")
    if op.name == "DEPTHWISE_CONV_2D":
        if in_c != 1 or filters.shape[-1] != out_c:
            return None
        filters = filters.reshape(k_h * k_w, out_c).T  # (output channel, tap)
    elif in_c % 4 == 0 or filters.shape[0] != out_c or filters.shape[3] != in_c:
        return None
    fan_in = k_h * k_w * in_c
    if out_c % 4 or fan_in > MAX_PATCH:
        return None
    bias = step.has_bias
    lo, hi = fused_activation_range(op, y)
    window = layer_window(op, x, w, y)
    return patch_body(window, filters.reshape(out_c, fan_in), -x.quantization.zero_point, y.quantization.zero_point,
                      lo, hi, bias, _requantisation(step, fan_in, bias))


# The largest window (taps x input channels) the patch kernel gathers, as halfword pairs on the stack,
# and the largest it gathers unrolled (one load, add and store a value) where the window is inside.
MAX_PATCH = 512
MAX_UNROLLED_PATCH = 128


def filter_pairs(filters: np.ndarray) -> np.ndarray:
    """(output channels, fan_in) int8 filters as the patch kernel reads them from flash: per group of
    four channels, per pair of window values, the four channels' pairs (low halfword the even value),
    as int32 words; an odd fan_in gets a zero value."""
    out_c, fan_in = filters.shape
    padded = np.zeros((out_c, fan_in + fan_in % 2), dtype=np.int64)
    padded[:, :fan_in] = filters
    low, high = padded[:, 0::2] & 0xFFFF, padded[:, 1::2] & 0xFFFF
    words = (low | (high << 16)).astype(np.uint32).view(np.int32)  # (out_c, pairs)
    return words.reshape(out_c // 4, 4, -1).transpose(0, 2, 1).copy()  # (group, pair, channel)


def patch_body(window: Window, filters: np.ndarray, in_offset: int, out_offset: int, lo: int, hi: int,
               bias: bool, right_shifts: bool) -> list[str]:
    """Per output pixel, its window gathered once as halfword pairs of (input + offset) on the stack,
    zero where a tap lies in the padding (TFLite skips those taps: they add nothing); then four output
    channels at a time, four accumulators, one SMLAD per pair and channel with the filters paired at
    import (a constant table in flash, compiled only with the kernel). CMSIS-NN's call instead builds
    the same window per pixel and sign-extends every filter word at every pixel."""
    (in_h, in_w, in_c), (out_h, out_w) = window.in_hwc, window.out_hw
    (k_h, k_w), (s_h, s_w), (d_h, d_w), (p_h, p_w) = window.kernel, window.stride, window.dilation, window.padding
    out_c, fan_in = filters.shape
    pairs = (fan_in + 1) // 2
    table = filter_pairs(filters)
    values = ", ".join(str(int(v)) for v in table.reshape(-1))
    lines = [f"  static const int32_t filter_pairs[{table.size}] = {{{values}}};",
             f"  int16_t patch[{2 * pairs}];",
             f"  patch[{2 * pairs - 1}] = 0;",
             f"  for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
             f"    for (int32_t ox = 0; ox < {out_w}; ++ox) {{"]
    gather = [f"      for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
              f"        const int32_t iy = oy * {s_h} - {p_h} + ky * {d_h};",
              f"        for (int32_t kx = 0; kx < {k_w}; ++kx) {{",
              f"          const int32_t ix = ox * {s_w} - {p_w} + kx * {d_w};",
              # a tap in the padding is zeros; the test is a branch of its own, as the pool analysis
              # bounds the read after it (a flag tested in a conditional expression it could not follow)
              f"          if (iy < 0 || iy >= {in_h} || ix < 0 || ix >= {in_w}) {{",
              f"            for (int32_t c = 0; c < {in_c}; ++c) {{",
              f"              patch[(ky * {k_w} + kx) * {in_c} + c] = 0;",
              "            }",
              "            continue;",
              "          }",
              f"          for (int32_t c = 0; c < {in_c}; ++c) {{",
              f"            patch[(ky * {k_w} + kx) * {in_c} + c] = "
              f"(int16_t)(input_[(iy * {in_w} + ix) * {in_c} + c] + ({in_offset}));",
              "          }", "        }", "      }"]
    if fan_in <= MAX_UNROLLED_PATCH and window.inside_pixels():
        (row_lo, row_hi), (col_lo, col_hi) = window.inside(0), window.inside(1)
        offsets = [(ky * d_h * in_w + kx * d_w) * in_c + c for ky in range(k_h) for kx in range(k_w) for c in range(in_c)]
        lines += [f"      if (oy >= {row_lo} && oy <= {row_hi} && ox >= {col_lo} && ox <= {col_hi}) {{",
                  f"        const int8_t* in = input_ + ((oy * {s_h} - {p_h}) * {in_w} + ox * {s_w} - {p_w}) * {in_c};"]
        lines += [f"        patch[{t}] = (int16_t)(in[{offset}] + ({in_offset}));" for t, offset in enumerate(offsets)]
        lines += ["      } else {", *[f"  {line}" for line in gather], "      }"]
    else:
        lines += gather
    lines += [
              f"      for (int32_t group = 0; group < {out_c // 4}; ++group) {{",
              "        const int32_t oc = group * 4;",
              f"        const int32_t* f = filter_pairs + group * {4 * pairs};"]
    lines += [f"        int32_t acc{j} = {f'bias_[oc + {j}]' if bias else '0'};" for j in range(4)]
    # unrolled at constant offsets where it fits (no counter: the four sums stay in registers)
    unrolled = pairs <= CHUNK_CHANNELS
    if not unrolled:
        lines += [f"        for (int32_t k = 0; k < {pairs}; ++k) {{"]
    for k in ([0] if not unrolled else range(pairs)):
        at = "k" if not unrolled else str(k)
        lines += [f"          {{ const int32_t x = mlf_dsp_read4((const int8_t*)(patch + 2 * {at}));"]
        lines += [f"            acc{j} = mlf_dsp_smlad(x, f[{at} * 4 + {j}], acc{j});" for j in range(4)]
        lines += ["          }"]
    if not unrolled:
        lines += ["        }"]
    if right_shifts:
        lines += [f"        const int32_t right{j} = -shift_[oc + {j}], half{j} = 1 << (right{j} - 1);" for j in range(4)]
    for j in range(4):
        lines += [f"        {line}" for line in _requantised_store(j, out_offset, lo, hi, right_shifts, f"oc + {j}",
                                                                    f"(oy * {out_w} + ox) * {out_c} + oc + {j}")]
    return lines + ["      }", "    }", "  }", "  return 0;"]


def _windowed(graph: Graph, step: Lowered) -> list[str] | None:
    op = step.operator
    layer = batch_one_layer(graph, op)
    if layer is None:
        return None
    x, w, y = layer
    _, in_h, in_w, in_c = x.shape
    _, out_h, out_w, out_c = y.shape
    _, k_h, k_w, f_c = w.shape
    padded = -(-in_c // 4) * 4
    if (in_c % 4 and in_c > CHUNK_CHANNELS) or out_c % 4 or f_c != in_c or w.shape[0] != out_c \
            or 8 * k_h * k_w * padded > MAX_PAIR_BYTES:
        return None
    # Channels short of a multiple of 4 are multiplied by zero weights. Measured (Cortex-M4F, -Os): vww's
    # first layer (3 channels, 3/4 of the products useful) took 0.64x CMSIS-NN's instructions, kws's
    # (1 channel, 1/4) 2.08x: generated where at least 3/4 of the products are the layer's.
    if 4 * in_c < 3 * padded:
        return None
    bias = step.has_bias
    lo, hi = fused_activation_range(op, y)
    window = layer_window(op, x, w, y)
    return windowed_body(window, out_c, -x.quantization.zero_point, y.quantization.zero_point, lo, hi, bias,
                         _requantisation(step, k_h * k_w * in_c, bias))


def _pointwise(graph: Graph, step: Lowered) -> list[str] | None:
    op = step.operator
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if len(w.shape) != 4 or w.shape[1:3] != (1, 1) or len(x.shape) != 4 or len(y.shape) != 4:
        return None
    if op.options.get("stride_h") != 1 or op.options.get("stride_w") != 1 or x.shape[:3] != y.shape[:3]:
        return None
    out_c, in_c = w.shape[0], w.shape[3]
    if in_c % 4 or out_c % 4 or in_c != x.shape[3] or out_c != y.shape[3] or 8 * in_c > MAX_PAIR_BYTES:
        return None
    pixels = x.shape[0] * x.shape[1] * x.shape[2]
    bias = step.has_bias
    lo, hi = fused_activation_range(op, y)
    right_shifts = _requantisation(step, in_c, bias)
    return pointwise_body(pixels, in_c, out_c, -x.quantization.zero_point, y.quantization.zero_point, lo, hi, bias,
                          right_shifts)


def _requantisation(step: Lowered, fan_in: int, bias: bool) -> bool:
    """Whether the inlined mlf_dsp_requantize serves every channel: shifts of -1 or less, and every sum
    (fan_in products of at most 255 × 128, and the bias) below 2^30 in magnitude."""
    largest = fan_in * 255 * 128 + (int(np.abs(step.constant("bias_").astype(np.int64)).max()) if bias else 0)
    return all(int(v) <= -1 for v in step.constant("shift_")) and largest < 1 << 30


def _depthwise(graph: Graph, step: Lowered, rounding: str) -> list[str] | None:
    """A depthwise convolution of batch 1 and depth multiplier 1 over channels a multiple of 4 (two
    roundings whatever `rounding`, as for convolutions)."""
    op = step.operator
    layer = batch_one_layer(graph, op)
    if layer is None:
        return None
    x, w, y = layer
    _, in_h, in_w, channels = x.shape
    _, out_h, out_w, out_c = y.shape
    _, k_h, k_w, _ = w.shape
    if out_c != channels or channels % 4 or w.shape[3] != channels:
        return None
    bias = step.has_bias
    lo, hi = fused_activation_range(op, y)
    window = layer_window(op, x, w, y)
    if 3 * window.inside_pixels() < out_h * out_w:
        return None
    return depthwise_body(window, -x.quantization.zero_point, y.quantization.zero_point, lo, hi, bias,
                          _requantisation(step, k_h * k_w, bias))


def _depthwise_or_patch(graph: Graph, step: Lowered, rounding: str) -> list[str] | None:
    """Depthwise layers of multiplier 1 (the depthwise kernel) or of one input channel (the patch kernel)."""
    return _depthwise(graph, step, rounding) or _patch(graph, step)


def _offset_pair(offset: int) -> str:
    """The input offset in both halfwords, as SMLAD multiplies it with a pair of filter values."""
    half = offset & 0xFFFF
    return f"(int32_t)0x{(half << 16) | half:08x}u"


# The largest stack buffer of sign-extended filter pairs a generated layer takes (four output
# channels' worth); a layer with more input channels keeps its CMSIS-NN call.
MAX_PAIR_BYTES = 4608  # ic's 3x3 convolutions of 64 channels


# Input channels a pass of the pixel loop takes, unrolled (constant offsets from one pointer each for
# the input and the filter pairs: no loop counter, no pointer steps, the accumulators in registers).
CHUNK_CHANNELS = 64


def pointwise_body(pixels: int, in_c: int, out_c: int, in_offset: int, out_offset: int, lo: int, hi: int,
                   bias: bool, right_shifts: bool) -> list[str]:
    """Four output channels at a time: their filters sign-extended once into halfword pairs on the
    stack (SXTB16: bytes 0 and 2, then 1 and 3, of each word) and the input offset folded into their
    bias (bias + offset × the filter's sum, by SMLAD on the same pairs); then per pixel four
    accumulators, each input word made two pairs by SXTB16 and multiplied with each channel's two
    pairs by SMLAD. The sums equal TFLite's sum of (input + offset) × filter + bias modulo 2^32.
    `right_shifts`: every channel's shift is -1 or less and every sum below 2^30 in magnitude
    (requantised by the inlined mlf_dsp_requantize, its per-channel constants kept per group)."""
    words = in_c // 2  # filter pairs per output channel
    chunk = min(in_c, CHUNK_CHANNELS) if in_c % min(in_c, CHUNK_CHANNELS) == 0 else 4
    lines = [f"  int32_t pairs[{4 * words}];",
             f"  for (int32_t group = 0; group < {out_c // 4}; ++group) {{",
             "    const int32_t oc = group * 4;"]
    lines += [f"    int32_t base{j} = {f'bias_[oc + {j}]' if bias else '0'};" for j in range(4)]
    if right_shifts:
        lines += [f"    const int32_t right{j} = -shift_[oc + {j}], half{j} = 1 << (right{j} - 1);" for j in range(4)]
    lines += [f"    for (int32_t k = 0; k < {in_c // 4}; ++k) {{"]
    for j in range(4):
        lines += [f"      {{ const int32_t f = mlf_dsp_read4(filter_ + (oc + {j}) * {in_c} + k * 4);",
                  "        const int32_t even = mlf_dsp_sxtb16(f), odd = mlf_dsp_sxtb16(mlf_dsp_ror8(f));",
                  f"        pairs[k * 8 + {2 * j}] = even;",
                  f"        pairs[k * 8 + {2 * j + 1}] = odd;",
                  f"        base{j} = mlf_dsp_smlad({_offset_pair(in_offset)}, even, base{j});",
                  f"        base{j} = mlf_dsp_smlad({_offset_pair(in_offset)}, odd, base{j}); }}"]
    lines += ["    }",
              f"    for (int32_t p = 0; p < {pixels}; ++p) {{"]
    lines += [f"      int32_t acc{j} = base{j};" for j in range(4)]
    # counted loops (an index times the step): the pool analysis's intervals then bound every read
    lines += [f"      for (int32_t part = 0; part < {in_c // chunk}; ++part) {{",
              f"        const int8_t* in = input_ + p * {in_c} + part * {chunk};",
              f"        const int32_t* pair = pairs + part * {2 * chunk};"]
    for word in range(chunk // 4):
        lines += [f"        {{ const int32_t x = mlf_dsp_read4(in + {4 * word});",
                  "          const int32_t even = mlf_dsp_sxtb16(x), odd = mlf_dsp_sxtb16(mlf_dsp_ror8(x));"]
        for j in range(4):
            lines += [f"          acc{j} = mlf_dsp_smlad(even, pair[{8 * word + 2 * j}], acc{j});",
                      f"          acc{j} = mlf_dsp_smlad(odd, pair[{8 * word + 2 * j + 1}], acc{j});"]
        lines += ["        }"]
    lines += ["      }"]
    for j in range(4):
        requantized = (f"mlf_dsp_requantize(acc{j}, multiplier_[oc + {j}], right{j}, half{j})" if right_shifts else
                       f"{REQUANTIZE_FUNCTION}(acc{j}, multiplier_[oc + {j}], shift_[oc + {j}])")
        clamped = "mlf_dsp_ssat8(out)" if (lo, hi) == (-128, 127) else f"(out < {lo} ? {lo} : (out > {hi} ? {hi} : out))"
        lines += [f"      {{ const int32_t out = {requantized} + ({out_offset});",
                  f"        output_[p * {out_c} + oc + {j}] = (int8_t){clamped}; }}"]
    return lines + ["    }", "  }", "  return 0;"]


def _requantised_store(j: int, out_offset: int, lo: int, hi: int, right_shifts: bool, channel: str, at: str) -> list[str]:
    """Accumulator j requantised (TFLite's two roundings), offset, clamped and stored at output_[at]."""
    requantized = (f"mlf_dsp_requantize(acc{j}, multiplier_[{channel}], right{j}, half{j})" if right_shifts else
                   f"{REQUANTIZE_FUNCTION}(acc{j}, multiplier_[{channel}], shift_[{channel}])")
    clamped = "mlf_dsp_ssat8(out)" if (lo, hi) == (-128, 127) else f"(out < {lo} ? {lo} : (out > {hi} ? {hi} : out))"
    return [f"{{ const int32_t out = {requantized} + ({out_offset});", f"  output_[{at}] = (int8_t){clamped}; }}"]


def depthwise_body(window: Window, in_offset: int, out_offset: int, lo: int, hi: int, bias: bool,
                   right_shifts: bool) -> list[str]:
    """Four channels at a time: their filter taps sign-extended once into halfword pairs on the stack
    (bytes 0 and 2, then 1 and 3, as SXTB16 takes them); then per output pixel four accumulators, each
    tap's input word made two pairs of (input + offset) by SXTAB16 and multiplied by SMLABB/SMLATT (one
    channel per halfword). Pixels whose window lies inside the input take the taps unrolled at
    constant offsets; the others skip the taps in the padding, as TFLite's reference kernel does."""
    (in_h, in_w, channels), (out_h, out_w) = window.in_hwc, window.out_hw
    (k_h, k_w), (s_h, s_w), (d_h, d_w), (p_h, p_w) = window.kernel, window.stride, window.dilation, window.padding
    (row_lo, row_hi), (col_lo, col_hi) = window.inside(0), window.inside(1)
    pair = _offset_pair(in_offset)

    def tap(source: str, index: str, indent: str) -> list[str]:
        return [f"{indent}{{ const int32_t x = mlf_dsp_read4({source});",
                f"{indent}  const int32_t even = mlf_dsp_sxtab16({pair}, x), odd = mlf_dsp_sxtab16({pair}, mlf_dsp_ror8(x));",
                f"{indent}  const int32_t we = taps[{index} * 2], wo = taps[{index} * 2 + 1];",
                f"{indent}  acc0 = mlf_dsp_smlabb(even, we, acc0); acc2 = mlf_dsp_smlatt(even, we, acc2);",
                f"{indent}  acc1 = mlf_dsp_smlabb(odd, wo, acc1); acc3 = mlf_dsp_smlatt(odd, wo, acc3); }}"]

    lines = [f"  int32_t taps[{2 * k_h * k_w}];",
             f"  for (int32_t block = 0; block < {channels // 4}; ++block) {{",
             "    const int32_t c = block * 4;",
             f"    for (int32_t t = 0; t < {k_h * k_w}; ++t) {{",
             f"      const int32_t f = mlf_dsp_read4(filter_ + t * {channels} + c);",
             "      taps[t * 2] = mlf_dsp_sxtb16(f);",
             "      taps[t * 2 + 1] = mlf_dsp_sxtb16(mlf_dsp_ror8(f));",
             "    }"]
    if right_shifts:
        lines += [f"    const int32_t right{j} = -shift_[c + {j}], half{j} = 1 << (right{j} - 1);" for j in range(4)]
    lines += [f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
              f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{"]
    lines += [f"        int32_t acc{j} = {f'bias_[c + {j}]' if bias else '0'};" for j in range(4)]
    lines += [f"        if (oy >= {row_lo} && oy <= {row_hi} && ox >= {col_lo} && ox <= {col_hi}) {{",
              f"          const int8_t* in = input_ + ((oy * {s_h} - {p_h}) * {in_w} + ox * {s_w} - {p_w}) * {channels} + c;"]
    for ky in range(k_h):
        for kx in range(k_w):
            lines += tap(f"in + {(ky * d_h * in_w + kx * d_w) * channels}", str(ky * k_w + kx), "          ")
    lines += ["        } else {",
              f"          for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
              f"            const int32_t iy = oy * {s_h} - {p_h} + ky * {d_h};",
              f"            if (iy < 0 || iy >= {in_h}) continue;",
              f"            for (int32_t kx = 0; kx < {k_w}; ++kx) {{",
              f"              const int32_t ix = ox * {s_w} - {p_w} + kx * {d_w};",
              f"              if (ix < 0 || ix >= {in_w}) continue;"]
    lines += tap(f"input_ + (iy * {in_w} + ix) * {channels} + c", f"(ky * {k_w} + kx)", "              ")
    lines += ["            }", "          }", "        }"]
    for j in range(4):
        lines += [f"        {line}" for line in _requantised_store(j, out_offset, lo, hi, right_shifts, f"c + {j}",
                                                                    f"(oy * {out_w} + ox) * {channels} + c + {j}")]
    return lines + ["      }", "    }", "  }", "  return 0;"]



def windowed_body(window: Window, out_c: int, in_offset: int, out_offset: int, lo: int, hi: int,
                  bias: bool, right_shifts: bool) -> list[str]:
    """The pointwise kernel over a window: four output channels at a time, their filters (every tap)
    sign-extended once into halfword pairs on the stack; per output pixel, per tap inside the input
    (TFLite skips the taps in the padding), the tap's input channels as the pointwise kernel takes
    them, made pairs of (input + offset) by SXTAB16 (no fold into the bias: padding taps count nothing)."""
    (in_h, in_w, in_c), (out_h, out_w) = window.in_hwc, window.out_hw
    (k_h, k_w), (s_h, s_w), (d_h, d_w), (p_h, p_w) = window.kernel, window.stride, window.dilation, window.padding
    fan_in, taps, tail = k_h * k_w * in_c, k_h * k_w, in_c % 4
    padded = in_c + (4 - tail) % 4  # a tap's channels in the pairs: a last word of fewer is zero-extended
    if tail:
        chunk = padded
    else:
        chunk = min(in_c, CHUNK_CHANNELS) if in_c % min(in_c, CHUNK_CHANNELS) == 0 else 4
    pair = _offset_pair(in_offset)
    lines = [f"  int32_t pairs[{2 * taps * padded}];",
             f"  for (int32_t group = 0; group < {out_c // 4}; ++group) {{",
             "    const int32_t oc = group * 4;"]
    if not tail:
        lines += [f"    for (int32_t k = 0; k < {fan_in // 4}; ++k) {{"]
        for j in range(4):
            lines += [f"      {{ const int32_t f = mlf_dsp_read4(filter_ + (oc + {j}) * {fan_in} + k * 4);",
                      f"        pairs[k * 8 + {2 * j}] = mlf_dsp_sxtb16(f);",
                      f"        pairs[k * 8 + {2 * j + 1}] = mlf_dsp_sxtb16(mlf_dsp_ror8(f)); }}"]
    else:
        lines += [f"    for (int32_t t = 0; t < {taps}; ++t) {{"]
        for word in range(padded // 4):
            count = 4 if 4 * word + 4 <= in_c else tail
            for j in range(4):
                source = _word(f"filter_ + (oc + {j}) * {fan_in} + t * {in_c} + {4 * word}", count)
                at = f"(t * {padded // 4} + {word}) * 8"
                lines += [f"      {{ const int32_t f = {source};",
                          f"        pairs[{at} + {2 * j}] = mlf_dsp_sxtb16(f);",
                          f"        pairs[{at} + {2 * j + 1}] = mlf_dsp_sxtb16(mlf_dsp_ror8(f)); }}"]
    lines += ["    }"]
    if right_shifts:
        lines += [f"    const int32_t right{j} = -shift_[oc + {j}], half{j} = 1 << (right{j} - 1);" for j in range(4)]
    lines += [f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
              f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{"]
    lines += [f"        int32_t acc{j} = {f'bias_[oc + {j}]' if bias else '0'};" for j in range(4)]
    lines += [f"        for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
              f"          const int32_t iy = oy * {s_h} - {p_h} + ky * {d_h};",
              f"          if (iy < 0 || iy >= {in_h}) continue;",
              f"          for (int32_t kx = 0; kx < {k_w}; ++kx) {{",
              f"            const int32_t ix = ox * {s_w} - {p_w} + kx * {d_w};",
              f"            if (ix < 0 || ix >= {in_w}) continue;",
              f"            for (int32_t part = 0; part < {padded // chunk}; ++part) {{",
              f"              const int8_t* in = input_ + (iy * {in_w} + ix) * {in_c} + part * {chunk};",
              f"              const int32_t* pair = pairs + ((ky * {k_w} + kx) * {padded} + part * {chunk}) * 2;"]
    for word in range(chunk // 4):
        count = 4 if not tail or 4 * word + 4 <= in_c else tail
        lines += [f"              {{ const int32_t x = {_word(f'in + {4 * word}', count)};",
                  (f"                const int32_t even = mlf_dsp_sxtab16({pair}, x), "
                   f"odd = mlf_dsp_sxtab16({pair}, mlf_dsp_ror8(x));")]
        for j in range(4):
            lines += [f"                acc{j} = mlf_dsp_smlad(even, pair[{8 * word + 2 * j}], acc{j});",
                      f"                acc{j} = mlf_dsp_smlad(odd, pair[{8 * word + 2 * j + 1}], acc{j});"]
        lines += ["              }"]
    lines += ["            }", "          }", "        }"]
    for j in range(4):
        lines += [f"        {line}" for line in _requantised_store(j, out_offset, lo, hi, right_shifts, f"oc + {j}",
                                                                    f"(oy * {out_w} + ox) * {out_c} + oc + {j}")]
    return lines + ["      }", "    }", "  }", "  return 0;"]


def _word(pointer: str, count: int) -> str:
    """The word at `pointer`: four bytes (one load), or the first `count` (1 to 3) with zeros above, so
    that nothing past the tensor's last byte is read."""
    if count == 4:
        return f"mlf_dsp_read4({pointer})"
    parts = [f"((uint32_t)(uint8_t)({pointer})[{i}] << {8 * i})" for i in range(count)]
    return f"(int32_t)({' | '.join(parts)})"


def _fully_connected(graph: Graph, step: Lowered, rounding: str) -> list[str] | None:
    """A fully connected layer of per-tensor weights whose units and depth are multiples of 4."""
    op = step.operator
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    weights = step.constant("filter_")
    units, depth = weights.shape
    if units % 4 or depth % 4 or 3 * depth + CHUNK_CHANNELS > 4095:  # the rows at immediate offsets
        return None
    batches = int(np.prod(x.shape)) // depth
    multiplier, shift = q.fully_connected_multiplier(x.quantization.scale, w.quantization.scale, y.quantization.scale)
    requantize = REQUANTIZE_ONCE_FUNCTION if rounding == "tflite" else REQUANTIZE_FUNCTION
    lo, hi = fused_activation_range(op, y)
    bias = step.has_bias
    return fully_connected_body(batches, depth, units, -x.quantization.zero_point, y.quantization.zero_point, lo, hi,
                                bias, f"{requantize}(acc{{j}}, {multiplier}, {shift})")


def fully_connected_body(batches: int, depth: int, units: int, in_offset: int, out_offset: int, lo: int, hi: int,
                         bias: bool, requantized: str) -> list[str]:
    """Four units at a time, four accumulators: each input word made two pairs of (input + offset) by
    SXTAB16, each unit's weight word two pairs by SXTB16 (read once: nothing to gain by keeping
    them), two SMLADs; the rows at constant offsets from one pointer, unrolled over up to 64 of the
    depth. `requantized`: the rounding's requantisation of acc{j} (TFLite's one rounding with
    `--rounding tflite`, as its reference fully connected kernel; CMSIS-NN's two otherwise)."""
    chunk = min(depth, CHUNK_CHANNELS) if depth % min(depth, CHUNK_CHANNELS) == 0 else 4
    pair = _offset_pair(in_offset)
    lines = [f"  for (int32_t b = 0; b < {batches}; ++b) {{",
             f"    for (int32_t group = 0; group < {units // 4}; ++group) {{",
             "      const int32_t unit = group * 4;"]
    lines += [f"      int32_t acc{j} = {f'bias_[unit + {j}]' if bias else '0'};" for j in range(4)]
    lines += [f"      for (int32_t part = 0; part < {depth // chunk}; ++part) {{",
              f"        const int8_t* in = input_ + b * {depth} + part * {chunk};",
              f"        const int8_t* row = filter_ + unit * {depth} + part * {chunk};"]
    for word in range(chunk // 4):
        lines += [f"        {{ const int32_t x = mlf_dsp_read4(in + {4 * word});",
                  f"          const int32_t even = mlf_dsp_sxtab16({pair}, x), odd = mlf_dsp_sxtab16({pair}, mlf_dsp_ror8(x));"]
        for j in range(4):
            lines += [f"          {{ const int32_t f = mlf_dsp_read4(row + {j * depth + 4 * word});",
                      f"            acc{j} = mlf_dsp_smlad(even, mlf_dsp_sxtb16(f), acc{j});",
                      f"            acc{j} = mlf_dsp_smlad(odd, mlf_dsp_sxtb16(mlf_dsp_ror8(f)), acc{j}); }}"]
        lines += ["        }"]
    lines += ["      }"]
    clamped = "mlf_dsp_ssat8(out)" if (lo, hi) == (-128, 127) else f"(out < {lo} ? {lo} : (out > {hi} ? {hi} : out))"
    for j in range(4):
        lines += [f"      {{ const int32_t out = {requantized.format(j=j)} + ({out_offset});",
                  f"        output_[b * {units} + unit + {j}] = (int8_t){clamped}; }}"]
    return lines + ["    }", "  }", "  return 0;"]


# Which layers are generated, from measured per-layer figures (Cortex-M4F, -Os, `run --profile`,
# against CMSIS-NN v7.0.0's calls): every 1x1 layer of kws and vww took 0.42-0.72x the instructions and
# 0.43-0.80x the estimated cycles, every 3x3 and strided 1x1 layer of ic 0.46-0.60x, every fully
# connected layer of ad 0.36-0.67x (0.30-0.55x the cycles), so those are generated wherever their
# shapes fit; depthwise layers lose where few pixels have their window inside the input (the rule in
# Window.inside_pixels).
_GENERATORS = {"arm_convolve_wrapper_s8": _convolution, "arm_depthwise_conv_wrapper_s8": _depthwise_or_patch,
               "arm_fully_connected_s8": _fully_connected}
