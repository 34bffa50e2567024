/* CMSIS-NN stand-in (tests only; see ../../README.md): int8 fully connected layer. */
#include "arm_nnfunctions.h"
#include "nn_fixed_point.h"

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
                                           const cmsis_nn_per_tensor_quant_params* quant_params,
                                           const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                           const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                           const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                           const cmsis_nn_dims* output_dims, int8_t* output_data) {
  (void)ctx;
  (void)bias_dims;
  const int32_t depth = filter_dims->n, out_c = output_dims->c;
  for (int32_t b = 0; b < input_dims->n; b++) {
    const int8_t* in = &input_data[b * depth];
    for (int32_t oc = 0; oc < out_c; oc++) {
      int32_t acc = bias_data != NULL ? bias_data[oc] : 0;
      for (int32_t k = 0; k < depth; k++) {
        acc += (in[k] + fc_params->input_offset) * (filter_data[oc * depth + k] + fc_params->filter_offset);
      }
      acc = nn_requantize(acc, quant_params->multiplier, quant_params->shift) + fc_params->output_offset;
      output_data[b * out_c + oc] = (int8_t)nn_clamp(acc, fc_params->activation.min, fc_params->activation.max);
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}
