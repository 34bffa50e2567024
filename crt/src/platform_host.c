/*
 * platform_host.c — the mlfrt platform API on Linux/POSIX, so the same main.c runs as a native
 * executable: console = raw stdin/stdout file descriptors (unbuffered), timer = CLOCK_MONOTONIC
 * in nanoseconds, exit = exit(), faults = SIGSEGV/SIGBUS/SIGILL/SIGFPE handler that prints a
 * "*** FAULT" line and exits with MLFRT_FAULT_EXIT_CODE. No stack painting.
 */
#define _XOPEN_SOURCE 700 /* POSIX 2008 + XSI (sigaltstack, SA_ONSTACK) */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mlfrt.h"

/* ---- Console ----------------------------------------------------------------------------- */

void mlfrt_putc(uint8_t c) {
  while (write(STDOUT_FILENO, &c, 1) < 0 && errno == EINTR) {
  }
}

int mlfrt_getc(uint32_t timeout_ms) {
  uint8_t c;
  if (timeout_ms != 0) {
    struct pollfd pfd;
    pfd.fd = STDIN_FILENO;
    pfd.events = POLLIN;
    pfd.revents = 0;
    int timeout = timeout_ms > (uint32_t)0x7FFFFFFF ? 0x7FFFFFFF : (int)timeout_ms;
    int ready;
    do {
      ready = poll(&pfd, 1, timeout);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return -1;
  }
  ssize_t got;
  do {
    got = read(STDIN_FILENO, &c, 1);
  } while (got < 0 && errno == EINTR);
  return got == 1 ? (int)c : -1;
}

/* ---- Timer: nanoseconds of CLOCK_MONOTONIC ----------------------------------------------- */

static uint64_t s_epoch_ns;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mlfrt_timer_start(void) { s_epoch_ns = now_ns(); }

uint64_t mlfrt_timer_ticks64(void) { return now_ns() - s_epoch_ns; }

uint32_t mlfrt_timer_ticks(void) { return (uint32_t)mlfrt_timer_ticks64(); }

uint32_t mlfrt_timer_hz(void) { return 1000000000u; }

/* ---- Exit and faults ------------------------------------------------------------------------ */

void mlfrt_exit(int code) { exit((code < 0 || code > 255) ? 255 : code); }

static void raw_write(const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

/* Async-signal-safe: only write() and _exit(). */
static void fault_handler(int sig, siginfo_t* info, void* context) {
  (void)context;
  static const char hex[] = "0123456789abcdef";
  char line[80];
  size_t n = 0;
  const char* head = "\n*** FAULT signal=";
  while (*head) line[n++] = *head++;
  if (sig >= 10) line[n++] = (char)('0' + sig / 10);
  line[n++] = (char)('0' + sig % 10);
  const char* mid = " addr=0x";
  while (*mid) line[n++] = *mid++;
  uintptr_t addr = (uintptr_t)info->si_addr;
  for (int shift = (int)(sizeof(addr) * 8) - 4; shift >= 0; shift -= 4) line[n++] = hex[(addr >> shift) & 0xFu];
  line[n++] = '\n';
  raw_write(line, n);
  _exit(MLFRT_FAULT_EXIT_CODE);
}

/* The handler runs on its own stack so that stack overflows are reported too. */
static uint8_t s_signal_stack[64 * 1024];

void mlfrt_init(void) {
  stack_t ss;
  memset(&ss, 0, sizeof(ss));
  ss.ss_sp = s_signal_stack;
  ss.ss_size = sizeof(s_signal_stack);
  sigaltstack(&ss, NULL);

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGILL, &sa, NULL);
  sigaction(SIGFPE, &sa, NULL);

  mlfrt_timer_start();
}

/* ---- Memory measurement ----------------------------------------------------------------------- */

size_t mlfrt_stack_peak(void) { return 0; }

