/*
 * tvm/runtime/crt/error_codes.h — mlfrt's own declaration of the CRT error numbering
 * (tvm_crt_error_t), ABI-compatible with TVM 0.8-0.18: value = (category << 8) | code.
 * Written for mlfbuild; not TVM's file. Only the values mlfrt uses or that are documented in
 * shared/docs/mlf-format.md §10.3 are listed.
 */
#ifndef MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_
#define MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_

#ifdef __cplusplus
extern "C" {
#endif

#define DEFINE_TVM_CRT_ERROR(category, code) (((category) << 8) | (code))

typedef enum {
  kTvmErrorCategoryFunctionRegistry = 1,
  kTvmErrorCategoryFraming = 2,
  kTvmErrorCategoryWriteStream = 3,
  kTvmErrorCategorySession = 4,
  kTvmErrorCategoryPlatform = 5,
  kTvmErrorCategoryGenerated = 6,
  kTvmErrorCategoryExecutor = 7,
  kTvmErrorCategoryFunctionCall = 8,
  kTvmErrorCategoryTimeEvaluator = 9
} tvm_crt_error_category_t;

/* The value type is an int-sized signed integer on every target (TVM returns it from C
   functions; 0 = success). An enum would be 1-2 bytes under arm-none-eabi's short enums. */
typedef int tvm_crt_error_t;

enum {
  kTvmErrorNoError = 0,
  /* Function registry */
  kTvmErrorFunctionNameNotFound = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 0x00),
  kTvmErrorFunctionIndexInvalid = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 0x01),
  /* Platform */
  kTvmErrorPlatformNoMemory = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 0x03),
  /* Function calls */
  kTvmErrorFunctionCallNotImplemented = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionCall, 0x02)
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_ */
