/*
 * mlfrt.h — the runtime/platform API of mlfbuild firmware (used by the rendered main.c).
 *
 * One API, two implementations chosen by which file is compiled:
 *   crt/src/platform_cortexm.c (+ startup_cortexm.c)  bare-metal Cortex-M, polled UART, SysTick
 *   crt/src/platform_host.c                           Linux: stdin/stdout, clock_gettime, exit()
 * and portable parts in crt/src/mlfrt_common.c (text output) and crt/src/backend.c (workspace,
 * TVM backend functions). No function allocates memory dynamically. Options: mlfrt_config.h.
 */
#ifndef MLFRT_H_
#define MLFRT_H_

#include <stddef.h>
#include <stdint.h>

#include "mlfrt_config.h"

#ifdef __cplusplus
extern "C" {
#define MLFRT_NORETURN [[noreturn]]
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define MLFRT_NORETURN _Noreturn
#elif defined(__GNUC__)  /* C99: the compilers' own spelling (-std=c99 -Wpedantic stays quiet) */
#define MLFRT_NORETURN __attribute__((noreturn))
#else
#define MLFRT_NORETURN
#endif

/* Version of this API (major * 100 + minor). */
#define MLFRT_API_VERSION 100

/* ---- Start-up ----------------------------------------------------------------------------- */

/* Initialises the console and starts the timer. Call once, first thing in main().
   Cortex-M: board register writes, UART init, SysTick (periodic interrupt). Host: installs the
   fault signal handlers. */
void mlfrt_init(void);

/* ---- Console ------------------------------------------------------------------------------ */

/* Sends one byte (blocking, polled). */
void mlfrt_putc(uint8_t c);

/* Receives one byte. timeout_ms = 0 waits forever. Returns 0..255, or -1 on timeout
   (host: also on end of input). */
int mlfrt_getc(uint32_t timeout_ms);

/* Sends `len` raw bytes. */
void mlfrt_write(const void* data, size_t len);

/* Sends a NUL-terminated string; no newline is added. With MLFRT_CRLF, "\n" goes out as "\r\n". */
void mlfrt_puts(const char* s);

/* Number formatting without printf. */
void mlfrt_put_u32(uint32_t value);       /* decimal */
void mlfrt_put_u64(uint64_t value);       /* decimal */
/* dividend / divisor (divisor > 0), remainder stored when `remainder` is not NULL. Bit by bit, so
 * a firmware that prints or converts 64-bit counts does not link libgcc's 64-bit division
 * (__aeabi_uldivmod, about 0.7 KB on Cortex-M). */
uint64_t mlfrt_udiv64(uint64_t dividend, uint32_t divisor, uint32_t* remainder);
void mlfrt_put_hex32(uint32_t value);     /* exactly 8 lowercase hex digits, no "0x" */

/* ---- Timer -------------------------------------------------------------------------------- */

/* Sets the timer's zero point to now. On Cortex-M this restarts SysTick, so the periodic tick
   interrupt has the same phase at every start: under QEMU -icount, code that runs the same
   instructions measures the same ticks. */
void mlfrt_timer_start(void);

/* Ticks since the last mlfrt_timer_start() (or since mlfrt_init()). One tick = 1/mlfrt_timer_hz() s.
   Cortex-M: SysTick clock cycles (MLFRT_SYSTICK_HZ; under QEMU -icount shift=N, one tick is
   1e9 / (hz * 2^N) instructions). Host: nanoseconds of CLOCK_MONOTONIC.
   The 32-bit value wraps (after 2^32 / hz seconds: 4.3 s on the host, 171 s at 25 MHz);
   differences of two readings stay right across one wrap. */
uint32_t mlfrt_timer_ticks(void);
uint64_t mlfrt_timer_ticks64(void);       /* same, 64-bit: never wraps in practice */
uint32_t mlfrt_timer_hz(void);

/* ---- Exit --------------------------------------------------------------------------------- */

/* Ends the program with `code`. Codes outside 0..255 become 255 (so a failure never reads as
   success after the mod-256 of exit statuses). Cortex-M: semihosting SYS_EXIT_EXTENDED if
   MLFRT_SEMIHOSTING, else prints "[[exit N]]" (then CR LF) and sleeps. Host: exit(code). */
MLFRT_NORETURN void mlfrt_exit(int code);

/* ---- Memory measurement ------------------------------------------------------------------- */

/* Hands the workspace buffer to TVMBackendAllocWorkspace (see crt/src/backend.c). Resets the
   allocator and the peak. The start is rounded up to MLFRT_WORKSPACE_ALIGN. */
void mlfrt_workspace_init(void* buf, size_t size);
/* Points TVMBackendAllocWorkspace at the region planned for the operator about to run (`buf` must be
   MLFRT_WORKSPACE_ALIGN-aligned; NULL: the operator may not allocate). Empties the allocator, which
   stays LIFO within the call, and keeps the peak, so the peak is the most any one operator held. */
void mlfrt_workspace_region(void* buf, size_t size);
/* Highest number of workspace bytes in use at once since mlfrt_workspace_init() (including
   alignment padding). */
size_t mlfrt_workspace_peak(void);
/* Workspace bytes in use now. */
size_t mlfrt_workspace_used(void);

/* Deepest stack use in bytes since reset (Cortex-M with MLFRT_STACK_PAINT), else 0. */
size_t mlfrt_stack_peak(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLFRT_H_ */
