"""Layer kernels generated at import for a core with MVE (Helium): ACLE's <arm_mve.h> intrinsics under
`#if MLF_MVE_KERNELS`, ahead of the layer's other bodies (kernels.py's DSP kernel, the CMSIS-NN call).

The depthwise kernel: CMSIS-NN v7's MVE depthwise convolution (arm_depthwise_conv_s8_opt) copies
every output pixel's window into an im2col buffer and adds the input offset to every value at every
pixel, four channels a vector; kws's 3x3 layers took 306k instructions for 72k MACs. Here, eight
channels a vector: the input offset folded at import into a bias table in flash (bias + offset ×
the sum of the channel's taps), taps in the padding read as the input's zero point (they add
nothing, as TFLite skips them), each tap two widening loads and two widening multiplies
(VMULLB/VMULLT, even and odd channels) added to two accumulators; requantised as CMSIS-NN's MVE
code does (VQRDMULH, then the rounding divide with its fix-up: TFLite's two roundings).

The convolution kernel: CMSIS-NN v7's MVE convolution copies every output pixel's window into an
im2col buffer before its matrix multiply; ic's 3x3 layers over 16 channels took 1,027,774 instructions
each. Here two output channels of two pixels at a time (four VMLADAVA sums, MLF_MVE_WINDOW_2X2), the
windows read in place where they lie inside the input, copied to the stack once per pixel pair
elsewhere (and always for a first layer of few channels); the input offset folded into a bias table,
the four sums requantised as one vector.
"""

from __future__ import annotations

import numpy as np

from .lowering.base import C_HELPERS, fused_activation_range
from .tflite import Graph
from .window import batch_one_layer, layer_window

