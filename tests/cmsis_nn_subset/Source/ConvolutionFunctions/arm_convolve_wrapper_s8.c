/* CMSIS-NN stand-in (tests only; see ../../README.md): int8 convolution, per-channel quantised. */
#include "arm_nnfunctions.h"
#include "nn_fixed_point.h"

arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
                                            const cmsis_nn_per_channel_quant_params* quant_params,
                                            const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                            const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                            const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                            const cmsis_nn_dims* output_dims, int8_t* output_data) {
  (void)ctx;
  (void)bias_dims;
  const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
  const int32_t k_h = filter_dims->h, k_w = filter_dims->w, out_c = output_dims->c;
  if (filter_dims->c != in_c || filter_dims->n != out_c) return ARM_CMSIS_NN_ARG_ERROR;
  for (int32_t b = 0; b < input_dims->n; b++) {
    for (int32_t oy = 0; oy < output_dims->h; oy++) {
      for (int32_t ox = 0; ox < output_dims->w; ox++) {
        for (int32_t oc = 0; oc < out_c; oc++) {
          int32_t acc = bias_data != NULL ? bias_data[oc] : 0;
          for (int32_t ky = 0; ky < k_h; ky++) {
            const int32_t iy = oy * conv_params->stride.h - conv_params->padding.h + ky * conv_params->dilation.h;
            if (iy < 0 || iy >= in_h) continue;
            for (int32_t kx = 0; kx < k_w; kx++) {
              const int32_t ix = ox * conv_params->stride.w - conv_params->padding.w + kx * conv_params->dilation.w;
              if (ix < 0 || ix >= in_w) continue;
              const int8_t* in = &input_data[((b * in_h + iy) * in_w + ix) * in_c];
              const int8_t* w = &filter_data[((oc * k_h + ky) * k_w + kx) * in_c];
              for (int32_t ic = 0; ic < in_c; ic++) acc += (in[ic] + conv_params->input_offset) * w[ic];
            }
          }
          acc = nn_requantize(acc, quant_params->multiplier[oc], quant_params->shift[oc]) + conv_params->output_offset;
          output_data[((b * output_dims->h + oy) * output_dims->w + ox) * out_c + oc] =
              (int8_t)nn_clamp(acc, conv_params->activation.min, conv_params->activation.max);
        }
      }
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}
