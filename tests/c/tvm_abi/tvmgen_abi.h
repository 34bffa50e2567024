/* The interface header TVM writes for an AOT module with interface-api=c (interface_c.cc): plain
   C, only <stdint.h>; the structs hold void* tensor pointers named after the tensors. Used by
   aot_c_interface.c. */
#ifndef TVMGEN_ABI_H_
#define TVMGEN_ABI_H_
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TVMGEN_ABI_INPUT_SIZE 16
#define TVMGEN_ABI_OUTPUT_SIZE 16
#define TVMGEN_ABI_WORKSPACE_SIZE 64

struct tvmgen_abi_inputs {
  void* input;
};

struct tvmgen_abi_outputs {
  void* output;
};

int32_t tvmgen_abi_run(struct tvmgen_abi_inputs* inputs, struct tvmgen_abi_outputs* outputs);

#ifdef __cplusplus
}
#endif

#endif /* TVMGEN_ABI_H_ */