MVE_FUNCTION = "mlf_mve_requantize"
MVE_C = r"""#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define MLF_MVE_KERNELS 1
#if defined(MLF_POOL_ANALYSIS)
/* What the pool analysis reads instead of <arm_mve.h> (which pycparser cannot parse): each load and
   store touches the first and the last byte of the span the instruction reads or writes, a vector is
   one int32_t, the arithmetic stands in by an addition (no value reaches an address). */
typedef int32_t int8x16_t;
typedef int32_t int16x8_t;
typedef int32_t int32x4_t;
typedef int32_t mve_pred16_t;
static inline int32_t vldrbq_s16(const int8_t* p) { return p[0] + p[7]; }
static inline int32_t vldrwq_s32(const int32_t* p) { return p[0] + p[3]; }
static inline void vstrbq_s16(int8_t* p, int32_t v) { p[0] = (int8_t)v; p[7] = (int8_t)v; }
static inline int32_t vldrbq_s8(const int8_t* p) { return p[0] + p[15]; }
static inline void vstrbq_s8(int8_t* p, int32_t v) { p[0] = (int8_t)v; p[15] = (int8_t)v; }
static inline int32_t mlf_mve_load_bytes(const int8_t* p, int32_t n) { return p[0] + p[n - 1]; }
static inline void mlf_mve_store_bytes(int8_t* p, int32_t n, int32_t v) { p[0] = (int8_t)v; p[n - 1] = (int8_t)v; }
static inline void mlf_mve_store_pair(int8_t* p, int32_t step, int32_t v) { p[0] = (int8_t)v; p[step + 1] = (int8_t)v; }
static inline void mlf_mve_store_first(int8_t* p, int32_t v) { p[0] = (int8_t)v; p[1] = (int8_t)v; }
#define vdupq_n_s8(a) ((int32_t)(a))
#define vmladavaq_s8(a, x, y) ((a) + (x) + (y))
#define vsetq_lane_s32(a, v, lane) ((a) + (v))
#define MLF_MVE_WINDOW_2X2(s00, s01, s10, s11, x0, x1, w0, w1, rows, count, jump) { \
    const int32_t mlf_last = ((rows) - 1) * ((count) * 16 + (jump)) + (count) * 16 - 1; \
    s00 += (x0)[0] + (x0)[mlf_last] + (x1)[0] + (x1)[mlf_last] + (w0)[0] + (w1)[0]; \
    s01 += s00; s10 += s00; s11 += s00; }
#define vdupq_n_s16(a) ((int32_t)(a))
#define vdupq_n_s32(a) ((int32_t)(a))
#define vaddq_s32(a, b) ((a) + (b))
#define vaddq_n_s32(a, b) ((a) + (b))
#define vmullbq_int_s16(a, b) ((a) + (b))
#define vmulltq_int_s16(a, b) ((a) + (b))
#define vminq_s32(a, b) ((a) + (b))
#define vmaxq_s32(a, b) ((a) + (b))
#define vmovnbq_s32(a, b) ((a) + (b))
#define vmovntq_s32(a, b) ((a) + (b))
#define mlf_mve_requantize(a, b, c) ((a) + (b) + (c))
#define mlf_mve_requantize_right(a, b, c) ((a) + (b) + (c))
#define MLF_MVE_IN_ORDER(v) ((void)0)
#else
#include <arm_mve.h>
/* An accumulator as it stands after a tap: gcc otherwise computes every tap's products first and
   spills them to the stack (the M55 has eight Q registers) before adding them up. */
#define MLF_MVE_IN_ORDER(v) __asm__("" : "+w"(v))
/* TFLite's requantisation of four sums: the doubling high multiply (VQRDMULH equals TFLite's for
   every multiplier it makes) after any left shift, then the rounding divide by a power of two, ties
   away from zero (the fix-up subtracts one from a negative value before VRSHL's round half up). */
static inline __attribute__((always_inline)) int32x4_t mlf_mve_requantize(int32x4_t value, int32x4_t multiplier,
                                                                          int32x4_t shift) {
  const int32x4_t zero = vdupq_n_s32(0);
  const mve_pred16_t left = vcmpgtq_n_s32(shift, 0);
  const int32x4_t high = vqrdmulhq_s32(vshlq_s32(value, vpselq_s32(shift, zero, left)), multiplier);
  const int32x4_t right = vpselq_s32(zero, shift, left);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(high, right), 31);
  return vrshlq_s32(vqaddq_s32(high, fixup), right);
}
/* The same for shifts of 0 or less (every layer of kws, vww and ic): no left shift to select. */
static inline __attribute__((always_inline)) int32x4_t mlf_mve_requantize_right(int32x4_t value, int32x4_t multiplier,
                                                                                int32x4_t shift) {
  const int32x4_t high = vqrdmulhq_s32(value, multiplier);
  return vrshlq_s32(vqaddq_s32(high, vshrq_n_s32(vandq_s32(high, shift), 31)), shift);
}
/* Two pixels' windows times two channels' filters, four sums (s00: the first pixel's first channel,
   s01 its second, s10 and s11 the second pixel's): `rows` rows of `count` vectors from x0 and x1
   (`jump` bytes from a row's end to the next row's start), the filters contiguous from w0 and w1.
   Written out: gcc spills the sums and computes each load's address (ic's 64-channel rows: 16
   instructions per 64 products, here 9), since the sums must lie in even registers. A row's first
   input and filter vectors are loaded ahead of its loop, so that loads alternate with the
   multiply-accumulates (the M55 overlaps the two) and nothing past the row is read. */
#define MLF_MVE_WINDOW_2X2(s00, s01, s10, s11, x0, x1, w0, w1, rows, count, jump) { \
    const int8_t* mlf_x0 = (x0); const int8_t* mlf_x1 = (x1); \
    const int8_t* mlf_w0 = (w0); const int8_t* mlf_w1 = (w1); int32_t mlf_rows = (rows); \
    __asm__ volatile("2: vldrb.8 q0, [%[xa]], #16\n" \
                     "   vldrb.8 q1, [%[wa]], #16\n" \
                     "   wls lr, %[n], 3f\n" \
                     "1: vmladava.s8 %[sa], q0, q1\n" \
                     "   vldrb.8 q2, [%[wb]], #16\n" \
                     "   vmladava.s8 %[sb], q0, q2\n" \
                     "   vldrb.8 q3, [%[xb]], #16\n" \
                     "   vmladava.s8 %[sc], q3, q1\n" \
                     "   vldrb.8 q0, [%[xa]], #16\n" \
                     "   vmladava.s8 %[sd], q3, q2\n" \
                     "   vldrb.8 q1, [%[wa]], #16\n" \
                     "   le lr, 1b\n" \
                     "3: vmladava.s8 %[sa], q0, q1\n" \
                     "   vldrb.8 q2, [%[wb]], #16\n" \
                     "   vmladava.s8 %[sb], q0, q2\n" \
                     "   vldrb.8 q3, [%[xb]], #16\n" \
                     "   vmladava.s8 %[sc], q3, q1\n" \
                     "   vmladava.s8 %[sd], q3, q2\n" \
                     "   add %[xa], %[xa], %[skip]\n" \
                     "   add %[xb], %[xb], %[skip]\n" \
                     "   subs %[left], %[left], #1\n" \
                     "   bne 2b\n" \
                     : [sa] "+&Te"(s00), [sb] "+&Te"(s01), [sc] "+&Te"(s10), [sd] "+&Te"(s11), \
                       [xa] "+&r"(mlf_x0), [xb] "+&r"(mlf_x1), [wa] "+&r"(mlf_w0), [wb] "+&r"(mlf_w1), \
                       [left] "+&r"(mlf_rows) \
                     : [n] "r"((count) - 1), [skip] "r"(jump) \
                     : "q0", "q1", "q2", "q3", "lr", "memory", "cc"); }
/* After a predicated store: gcc 12 takes it for a store of the whole vector, so two later stores that
   together cover its 16 bytes made it drop the first as dead (a first layer's window rows one byte
   apart); the barrier keeps every store. */
#define MLF_MVE_KEEP_STORES() __asm__ volatile("" ::: "memory")
/* The first n (1 to 16) bytes at p, the others zero; and stored (the fewer channels of a first layer). */
static inline __attribute__((always_inline)) int8x16_t mlf_mve_load_bytes(const int8_t* p, int32_t n) {
  return vldrbq_z_s8(p, vctp8q(n));
}
static inline __attribute__((always_inline)) void mlf_mve_store_bytes(int8_t* p, int32_t n, int8x16_t v) {
  vstrbq_p_s8(p, v, vctp8q(n));
  MLF_MVE_KEEP_STORES();
}
/* Two output channels of two pixels (lanes 0-1 the first pixel's, 2-3 the second's, `step` bytes on)
   as bytes; and of the first pixel alone (a row's last pixel of an odd width). */
static inline __attribute__((always_inline)) void mlf_mve_store_pair(int8_t* p, int32_t step, int32x4_t v) {
  const uint32x4_t offsets = {0, 1, (uint32_t)step, (uint32_t)step + 1};
  vstrbq_scatter_offset_s32(p, offsets, v);
}
static inline __attribute__((always_inline)) void mlf_mve_store_first(int8_t* p, int32x4_t v) {
  vstrbq_p_s32(p, v, vctp32q(2));
  MLF_MVE_KEEP_STORES();
}
#endif
#else
#define MLF_MVE_KERNELS 0
#endif"""

