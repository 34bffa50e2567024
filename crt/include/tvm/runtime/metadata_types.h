/*
 * tvm/runtime/metadata_types.h — mlfrt's own, ABI-compatible declaration of the model metadata
 * that TVM (0.9+) generates for the AOT executor with interface-api=packed (a <mod>_libN.c that
 * includes <inttypes.h>, this header and <tvm/runtime/c_runtime_api.h>, defines
 * `static const struct TVMMetadata kTvmgenMetadata[1]` and returns it from
 * tvmgen_<mod>_get_c_metadata). Written for mlfbuild; not TVM's file. The same in TVM 0.9-0.18;
 * like TVM's, it brings in <inttypes.h> and c_runtime_api.h (TVMValue, kTVMOpaqueHandle).
 *
 * ABI facts this file must match (checked in crt/src/backend.c). The generated initialisers are
 * positional, so member order is the ABI:
 *   - struct TVMMetadata: 80 bytes on x86-64 and on Cortex-M (int64 members force 8-byte
 *     alignment; each pointer is followed by 4 bytes of padding on Cortex-M);
 *   - struct TVMTensorInfo: 24 bytes on Cortex-M, 32 on x86-64;
 *   - struct TVMConstantInfo: 32 bytes on both.
 */
#ifndef MLFRT_TVM_RUNTIME_METADATA_TYPES_H_
#define MLFRT_TVM_RUNTIME_METADATA_TYPES_H_

#include <inttypes.h>
#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Value of TVMMetadata.version written by TVM 0.9-0.18. */
#define TVM_METADATA_VERSION 1

/* One input, output or workspace pool. */
struct TVMTensorInfo {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;
  DLDataType dtype;
};

/* One constant pool: data_bytes holds a serialised NDArray (params format), data_len bytes. */
struct TVMConstantInfo {
  const char* name_hint;
  int64_t byte_offset;
  int64_t data_len;
  const void* data_bytes;
};

/* The whole model. mod_name is e.g. "tvmgen_default"; the entry point is <mod_name>_run. */
struct TVMMetadata {
  int64_t version;
  const struct TVMTensorInfo* inputs;
  int64_t num_inputs;
  const struct TVMTensorInfo* outputs;
  int64_t num_outputs;
  const struct TVMTensorInfo* workspace_pools;
  int64_t num_workspace_pools;
  const struct TVMConstantInfo* constant_pools;
  int64_t num_constant_pools;
  const char* mod_name;
};

typedef struct TVMTensorInfo TVMTensorInfo;
typedef struct TVMConstantInfo TVMConstantInfo;
typedef struct TVMMetadata TVMMetadata;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_TVM_RUNTIME_METADATA_TYPES_H_ */
