/* The model metadata of an AOT module with interface-api=packed (TVM 0.9-0.18): positional
 * TVMMetadata / TVMTensorInfo / TVMConstantInfo tables and the packed function that returns them
 * as an opaque handle (kTVMOpaqueHandle, the one type code generated code spells by name). */
#include <inttypes.h>
#include <tvm/runtime/metadata_types.h>
#include <tvm/runtime/c_runtime_api.h>
static const int64_t kTvmgenMetadata_inputs_0_shape[2] = {
1L, 16L};
static const struct TVMTensorInfo kTvmgenMetadata_inputs[1] = {
{
"input" /* name*/,
kTvmgenMetadata_inputs_0_shape,
2L /* num_shape*/,
{0, 8, 1} /* dtype*/}
};
static const int64_t kTvmgenMetadata_outputs_0_shape[2] = {
1L, 16L};
static const struct TVMTensorInfo kTvmgenMetadata_outputs[1] = {
{
"output" /* name*/,
kTvmgenMetadata_outputs_0_shape,
2L /* num_shape*/,
{2, 32, 1} /* dtype*/}
};
static const int64_t kTvmgenMetadata_workspace_pools_0_shape[1] = {
64L};
static const struct TVMTensorInfo kTvmgenMetadata_workspace_pools[1] = {
{
"global_workspace_1_var" /* name*/,
kTvmgenMetadata_workspace_pools_0_shape,
1L /* num_shape*/,
{1, 8, 1} /* dtype*/}
};
static const struct TVMConstantInfo kTvmgenMetadata_constant_pools[1] = {
{
"fused_constant_let" /* name_hint*/,
0L /* byte_offset*/,
4L /* data_len*/,
"\x01\x02\x03\x04"
}
};
static const struct TVMMetadata kTvmgenMetadata[1] = {
{
1L /* version*/,
kTvmgenMetadata_inputs,
1L /* num_inputs*/,
kTvmgenMetadata_outputs,
1L /* num_outputs*/,
kTvmgenMetadata_workspace_pools,
1L /* num_workspace_pools*/,
kTvmgenMetadata_constant_pools,
1L /* num_constant_pools*/,
"tvmgen_abi" /* mod_name*/}
};
#ifdef __cplusplus
extern "C"
#endif
TVM_DLL int32_t tvmgen_abi_get_c_metadata(TVMValue* arg_values, int* arg_tcodes, int num_args, TVMValue* ret_values, int* ret_tcodes, void* resource_handle) {
    (void)arg_values, (void)arg_tcodes, (void)num_args, (void)resource_handle;
    ret_values[0].v_handle = (void*) &kTvmgenMetadata;
    ret_tcodes[0] = kTVMOpaqueHandle;
    return 0;
};
