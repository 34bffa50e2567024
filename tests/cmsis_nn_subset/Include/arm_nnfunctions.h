/* Stand-in for CMSIS-NN's arm_nnfunctions.h (tests only; see ../README.md): the five functions
 * the kws_aot_cmsisnn fixture calls, with CMSIS-NN's signatures. Tensors are NHWC. */
#ifndef ARM_NNFUNCTIONS_H
#define ARM_NNFUNCTIONS_H

#include "arm_nn_math_types.h"
#include "arm_nn_types.h"

/* filter: [out_ch][kh][kw][in_ch]; per-channel requantisation. */
arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
                                            const cmsis_nn_per_channel_quant_params* quant_params,
                                            const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                            const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                            const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                            const cmsis_nn_dims* output_dims, int8_t* output_data);

/* filter: [1][kh][kw][in_ch * ch_mult]. */
arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context* ctx,
                                                  const cmsis_nn_dw_conv_params* dw_conv_params,
                                                  const cmsis_nn_per_channel_quant_params* quant_params,
                                                  const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                                  const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                                  const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                                  const cmsis_nn_dims* output_dims, int8_t* output_data);

/* filter: [output_ch = filter_dims->c][accumulation depth = filter_dims->n]. */
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
                                           const cmsis_nn_per_tensor_quant_params* quant_params,
                                           const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                           const cmsis_nn_dims* filter_dims, const int8_t* filter_data,
                                           const cmsis_nn_dims* bias_dims, const int32_t* bias_data,
                                           const cmsis_nn_dims* output_dims, int8_t* output_data);

/* window: filter_dims->h x filter_dims->w; rounds half away from zero. */
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context* ctx, const cmsis_nn_pool_params* pool_params,
                                   const cmsis_nn_dims* input_dims, const int8_t* input_data,
                                   const cmsis_nn_dims* filter_dims, const cmsis_nn_dims* output_dims,
                                   int8_t* output_data);

void arm_softmax_s8(const int8_t* input, const int32_t num_rows, const int32_t row_size, const int32_t mult,
                    const int32_t shift, const int32_t diff_min, int8_t* output);

#endif
