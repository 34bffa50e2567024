/*
 * tvm/runtime/c_backend_api.h — mlfrt's own, ABI-compatible declaration of the backend functions
 * TVM-generated code calls (TVM 0.8-0.18; the header is the same in every release). Written for
 * mlfbuild; not TVM's file. crt/README.md has the provenance of each fact.
 *
 * ABI facts this file must match:
 *   - TVMBackendPackedCFunc: int f(TVMValue* args, int* type_codes, int num_args,
 *     TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle). Generated kernels
 *     define it with int32_t / void* parameters; on arm-none-eabi int32_t is `long`, but both
 *     are 32-bit, so the calling convention is identical (keep them in separate translation units).
 *   - TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
 *     int dtype_code_hint, int dtype_bits_hint) -> void* (NULL on failure);
 *     TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) -> 0 on success.
 *     Called by C and LLVM kernels, and by the AOT main without USMP.
 *   - TVMParallelGroupEnv {void* sync_handle; int32_t num_task;} and
 *     FTVMParallelLambda int f(int task_id, TVMParallelGroupEnv* penv, void* cdata) (LLVM code).
 * mlfrt implements these in crt/src/backend.c (see crt/README.md).
 */
#ifndef MLFRT_TVM_RUNTIME_C_BACKEND_API_H_
#define MLFRT_TVM_RUNTIME_C_BACKEND_API_H_

#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The signature of every packed function (kernels of graph/packed builds, registry entries). */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/* Temporary buffers of kernels (>= 1 KiB) and, without USMP, the AOT main's intermediates.
   mlfrt: LIFO bump allocator over the buffer given to mlfrt_workspace_init(). */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/* Environment of one parallel task group. */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

/* Body of a parallel loop: runs task `task_id` of `penv->num_task`. Returns 0 on success. */
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/* mlfrt runs parallel loops serially: flambda(0, {NULL, 1}, cdata). */
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

/* Declared only; mlfrt does not implement them, so a model that needs one fails at link time with an
   undefined reference naming it. Callers: GetFuncFromEnv (with TVMFuncCall), C and LLVM code calling
   a packed function by name; RegisterSystemLibSymbol, system libraries that embed device code;
   RunOnce, LLVM static initialisers; RegisterEnvCAPI, TVM's host runtime only. */
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out);
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);
TVM_DLL int TVMBackendRunOnce(void** handle, int (*f)(void*), void* cdata, int nbytes);
TVM_DLL int TVMBackendRegisterEnvCAPI(const char* name, void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_C_BACKEND_API_H_ */
