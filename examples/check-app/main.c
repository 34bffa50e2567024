/* check-app: an application of exported models that runs each one on a reference input and compares
 * its outputs with the reference outputs, bit for bit (int models) or within 1e-5 (float models).
 * It knows the models only through their documented headers (mlf_<mod>.h, which includes
 * tvmgen_<mod>.h) and reference.h, which reference.py writes: per model, the input and expected
 * output bytes and one `#include "check_model.inc"` that defines check_<mod>(). Exit status 0 when
 * every output matched, 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* Counts an output's elements that differ from the reference (dtype from the model's header). */
static uint32_t differences(const void* got, const void* want, uint32_t nbytes, int dtype_code, int dtype_bits) {
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
