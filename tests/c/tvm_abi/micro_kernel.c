/* The frame of TVM's arm_cpu tensorize micro-kernels (python/tvm/topi/arm_cpu/mprofile/dsp/
 * micro_kernel/, TVM 0.9-0.18): the common includes, static inline helpers returning int32_t, and
 * kTvmErrorFunctionCallInvalidArg for unaligned operands. Portable (no DSP intrinsics), so it also
 * compiles for the host; micro_kernel_acle.c adds the intrinsics. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C"
#endif
__attribute__((always_inline)) static inline int32_t gemm_1x4x1_body_loop_ABIKERNL(
    int8_t *aa, int8_t *bb, int32_t *cc,
    int32_t A_stride_arg, int32_t B_stride_arg, int32_t C_stride_arg) {
  int A_stride = A_stride_arg;
  int B_stride = B_stride_arg;
  int C_stride = C_stride_arg;
  int32_t sum = 0;
  for (int l = 0; l < 4; l++) {
    sum += (int32_t)aa[l * A_stride] * (int32_t)bb[l * B_stride];
  }
  cc[0 * C_stride] = sum;
  return 0;
}

#ifdef __cplusplus
extern "C"
#endif
__attribute__((always_inline)) static inline int32_t gemm_1x4x1_body_ABIKERNL(
    int8_t *aa, int8_t *bb, int32_t *cc,
    int32_t A_stride, int32_t B_stride, int32_t C_stride) {
  int32_t retcode = 0;

  if (((uintptr_t)aa & 0x3) != 0 || ((uintptr_t)bb & 0x3) != 0) {
    retcode = kTvmErrorFunctionCallInvalidArg;
    goto out;
  }
  int32_t aa_vector[1];
  memcpy(&aa_vector, aa, sizeof(aa_vector));
  retcode = gemm_1x4x1_body_loop_ABIKERNL(aa, bb, cc, A_stride, B_stride, C_stride);

out:
  return retcode;
}

#ifdef __cplusplus
extern "C"
#endif
int32_t gemm_1x4x1_reset_ABIKERNL(int32_t *cc, int32_t C_stride);
int32_t gemm_1x4x1_reset_ABIKERNL(int32_t *cc, int32_t C_stride) {
  cc[0 * C_stride] = 0;
  return 0;
}

int32_t abi_kernel_call(int8_t* a, int8_t* b, int32_t* c);
int32_t abi_kernel_call(int8_t* a, int8_t* b, int32_t* c) {
  if (gemm_1x4x1_reset_ABIKERNL(c, 1) != 0) return -1;
  return gemm_1x4x1_body_ABIKERNL(a, b, c, 1, 1, 1);
}
