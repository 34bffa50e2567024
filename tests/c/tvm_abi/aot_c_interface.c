/* The AOT entry point with interface-api=c and USMP (TVM 0.9-0.18, <mod>_lib0.c): the constant
 * pool is a static const struct in .rodata.tvm, the workspace pool a static array in
 * .bss.noinit.tvm, and tvmgen_<mod>_run passes both to the main function. */
#include "tvm/runtime/c_runtime_api.h"
#ifdef __cplusplus
extern "C" {
#endif
__attribute__((section(".rodata.tvm"), ))
static const struct global_const_workspace {
  const int8_t fused_constant_let[16] __attribute__((aligned(16))); // 16 bytes, aligned offset: 0
  const int32_t fused_constant_1_let[4] __attribute__((packed, aligned(16))); // 16 bytes, aligned offset: 16
} global_const_workspace = {
  .fused_constant_let = {
    +0x01, +0x02, -0x03, +0x04, +0x05, -0x06, +0x07, +0x08, +0x09, -0x0a, +0x0b, +0x0c, -0x0d, +0x0e, +0x0f, +0x10
  },
  .fused_constant_1_let = {
    +0x00000001, -0x00000002, +0x00000003, -0x00000004
  },
};// of total size 32 bytes
__attribute__((section(".bss.noinit.tvm"), aligned(16)))
static uint8_t global_workspace[64];
#include <tvmgen_abi.h>
TVM_DLL int32_t tvmgen_abi___tvm_main__(int8_t* input_buffer_var,int8_t* output_buffer_var,uint8_t* global_const_workspace_0_var,uint8_t* global_workspace_1_var);
int32_t tvmgen_abi_run(struct tvmgen_abi_inputs* inputs,struct tvmgen_abi_outputs* outputs) {return tvmgen_abi___tvm_main__(inputs->input,outputs->output,((uint8_t*)&global_const_workspace),((uint8_t*)&global_workspace));
}
#ifdef __cplusplus
}
#endif
