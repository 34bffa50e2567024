/* The AOT entry point with interface-api=packed (<mod>_lib0.c): TVM 0.9-0.18 wrap each USMP pool in
 * a DLTensor and a TVMValue and append them to the caller's arguments; TVM 0.8 passed the
 * arguments through as void*. */
#include "tvm/runtime/c_runtime_api.h"
#ifdef __cplusplus
extern "C" {
#endif
__attribute__((section(".bss.noinit.tvm"), aligned(16)))
static uint8_t global_workspace[64];
DLTensor global_workspace_dltensor = {
.data = &global_workspace
};
TVMValue global_workspace_tvm_value = {
.v_handle = &global_workspace_dltensor
};
TVM_DLL int32_t tvmgen_abi___tvm_main__(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, void* resource_handle);
int32_t tvmgen_abi_run(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, void* resource_handle) {
TVMValue tensors[3];
tensors[0] = ((TVMValue*)args)[0];
tensors[1] = ((TVMValue*)args)[1];
tensors[2] = global_workspace_tvm_value;
return tvmgen_abi___tvm_main__((void*)tensors, type_code, num_args, out_value, out_type_code, resource_handle);
}

/* TVM 0.8 */
TVM_DLL int32_t tvmgen_abi_run_model(void* args, void* type_code, int num_args, void* out_value, void* out_type_code, void* resource_handle);
int32_t tvmgen_abi08_run(void* args, void* type_code, int num_args, void* out_value, void* out_type_code, void* resource_handle) {
return tvmgen_abi_run_model(args, type_code, num_args, out_value, out_type_code, resource_handle);
}
#ifdef __cplusplus
}
#endif
