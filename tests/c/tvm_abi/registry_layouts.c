/* Host program: the function registry reads both names-blob layouts — TVM 0.8's one-byte count and
 * the uint16 count of TVM 0.9-0.18 — including empty registries and a one-byte count that wrapped
 * (TVM 0.8 with 256 functions writes 0). Prints "ok" or the first failure; exit status 0 on
 * success. */
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/crt/func_registry.h>

static int first(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a, (void)t, (void)n, (void)r, (void)rt, (void)h;
  return 1;
}
static int second(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a, (void)t, (void)n, (void)r, (void)rt, (void)h;
  return 2;
}
static const TVMBackendPackedCFunc funcs[] = {first, second};

static int failures;
static void check(int ok, const char* what) {
  if (!ok && failures++ == 0) printf("FAIL: %s\n", what);
}

static void check_registry(const TVMFuncRegistry* reg, const char* layout) {
  char what[96];
  tvm_function_index_t index = 99;
  TVMBackendPackedCFunc f = NULL;
  snprintf(what, sizeof what, "%s: count", layout);
  check(TVMFuncRegistry_GetNumFuncs(reg) == 2, what);
  snprintf(what, sizeof what, "%s: first name", layout);
  check(strcmp(TVMFuncRegistry_Get0thFunctionName(reg), "tvmgen_default_fused_add") == 0, what);
  snprintf(what, sizeof what, "%s: lookup", layout);
  check(TVMFuncRegistry_Lookup(reg, "_tvm_second", &index) == kTvmErrorNoError && index == 1, what);
  snprintf(what, sizeof what, "%s: call by index", layout);
  check(TVMFuncRegistry_GetByIndex(reg, index, &f) == kTvmErrorNoError && f(NULL, NULL, 0, NULL, NULL, NULL) == 2,
        what);
  snprintf(what, sizeof what, "%s: missing name", layout);
  check(TVMFuncRegistry_Lookup(reg, "tvmgen_default_fused", &index) == kTvmErrorFunctionNameNotFound, what);
  snprintf(what, sizeof what, "%s: index range", layout);
  check(TVMFuncRegistry_GetByIndex(reg, 2, &f) == kTvmErrorFunctionIndexInvalid, what);
}

int main(void) {
  const TVMFuncRegistry v09 = {"\002\000tvmgen_default_fused_add\000_tvm_second\000", funcs};
  const TVMFuncRegistry v08 = {"\002tvmgen_default_fused_add\000_tvm_second\000", funcs};
  check_registry(&v09, "uint16 count (TVM 0.9+)");
  check_registry(&v08, "one-byte count (TVM 0.8)");

  /* Exactly as long as TVM writes them (the literal's own NUL ends the blob). */
  static const char empty09[3] = {0, 0, 0};
  static const char empty08[2] = {0, 0};
  const TVMFuncRegistry none09 = {empty09, funcs};
  const TVMFuncRegistry none08 = {empty08, funcs};
  tvm_function_index_t index = 0;
  check(TVMFuncRegistry_GetNumFuncs(&none09) == 0 && TVMFuncRegistry_Lookup(&none09, "x", &index) != 0,
        "empty registry, uint16 count");
  check(TVMFuncRegistry_GetNumFuncs(&none08) == 0 && TVMFuncRegistry_Lookup(&none08, "x", &index) != 0,
        "empty registry, one-byte count");

  const TVMFuncRegistry wrapped = {"\000first\000_tvm_second\000", funcs};
  check(TVMFuncRegistry_Lookup(&wrapped, "_tvm_second", &index) == kTvmErrorNoError && index == 1,
        "lookup past a wrapped one-byte count");
  if (failures == 0) printf("ok\n");
  return failures != 0;
}
