/*
 * backend.c — the TVM backend functions generated code calls, for a single-threaded,
 * allocation-free firmware:
 *   TVMBackendAllocWorkspace / TVMBackendFreeWorkspace  LIFO bump allocator over one buffer (a pool,
 *                                                       or the running operator's planned region)
 *   TVMAPISetLastError / TVMGetLastError                 static message buffer
 *   TVMBackendParallelLaunch / TVMBackendParallelBarrier serial execution
 * plus mlfrt_workspace_init/peak/used. Portable (Cortex-M and host). Compile with
 * -ffunction-sections so the functions a model does not use vanish at link time.
 */
#include <stdint.h>

#include "mlfrt.h"
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/metadata_types.h>

/* ---- ABI checks: our headers must lay structs out exactly as TVM's generated code expects. -- */
#define MLFRT_PTR32 (UINTPTR_MAX == 0xFFFFFFFFu)
_Static_assert(sizeof(DLDataType) == 4, "DLDataType must be 4 bytes");
_Static_assert(sizeof(DLDevice) == 8, "DLDevice must be 8 bytes");
_Static_assert(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id at offset 4");
_Static_assert(sizeof(TVMValue) == 8, "TVMValue must be 8 bytes");
_Static_assert(_Alignof(TVMValue) == 8, "TVMValue must be 8-aligned");
_Static_assert(sizeof(DLTensor) == (MLFRT_PTR32 ? 40 : 48), "DLTensor size (40 on Cortex-M, 48 on x86-64)");
_Static_assert(offsetof(DLTensor, device) == (MLFRT_PTR32 ? 4 : 8), "DLTensor.device offset");
_Static_assert(offsetof(DLTensor, ndim) == (MLFRT_PTR32 ? 12 : 16), "DLTensor.ndim offset");
_Static_assert(offsetof(DLTensor, dtype) == (MLFRT_PTR32 ? 16 : 20), "DLTensor.dtype offset");
_Static_assert(offsetof(DLTensor, shape) == (MLFRT_PTR32 ? 20 : 24), "DLTensor.shape offset");
_Static_assert(offsetof(DLTensor, strides) == (MLFRT_PTR32 ? 24 : 32), "DLTensor.strides offset");
_Static_assert(offsetof(DLTensor, byte_offset) == (MLFRT_PTR32 ? 32 : 40), "DLTensor.byte_offset offset");
_Static_assert(sizeof(TVMFuncRegistry) == 2 * sizeof(void*), "TVMFuncRegistry is two pointers");
_Static_assert(sizeof(TVMModule) == sizeof(void*), "TVMModule is one pointer");
_Static_assert(sizeof(struct TVMMetadata) == 80, "TVMMetadata must be 80 bytes");
_Static_assert(offsetof(struct TVMMetadata, mod_name) == 72, "TVMMetadata.mod_name offset");
_Static_assert(sizeof(struct TVMTensorInfo) == (MLFRT_PTR32 ? 24 : 32), "TVMTensorInfo size");
_Static_assert(offsetof(struct TVMTensorInfo, dtype) == (MLFRT_PTR32 ? 16 : 24), "TVMTensorInfo.dtype offset");
_Static_assert(sizeof(struct TVMConstantInfo) == 32, "TVMConstantInfo must be 32 bytes");
_Static_assert(sizeof(tvm_crt_error_t) == 4, "tvm_crt_error_t is 32-bit");
_Static_assert(kTVMOpaqueHandle == 3 && kTVMDLTensorHandle == 7 && kTVMNDArrayHandle == 13 &&
                   kTVMArgBool == 15 && kTVMExtBegin == 16,
               "TVMArgTypeCode values (TVM 0.18 numbering)");
_Static_assert(kTvmErrorFunctionCallInvalidArg == 0x803 && kTvmErrorSystemErrorMask < 0,
               "tvm_crt_error_t numbering");
_Static_assert(kDLCPU == 1 && kDLFloat == 2 && kDLUInt == 1, "DLPack enum values");

_Static_assert((MLFRT_WORKSPACE_ALIGN & (MLFRT_WORKSPACE_ALIGN - 1u)) == 0 && MLFRT_WORKSPACE_ALIGN >= 8u,
               "MLFRT_WORKSPACE_ALIGN must be a power of two >= 8");

/* ---- Workspace: LIFO bump allocator ------------------------------------------------------- */

/* Four words of state and no bookkeeping per block: TVM's generated code frees in exactly the
 * reverse order it allocates (AOT and operator bodies alike), so freeing a block rewinds the top
 * to that block's start, as TVM's own stack allocator does. A free must name a block start inside
 * the live region; an out-of-order free is caught at the latest by the free that follows it. */
static struct {
  uint8_t* base; /* aligned start of the buffer */
  size_t size;   /* usable bytes from base */
  size_t top;    /* bytes in use (end of the last allocation) */
  size_t peak;   /* highest `top` so far */
} s_ws;

void mlfrt_workspace_init(void* buf, size_t size) {
  uintptr_t addr = (uintptr_t)buf;
  uintptr_t aligned = (addr + (MLFRT_WORKSPACE_ALIGN - 1u)) & ~(uintptr_t)(MLFRT_WORKSPACE_ALIGN - 1u);
  size_t pad = (size_t)(aligned - addr);
  s_ws.base = (buf != NULL && size > pad) ? (uint8_t*)buf + pad : NULL;
  s_ws.size = (s_ws.base != NULL) ? size - pad : 0;
  s_ws.top = 0;
  s_ws.peak = 0;
}

void mlfrt_workspace_region(void* buf, size_t size) {
  s_ws.base = (uint8_t*)buf;
  s_ws.size = (buf != NULL) ? size : 0;
  s_ws.top = 0;
}

size_t mlfrt_workspace_peak(void) { return s_ws.peak; }

size_t mlfrt_workspace_used(void) { return s_ws.top; }

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (s_ws.base == NULL) {
    TVMAPISetLastError("TVMBackendAllocWorkspace: no workspace (call mlfrt_workspace_init)");
    return NULL;
  }
  /* Round up to the alignment; a zero-byte request still gets a distinct block. */
  uint64_t rounded = (nbytes + (MLFRT_WORKSPACE_ALIGN - 1u)) & ~(uint64_t)(MLFRT_WORKSPACE_ALIGN - 1u);
  if (rounded == 0) rounded = MLFRT_WORKSPACE_ALIGN;
  if (rounded < nbytes || rounded > (uint64_t)(s_ws.size - s_ws.top)) {
    TVMAPISetLastError("TVMBackendAllocWorkspace: workspace exhausted");
    return NULL;
  }
  size_t start = s_ws.top;
  s_ws.top = start + (size_t)rounded;
  if (s_ws.top > s_ws.peak) s_ws.peak = s_ws.top;
  return s_ws.base + start;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  uintptr_t offset = (uintptr_t)ptr - (uintptr_t)s_ws.base; /* wraps to huge when ptr < base */
  if (s_ws.base == NULL || ptr == NULL || offset >= s_ws.top || (offset & (MLFRT_WORKSPACE_ALIGN - 1u)) != 0u) {
    TVMAPISetLastError("TVMBackendFreeWorkspace: not a live allocation (frees must come in reverse order)");
    return -1;
  }
  s_ws.top = (size_t)offset;
  return 0;
}

/* ---- Last error ---------------------------------------------------------------------------- */

/* ABI fact: TVM's C code generator passes string literals to TVMAPISetLastError (assertion and
 * type-check messages, codegen_c_host.cc), and so does this runtime, so keeping the pointer is
 * safe and costs one word of RAM instead of a message buffer. */
static const char* s_last_error;

void TVMAPISetLastError(const char* msg) { s_last_error = msg; }

const char* TVMGetLastError(void) { return (s_last_error != NULL) ? s_last_error : ""; }

/* ---- Parallel loops: run serially ------------------------------------------------------------ */

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  (void)num_task; /* whatever was asked, one task does all the work */
  TVMParallelGroupEnv env;
  env.sync_handle = NULL;
  env.num_task = 1;
  return flambda(0, &env, cdata);
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id;
  (void)penv;
  return 0;
}