# Registered under the macro every MVE body tests (the emitter writes a helper where a body names it).
MVE_MACRO = "MLF_MVE_KERNELS"
C_HELPERS.setdefault(MVE_MACRO, MVE_C)

LANES = 8  # channels a pass: one int16x8 of inputs, two int32x4 accumulators (even and odd channels)


# Which layers are generated, from measured per-layer figures (Cortex-M55, mps3-an547, -Os,
# `run --profile`, against CMSIS-NN v7.0.0's MVE calls): kws's 3x3 depthwise layers took 160,090
# instructions against 306,356 (0.52x; 0.53x the estimated cycles), vww's thirteen depthwise layers
# 0.26-0.61x the instructions and 0.25-0.63x the cycles, the 3x3-pixel one (one pixel of nine inside)
# included: every depthwise layer of multiplier 1 over channels a multiple of 8 is generated.
def generated(graph: Graph, step, rounding: str) -> list[str] | None:
    """The MVE body of a layer it serves, or None (`rounding` aside: depthwise layers round twice
    under either choice, as TFLite's and CMSIS-NN's do)."""
    if step.alias_of is not None:
        return None
    if step.function == "arm_depthwise_conv_wrapper_s8":
        return _depthwise(graph, step)
    if step.function == "arm_convolve_wrapper_s8":
        return _convolution(graph, step)
    return None


