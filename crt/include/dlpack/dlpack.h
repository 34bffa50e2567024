/*
 * dlpack/dlpack.h — mlfrt's own, ABI-compatible declaration of the DLPack tensor structs that
 * TVM-generated C code uses (DLPack 0.5 in TVM 0.8-0.10, 0.7 in TVM 0.11-0.18; the layouts
 * below are identical in both). Written for mlfbuild from the published ABI; not TVM's file.
 *
 * ABI facts this file must match (checked by _Static_assert in crt/src/backend.c):
 *   - enum values of DLDeviceType and DLDataTypeCode (generated code casts literals to them,
 *     e.g. `(DLDeviceType)1` for kDLCPU);
 *   - DLDataType is 4 bytes {uint8 code, uint8 bits, uint16 lanes};
 *   - DLDevice is 8 bytes on both targets: arm-none-eabi-gcc makes enums 1 byte by default
 *     (-fshort-enums, "Tag_ABI_enum_size: small"), x86-64 4 bytes; device_id stays at offset 4;
 *   - DLTensor is 48 bytes on x86-64 (offsets data 0, device 8, ndim 16, dtype 20, shape 24,
 *     strides 32, byte_offset 40) and 40 bytes on Cortex-M/AAPCS (offsets 0/4/12/16/20/24/32,
 *     with 4 bytes of padding before the 8-byte aligned byte_offset).
 * Compile the runtime and the generated code with the same enum-size setting.
 */
#ifndef MLFRT_DLPACK_DLPACK_H_
#define MLFRT_DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/* Version of the DLPack ABI these declarations follow (0.7 = 70, as bundled by TVM 0.11+). */
#define DLPACK_VERSION 70
#define DLPACK_ABI_VERSION 1

#ifndef DLPACK_DLL
#define DLPACK_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Device kinds. Values are part of the ABI (stored in DLTensor.device.device_type). */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16
} DLDeviceType;

/* A device: 8 bytes on every target we build for (see the note at the top). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Scalar kinds, the `code` byte of DLDataType. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U
} DLDataTypeCode;

/* Element type: 4 bytes, e.g. int8 = {0, 8, 1}, float32 = {2, 32, 1}. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A tensor view: 40 bytes on Cortex-M, 48 bytes on x86-64 (see the note at the top). */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* NULL = compact row-major */
  uint64_t byte_offset;
} DLTensor;

/* Tensor plus owner, for exchanging tensors between frameworks (not used by generated code). */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_DLPACK_DLPACK_H_ */
