/*
 * tvm/runtime/crt/module.h — mlfrt's own, ABI-compatible declaration of the system-lib module
 * that TVM generates in <mod>_lib0.c. Written for mlfbuild; not TVM's file.
 *
 * lib0.c includes only this header and then uses TVM_DLL, int32_t, TVMValue,
 * TVMBackendPackedCFunc, TVMFuncRegistry and TVMModule, so this header must pull in
 * c_runtime_api.h, c_backend_api.h and func_registry.h.
 *
 * ABI: struct TVMModule {const TVMFuncRegistry* registry;} (one pointer), initialised
 * positionally by lib0.c. The same in TVM 0.8-0.18. TVM 0.8's CMSIS-NN code includes this header
 * for TVM_DLL and the DLPack types. Not declared: TVMModCreateFromCModule, which registers a module
 * with TVM's own CRT and is never called by generated code.
 */
#ifndef MLFRT_TVM_RUNTIME_CRT_MODULE_H_
#define MLFRT_TVM_RUNTIME_CRT_MODULE_H_

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/func_registry.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMModule {
  const TVMFuncRegistry* registry;
} TVMModule;

/* Defined by the generated lib0.c of system-lib builds: the module with every function. */
const TVMModule* TVMSystemLibEntryPoint(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_CRT_MODULE_H_ */