def _lane_order(values: np.ndarray) -> np.ndarray:
    """Per-channel values as the accumulators hold them: per eight channels, the even ones then the odd."""
    blocks = values.reshape(-1, LANES)
    return np.concatenate([blocks[:, 0::2], blocks[:, 1::2]], axis=1).reshape(-1)


def _table(name: str, values: np.ndarray, ctype: str = "int32_t") -> str:
    return f"  static const {ctype} {name}[{values.size}] = {{{', '.join(str(int(v)) for v in values)}}};"


def _depthwise(graph: Graph, step) -> list[str] | None:
    """A depthwise convolution of batch 1 and depth multiplier 1 over channels a multiple of 8."""
    op = step.operator
    layer = batch_one_layer(graph, op)
    if layer is None:
        return None
    x, w, y = layer
    _, in_h, in_w, channels = x.shape
    _, out_h, out_w, out_c = y.shape
    _, k_h, k_w, _ = w.shape
    if out_c != channels or channels % LANES or w.shape[3] != channels:
        return None
    filters = step.constant("filter_").reshape(k_h * k_w, channels).astype(np.int64)
    in_zero = int(x.quantization.zero_point)
    folded = _folded_bias(step, filters.T, in_zero)
    window = layer_window(op, x, w, y)
    stride, dilation, (pad_h, pad_w) = window.stride, window.dilation, window.padding
    lo, hi = fused_activation_range(op, y)
    out_zero = int(y.quantization.zero_point)
    (row_lo, row_hi), (col_lo, col_hi) = window.inside(0), window.inside(1)
    (s_h, s_w), (d_h, d_w) = stride, dilation

    def tap(load: str, t: str, indent: str) -> list[str]:
        return [f"{indent}{{ const int16x8_t x = {load};",
                f"{indent}  const int16x8_t f = vldrbq_s16(filter_ + {t} * {channels} + c);",
                f"{indent}  even = vaddq_s32(even, vmullbq_int_s16(x, f));",
                f"{indent}  odd = vaddq_s32(odd, vmulltq_int_s16(x, f));",
                f"{indent}  MLF_MVE_IN_ORDER(even); MLF_MVE_IN_ORDER(odd); }}"]

    lines = [_table("folded_bias", _lane_order(folded)),
             _table("multipliers", _lane_order(step.constant("multiplier_").astype(np.int64))),
             _table("shifts", _lane_order(step.constant("shift_").astype(np.int64))),
             f"  for (int32_t block = 0; block < {channels // LANES}; ++block) {{",
             f"    const int32_t c = block * {LANES};",
             f"    for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
             f"      for (int32_t ox = 0; ox < {out_w}; ++ox) {{",
             "        int32x4_t even = vldrwq_s32(folded_bias + c), odd = vldrwq_s32(folded_bias + c + 4);",
             f"        if (oy >= {row_lo} && oy <= {row_hi} && ox >= {col_lo} && ox <= {col_hi}) {{",
             f"          const int8_t* in = input_ + ((oy * {s_h} - {pad_h}) * {in_w} + ox * {s_w} - {pad_w}) * {channels} + c;"]
    for ky in range(k_h):
        for kx in range(k_w):
            lines += tap(f"vldrbq_s16(in + {(ky * d_h * in_w + kx * d_w) * channels})", str(ky * k_w + kx), "          ")
    # the other pixels unrolled too, each tap read where it lies inside the input (a loop over the taps
    # took 180 instructions a pixel more: kws's 3x3 layers have 56 of their 125 pixels on the border)
    lines += ["        } else {"]
    lines += [f"          const int32_t iy{ky} = oy * {s_h} - {pad_h} + {ky * d_h};" for ky in range(k_h)]
    lines += [f"          const int32_t ix{kx} = ox * {s_w} - {pad_w} + {kx * d_w};" for kx in range(k_w)]
    for ky in range(k_h):
        for kx in range(k_w):
            lines += [f"          {{ int16x8_t value = vdupq_n_s16({in_zero});",
                      f"            if (iy{ky} >= 0 && iy{ky} < {in_h} && ix{kx} >= 0 && ix{kx} < {in_w}) {{",
                      f"              value = vldrbq_s16(input_ + (iy{ky} * {in_w} + ix{kx}) * {channels} + c);",
                      "            }"]
            lines += tap("value", str(ky * k_w + kx), "            ")
            lines += ["          }"]
    lines += ["        }"]
    shifts = step.constant("shift_")
    requantize = f"{MVE_FUNCTION}_right" if int(shifts.max()) <= 0 else MVE_FUNCTION
    for half, name in ((0, "even"), (4, "odd")):
        lines += [f"        {name} = vaddq_n_s32({requantize}({name}, vldrwq_s32(multipliers + c + {half}), "
                  f"vldrwq_s32(shifts + c + {half})), {out_zero});",
                  f"        {name} = vminq_s32(vmaxq_s32({name}, vdupq_n_s32({lo})), vdupq_n_s32({hi}));"]
    lines += ["        vstrbq_s16(output_ + (oy * " + str(out_w) + " + ox) * " + str(channels) + " + c, "
              "vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), even), odd));",
              "      }", "    }", "  }", "  return 0;"]
    return lines


