/*
 * mlf_tvm_platform.c — what TVM's standalone C runtime needs from the firmware (--runtime tvm),
 * written for mlfbuild on top of mlfrt (crt/: console, timer, exit, startup):
 *
 *   TVMPlatformMemoryAllocate / Free   TVM's own memory managers (src/runtime/crt/memory):
 *                                      the stack allocator for AOT (as TVM's Zephyr
 *                                      aot_standalone_demo and mlperftiny projects do), the page
 *                                      allocator for the graph executor (as apps/bundle_deploy and
 *                                      the CRT's platform.c.template do: its frees are not LIFO)
 *   TVMPlatformAbort                   prints "*** FAULT tvm: TVMPlatformAbort(0x....)" and exits
 *                                      with MLFRT_FAULT_EXIT_CODE, like any other firmware fault
 *   TVMPlatformTimerStart / Stop       mlfrt's timer (SysTick on Cortex-M)
 *   TVMLogf                            one console line per message ("tvm: ...")
 *   TVMSystemLibEntryPoint (weak)      NULL for models built without system-lib (crt_runtime_api.c
 *                                      references it: apache/tvm#10237)
 *   usleep (Cortex-M)                  busy wait (the CRT's time evaluator calls it; newlib-nano
 *                                      has none)
 *
 * and mlfrt_workspace_init/peak/used, which main.c calls around every run (crt/src/backend.c,
 * which defines them for our own runtime, is not part of a --runtime tvm build). The pool is set
 * up by the first call only and keeps its state afterwards, as TVM's own applications initialise
 * their memory manager once. The peak is the pool high-water since the firmware started:
 *   stack allocator: the highest allocation end, in bytes from the (16-aligned) pool start;
 *   page allocator:  the smallest pool that would have held every page used so far
 *                    (pages high-water x (page + per-page metadata) + the manager), i.e. what a
 *                    bisection of the pool size would find for the same run sequence.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "crt_config.h"
#include "mlf_tvm_platform.h"
#include "mlfrt.h"
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/stack_allocator.h>
#if MLF_TVM_PAGE_ALLOCATOR
#include <tvm/runtime/crt/internal/memory/page_allocator.h>
#include <tvm/runtime/crt/packed_func.h>
#include <tvm/runtime/crt/page_allocator.h>
#endif

#ifndef MLF_TVM_LOG_BYTES
#define MLF_TVM_LOG_BYTES 160
#endif

/* ---- Memory: one pool, managed by TVM's stack or page allocator ----------------------------- */

static struct {
  int ready;
  const uint8_t* buffer; /* what the pool was set up over */
  size_t size;
  size_t peak;
  int exhausted;         /* an allocation failed for want of memory */
#if MLF_TVM_PAGE_ALLOCATOR
  MemoryManagerInterface* pages;
#else
  tvm_workspace_t stack;
#endif
} s_pool;

#if MLF_TVM_PAGE_ALLOCATOR
/* The page allocator keeps its bookkeeping at the end of the pool: per page one Page, one
   PageEntry and one IndexedEntry, plus the MemoryManager itself (page_allocator.c). */
static size_t page_pool_needed(size_t pages) {
  size_t per_page = ((size_t)1 << MLF_TVM_PAGE_SIZE_LOG2) + sizeof(Page) + sizeof(PageEntry) + sizeof(IndexedEntry);
  return pages * per_page + sizeof(MemoryManager);
}
#endif

void mlfrt_workspace_init(void* buf, size_t size) {
  if (s_pool.ready || buf == NULL || size == 0u) return;
#if MLF_TVM_PAGE_ALLOCATOR
  if (PageMemoryManagerCreate(&s_pool.pages, (uint8_t*)buf, size, MLF_TVM_PAGE_SIZE_LOG2) != kTvmErrorNoError) return;
#else
  if (StackMemoryManager_Init(&s_pool.stack, (uint8_t*)buf, size) != kTvmErrorNoError) return;
#endif
  s_pool.ready = 1;
  s_pool.buffer = (const uint8_t*)buf;
  s_pool.size = size;
}

size_t mlfrt_workspace_peak(void) { return s_pool.peak; }

size_t mlfrt_workspace_used(void) {
  if (!s_pool.ready) return 0;
#if MLF_TVM_PAGE_ALLOCATOR
  const MemoryManager* mgr = (const MemoryManager*)s_pool.pages;
  size_t free_pages = 0;
  for (size_t i = 0; i < mgr->free_map.num_entries; i++) free_pages += (size_t)mgr->free_map.entries[i].page.num_pages;
  return (mgr->ptable.num_pages - free_pages) * mgr->ptable.page_size_bytes;
#else
  return (size_t)(s_pool.stack.next_alloc - s_pool.stack.workspace);
#endif
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  tvm_crt_error_t err = kTvmErrorPlatformNoMemory;
  size_t high = 0;
  *out_ptr = NULL;
  if (s_pool.ready) {
#if MLF_TVM_PAGE_ALLOCATOR
    err = s_pool.pages->Allocate(s_pool.pages, num_bytes, dev, out_ptr);
    high = page_pool_needed(((const MemoryManager*)s_pool.pages)->ptable.num_pages);
#else
    if (num_bytes <= (size_t)INT32_MAX) err = StackMemoryManager_Allocate(&s_pool.stack, (int32_t)num_bytes, out_ptr);
    high = (size_t)(s_pool.stack.next_alloc - s_pool.buffer);
#endif
  }
  (void)dev;
  if (err == kTvmErrorPlatformNoMemory) s_pool.exhausted = 1;
  if (high > s_pool.peak) s_pool.peak = high;
  return err;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  if (!s_pool.ready) return kTvmErrorPlatformNoMemory;
#if MLF_TVM_PAGE_ALLOCATOR
  return s_pool.pages->Free(s_pool.pages, ptr, dev);
#else
  (void)dev;
  return StackMemoryManager_Free(&s_pool.stack, ptr);
#endif
}

