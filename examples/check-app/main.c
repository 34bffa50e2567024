/* check-app: an application of exported models that runs each one on a reference input and compares
 * its outputs with the reference outputs: integer outputs exactly, or within CHECK_ATOL steps when
 * reference.h (reference.py --atol N) or -DCHECK_ATOL=N sets it; float outputs within 1e-5.
 * It knows the models only through their documented headers (mlf_<mod>.h, which includes
 * tvmgen_<mod>.h) and reference.h, which reference.py writes: per model, the input and expected
 * output bytes and one `#include "check_model.inc"` that defines check_<mod>(). Exit status 0 when
 * every output matched, 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* An integer element (dtype code 0: int, 1: uint; 8, 16 or 32 bits) as a wide signed value. */
static int64_t element(const void* data, uint32_t i, int dtype_code, int dtype_bits) {
  if (dtype_bits == 8) return dtype_code == 0 ? (int64_t)((const int8_t*)data)[i] : (int64_t)((const uint8_t*)data)[i];
  if (dtype_bits == 16) return dtype_code == 0 ? (int64_t)((const int16_t*)data)[i] : (int64_t)((const uint16_t*)data)[i];
  return dtype_code == 0 ? (int64_t)((const int32_t*)data)[i] : (int64_t)((const uint32_t*)data)[i];
}

/* Counts an output's elements that differ from the reference by more than `atol` steps of an integer
 * dtype (dtype from the model's header; other dtypes byte for byte). */
static uint32_t differences(const void* got, const void* want, uint32_t nbytes, int dtype_code, int dtype_bits,
                            int64_t atol) {
  uint32_t count = 0;
  if (dtype_code == 2 && dtype_bits == 32) {
    const float* a = (const float*)got;
    const float* b = (const float*)want;
    for (uint32_t i = 0; i < nbytes / 4u; i++) {
      float d = a[i] - b[i];
      float scale = b[i] < 0 ? -b[i] : b[i];
      if (d < 0) d = -d;
      if (!(d <= 1e-5f + 1e-5f * scale)) count++;
    }
    return count;
  }
  if ((dtype_code == 0 || dtype_code == 1) && (dtype_bits == 8 || dtype_bits == 16 || dtype_bits == 32)) {
    for (uint32_t i = 0; i < nbytes / (uint32_t)(dtype_bits / 8); i++) {
      int64_t d = element(got, i, dtype_code, dtype_bits) - element(want, i, dtype_code, dtype_bits);
      count += (d < 0 ? -d : d) > atol;
    }
    return count;
  }
  const uint8_t* a = (const uint8_t*)got;
  const uint8_t* b = (const uint8_t*)want;
  for (uint32_t i = 0; i < nbytes; i++) count += a[i] != b[i];
  return count;
}

#include "reference.h"

/* mlfbuild's board support sets up the UART behind printf in mlfrt_init(); with a BSP of your own
 * the symbol is absent (weak: NULL) and yours has done it before main. */
void mlfrt_init(void) __attribute__((weak));

int main(void) {
  if (mlfrt_init) mlfrt_init();
  int failures = 0;
#define CHECK_ONE(mod) failures += CAT(check_, mod)();
  REFERENCE_MODELS(CHECK_ONE)
  printf("check-app: %s\n", failures == 0 ? "all outputs match" : "MISMATCH");
  return failures == 0 ? 0 : 1;
}
