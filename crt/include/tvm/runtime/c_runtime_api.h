/*
 * tvm/runtime/c_runtime_api.h — mlfrt's own, ABI-compatible declaration of the part of TVM's C
 * runtime API that TVM-generated C code (TVM 0.8-0.18) can reference. Written for mlfbuild; not
 * TVM's file. crt/README.md has the provenance of each fact.
 *
 * Generated code includes this as "tvm/runtime/c_runtime_api.h" (after `#define TVM_EXPORTS`) and
 * uses: TVM_DLL, TVMValue, DLTensor and DLDeviceType (through dlpack.h), int32_t/int64_t/uint64_t,
 * NULL, bool (TVM 0.8-0.11 code prints `bool` without including <stdbool.h>), the type code
 * kTVMOpaqueHandle (AOT packed metadata), TVMAPISetLastError (failed assertions) and TVMFuncCall
 * (calls of packed functions by name). Type codes are compared as integer literals, never by name.
 *
 * ABI facts this file must match (checked in crt/src/backend.c):
 *   - TVMValue is an 8-byte, 8-aligned union on x86-64 and Cortex-M (int64/double members);
 *   - TVMArgTypeCode follows TVM 0.18: kTVMArgBool = 15, kTVMExtBegin = 16. TVM 0.8-0.17 had no
 *     kTVMArgBool and kTVMExtBegin = 15; codes 0..14 are identical in every release;
 *   - TVMDeviceExtType follows TVM 0.11+ (32..36); TVM 0.8-0.10 used 5, 6, 11, 13, 14, 15;
 *   - type codes and return codes travel as plain `int` (32-bit on both targets).
 * Not declared: TVM's host-side C API (modules, arrays, streams, objects, Python error hooks) and
 * TVM_VERSION — nothing generated calls them, and mlfrt implements none of them.
 */
#ifndef MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_
#define MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_

/* Weak linking. */
#ifndef TVM_WEAK
#if defined(_MSC_VER)
#define TVM_WEAK __declspec(selectany)
#else
#define TVM_WEAK __attribute__((weak))
#endif
#endif

/* Marks something deliberately unused (TVM 0.12+). */
#ifndef TVM_ATTRIBUTE_UNUSED
#if defined(__GNUC__)
#define TVM_ATTRIBUTE_UNUSED __attribute__((unused))
#else
#define TVM_ATTRIBUTE_UNUSED
#endif
#endif

/* Symbol visibility. Generated code writes `TVM_DLL int32_t f(...)`; it must expand to a
   declaration specifier that is valid on gcc/clang for both ELF targets. */
#ifndef TVM_DLL
#if defined(_WIN32)
#if defined(TVM_EXPORTS)
#define TVM_DLL __declspec(dllexport)
#else
#define TVM_DLL __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define TVM_DLL __attribute__((visibility("default")))
#else
#define TVM_DLL
#endif
#endif

#include <dlpack/dlpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t tvm_index_t;

/* TVM's device kinds beyond DLPack's (TVM 0.11+ numbering; generated code writes device types as
   integer literals and only ever kDLCPU = 1, which no release renumbered). */
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
  kTVMArgBool = 15U,            /* TVM 0.18 */
  kTVMExtBegin = 16U,           /* 15 in TVM 0.8-0.17 */
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

/* A packed function as front ends register it (results go through a TVMRetValueHandle), its
   finaliser, and an extension-type declarer. Types only: mlfrt registers no functions. */
typedef int (*TVMPackedCFunc)(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                              void* resource_handle);
typedef void (*TVMPackedCFuncFinalizer)(void* resource_handle);
typedef int (*TVMExtensionFuncDeclarer)(TVMFunctionHandle register_func_handle);

/* Error message of the last failing call on this (single) thread. Implemented by mlfrt in
   crt/src/backend.c: the pointer is kept, not the text (TVM's generated code passes string
   literals), so the message must outlive the call. */
TVM_DLL void TVMAPISetLastError(const char* msg);
TVM_DLL const char* TVMGetLastError(void);

/* Calls a packed function through a handle (generated code gets the handle from
   TVMBackendGetFuncFromEnv). Declared only: mlfrt does not implement it, so models that call packed
   functions by name (tvm_call_packed) fail at link time with an undefined reference naming it. */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_C_RUNTIME_API_H_ */
