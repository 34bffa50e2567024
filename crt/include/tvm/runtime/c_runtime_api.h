/*
 * tvm/runtime/c_runtime_api.h — mlfrt's own, ABI-compatible subset of TVM's C runtime API, as
 * needed by TVM-generated C code (TVM 0.8-0.18). Written for mlfbuild; not TVM's file.
 *
 * Generated kernels include this as "tvm/runtime/c_runtime_api.h" and use: TVM_DLL, TVMValue,
 * DLTensor (through dlpack.h), DLDeviceType, int32_t/int64_t/uint64_t, NULL, and the type code
 * kTVMOpaqueHandle (AOT packed metadata). Everything else is declared for completeness.
 *
 * ABI facts this file must match (checked in crt/src/backend.c):
 *   - TVMValue is an 8-byte, 8-aligned union on x86-64 and Cortex-M (int64/double members);
 *   - TVMArgTypeCode values 0..15 as in TVM 0.8-0.17 (TVM 0.18 inserts kTVMArgBool = 15 and
 *     moves kTVMExtBegin to 16; codes 0..14 are identical in all releases);
 *   - type codes and return codes travel as plain `int` (32-bit on both targets).
 */
#ifndef MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_
#define MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

/* Symbol visibility. Generated code writes `TVM_DLL int32_t f(...)`; it must expand to a
   declaration specifier that is valid on gcc/clang for both ELF targets. */
#ifndef TVM_DLL
#if defined(_MSC_VER)
#define TVM_DLL __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define TVM_DLL __attribute__((visibility("default")))
#else
#define TVM_DLL
#endif
#endif

#ifndef TVM_WEAK
#define TVM_WEAK __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t tvm_index_t;

/* TVM's device kinds beyond DLPack's (values fixed since TVM 0.8). */
typedef enum {
  kDLAOCL = 32,
  kDLSDAccel = 33,
  kOpenGL = 34,
  kDLMicroDev = 35,
  TVMDeviceExtType_End = 36
} TVMDeviceExtType;

/* Type codes of packed-call arguments (the `type_codes` array of TVMBackendPackedCFunc). */
typedef enum {
  kTVMArgInt = kDLInt,          /* 0 */
  kTVMArgFloat = kDLFloat,      /* 2 */
  kTVMOpaqueHandle = 3U,
  kTVMNullptr = 4U,
  kTVMDataType = 5U,
  kDLDevice = 6U,
  kTVMDLTensorHandle = 7U,
  kTVMObjectHandle = 8U,
  kTVMModuleHandle = 9U,
  kTVMPackedFuncHandle = 10U,
  kTVMStr = 11U,
  kTVMBytes = 12U,
  kTVMNDArrayHandle = 13U,
  kTVMObjectRValueRefArg = 14U,
  kTVMExtBegin = 15U,           /* TVM 0.18: kTVMArgBool = 15, kTVMExtBegin = 16 */
  kTVMNNVMFirst = 16U,
  kTVMNNVMLast = 20U,
  kTVMExtReserveEnd = 64U,
  kTVMExtEnd = 128U
} TVMArgTypeCode;

/* Opaque handles. */
typedef DLTensor* TVMArrayHandle;
typedef void* TVMFunctionHandle;
typedef void* TVMModuleHandle;
typedef void* TVMRetValueHandle;
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;

/* One packed-call argument or return value: 8 bytes, 8-aligned, on every target. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/* A byte string argument (kTVMBytes). */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/* Error message of the last failing call on this (single) thread. Implemented by mlfrt in
   crt/src/backend.c: the pointer is kept, not the text (TVM's generated code passes string
   literals), so the message must outlive the call. */
TVM_DLL void TVMAPISetLastError(const char* msg);
TVM_DLL const char* TVMGetLastError(void);

/* Calls a packed function through a handle. Declared for ABI completeness only: mlfrt does not
   implement it, so models that call packed externs (tvm_call_packed) fail at link time. */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_ */
