/*
 * tvm/runtime/crt/func_registry.h — mlfrt's own, ABI-compatible declaration of the system-lib
 * function registry that TVM generates in <mod>_lib0.c (graph executor, AOT packed, operator
 * exports with system-lib) and in LLVM system-lib objects. Written for mlfbuild; not TVM's file.
 *
 * ABI facts this file must match:
 *   - struct TVMFuncRegistry {const char* names; const TVMBackendPackedCFunc* funcs;}:
 *     8 bytes on Cortex-M, 16 on x86-64 (two pointers), initialised positionally by lib0.c;
 *   - `names` blob: the number of functions, then each name NUL-terminated; the C string literal
 *     adds a final NUL. funcs[i] belongs to the i-th name. The count is one byte in TVM 0.8 and a
 *     uint16 from TVM 0.9 on, in the byte order of the machine that ran TVM (little-endian on
 *     x86-64/arm64). mlfrt reads both: after a one-byte count comes a name, which starts with a
 *     letter or '_' (>= 'A'); the high byte of a uint16 count is below 'A' for fewer than 16 640
 *     functions. An empty name ends the blob;
 *   - function indices are uint16_t.
 */
#ifndef MLFRT_TVM_RUNTIME_CRT_FUNC_REGISTRY_H_
#define MLFRT_TVM_RUNTIME_CRT_FUNC_REGISTRY_H_

#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t tvm_function_index_t;
typedef uint16_t tvm_module_index_t;

typedef struct TVMFuncRegistry {
  const char* names;                  /* count (1 or 2 bytes) then NUL-terminated names */
  const TVMBackendPackedCFunc* funcs; /* same order as names */
} TVMFuncRegistry;

/* Implemented by mlfrt in crt/src/func_registry.c. */

/* Number of functions in the registry (names[0], or the little-endian uint16 at names[0..1]). */
uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg);

/* The first name in the blob, just after the count. */
const char* TVMFuncRegistry_Get0thFunctionName(const TVMFuncRegistry* reg);

/* Index of `name` in *function_index; kTvmErrorFunctionNameNotFound if absent. */
tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index);

/* Function at `index` in *out_func; kTvmErrorFunctionIndexInvalid if out of range. */
tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg,
                                           tvm_function_index_t index,
                                           TVMBackendPackedCFunc* out_func);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_CRT_FUNC_REGISTRY_H_ */
