/* CMSIS-NN stand-in (tests only; see ../../README.md): int8 softmax in fixed point, as TFLite's
 * reference kernel: exponentials in Q0.31 summed with 12 accumulator bits, then scaled by 1/sum. */
#include "arm_nnfunctions.h"
#include "nn_fixed_point.h"

#define ACCUM_BITS 12

void arm_softmax_s8(const int8_t* input, const int32_t num_rows, const int32_t row_size, const int32_t mult,
                    const int32_t shift, const int32_t diff_min, int8_t* output) {
  const int32_t mask = 1 << shift;
  for (int32_t row = 0; row < num_rows; row++, input += row_size, output += row_size) {
    int8_t max = input[0];
    for (int32_t col = 1; col < row_size; col++) max = input[col] > max ? input[col] : max;
    int32_t sum = 0;
    for (int32_t col = 0; col < row_size; col++) {
      const int32_t diff = input[col] - max;
      if (diff >= diff_min) sum += nn_div_pow2(nn_exp_on_negative_values(nn_mul_sat(diff * mask, mult)), ACCUM_BITS);
    }
    const int32_t headroom = sum > 0 ? __builtin_clz((uint32_t)sum) : 32;
    const uint32_t normalised = sum > 0 ? (uint32_t)sum << headroom : 0u;
    const int32_t shifted_scale = nn_one_over_one_plus_x((int32_t)(normalised - 0x80000000u));
    const int32_t bits_over_unit = ACCUM_BITS - headroom + 23;
    for (int32_t col = 0; col < row_size; col++) {
      const int32_t diff = input[col] - max;
      if (diff < diff_min) {
        output[col] = NN_Q7_MIN;
        continue;
      }
      const int32_t exp = nn_exp_on_negative_values(nn_mul_sat(diff * mask, mult));
      const int32_t result = nn_div_pow2(nn_mul_sat(shifted_scale, exp), bits_over_unit) + NN_Q7_MIN;
      output[col] = (int8_t)nn_clamp(result, NN_Q7_MIN, NN_Q7_MAX);
    }
  }
}
