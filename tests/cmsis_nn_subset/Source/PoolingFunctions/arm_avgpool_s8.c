/* CMSIS-NN stand-in (tests only; see ../../README.md): int8 average pooling. */
#include "arm_nnfunctions.h"
#include "nn_fixed_point.h"

arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context* ctx, const cmsis_nn_pool_params* pool_params,
                                   const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                   const cmsis_nn_dims* filter_dims, const cmsis_nn_dims* output_dims,
                                   int8_t* output_data) {
  (void)ctx;
  const int32_t in_h = input_dims->h, in_w = input_dims->w, channels = input_dims->c;
  for (int32_t oy = 0; oy < output_dims->h; oy++) {
    for (int32_t ox = 0; ox < output_dims->w; ox++) {
      const int32_t y0 = oy * pool_params->stride.h - pool_params->padding.h;
      const int32_t x0 = ox * pool_params->stride.w - pool_params->padding.w;
      for (int32_t c = 0; c < channels; c++) {
        int32_t sum = 0, count = 0;
        for (int32_t y = y0; y < y0 + filter_dims->h; y++) {
          for (int32_t x = x0; x < x0 + filter_dims->w; x++) {
            if (y < 0 || y >= in_h || x < 0 || x >= in_w) continue;
            sum += input_data[(y * in_w + x) * channels + c];
            count++;
          }
        }
        if (count == 0) return ARM_CMSIS_NN_ARG_ERROR;
        sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
        output_data[(oy * output_dims->w + ox) * channels + c] =
            (int8_t)nn_clamp(sum, pool_params->activation.min, pool_params->activation.max);
      }
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}
