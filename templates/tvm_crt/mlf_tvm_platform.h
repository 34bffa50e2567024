/*
 * mlf_tvm_platform.h — glue between mlfbuild firmware and TVM's standalone C runtime (--runtime tvm).
 *
 * mlf_tvm_platform.c implements the platform hooks TVM's CRT calls (tvm/runtime/crt/platform.h:
 * memory, abort, timers, TVMLogf) on top of mlfrt (console, timer, exit), and the mlfrt workspace
 * API main.c uses (mlfrt_workspace_init/peak/used) over TVM's own memory managers. The functions
 * below are what the generated model code (src/model_<name>.c) calls.
 */
#ifndef MLF_TVM_PLATFORM_H_
#define MLF_TVM_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TVMInitializeRuntime() (once per firmware), then the system library module through the
   "runtime.SystemLib" global function, as TVM's apps/bundle_deploy does. 0 on success. */
int mlf_tvm_system_lib(TVMModuleHandle* out);

/* Prints "tvm: <what> failed" and TVM's last error message on the console. */
void mlf_tvm_report(const char* what);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLF_TVM_PLATFORM_H_ */
