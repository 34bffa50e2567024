/* A packed operator in the shape TVM's C host code generator writes it (graph executor, AOT with
 * the packed API, operator exports): arguments unpacked through TVMValue and DLTensor, checks
 * reported through TVMAPISetLastError, a kernel workspace from TVMBackendAllocWorkspace, a DLTensor
 * built on the stack for a call, a packed function called by name (TVMBackendGetFuncFromEnv +
 * TVMFuncCall) and another called directly (C-packed). TVM 0.8-0.11 print `bool` without including
 * <stdbool.h>, so neither does this file. */
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>

void* __tvm_module_ctx = NULL;
static void* abi_argsort_packed = NULL;

/* A C-packed callee, declared as the generated lib0.c declares it. */
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t abi_fused_softmax(TVMValue* args, int* type_code, int num_args, TVMValue* out_value,
                                  int* out_type_code, void* resource_handle);

#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t abi_fused_add(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value,
                              int32_t* out_ret_tcode, void* resource_handle) {
  TVMValue stack[2];
  void* stack_tcode = stack;
  TVMValue stack_1[2];
  void* stack_value = stack_1;
  TVMValue stack_2[6];
  void* stack_array = stack_2;
  TVMValue stack_3[2];
  void* stack_shape = stack_3;
  if (!(num_args == 2)) {
    TVMAPISetLastError("abi_fused_add: num_args should be 2");
    return -1;
  }
  int32_t p0_code = arg_type_ids[0];
  int32_t out_code = arg_type_ids[1];
  void* p0 = (((TVMValue*)args)[0].v_handle);
  void* out = (((TVMValue*)args)[1].v_handle);
  if (!((p0_code == 3) || (p0_code == 13) || (p0_code == 7) || (p0_code == 4))) {
    TVMAPISetLastError("abi_fused_add: Expect arg[0] to be pointer");
    return -1;
  }
  if (!((out_code == 3) || (out_code == 13) || (out_code == 7) || (out_code == 4))) {
    TVMAPISetLastError("abi_fused_add: Expect arg[1] to be pointer");
    return -1;
  }
  void* p0_1 = (((DLTensor*)p0)[0].data);
  int64_t* p0_shape = (int64_t*)(((DLTensor*)p0)[0].shape);
  int64_t* p0_strides = (int64_t*)(((DLTensor*)p0)[0].strides);
  int32_t dev_id = (((DLTensor*)p0)[0].device.device_id);
  void* out_1 = (((DLTensor*)out)[0].data);
  bool p0_compact = (p0_strides == NULL);
  if (!(2 == (((DLTensor*)p0)[0].ndim))) {
    TVMAPISetLastError("abi_fused_add.p0.ndim is expected to equal 2");
    return -1;
  }
  if (!((((((DLTensor*)p0)[0].dtype.code) == (uint8_t)0) && ((((DLTensor*)p0)[0].dtype.bits) == (uint8_t)8)) &&
        ((((DLTensor*)p0)[0].dtype.lanes) == (uint16_t)1))) {
    TVMAPISetLastError("abi_fused_add.p0.dtype is expected to be int8");
    return -1;
  }
  if (!((int32_t)p0_shape[0] == 1) || !p0_compact || !((uint64_t)0 == (((DLTensor*)p0)[0].byte_offset))) {
    TVMAPISetLastError("abi_fused_add: unexpected layout of p0");
    return -1;
  }
  if (!(1 == ((int32_t)(((DLTensor*)p0)[0].device.device_type)))) {
    TVMAPISetLastError("abi_fused_add: expected device_type to be kDLCPU");
    return -1;
  }
  void* ws = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)1024, 0, 8);
  if (ws == NULL) {
    return -1;
  }
  for (int32_t i = 0; i < 16; ++i) {
    ((int8_t*)ws)[i] = (int8_t)(((int8_t*)p0_1)[i] + (int8_t)1);
  }
  ((int64_t*)stack_shape)[0] = (int64_t)1;
  ((int64_t*)stack_shape)[1] = (int64_t)16;
  (((DLTensor*)stack_array)[0].data) = ws;
  (((DLTensor*)stack_array)[0].shape) = (&(((int64_t*)stack_shape)[0]));
  (((DLTensor*)stack_array)[0].strides) = (int64_t*)NULL;
  (((DLTensor*)stack_array)[0].ndim) = (uint32_t)2;
  (((DLTensor*)stack_array)[0].dtype.code) = (uint8_t)0;
  (((DLTensor*)stack_array)[0].dtype.bits) = (uint8_t)8;
  (((DLTensor*)stack_array)[0].dtype.lanes) = (uint16_t)1;
  (((DLTensor*)stack_array)[0].byte_offset) = (uint64_t)0;
  (((DLTensor*)stack_array)[0].device.device_id) = dev_id;
  (((DLTensor*)stack_array)[0].device.device_type) = (DLDeviceType)1;
  (((TVMValue*)stack_value)[0].v_handle) = (&(((DLTensor*)stack_array)[0]));
  ((int32_t*)stack_tcode)[0] = 7;
  (((TVMValue*)stack_value)[1].v_handle) = out;
  ((int32_t*)stack_tcode)[1] = 3;
  if (abi_argsort_packed == NULL) {
    if (TVMBackendGetFuncFromEnv(__tvm_module_ctx, "tvm.contrib.sort.argsort", &abi_argsort_packed) != 0) {
      return -1;
    }
  }
  TVMValue ret_val;
  int ret_type_code;
  if (TVMFuncCall(abi_argsort_packed, (TVMValue*)stack_value, (int*)stack_tcode, 2, &ret_val, &ret_type_code) != 0) {
    return -1;
  }
  TVMValue ret_val_1;
  int ret_type_code_1;
  if (abi_fused_softmax((TVMValue*)stack_value, (int*)stack_tcode, 2, &ret_val_1, &ret_type_code_1,
                        resource_handle) != 0) {
    return -1;
  }
  ((float*)out_1)[0] = expf((float)ret_val.v_float64) + (float)ret_val_1.v_int64;
  if (TVMBackendFreeWorkspace(1, dev_id, ws) != 0) {
    return -1;
  }
  (((TVMValue*)out_ret_value)[0].v_int64) = (int64_t)0;
  out_ret_tcode[0] = kTVMArgInt;
  return 0;
}
