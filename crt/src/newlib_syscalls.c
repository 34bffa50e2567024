/*
 * newlib_syscalls.c — the OS hooks newlib's libc calls, for firmware linked with
 * `-nostartfiles --specs=nano.specs` (Cortex-M only). mlfrt itself uses none of them; they make
 * printf/puts (-> console), getchar (-> console), malloc (-> the .heap section between
 * __heap_start and __heap_end) and exit (-> mlfrt_exit) work if a firmware uses them.
 * Link with -Wl,--gc-sections: unused hooks vanish.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "mlfrt.h"

extern uint8_t __heap_start[], __heap_end[];

void* _sbrk(ptrdiff_t increment);
int _write(int fd, const char* buf, int len);
int _read(int fd, char* buf, int len);
int _close(int fd);
int _fstat(int fd, struct stat* st);
int _isatty(int fd);
int _lseek(int fd, int offset, int whence);
int _kill(int pid, int sig);
int _getpid(void);
void _exit(int code);

void* _sbrk(ptrdiff_t increment) {
  static uintptr_t brk;
  if (brk == 0) brk = (uintptr_t)__heap_start;
  uintptr_t next = brk + (uintptr_t)increment;
  if ((increment > 0 && (next > (uintptr_t)__heap_end || next < brk)) ||
      (increment < 0 && (next < (uintptr_t)__heap_start || next > brk))) {
    errno = ENOMEM;
    return (void*)-1;
  }
  uintptr_t old = brk;
  brk = next;
  return (void*)old;
}

int _write(int fd, const char* buf, int len) {
  (void)fd; /* stdout and stderr both go to the console */
  if (len <= 0) return 0;
  mlfrt_write(buf, (size_t)len);
  return len;
}

int _read(int fd, char* buf, int len) {
  if (fd != 0 || len <= 0) return 0;
  int c = mlfrt_getc(0);
  if (c < 0) return 0;
  buf[0] = (char)c;
  return 1;
}

int _close(int fd) {
  (void)fd;
  errno = EBADF;
  return -1;
}

int _fstat(int fd, struct stat* st) {
  (void)fd;
  st->st_mode = S_IFCHR;
  return 0;
}

int _isatty(int fd) { return fd >= 0 && fd <= 2; }

int _lseek(int fd, int offset, int whence) {
  (void)fd;
  (void)offset;
  (void)whence;
  errno = ESPIPE;
  return -1;
}

int _kill(int pid, int sig) {
  (void)pid;
  (void)sig;
  errno = EINVAL;
  return -1;
}

int _getpid(void) { return 1; }

void _exit(int code) { mlfrt_exit(code); }
