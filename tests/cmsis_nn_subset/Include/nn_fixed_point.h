/* Fixed-point helpers of the CMSIS-NN stand-in (tests only; see ../README.md): the integer
 * arithmetic of TFLite's reference kernels (gemmlowp), as CMSIS-NN implements it. */
#ifndef NN_FIXED_POINT_H
#define NN_FIXED_POINT_H

#include <stddef.h>
#include <stdint.h>

#include "arm_nn_math_types.h"

/* Saturating rounding doubling high multiply: (a * b * 2 + 2^31) >> 32, rounding half away from 0. */
static inline int32_t nn_mul_sat(int32_t a, int32_t b) {
  if (a == b && a == NN_Q31_MIN) return NN_Q31_MAX;
  int64_t product = (int64_t)a * b;
  int64_t nudge = product >= 0 ? (1LL << 30) : (1 - (1LL << 30));
  return (int32_t)((product + nudge) / (1LL << 31));
}

/* The requantisation multiply (no saturation; rounds half up). */
static inline int32_t nn_mul_no_sat(int32_t a, int32_t b) {
  return (int32_t)(((int64_t)a * b + (1LL << 30)) >> 31);
}

/* Rounding arithmetic right shift, halves away from zero. */
static inline int32_t nn_div_pow2(int32_t dividend, int32_t exponent) {
  const int32_t mask = (int32_t)((1u << exponent) - 1u);
  const int32_t remainder = dividend & mask;
  int32_t result = dividend >> exponent;
  int32_t threshold = mask >> 1;
  if (result < 0) threshold++;
  if (remainder > threshold) result++;
  return result;
}

/* Saturating left shift. */
static inline int32_t nn_mul_pow2(int32_t value, int32_t exponent) {
  const int32_t threshold = (int32_t)((1u << (31 - exponent)) - 1u);
  if (value > threshold) return NN_Q31_MAX;
  if (value < -threshold) return NN_Q31_MIN;
  return (int32_t)((uint32_t)value << exponent);
}

/* value * 2^shift * multiplier / 2^31, as TFLite's MultiplyByQuantizedMultiplier. */
static inline int32_t nn_requantize(int32_t value, int32_t multiplier, int32_t shift) {
  const int32_t left = shift > 0 ? shift : 0;
  const int32_t right = shift > 0 ? 0 : -shift;
  return nn_div_pow2(nn_mul_no_sat((int32_t)((uint32_t)value << left), multiplier), right);
}

static inline int32_t nn_select(int condition, int32_t if_true, int32_t otherwise) {
  return condition ? if_true : otherwise;
}

/* exp(x) for x <= 0 in Q5.26, result in Q0.31 (gemmlowp's exp_on_negative_values). */
static inline int32_t nn_exp_on_negative_values(int32_t value) {
  const int32_t quarter = 1 << 24;
  const int32_t mod_minus_quarter = (value & (quarter - 1)) - quarter;
  const int32_t remainder = mod_minus_quarter - value;
  const int32_t x = mod_minus_quarter * 32 + (1 << 28);
  const int32_t x2 = nn_mul_sat(x, x);
  const int32_t x3 = nn_mul_sat(x2, x);
  const int32_t x4_over_4 = nn_div_pow2(nn_mul_sat(x2, x2), 2);
  const int32_t poly = nn_div_pow2(nn_mul_sat(x4_over_4 + x3, 715827883 /* 1/3 */) + x2, 1);
  int32_t result = 1895147668 /* exp(-1/8) */ + nn_mul_sat(1895147668, x + poly);
  static const int32_t factors[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  for (int i = 0; i < 7; i++) { /* exp(-1/4), exp(-1/2), ... exp(-16) */
    result = nn_select((remainder & (1 << (24 + i))) != 0, nn_mul_sat(result, factors[i]), result);
  }
  return nn_select(value == 0, NN_Q31_MAX, result);
}

/* 1 / (1 + x) for x in [0, 1) in Q0.31, by Newton-Raphson (gemmlowp). */
static inline int32_t nn_one_over_one_plus_x(int32_t value) {
  const int64_t sum = (int64_t)value + NN_Q31_MAX;
  const int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
  int32_t x = 1515870810 + nn_mul_sat(half_denominator, -1010580540);
  const int32_t one = 1 << 29;
  for (int i = 0; i < 3; i++) x += nn_mul_pow2(nn_mul_sat(x, one - nn_mul_sat(half_denominator, x)), 2);
  return nn_mul_pow2(x, 1);
}

static inline int32_t nn_clamp(int32_t value, int32_t low, int32_t high) {
  return value < low ? low : (value > high ? high : value);
}

#endif
