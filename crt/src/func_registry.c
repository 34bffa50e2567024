/*
 * func_registry.c — look functions up in a TVM-generated system-lib registry
 * (TVMSystemLibEntryPoint()->registry). Portable; no allocation, no libc.
 */
#include <tvm/runtime/crt/func_registry.h>

uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg) {
  /* Two bytes, little-endian (the byte order of the x86-64/arm64 machine that ran TVM). */
  const unsigned char* p = (const unsigned char*)reg->names;
  return (uint16_t)(p[0] | (p[1] << 8));
}

tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index) {
  uint16_t n = TVMFuncRegistry_GetNumFuncs(reg);
  const char* entry = reg->names + 2;
  for (uint16_t i = 0; i < n; i++) {
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
