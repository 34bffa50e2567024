/*
 * crt_smoke.c — smoke test of mlfbuild's C runtime (crt/), run by tests/test_crt.py on QEMU
 * boards and on the host. Protocol on the console:
 *   prints "crt_smoke: hello from <board>", self-test results, then "ready";
 *   reads one line: "fault" -> jumps to an invalid address (expect "*** FAULT", exit 3);
 *                   anything else -> prints "echo: <line>" and exits with 42.
 */
#include <stdint.h>
#include <string.h>

#include "mlfrt.h"
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/module.h>

#ifndef SMOKE_BOARD
#define SMOKE_BOARD "unknown"
#endif

static int s_failures;

static void check(int ok, const char* what) {
  if (!ok) {
    s_failures++;
    mlfrt_puts("FAIL: ");
    mlfrt_puts(what);
    mlfrt_puts("\n");
  }
}

static int aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

static __attribute__((aligned(16))) uint8_t s_buffer[600];

static void workspace_test(void) {
  /* Hand over a misaligned start: the allocator must round it up (15 bytes lost -> 513 usable). */
  mlfrt_workspace_init(s_buffer + 1, 528);
  void* a = TVMBackendAllocWorkspace(kDLCPU, 0, 10, kDLFloat, 32);
  void* b = TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLInt, 8);
  check(a != NULL && b != NULL, "workspace: small allocations");
  check(aligned16(a) && aligned16(b), "workspace: 16-byte alignment");
  check((uint8_t*)b - (uint8_t*)a == 16, "workspace: bump by the rounded size");
  check(mlfrt_workspace_used() == 128, "workspace: used after two allocations");
  check(TVMBackendAllocWorkspace(kDLCPU, 0, 1000, kDLInt, 8) == NULL, "workspace: exhaustion returns NULL");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, (uint8_t*)b + 1) != 0, "workspace: a misaligned free is refused");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, s_buffer + 599) != 0, "workspace: free beyond the top is refused");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, b) == 0, "workspace: LIFO free b");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, b) != 0, "workspace: double free is refused");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, a) == 0, "workspace: LIFO free a");
  check(mlfrt_workspace_used() == 0, "workspace: empty after frees");
  a = TVMBackendAllocWorkspace(kDLCPU, 0, 10, kDLFloat, 32);
  b = TVMBackendAllocWorkspace(kDLCPU, 0, 10, kDLFloat, 32);
  check(TVMBackendFreeWorkspace(kDLCPU, 0, a) == 0 && TVMBackendFreeWorkspace(kDLCPU, 0, b) != 0,
        "workspace: an out-of-order free is caught by the next free");
  check(mlfrt_workspace_used() == 0, "workspace: empty again");
  void* big = TVMBackendAllocWorkspace(kDLCPU, 0, 512, kDLInt, 8);
  check(big != NULL && aligned16(big), "workspace: exact fit");
  check(TVMBackendAllocWorkspace(kDLCPU, 0, 1, kDLInt, 8) == NULL, "workspace: full");
  check(TVMBackendFreeWorkspace(kDLCPU, 0, big) == 0, "workspace: free exact fit");
  check(mlfrt_workspace_peak() == 512, "workspace: peak");
  check(strcmp(TVMGetLastError(), "TVMBackendAllocWorkspace: workspace exhausted") == 0,
        "last error names the failure");
  mlfrt_puts("workspace ok peak=");
  mlfrt_put_u32((uint32_t)mlfrt_workspace_peak());
  mlfrt_puts("\n");
}

static int s_task_calls;
static int lambda(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  s_task_calls++;
  *(int*)cdata = task_id * 100 + (int)penv->num_task;
  return 0;
}

static void parallel_test(void) {
  int seen = -1;
  check(TVMBackendParallelLaunch(lambda, &seen, 4) == 0, "parallel launch returns 0");
  check(s_task_calls == 1 && seen == 1, "parallel launch runs task 0 of 1 once");
  check(TVMBackendParallelBarrier(0, NULL) == 0, "parallel barrier");
}

static int fn_a(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* handle) {
  (void)args, (void)codes, (void)n, (void)ret, (void)ret_code, (void)handle;
  return 11;
}
static int fn_b(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* handle) {
  (void)args, (void)codes, (void)n, (void)ret, (void)ret_code, (void)handle;
  return 22;
}

