/* CMSIS-NN stand-in (tests only; see ../../README.md): int8 depthwise convolution. */
#include "arm_nnfunctions.h"
#include "nn_fixed_point.h"

arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context* ctx,
                                                  const cmsis_nn_dw_conv_params* dw_conv_params,
                                                  const cmsis_nn_per_channel_quant_params* quant_params,
                                                  const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                                  const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                                  const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                                  const cmsis_nn_dims* output_dims, int8_t* output_data) {
  (void)ctx;
  (void)bias_dims;
  const cmsis_nn_dw_conv_params* p = dw_conv_params;
  const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
  const int32_t k_h = filter_dims->h, k_w = filter_dims->w, out_c = output_dims->c;
  if (out_c != in_c * p->ch_mult || filter_dims->c != out_c) return ARM_CMSIS_NN_ARG_ERROR;
  for (int32_t b = 0; b < input_dims->n; b++) {
    for (int32_t oy = 0; oy < output_dims->h; oy++) {
      for (int32_t ox = 0; ox < output_dims->w; ox++) {
        for (int32_t ic = 0; ic < in_c; ic++) {
          for (int32_t m = 0; m < p->ch_mult; m++) {
            const int32_t oc = ic * p->ch_mult + m;
            int32_t acc = bias_data != NULL ? bias_data[oc] : 0;
            for (int32_t ky = 0; ky < k_h; ky++) {
              const int32_t iy = oy * p->stride.h - p->padding.h + ky * p->dilation.h;
              if (iy < 0 || iy >= in_h) continue;
              for (int32_t kx = 0; kx < k_w; kx++) {
                const int32_t ix = ox * p->stride.w - p->padding.w + kx * p->dilation.w;
                if (ix < 0 || ix >= in_w) continue;
                acc += (input_data[((b * in_h + iy) * in_w + ix) * in_c + ic] + p->input_offset) *
                       filter_data[(ky * k_w + kx) * out_c + oc];
              }
            }
            acc = nn_requantize(acc, quant_params->multiplier[oc], quant_params->shift[oc]) + p->output_offset;
            output_data[((b * output_dims->h + oy) * output_dims->w + ox) * out_c + oc] =
                (int8_t)nn_clamp(acc, p->activation.min, p->activation.max);
          }
        }
      }
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}
