/* The function registry of a system library (<mod>_lib0.c of graph-executor, AOT packed and
 * operator exports): only <tvm/runtime/crt/module.h> is included. The names blob starts with the
 * function count: a uint16 from TVM 0.9 on (system_lib), one byte in TVM 0.8 (system_lib_08). */
#include <tvm/runtime/crt/module.h>
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t abi_fused_add(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, void* resource_handle);
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t abi_fused_softmax(TVMValue* args, int* type_code, int num_args, TVMValue* out_value, int* out_type_code, void* resource_handle);
static TVMBackendPackedCFunc _tvm_func_array[] = {
    (TVMBackendPackedCFunc)abi_fused_add,
    (TVMBackendPackedCFunc)abi_fused_softmax,
};
static const TVMFuncRegistry _tvm_func_registry = {
    "\002\000abi_fused_add\000abi_fused_softmax\000",    _tvm_func_array,
};
static const TVMModule _tvm_system_lib = {
    &_tvm_func_registry,
};
const TVMModule* TVMSystemLibEntryPoint(void) {
    return &_tvm_system_lib;
}

static const TVMFuncRegistry _tvm_func_registry_08 = {
    "\002abi_fused_add\000abi_fused_softmax\000",    _tvm_func_array,
};
static const TVMModule _tvm_system_lib_08 = {
    &_tvm_func_registry_08,
};
const TVMModule* abi_system_lib_08(void);
const TVMModule* abi_system_lib_08(void) {
    return &_tvm_system_lib_08;
}