static void registry_test(void) {
  /* The shape TVM generates in lib0.c: uint16 count (LE) + NUL-terminated names. */
  static const TVMBackendPackedCFunc funcs[] = {fn_a, fn_b, fn_a};
  static const TVMFuncRegistry reg = {"\003\000run\000run_b\000ru\000", funcs};
  tvm_function_index_t idx = 99;
  TVMBackendPackedCFunc f = NULL;
  check(TVMFuncRegistry_GetNumFuncs(&reg) == 3, "registry: count");
  check(TVMFuncRegistry_Lookup(&reg, "run_b", &idx) == 0 && idx == 1, "registry: lookup run_b");
  check(TVMFuncRegistry_Lookup(&reg, "ru", &idx) == 0 && idx == 2, "registry: lookup prefix name");
  check(TVMFuncRegistry_Lookup(&reg, "r", &idx) == kTvmErrorFunctionNameNotFound, "registry: missing name");
  check(TVMFuncRegistry_GetByIndex(&reg, 1, &f) == 0 && f(NULL, NULL, 0, NULL, NULL, NULL) == 22,
        "registry: by index");
  check(TVMFuncRegistry_GetByIndex(&reg, 3, &f) == kTvmErrorFunctionIndexInvalid, "registry: index range");
}

static void timer_test(void) {
  uint32_t hz = mlfrt_timer_hz();
  uint64_t want = (uint64_t)hz / 1000u * 3u; /* 3 ms: several SysTick periods */
  mlfrt_timer_start();
  uint32_t t0 = mlfrt_timer_ticks();
  uint64_t prev = mlfrt_timer_ticks64(), now = prev;
  int monotonic = 1;
  for (uint32_t i = 0; i < 200000000u && now - prev < want; i++) {
    uint64_t t = mlfrt_timer_ticks64();
    if (t < now) monotonic = 0;
    now = t;
  }
  uint32_t t1 = mlfrt_timer_ticks();
  check(now - prev >= want, "timer advances");
  check(monotonic, "timer is monotonic");
  mlfrt_puts("timer ok ticks=");
  mlfrt_put_u32(t1 - t0);
  mlfrt_puts(" hz=");
  mlfrt_put_u32(hz);
  mlfrt_puts("\n");
}

static void division_test(void) {
  uint32_t rest = 0;
  check(mlfrt_udiv64(18446744073709551615ull, 10u, &rest) == 1844674407370955161ull && rest == 5u, "udiv64 by 10");
  check(mlfrt_udiv64(0x123456789ABCDEFull, 0xFFFFFFFFu, &rest) == 0x1234567ull && rest == 0x8ACF1356u,
        "udiv64 by 2^32-1");
  check(mlfrt_udiv64(7u, 8u, NULL) == 0u, "udiv64 without remainder");
}

static void format_test(void) {
  mlfrt_puts("format ");
  mlfrt_put_u32(4294967295u);
  mlfrt_putc(' ');
  mlfrt_put_u64(18446744073709551615ull);
  mlfrt_puts(" 0x");
  mlfrt_put_hex32(0xDEADBEEFu);
  mlfrt_puts("\n");
}

/* The stack region's size from the linker script's symbols; the host build has no such region. */
#if defined(__arm__)
extern uint32_t _sstack[], _estack[];
static size_t stack_size(void) { return (size_t)((uintptr_t)_estack - (uintptr_t)_sstack); }
#else
static size_t stack_size(void) { return 0; }
#endif

/* One line without its end ('\r' or '\n'); -1 when no byte comes within timeout_ms. */
static int read_line(char* line, size_t size, uint32_t timeout_ms) {
  size_t n = 0;
  for (;;) {
    int c = mlfrt_getc(timeout_ms);
    if (c < 0) return -1;
    if (c == '\r' || c == '\n') break;
    if (n + 1 < size) line[n++] = (char)c;
  }
  line[n] = '\0';
  return (int)n;
}

int main(void) {
  mlfrt_init();
  mlfrt_puts("crt_smoke: hello from " SMOKE_BOARD "\n");
  workspace_test();
  parallel_test();
  registry_test();
  timer_test();
  division_test();
  format_test();
  mlfrt_puts("stack peak=");
  mlfrt_put_u32((uint32_t)mlfrt_stack_peak());
  mlfrt_puts(" size=");
  mlfrt_put_u32((uint32_t)stack_size());
  mlfrt_puts("\n");
  if (s_failures != 0) return 1;
  mlfrt_puts("ready\n");

  char line[64];
  int n = read_line(line, sizeof(line), 20000);
  if (n < 0) {
    mlfrt_puts("no input\n");
    return 2;
  }
  if (strcmp(line, "fault") == 0) {
    mlfrt_puts("faulting\n");
    void (*volatile bad)(void) = (void (*)(void))(uintptr_t)0x100u; /* even address: not Thumb code */
    bad();
    mlfrt_puts("still alive?\n");
    return 1;
  }
  mlfrt_puts("echo: ");
  mlfrt_puts(line);
  mlfrt_puts("\n");
  return 42;
}
