/* A chip's flash read path, behind `mlfbuild run --profile --cycles-for BOARD`: the wait states a
 * read from flash costs when the flash accelerator's caches miss. Pure C (no QEMU): opprofile.c
 * includes it, and the tests compile it alone (gcc -shared) and call fc_test_* through ctypes.
 *
 * The model is the one STM32's flash interface documents (ST's STM32L4 HAL, stm32l4xx_hal_flash.c:
 * "Prefetch on I-Code, 32 cache lines of 4*64 bits on I-Code, 8 cache lines of 4*64 bits on
 * D-Code"; "Data in flash are 72-bits word (8 bits added per double word)"):
 *   - the flash is read one read unit (64 bits there) at a time; a read costs `wait_states` cycles
 *     beyond the one the core's timing table already counts;
 *   - the instruction cache (I-Code) and the data cache (D-Code: loads, literal pools, tables) each
 *     hold `lines` lines of `reads_per_line` read units; a unit is kept once read, the least recently
 *     used line makes room for a new one; a hit costs nothing;
 *   - prefetch is off, as after reset (FLASH_ACR resets to ICEN | DCEN, PRFTEN clear).
 * Every figure comes from the board file's [flash_timing] table (boards/README.md).
 */
#include <stdint.h>

#define FC_MAX_LINES 64
#define FC_MAX_READS_PER_LINE 8

struct fc_cache {
  unsigned lines, reads_per_line, read_bytes;
  uint64_t tag[FC_MAX_LINES];  /* line address (address / line bytes) */
  uint8_t valid[FC_MAX_LINES]; /* one bit per read unit of the line held */
  uint64_t used[FC_MAX_LINES]; /* when last used: the least recently used line is replaced */
  uint8_t holds[FC_MAX_LINES];
  uint64_t clock;
  uint64_t misses;
};

static void fc_init(struct fc_cache* cache, unsigned lines, unsigned reads_per_line, unsigned read_bytes) {
  *cache = (struct fc_cache){0};
  cache->lines = lines > FC_MAX_LINES ? FC_MAX_LINES : lines;
  cache->reads_per_line = reads_per_line > FC_MAX_READS_PER_LINE ? FC_MAX_READS_PER_LINE : reads_per_line;
  cache->read_bytes = read_bytes ? read_bytes : 8;
}

/* One read unit through the cache: 1 when it had to be read from flash. */
static unsigned fc_read_unit(struct fc_cache* cache, uint64_t unit) {
  uint64_t line = unit / cache->reads_per_line;
  unsigned bit = 1u << (unit % cache->reads_per_line);
  unsigned victim = 0;
  cache->clock++;
  for (unsigned i = 0; i < cache->lines; i++) {
    if (cache->holds[i] && cache->tag[i] == line) {
      cache->used[i] = cache->clock;
      if (cache->valid[i] & bit) return 0;
      cache->valid[i] |= (uint8_t)bit;
      cache->misses++;
      return 1;
    }
    if (!cache->holds[victim]) continue; /* an empty line is taken first */
    if (!cache->holds[i] || cache->used[i] < cache->used[victim]) victim = i;
  }
  cache->holds[victim] = 1;
  cache->tag[victim] = line;
  cache->valid[victim] = (uint8_t)bit;
  cache->used[victim] = cache->clock;
  cache->misses++;
  return 1;
}

/* The flash reads an access of `bytes` at `address` needs (it may straddle two read units). */
static unsigned fc_access(struct fc_cache* cache, uint64_t address, unsigned bytes) {
  if (cache->lines == 0 || bytes == 0) return 0;
  uint64_t first = address / cache->read_bytes, last = (address + bytes - 1) / cache->read_bytes;
  unsigned reads = 0;
  for (uint64_t unit = first; unit <= last; unit++) reads += fc_read_unit(cache, unit);
  return reads;
}

/* For the tests: one cache, set up and read through ctypes. */
static struct fc_cache fc_test_cache;

__attribute__((visibility("default"))) void fc_test_init(unsigned lines, unsigned reads_per_line, unsigned read_bytes) {
  fc_init(&fc_test_cache, lines, reads_per_line, read_bytes);
}

__attribute__((visibility("default"))) unsigned fc_test_access(uint64_t address, unsigned bytes) {
  return fc_access(&fc_test_cache, address, bytes);
}
