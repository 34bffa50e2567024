/*
 * mlfrt_common.c — the portable half of the console API (text and number output, line input),
 * built on the platform's mlfrt_putc()/mlfrt_getc(). No printf, no allocation.
 */
#include "mlfrt.h"

void mlfrt_write(const void* data, size_t len) {
  const uint8_t* p = (const uint8_t*)data;
  for (size_t i = 0; i < len; i++) mlfrt_putc(p[i]);
}

void mlfrt_puts(const char* s) {
  for (; *s != '\0'; s++) {
#if MLFRT_CRLF
    if (*s == '\n') mlfrt_putc('\r');
#endif
    mlfrt_putc((uint8_t)*s);
  }
}

uint64_t mlfrt_udiv64(uint64_t dividend, uint32_t divisor, uint32_t* remainder) {
  uint64_t quotient = 0, rest = 0;
  for (int bit = 63; bit >= 0; bit--) {
    rest = (rest << 1) | ((dividend >> bit) & 1u); /* rest < 2 * divisor: never overflows */
    if (rest >= divisor) {
      rest -= divisor;
      quotient |= (uint64_t)1 << bit;
    }
  }
  if (remainder != NULL) *remainder = (uint32_t)rest;
  return quotient;
}

void mlfrt_put_u64(uint64_t value) {
  char digits[20];
  size_t n = 0;
  do {
    uint32_t digit;
    value = mlfrt_udiv64(value, 10u, &digit);
    digits[n++] = (char)('0' + (int)digit);
  } while (value != 0);
  while (n > 0) mlfrt_putc((uint8_t)digits[--n]);
}

void mlfrt_put_u32(uint32_t value) {
  char digits[10];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + (int)(value % 10u));
    value /= 10u;
  } while (value != 0);
  while (n > 0) mlfrt_putc((uint8_t)digits[--n]);
}

void mlfrt_put_hex32(uint32_t value) {
  static const char hex[] = "0123456789abcdef";
  for (int shift = 28; shift >= 0; shift -= 4) mlfrt_putc((uint8_t)hex[(value >> shift) & 0xFu]);
}