VECTOR = 16  # int8 values an MVE vector holds: a convolution's input channels come in whole vectors
# A window of at most this many vectors is read at constant offsets, unrolled (ic's 1x1 layers of
# stride 2 over 16 and 32 channels: 84,467 and 53,107 instructions; through MLF_MVE_WINDOW_2X2's loop,
# whose set-up a window of one or two vectors does not repay, 130,233 and 77,565).
UNROLLED_VECTORS = 4
# The largest window of a layer over fewer channels (not a multiple of 16: a first layer over an image
# or a spectrogram) copied to the stack for every pixel pair, a window row at most one vector.
MAX_FEW_CHANNEL_WINDOW = 256


def _folded_bias(step, filters: np.ndarray, in_zero: int) -> np.ndarray:
    """Per output channel, bias + input offset x the sum of its filter (`filters` one row a channel),
    modulo 2^32 as TFLite's int32 sums."""
    bias = (step.constant("bias_").astype(np.int64) if step.has_bias
            else np.zeros(filters.shape[0], dtype=np.int64))
    return (bias - in_zero * filters.sum(axis=1) + 2**31) % 2**32 - 2**31


def _pair_lanes(values: np.ndarray) -> np.ndarray:
    """Per-channel values as the convolution's vector holds a channel pair: c, c + 1 of two pixels."""
    pairs = values.reshape(-1, 2)
    return np.concatenate([pairs, pairs], axis=1).reshape(-1)


