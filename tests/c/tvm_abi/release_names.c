/* Names that differ between TVM releases, all available at once: TVM 0.8's executor error names
 * next to 0.9's, TVM 0.18's kTVMArgBool, the macros TVM 0.12 added, TVM's device kinds, and the
 * system-error mask (a negative status). */
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/func_registry.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/metadata_types.h>

TVM_WEAK int abi_weak_hook(void);
TVM_WEAK int abi_weak_hook(void) { return 0; }

/* A packed function that takes one bool argument (TVM 0.18 passes it with kTVMArgBool). */
TVM_DLL int abi_bool_arg(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, int* out_ret_tcode,
                         void* resource_handle);
TVM_DLL int abi_bool_arg(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, int* out_ret_tcode,
                         void* resource_handle) {
  TVM_ATTRIBUTE_UNUSED void* unused = resource_handle;
  if (num_args != 1) return kTvmErrorFunctionCallNumArguments;
  if (type_codes[0] != kTVMArgBool && type_codes[0] != kTVMArgInt) return kTvmErrorFunctionCallWrongArgType;
  bool flag = args[0].v_int64 != 0;
  out_ret_value[0].v_int64 = flag ? kTvmErrorGraphModuleNoSuchInput : kTvmErrorExecutorModuleNoSuchInput;
  out_ret_tcode[0] = kTVMArgInt;
  return abi_weak_hook();
}

int abi_is_system_error(tvm_crt_error_t status);
int abi_is_system_error(tvm_crt_error_t status) {
  return (status & kTvmErrorSystemErrorMask) != 0 && status < 0;
}

int abi_category(tvm_crt_error_t status);
int abi_category(tvm_crt_error_t status) {
  tvm_crt_error_category_t category =
      (tvm_crt_error_category_t)((status & TVM_CRT_ERROR_CATEGORY_Msk) >> TVM_CRT_ERROR_CATEGORY_Pos);
  return category == kTvmErrorCategoryGraphExecutor ? kTvmErrorCategoryExecutor : (int)category;
}

int abi_device_kinds(void);
int abi_device_kinds(void) {
  DLDevice cpu = {kDLCPU, 0};
  DLDevice micro = {(DLDeviceType)kDLMicroDev, 0};
  return cpu.device_type + micro.device_type + kDLHexagon + kTVMExtBegin + (kTVMNullptr == 4);
}