/* ---- Errors and logging ------------------------------------------------------------------- */

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  mlfrt_puts("\n*** FAULT tvm: TVMPlatformAbort(0x");
  mlfrt_put_hex32((uint32_t)error_code);
  mlfrt_puts(")");
  if (s_pool.exhausted) {
    mlfrt_puts(" after the TVM memory pool (");
    mlfrt_put_u32((uint32_t)s_pool.size);
    mlfrt_puts(" B) ran out");
  }
  mlfrt_puts("\n");
  mlfrt_exit(MLFRT_FAULT_EXIT_CODE);
}

void TVMLogf(const char* format, ...) {
  char line[MLF_TVM_LOG_BYTES];
  va_list args;
  va_start(args, format);
  int length = vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (length < 0) return;
  mlfrt_puts("tvm: ");
  mlfrt_puts(line);
  size_t shown = strlen(line);
  if (shown == 0u || line[shown - 1u] != '\n') mlfrt_puts("\n");
}

void mlf_tvm_report(const char* what) {
  const char* message = TVMGetLastError();
  mlfrt_puts("tvm: ");
  mlfrt_puts(what);
  mlfrt_puts(" failed");
  if (message != NULL && message[0] != '\0') {
    mlfrt_puts(": ");
    mlfrt_puts(message);
  }
  mlfrt_puts("\n");
}

/* ---- Timers, used by the CRT's time evaluator --------------------------------------------- */

static uint64_t s_timer_start;
static int s_timer_running;

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (s_timer_running) return kTvmErrorPlatformTimerBadState;
  s_timer_running = 1;
  s_timer_start = mlfrt_timer_ticks64();
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  if (!s_timer_running) return kTvmErrorPlatformTimerBadState;
  s_timer_running = 0;
  *elapsed_time_seconds = (double)(mlfrt_timer_ticks64() - s_timer_start) / (double)mlfrt_timer_hz();
  return kTvmErrorNoError;
}

/* TVM's templates call this from main(); the CRT itself does not. Nothing to do here: the
   memory manager is set up over the workspace pool by mlfrt_workspace_init(). */
tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

/* ---- Runtime start-up (graph executor) ---------------------------------------------------- */

#if MLF_TVM_PAGE_ALLOCATOR
/* C99 inline in packed_func.h: this declaration makes this file emit its external definition. */
extern TVMModuleHandle TVMArgs_AsModuleHandle(const TVMArgs* args, size_t index);

int mlf_tvm_system_lib(TVMModuleHandle* out) {
  static TVMModuleHandle system_lib;
  static int ready;
  if (!ready) {
    tvm_crt_error_t err = TVMInitializeRuntime();
    if (err != kTvmErrorNoError) {
      mlfrt_puts("tvm: TVMInitializeRuntime failed: error 0x");
      mlfrt_put_hex32((uint32_t)err);
      mlfrt_puts("\n");
      return -1;
    }
    TVMPackedFunc function;
    TVMArgs args = TVMArgs_Create(NULL, NULL, 0);
    if (TVMPackedFunc_InitGlobalFunc(&function, "runtime.SystemLib", &args) != 0 ||
        TVMPackedFunc_Call(&function) != 0) {
      mlf_tvm_report("runtime.SystemLib");
      return -1;
    }
    system_lib = TVMArgs_AsModuleHandle(&function.ret_value, 0);
    ready = 1;
  }
  *out = system_lib;
  return 0;
}
#endif

/* ---- What the CRT links against that a bare-metal libc or the model may not define -------- */

/* crt_runtime_api.c calls this for "runtime.SystemLib"; models exported with system-lib define
   the real one in <mod>_lib0.c, which takes precedence over this weak stub. */
__attribute__((weak)) const TVMModule* TVMSystemLibEntryPoint(void) { return NULL; }

#ifndef MLFRT_HOST
#include <sys/types.h>
int usleep(useconds_t microseconds);
int usleep(useconds_t microseconds) {
  uint64_t end = mlfrt_timer_ticks64() + (uint64_t)microseconds * mlfrt_timer_hz() / 1000000u;
  while (mlfrt_timer_ticks64() < end) {
  }
  return 0;
}
#endif
