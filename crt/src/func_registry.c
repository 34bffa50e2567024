/*
 * func_registry.c — look functions up in a TVM-generated system-lib registry
 * (TVMSystemLibEntryPoint()->registry), as written by TVM 0.8 (one-byte count) or 0.9-0.18
 * (uint16 count). Portable; no allocation, no libc.
 */
#include <tvm/runtime/crt/func_registry.h>

/* Width of the count in front of the names: 1 (TVM 0.8) or 2 (TVM 0.9+). A name starts with a
 * letter or '_', all >= 'A'; the high byte of a little-endian uint16 count is below 'A' unless the
 * registry has 16 640 functions or more. */
static unsigned count_width(const TVMFuncRegistry* reg) {
  const unsigned char* p = (const unsigned char*)reg->names;
  return (p[1] >= (unsigned char)'A') ? 1u : 2u;
}

uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg) {
  const unsigned char* p = (const unsigned char*)reg->names;
  if (count_width(reg) == 1u) return p[0];
  return (uint16_t)(p[0] | (p[1] << 8));
}

const char* TVMFuncRegistry_Get0thFunctionName(const TVMFuncRegistry* reg) {
  /* An empty registry is two NULs in TVM 0.8 (count, final NUL) and three from 0.9 on: names + 1
     is an empty name in both, and nothing after it may be read. */
  if (reg->names[0] == '\0' && reg->names[1] == '\0') return reg->names + 1;
  return reg->names + count_width(reg);
}

tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index) {
  /* Walk to the empty name that ends the blob rather than trusting the count: TVM 0.8's one-byte
     count wraps at 256 functions. */
  const char* entry = TVMFuncRegistry_Get0thFunctionName(reg);
  for (uint16_t i = 0; *entry != '\0'; i++) {
    const char* a = entry;
    const char* b = name;
    while (*a != '\0' && *a == *b) {
      a++;
      b++;
    }
    if (*a == '\0' && *b == '\0') {
      *function_index = i;
      return kTvmErrorNoError;
    }
    while (*a != '\0') a++; /* skip the rest of this name */
    entry = a + 1;
  }
  return kTvmErrorFunctionNameNotFound;
}

tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg, tvm_function_index_t index,
                                           TVMBackendPackedCFunc* out_func) {
  if (index >= TVMFuncRegistry_GetNumFuncs(reg)) return kTvmErrorFunctionIndexInvalid;
  *out_func = reg->funcs[index];
  return kTvmErrorNoError;
}
