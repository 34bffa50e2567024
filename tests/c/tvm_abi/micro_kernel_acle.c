/* The DSP side of TVM's arm_cpu micro-kernels (TVM 0.12-0.18, compiled with -mcpu=cortex-m4 or
 * cortex-m7): <arm_acle.h> next to <tvm/runtime/crt/error_codes.h>, the kernels' own rotate and
 * halfword-pack helpers behind ARM_CPU_INTRINSICS_EXIST, and the ACLE intrinsics they call:
 * __sxtb16, __smlad, __ssub8, __sel, __ssat, __builtin_arm_smlabb / __builtin_arm_smlatt (gemm,
 * pooling, multi-channel convolution); __smlabb, __smlabt, __smlatb, __smlatt, __smladx and an
 * `__asm__` pkhbt (tensordot, 0.11+). Cortex-M only: the host has no <arm_acle.h>. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arm_acle.h>

#include <tvm/runtime/crt/error_codes.h>

#ifndef ARM_CPU_INTRINSICS_EXIST
#define ARM_CPU_INTRINSICS_EXIST
__attribute__((always_inline)) static inline uint32_t __ror(uint32_t op1, uint32_t op2) {
  op2 %= 32U;
  if (op2 == 0U) {
    return op1;
  }
  return (op1 >> op2) | (op1 << (32U - op2));
}

#define __pkhbt(ARG1, ARG2, ARG3) \
  __extension__({ \
    uint32_t __RES, __ARG1 = (ARG1), __ARG2 = (ARG2); \
    __asm("pkhbt %0, %1, %2, lsl %3" : "=r"(__RES) : "r"(__ARG1), "r"(__ARG2), "I"(ARG3)); \
    __RES; \
  })

#define __pkhtb(ARG1, ARG2, ARG3) \
  __extension__({ \
    uint32_t __RES, __ARG1 = (ARG1), __ARG2 = (ARG2); \
    __asm("pkhtb %0, %1, %2, asr %3" : "=r"(__RES) : "r"(__ARG1), "r"(__ARG2), "I"(ARG3)); \
    __RES; \
  })
#endif

/* int8 -> two int16 halfword pairs, as the kernels' read_and_pad does. */
__attribute__((always_inline)) static inline const int8_t* abi_read_and_pad(const int8_t* source, int32_t* out1,
                                                                           int32_t* out2) {
  int32_t in;
  memcpy(&in, source, 4);
  int32_t in_a1 = __sxtb16(__ror((uint32_t)in, 8));
  int32_t in_a2 = __sxtb16(in);
  *out1 = (int32_t)(__pkhtb(in_a1, in_a2, 16));
  *out2 = (int32_t)(__pkhbt(in_a2, in_a1, 16));
  return source + 4;
}

int32_t abi_dsp_kernel(const int8_t* a, const int8_t* b, int8_t* max, int32_t* sums, int n);
int32_t abi_dsp_kernel(const int8_t* a, const int8_t* b, int8_t* max, int32_t* sums, int n) {
  if (((uintptr_t)a & 0x3) != 0 || ((uintptr_t)b & 0x3) != 0 || n % 4 != 0) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  int32_t sum = 0, sum_c0 = 0, sum_c1 = 0;
  for (int i = 0; i < n; i += 4) {
    int32_t a1, a2, b1, b2;
    abi_read_and_pad(a + i, &a1, &a2);
    abi_read_and_pad(b + i, &b1, &b2);
    sum = __smlad(a1, b1, sum);
    sum = __smlad(a2, b2, sum);
    sum_c0 = __builtin_arm_smlabb(a1, b1, sum_c0);
    sum_c1 = __builtin_arm_smlatt(a2, b2, sum_c1);

    int32_t arg32, res32;
    memcpy(&arg32, a + i, 4);
    memcpy(&res32, max + i, 4);
    __ssub8(arg32, res32);
    res32 = (int32_t)__sel((uint32_t)arg32, (uint32_t)res32);
    memcpy(max + i, &res32, 4);
  }
  sums[0] = __ssat(sum >> 8, 8);
  sums[1] = sum_c0;
  sums[2] = sum_c1;
  return 0;
}

/* One tensordot step: halfword products picked by instruction, then a packed int16 result. */
int32_t abi_tensordot(const int32_t* tensor, const int32_t* kernel, int32_t* output);
int32_t abi_tensordot(const int32_t* tensor, const int32_t* kernel, int32_t* output) {
  int32_t tensor__y00_x00__y00_x01 = tensor[0];
  int32_t tensor__y00_x02__y00_x03 = tensor[1];
  int32_t kernel__y00_x00__y00_x01 = kernel[0];
  int32_t kernel__y00_x02__y00_x03 = kernel[1];
  int32_t sum_0 = 0, sum_1 = 0;
  sum_0 = __smlad(tensor__y00_x00__y00_x01, kernel__y00_x00__y00_x01, sum_0);
  sum_0 = __smlabb(tensor__y00_x02__y00_x03, kernel__y00_x02__y00_x03, sum_0);
  sum_1 = __smladx(tensor__y00_x00__y00_x01, kernel__y00_x02__y00_x03, sum_1);
  sum_1 = __smlabt(tensor__y00_x02__y00_x03, kernel__y00_x00__y00_x01, sum_1);
  sum_1 = __smlatb(tensor__y00_x02__y00_x03, kernel__y00_x00__y00_x01, sum_1);
  sum_1 = __smlatt(tensor__y00_x00__y00_x01, kernel__y00_x02__y00_x03, sum_1);
  int32_t requant_0 = __ssat(sum_0 >> 8, 8);
  int32_t requant_1 = __ssat(sum_1 >> 8, 8);
  int32_t packed_res_0;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(packed_res_0) : "r"(requant_0), "r"(requant_1));
  output[0] = packed_res_0;
  return 0;
}
