/*
 * tvm/runtime/crt/error_codes.h — mlfrt's own declaration of the CRT status numbering
 * (tvm_crt_error_t) of TVM 0.8-0.18. Written for mlfbuild; not TVM's file.
 *
 * A status is (category << 8) | code; 0 is success; a status with the sign bit set is a system
 * error (kTvmErrorSystemErrorMask). Every category and code has the same value in all releases;
 * what changed (crt/README.md has the provenance of each fact):
 *   - TVM 0.9 renamed the executor category and its codes (GraphExecutor / GraphModule in 0.8,
 *     Executor / ExecutorModule from 0.9); both spellings are declared here with the same values;
 *   - TVM 0.9 moved the system-error mask from bit 15 to bit 31 (see kTvmErrorSystemErrorMask).
 * Generated code uses the names as plain int constants: TVM's arm_cpu micro-kernels (0.9+) return
 * kTvmErrorFunctionCallInvalidArg from int32_t functions.
 */
#ifndef MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_
#define MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_

#include <limits.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TVM_CRT_ERROR_CATEGORY_Pos 8
#define TVM_CRT_ERROR_CATEGORY_Msk (0xff << TVM_CRT_ERROR_CATEGORY_Pos)
#define TVM_CRT_ERROR_CODE_Pos 0
#define TVM_CRT_ERROR_CODE_Msk (0xff << TVM_CRT_ERROR_CODE_Pos)

#define DEFINE_TVM_CRT_ERROR(category, code) \
  (((category) << TVM_CRT_ERROR_CATEGORY_Pos) | ((code) << TVM_CRT_ERROR_CODE_Pos))

typedef enum {
  kTvmErrorCategoryFunctionRegistry = 1,
  kTvmErrorCategoryFraming = 2,
  kTvmErrorCategoryWriteStream = 3,
  kTvmErrorCategorySession = 4,
  kTvmErrorCategoryPlatform = 5,
  kTvmErrorCategoryGenerated = 6,
  kTvmErrorCategoryExecutor = 7,
  kTvmErrorCategoryGraphExecutor = kTvmErrorCategoryExecutor, /* the TVM 0.8 name */
  kTvmErrorCategoryFunctionCall = 8,
  kTvmErrorCategoryTimeEvaluator = 9
} tvm_crt_error_category_t;

/* The status type: a signed int on every target. TVM declares it as the enumeration below; from
 * TVM 0.9 on that enumeration holds INT_MIN, so it is int-sized even where enums are short
 * (arm-none-eabi-gcc's default), and `int` is the same type size. An enum of our own would be 1-2
 * bytes there. (TVM 0.8's mask was 0x8000, which made its enumeration 2 bytes on arm-none-eabi; a
 * status only ever travels as a return value in r0, widened by the callee, so int is call-compatible
 * with it too, and no generated code stores one.) */
typedef int tvm_crt_error_t;

enum {
  kTvmErrorNoError = 0,

  /* Function registry */
  kTvmErrorFunctionNameNotFound = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 0),
  kTvmErrorFunctionIndexInvalid = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 1),
  kTvmErrorFunctionRegistryFull = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 2),
  kTvmErrorFunctionAlreadyDefined = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 3),
  kTvmErrorBufferTooSmall = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionRegistry, 4),

  /* RPC framing */
  kTvmErrorFramingInvalidState = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFraming, 0),
  kTvmErrorFramingShortPacket = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFraming, 1),
  kTvmErrorFramingInvalidEscape = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFraming, 2),
  kTvmErrorFramingPayloadOverflow = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFraming, 3),
  kTvmErrorFramingPayloadIncomplete = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFraming, 4),

  /* RPC write stream */
  kTvmErrorWriteStreamShortWrite = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryWriteStream, 0),
  kTvmErrorWriteStreamLongWrite = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryWriteStream, 1),

  /* RPC session */
  kTvmErrorSessionInvalidState = DEFINE_TVM_CRT_ERROR(kTvmErrorCategorySession, 0),
  kTvmErrorSessionReceiveBufferBusy = DEFINE_TVM_CRT_ERROR(kTvmErrorCategorySession, 1),
  kTvmErrorSessionReceiveBufferShortWrite = DEFINE_TVM_CRT_ERROR(kTvmErrorCategorySession, 2),

  /* Platform */
  kTvmErrorPlatformCheckFailure = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 0),
  kTvmErrorPlatformMemoryManagerInitialized = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 1),
  kTvmErrorPlatformShutdown = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 2),
  kTvmErrorPlatformNoMemory = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 3),
  kTvmErrorPlatformTimerBadState = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 4),
  kTvmErrorPlatformStackAllocBadFree = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryPlatform, 5),

  /* Generated functions */
  kTvmErrorGeneratedInvalidStorageId = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryGenerated, 0),

  /* Graph or AOT executor (TVM 0.9+ names, then the TVM 0.8 names of the same values) */
  kTvmErrorExecutorModuleAlreadyCreated = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryExecutor, 0),
  kTvmErrorExecutorModuleBadContext = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryExecutor, 1),
  kTvmErrorExecutorModuleNoSuchInput = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryExecutor, 2),
  kTvmErrorGraphModuleAlreadyCreated = kTvmErrorExecutorModuleAlreadyCreated,
  kTvmErrorGraphModuleBadContext = kTvmErrorExecutorModuleBadContext,
  kTvmErrorGraphModuleNoSuchInput = kTvmErrorExecutorModuleNoSuchInput,

  /* Function calls */
  kTvmErrorFunctionCallNumArguments = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionCall, 0),
  kTvmErrorFunctionCallWrongArgType = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionCall, 1),
  kTvmErrorFunctionCallNotImplemented = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionCall, 2),
  kTvmErrorFunctionCallInvalidArg = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryFunctionCall, 3),

  /* Time evaluator */
  kTvmErrorTimeEvaluatorBadHandle = DEFINE_TVM_CRT_ERROR(kTvmErrorCategoryTimeEvaluator, 0),

  /* System errors are negative: the mask is the sign bit of int (TVM 0.9-0.18; TVM 0.8 wrote bit 15,
   * 0x8000, which no generated code uses). INT_MIN avoids shifting into the sign bit. */
  kTvmErrorSystemErrorMask = INT_MIN
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_CRT_ERROR_CODES_H_ */
