/* Stand-in for CMSIS-NN's arm_nn_types.h (tests only; see ../README.md): the structures TVM's
 * generated code fills in, field for field in CMSIS-NN's order. */
#ifndef ARM_NN_TYPES_H
#define ARM_NN_TYPES_H

#include <stdint.h>

typedef enum {
  ARM_CMSIS_NN_SUCCESS = 0,
  ARM_CMSIS_NN_ARG_ERROR = -1,
  ARM_CMSIS_NN_NO_IMPL_ERROR = -2,
} arm_cmsis_nn_status;

typedef struct { int32_t w; int32_t h; } cmsis_nn_tile;
typedef struct { int32_t min; int32_t max; } cmsis_nn_activation;
typedef struct { int32_t n; int32_t h; int32_t w; int32_t c; } cmsis_nn_dims;
typedef struct { void* buf; int32_t size; } cmsis_nn_context;
typedef struct { int32_t* multiplier; int32_t* shift; } cmsis_nn_per_channel_quant_params;
typedef struct { int32_t multiplier; int32_t shift; } cmsis_nn_per_tensor_quant_params;

typedef struct {
  int32_t input_offset;
  int32_t output_offset;
  cmsis_nn_tile stride;
  cmsis_nn_tile padding;
  cmsis_nn_tile dilation;
  cmsis_nn_activation activation;
} cmsis_nn_conv_params;

typedef struct {
  int32_t input_offset;
  int32_t output_offset;
  int32_t ch_mult;
  cmsis_nn_tile stride;
  cmsis_nn_tile padding;
  cmsis_nn_tile dilation;
  cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;

typedef struct {
  cmsis_nn_tile stride;
  cmsis_nn_tile padding;
  cmsis_nn_activation activation;
} cmsis_nn_pool_params;

typedef struct {
  int32_t input_offset;
  int32_t filter_offset;
  int32_t output_offset;
  cmsis_nn_activation activation;
} cmsis_nn_fc_params;

#endif