# Which convolutions are generated, from measured per-layer figures (Cortex-M55, mps3-an547, -Os, `run
# --profile`, against CMSIS-NN v7.0.0's MVE calls): ic's nine took 0.48-0.81x the instructions and
# 0.47-0.83x the estimated cycles (3x3 over 3, 16, 32 and 64 channels, 1x1 of stride 2), kws's first
# layer (1 channel, 10x4) about 0.80x and vww's (3 channels, 3x3, stride 2) about 0.36x: every layer
# whose taps are whole vectors, or whose window rows fit one, is generated.
def _convolution(graph: Graph, step) -> list[str] | None:
    """A convolution of batch 1 over input channels a multiple of 16, or fewer whose window row (no
    dilation across it) fits a vector, and output channels a multiple of 2; not 1x1 of stride 1
    (CMSIS-NN's 1x1 kernel reads the input in place, as this does)."""
    op = step.operator
    layer = batch_one_layer(graph, op)
    if layer is None:
        return None
    x, w, y = layer
    in_c, out_c = x.shape[3], y.shape[3]
    if out_c % 2 or w.shape[0] != out_c or w.shape[3] != in_c:
        return None
    window = layer_window(op, x, w, y)
    if window.kernel == (1, 1) and window.stride == (1, 1):
        return None
    (k_h, k_w), (_, d_w) = window.kernel, window.dilation
    if in_c % VECTOR and (d_w != 1 or k_w * in_c > VECTOR or k_h * k_w * in_c > MAX_FEW_CHANNEL_WINDOW):
        return None
    filters = step.constant("filter_").reshape(out_c, -1).astype(np.int64)
    in_zero = int(x.quantization.zero_point)
    shifts = step.constant("shift_")
    requantize = f"{MVE_FUNCTION}_right" if int(shifts.max()) <= 0 else MVE_FUNCTION
    lines = [_table("folded_bias", _folded_bias(step, filters, in_zero)),
             _table("multipliers", _pair_lanes(step.constant("multiplier_").astype(np.int64))),
             _table("shifts", _pair_lanes(shifts.astype(np.int64)))]
    if in_c % VECTOR:  # the filters padded to whole vectors with zeros, as the windows are
        padded = np.zeros((out_c, -(-filters.shape[1] // VECTOR) * VECTOR), dtype=np.int64)
        padded[:, :filters.shape[1]] = filters
        lines += [_table("padded_filters", padded.reshape(-1), "int8_t")]
    return lines + convolution_body(window, out_c, in_zero, int(y.quantization.zero_point),
                                    fused_activation_range(op, y), requantize)


def convolution_body(window, out_c: int, in_zero: int, out_zero: int, clamp: tuple[int, int],
                     requantize: str) -> list[str]:
    """Two output channels of two neighbouring pixels at a time, four sums (MLF_MVE_WINDOW_2X2): each
    input vector (16 channels of a tap) and each filter vector serve two VMLADAVAs (16 products summed
    into a scalar). The input offset is folded into the bias table, so the sums take the raw int8
    values. Where both pixels' windows lie inside the input they are read in place from the NHWC
    input (no im2col copy); elsewhere the pair's two windows are first copied to the stack, each tap
    in the padding as the zero point (it then adds nothing, as TFLite skips it), once for all the
    output channels. The four sums are requantised as one vector (multipliers and shifts laid out per
    channel pair at import)."""
    (_, in_w, in_c), (out_h, out_w) = window.in_hwc, window.out_hw
    (k_h, k_w), (s_h, s_w), (p_h, p_w) = window.kernel, window.stride, window.padding
    (row_lo, row_hi), (col_lo, col_hi) = window.inside(0), window.inside(1)
    fan_in = k_h * k_w * in_c
    few = in_c % VECTOR != 0  # fewer channels: every window copied, filters and windows padded to vectors
    padded = -(-fan_in // VECTOR) * VECTOR
    filters = "padded_filters" if few else "filter_"
    lo, hi = clamp
    # the output's address written out at each store: the pool analysis then bounds it with the pixel
    # ranges the branches narrow
    out = f"output_ + (oy * {out_w} + ox) * {out_c} + pair * 2"
    if out_w % 2:  # a row's last pixel alone
        store = [f"if (ox < {out_w - 1}) {{", f"  mlf_mve_store_pair({out}, {out_c}, sums);",
                 "} else {", f"  mlf_mve_store_first({out}, sums);", "}"]
    else:
        store = [f"mlf_mve_store_pair({out}, {out_c}, sums);"]

    def channel_pairs(indent: str, sums: list[str]) -> list[str]:
        lines = [f"for (int32_t pair = 0; pair < {out_c // 2}; ++pair) {{",
                 f"  const int8_t* f = {filters} + pair * {2 * padded};",
                 "  int32_t a00 = folded_bias[pair * 2], a01 = folded_bias[pair * 2 + 1], a10 = a00, a11 = a01;",
                 *[f"  {line}" for line in sums],
                 "  int32x4_t sums = vsetq_lane_s32(a00, vdupq_n_s32(0), 0);",
                 "  sums = vsetq_lane_s32(a01, sums, 1); sums = vsetq_lane_s32(a10, sums, 2);",
                 "  sums = vsetq_lane_s32(a11, sums, 3);",
                 (f"  sums = vaddq_n_s32({requantize}(sums, vldrwq_s32(multipliers + pair * 4), "
                  f"vldrwq_s32(shifts + pair * 4)), {out_zero});"),
                 f"  sums = vminq_s32(vmaxq_s32(sums, vdupq_n_s32({lo})), vdupq_n_s32({hi}));",
                 *[f"  {line}" for line in store], "}"]
        return [indent + line for line in lines]

    def window_2x2(x0: str, x1: str, w: str, rows: int, count: int, jump: int) -> str:
        return f"MLF_MVE_WINDOW_2X2(a00, a01, a10, a11, {x0}, {x1}, {w}, {w} + {padded}, {rows}, {count}, {jump});"

    # the windows on the stack are laid out as the filters: one row of `padded` bytes each
    copied = window_2x2("windows", f"windows + {padded}", "f", 1, padded // VECTOR, 0)
    if few:  # each window row (k_w taps, at most a vector) copied, the whole window then read
        inside, inside_sums = _copied_rows(window, padded), [copied]
    else:
        inside, inside_sums = [], _sums_in_place(window, window_2x2)
    copy = _copied_taps(window, padded)
    # a window's bytes past fan_in stay zero (the padded filters' zeros multiply them)
    zeroed = [f"  vstrbq_s8(windows + {at - VECTOR}, vdupq_n_s8(0));" for at in (padded, 2 * padded)] if few else []
    return [f"  const int8x16_t zero_point = vdupq_n_s8({in_zero});",
            f"  int8_t windows[{2 * padded}];",
            *zeroed,
            f"  for (int32_t oy = 0; oy < {out_h}; ++oy) {{",
            # an even width's pairs end at its last pixel but one (the pool analysis then bounds the stores)
            f"    for (int32_t ox = 0; ox < {out_w - 1 + out_w % 2}; ox += 2) {{",
            f"      if (oy >= {row_lo} && oy <= {row_hi} && ox >= {col_lo} && ox <= {col_hi - 1}) {{",
            f"        const int8_t* in = input_ + ((oy * {s_h} - {p_h}) * {in_w} + ox * {s_w} - {p_w}) * {in_c};",
            *[f"        {line}" for line in inside],
            *channel_pairs("        ", inside_sums),
            "      } else {",
            *[f"        {line}" for line in copy],
            *channel_pairs("        ", [copied]),
            "      }",
            "    }", "  }", "  return 0;"]


def _copied_rows(window, padded: int) -> list[str]:
    """A few-channel pair's windows (inside the input) copied to the stack, a row of taps at a time."""
    (_, in_w, in_c), (k_h, k_w) = window.in_hwc, window.kernel
    next_pixel, row = window.stride[1] * in_c, k_w * in_c
    return [f"for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
            f"  const int8_t* at = in + ky * {window.dilation[0] * in_w * in_c};",
            f"  mlf_mve_store_bytes(windows + ky * {row}, {row}, mlf_mve_load_bytes(at, {row}));",
            f"  mlf_mve_store_bytes(windows + {padded} + ky * {row}, {row}, mlf_mve_load_bytes(at + {next_pixel}, {row}));",
            "}"]


def _sums_in_place(window, window_2x2) -> list[str]:
    """The four sums of a pair whose windows lie inside the input, read where they are: a window of
    up to UNROLLED_VECTORS vectors at constant offsets, any other by MLF_MVE_WINDOW_2X2 (`window_2x2`)."""
    (_, in_w, in_c), (k_h, k_w), (d_h, d_w) = window.in_hwc, window.kernel, window.dilation
    fan_in, vectors, next_pixel = k_h * k_w * in_c, in_c // VECTOR, window.stride[1] * in_c
    if fan_in <= UNROLLED_VECTORS * VECTOR:  # 1x1 windows
        lines = []
        for ky in range(k_h):
            for kx in range(k_w):
                for v in range(vectors):
                    at, tap = (ky * d_h * in_w + kx * d_w) * in_c + v * VECTOR, (ky * k_w + kx) * in_c + v * VECTOR
                    lines += [f"{{ const int8x16_t x0 = vldrbq_s8(in + {at}), x1 = vldrbq_s8(in + {at + next_pixel});",
                              f"  const int8x16_t w0 = vldrbq_s8(f + {tap}), w1 = vldrbq_s8(f + {fan_in + tap});",
                              "  a00 = vmladavaq_s8(a00, x0, w0); a01 = vmladavaq_s8(a01, x0, w1);",
                              "  a10 = vmladavaq_s8(a10, x1, w0); a11 = vmladavaq_s8(a11, x1, w1); }"]
        return lines
    if d_w == 1:  # a window row is contiguous: one row of k_w taps after another
        return [window_2x2("in", f"in + {next_pixel}", "f", k_h, k_w * vectors, (d_h * in_w - k_w) * in_c)]
    row = f"in + ky * {d_h * in_w * in_c}"  # each tap a row
    return [f"for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
            "  " + window_2x2(row, f"{row} + {next_pixel}", f"f + ky * {k_w * in_c}", k_w, vectors, (d_w - 1) * in_c),
            "}"]


def _copied_taps(window, padded: int) -> list[str]:
    """A pair's windows copied to the stack tap by tap, a tap in the padding as the zero point: 16
    channels a vector, or the few channels of a first layer by a predicated load and store."""
    (in_h, in_w, in_c), (k_h, k_w) = window.in_hwc, window.kernel
    (s_h, s_w), (d_h, d_w), (p_h, p_w) = window.stride, window.dilation, window.padding
    if in_c % VECTOR:
        parts, read = 1, f"mlf_mve_load_bytes(input_ + (iy * {in_w} + ix{{p}}) * {in_c}, {in_c})"
        write = f"mlf_mve_store_bytes(windows + {{at}}(ky * {k_w} + kx) * {in_c}, {in_c}, in{{p}});"
    else:
        parts, read = in_c // VECTOR, f"vldrbq_s8(input_ + (iy * {in_w} + ix{{p}}) * {in_c} + v * {VECTOR})"
        write = f"vstrbq_s8(windows + {{at}}(ky * {k_w} + kx) * {in_c} + v * {VECTOR}, in{{p}});"
    return [f"for (int32_t ky = 0; ky < {k_h}; ++ky) {{",
            f"  const int32_t iy = oy * {s_h} - {p_h} + ky * {d_h};",
            f"  for (int32_t kx = 0; kx < {k_w}; ++kx) {{",
            f"    const int32_t ix0 = ox * {s_w} - {p_w} + kx * {d_w}, ix1 = ix0 + {s_w};",
            f"    for (int32_t v = 0; v < {parts}; ++v) {{",
            "      int8x16_t in0 = zero_point, in1 = zero_point;",
            f"      if (iy >= 0 && iy < {in_h} && ix0 >= 0 && ix0 < {in_w}) {{",
            f"        in0 = {read.format(p=0)};",
            "      }",
            f"      if (iy >= 0 && iy < {in_h} && ix1 >= 0 && ix1 < {in_w}) {{",
            f"        in1 = {read.format(p=1)};",
            "      }",
            f"      {write.format(at='', p=0)}",
            f"      {write.format(at=f'{padded} + ', p=1)}",
            "    }", "  }", "}"]
