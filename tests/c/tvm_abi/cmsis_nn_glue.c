/* The TVM side of the code TVM's CMSIS-NN code generator writes around each library call
 * (src/relay/backend/contrib/cmsisnn/tir_to_runtime.cc): the includes it emits besides CMSIS-NN's
 * own headers, and a failed status reported through TVMAPISetLastError. The library is stood in
 * for by abi_cmsis_nn_call; the switch mirrors the generated `switch (!status)`. */
#include <stdio.h>
#include <stdlib.h>
#include <dlpack/dlpack.h>
#include <tvm/runtime/crt/module.h>

typedef enum { ABI_CMSIS_NN_SUCCESS = 0, ABI_CMSIS_NN_ARG_ERROR = -1, ABI_CMSIS_NN_NO_IMPL_ERROR = -2 } abi_cmsis_nn_status;
abi_cmsis_nn_status abi_cmsis_nn_call(const int8_t* input, int8_t* output);

#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_abi_cmsis_nn_main_0(int8_t* input_, int8_t* output_) {
  abi_cmsis_nn_status status = abi_cmsis_nn_call(input_, output_);
  switch (status) {
    case ABI_CMSIS_NN_SUCCESS: break;
    case ABI_CMSIS_NN_ARG_ERROR: TVMAPISetLastError("ARM_CMSIS_NN_ARG_ERROR"); return -1;
    case ABI_CMSIS_NN_NO_IMPL_ERROR: TVMAPISetLastError("ARM_CMSIS_NN_NO_IMPL_ERROR"); return -1;
  }
  return 0;
}
