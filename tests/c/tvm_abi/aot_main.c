/* The AOT main function with the unpacked API, in the shape TVM's AOT code generator lowers it
 * (TVM 0.8-0.18): operators are called as plain C functions and return 0 or -1. Without USMP the
 * intermediates come from TVMBackendAllocWorkspace and are freed in reverse order; with USMP they
 * are offsets into the workspace pool passed in. */
#define TVM_EXPORTS
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_abi_fused_add(int8_t* p0, int8_t* T_add, uint8_t* global_const_workspace_var,
                                     uint8_t* global_workspace_var);

#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_abi___tvm_main__(int8_t* input_buffer_var, int8_t* output_buffer_var,
                                        uint8_t* global_const_workspace_0_var, uint8_t* global_workspace_1_var) {
  /* USMP: an intermediate inside the pool. */
  void* sid_1_let = (&(((uint8_t*)global_workspace_1_var)[32]));
  if (tvmgen_abi_fused_add(input_buffer_var, (int8_t*)sid_1_let, global_const_workspace_0_var,
                           global_workspace_1_var) != 0) {
    return -1;
  }
  /* Without USMP: intermediates from the workspace allocator. */
  void* sid_2_let = TVMBackendAllocWorkspace(1, 0, (uint64_t)16, 0, 8);
  if (sid_2_let == NULL) {
    return -1;
  }
  void* sid_3_let = TVMBackendAllocWorkspace(1, 0, (uint64_t)16, 0, 8);
  if (sid_3_let == NULL) {
    return -1;
  }
  if (tvmgen_abi_fused_add((int8_t*)sid_1_let, (int8_t*)sid_2_let, global_const_workspace_0_var,
                           global_workspace_1_var) != 0) {
    return -1;
  }
  if (tvmgen_abi_fused_add((int8_t*)sid_2_let, (int8_t*)sid_3_let, global_const_workspace_0_var,
                           global_workspace_1_var) != 0) {
    return -1;
  }
  if (tvmgen_abi_fused_add((int8_t*)sid_3_let, output_buffer_var, global_const_workspace_0_var,
                           global_workspace_1_var) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(1, 0, sid_3_let) != 0) {
    return -1;
  }
  if (TVMBackendFreeWorkspace(1, 0, sid_2_let) != 0) {
    return -1;
  }
  return 0;
}
