/* QEMU TCG plugin (plugin API version 1, QEMU >= 6) behind `mlfbuild run --profile`: instructions,
 * estimated cycles and calls per operator function, and per inference, of every model in a firmware.
 *
 * ranges=PATH lists the firmware's functions, one per line: "lo hi kind model" (hex addresses,
 * half-open; kind E = a model's executor (its run function), O = an operator, I = the application
 * around the models (main.c)). Each executed translation block is charged to the function it starts
 * in; code outside every range (runtime, libc, CMSIS-NN, interrupts) is charged to the function
 * that was running before it, so an operator's figure includes what it calls. Blocks executed while
 * no model runs (kind I last) are not counted. A block that starts at a function's first address
 * is a call.
 * model=m4|m55|none chooses the cycle model (thumbcost.c): every instruction is classified once, when
 * QEMU translates its block, and the block's cycles are summed then; a block ending in a conditional
 * branch adds the taken-branch penalty when the next block executed does not start where it falls
 * through (the plugin sees the next block's address anyway, so this costs nothing extra).
 * flash=LO:HI:WS:READ_BYTES:CODE_LINES:DATA_LINES:READS_PER_LINE (`run --profile --cycles-for BOARD`) adds a
 * chip's flash read path (flashcost.c) to the estimate: every instruction fetched and every load from
 * [LO, HI) goes through that chip's instruction or data cache, and each read the caches miss costs
 * N wait states, charged where it happens. Instruction fetches are counted per executed block (the
 * read units its instructions span), loads through a memory callback on each instruction.
 * out=PATH receives one line per range at exit: "index calls instructions first-call cycles", then
 * "model M runs instructions cycles" per model (runs = calls of its executor), then with a flash
 * model "flash M instruction-reads data-reads" per model (the reads its caches missed).
 * Debian ships no qemu-plugin.h, so the few declarations used are written here from QEMU's
 * include/qemu/qemu-plugin.h (API version 1). Build: gcc -O2 -shared -fPIC -o libopprofile.so opprofile.c (thumbcost.c beside it) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashcost.c"
#include "thumbcost.c"

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef uint32_t qemu_plugin_meminfo_t;

extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb* tb);
extern struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
extern const void* qemu_plugin_insn_data(const struct qemu_plugin_insn* insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn* insn);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb*));
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb* tb, void (*cb)(unsigned int, void*),
                                                 enum qemu_plugin_cb_flags flags, void* userdata);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn* insn,
                                             void (*cb)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void*),
                                             enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                             void* userdata);
extern unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
extern _Bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void*), void* userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_RANGES 8192
#define MAX_MODELS 64

static struct {
  uint64_t lo, hi;
  char kind;
  int model;
  uint64_t calls, insns, first_call; /* first_call: 1 + how many calls came before (0: never called) */
  uint64_t cycles;
} ranges[MAX_RANGES];
static uint64_t calls_so_far;
static size_t n_ranges;
static uint64_t model_insns[MAX_MODELS], model_cycles[MAX_MODELS];
static int cycle_model = -1; /* TC_MODEL_*; -1: no cycle estimate */
static int running_model = -1; /* the model whose code runs now; -1: none */
static long current = -1;      /* the range charged for code outside every range */
static char out_path[1024];

/* The chip's flash read path (flashcost.c), when --cycles-for names one. */
static struct {
  int on;
  uint64_t lo, hi; /* where the firmware's flash is in the machine QEMU runs */
  unsigned wait_states;
  struct fc_cache code, data;
  uint64_t code_reads[MAX_MODELS], data_reads[MAX_MODELS];
} flash;

static long find(uint64_t address) {
  size_t lo = 0, hi = n_ranges;
  while (lo < hi) { /* sorted and disjoint */
    size_t mid = (lo + hi) / 2;
    if (address < ranges[mid].lo) hi = mid;
    else if (address >= ranges[mid].hi) lo = mid + 1;
    else return (long)mid;
  }
  return -1;
}

/* What the plugin knows of a translated block (one per translation, never freed: QEMU keeps few). */
struct block {
  uint64_t start, fallthrough; /* fallthrough: the address after its last instruction */
  long range;                  /* the range it starts in, -1: none */
  int entry;                   /* it starts at its range's first address: a call */
  uint32_t insns, cycles;      /* cycles: the estimate with every conditional branch not taken */
  uint32_t taken_penalty;      /* added when its last instruction, a conditional branch, is taken */
  uint32_t fetch_bytes;        /* its instructions' bytes, fetched from flash when it runs there */
};

/* The block that ran last, when it ended in a conditional branch, and whom it was charged to. */
static const struct block* pending;
static long pending_range = -1;
static int pending_model = -1;

static void charge_taken_branch(uint64_t start) {
  if (pending && start != pending->fallthrough) {
    ranges[pending_range].cycles += pending->taken_penalty;
    model_cycles[pending_model] += pending->taken_penalty;
  }
  pending = NULL;
}

static void charge(uint64_t cycles) {
  ranges[current].cycles += cycles;
  model_cycles[running_model] += cycles;
}

/* A load: from flash, through the chip's data cache (code outside the models warms it too). */
static void on_load(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t address, void* userdata) {
  (void)vcpu;
  (void)userdata;
  if (address < flash.lo || address >= flash.hi || qemu_plugin_mem_is_store(info)) return;
  unsigned reads = fc_access(&flash.data, address, 1u << qemu_plugin_mem_size_shift(info));
  if (running_model < 0 || current < 0) return;
  flash.data_reads[running_model] += reads;
  charge(reads * flash.wait_states);
}

static void on_exec(unsigned int vcpu, void* userdata) {
  (void)vcpu;
  const struct block* block = userdata;
  charge_taken_branch(block->start);
  /* Every block fetched from flash goes through the instruction cache, counted or not. */
  unsigned reads = block->fetch_bytes ? fc_access(&flash.code, block->start, block->fetch_bytes) : 0;
  long index = block->range;
  if (index >= 0) {
    if (ranges[index].kind == 'I') {
      running_model = -1;
      current = -1;
      return;
    }
    if (ranges[index].kind == 'E') running_model = ranges[index].model;
    if (running_model < 0) return;
    current = index;
    if (block->entry) {
      if (ranges[index].calls++ == 0) ranges[index].first_call = ++calls_so_far;
    }
  }
  if (running_model < 0 || current < 0) return;
  flash.code_reads[running_model] += reads;
  charge(reads * flash.wait_states);
  ranges[current].insns += block->insns;
  ranges[current].cycles += block->cycles;
  model_insns[running_model] += block->insns;
  model_cycles[running_model] += block->cycles;
  if (block->taken_penalty) {
    pending = block;
    pending_range = current;
    pending_model = running_model;
  }
}

/* The block's cycles: each instruction's class cost after the one before it; the last instruction
 * decides the taken-branch penalty (a branch inside an IT block is conditional too). */
static void estimate_cycles(struct qemu_plugin_tb* tb, size_t n, struct block* block) {
  struct tc_insn prev, insn;
  unsigned it_left = 0, in_it = 0;
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn* handle = qemu_plugin_tb_get_insn(tb, i);
    size_t size = qemu_plugin_insn_size(handle);
    if (i + 1 == n) block->fallthrough = qemu_plugin_insn_vaddr(handle) + size;
    if (size != 2 && size != 4) {
      block->cycles += 1;
      continue;
    }
    insn = tc_decode(qemu_plugin_insn_data(handle), (unsigned)size);
    in_it = it_left > 0;
    if (it_left) it_left--;
    if (insn.cls == TC_IT) it_left = insn.it_count;
    block->cycles += tc_cycles(cycle_model, &insn, i ? &prev : NULL);
    prev = insn;
  }
  if (n == 0 || !tc_is_branch(insn.cls)) return;
  if (tc_is_conditional_branch(insn.cls)) {
    block->taken_penalty = tc_taken_penalty(cycle_model, &insn);
  } else if (in_it) { /* tc_cycles counted it taken: count it not taken, and charge the refill if it is */
    block->cycles -= TC_REFILL;
    block->taken_penalty = TC_REFILL;
  }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  struct block* block = calloc(1, sizeof *block);
  if (block == NULL) return;
  size_t n = qemu_plugin_tb_n_insns(tb);
  block->start = qemu_plugin_tb_vaddr(tb);
  block->range = find(block->start);
  block->entry = block->range >= 0 && ranges[block->range].lo == block->start;
  block->insns = (uint32_t)n;
  if (cycle_model >= 0) estimate_cycles(tb, n, block);
  if (flash.on && n && block->start >= flash.lo && block->start < flash.hi) {
    struct qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
    block->fetch_bytes = (uint32_t)(qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last) - block->start);
  }
  if (flash.on) {
    for (size_t i = 0; i < n; i++)
      qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_load, QEMU_PLUGIN_CB_NO_REGS,
                                       QEMU_PLUGIN_MEM_RW, NULL); /* loads kept in on_load: with MEM_R, QEMU 7.2 reported stores */
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, block);
}

static void at_exit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  FILE* out = fopen(out_path, "w");
  if (out == NULL) return;
  for (size_t i = 0; i < n_ranges; i++) {
    fprintf(out, "%zu %llu %llu %llu %llu\n", i, (unsigned long long)ranges[i].calls,
            (unsigned long long)ranges[i].insns, (unsigned long long)ranges[i].first_call,
            (unsigned long long)ranges[i].cycles);
  }
  for (int m = 0; m < MAX_MODELS; m++) {
    uint64_t runs = 0;
    for (size_t i = 0; i < n_ranges; i++) {
      if (ranges[i].kind == 'E' && ranges[i].model == m) runs += ranges[i].calls;
    }
    if (runs)
      fprintf(out, "model %d %llu %llu %llu\n", m, (unsigned long long)runs, (unsigned long long)model_insns[m],
              (unsigned long long)model_cycles[m]);
    if (runs && flash.on)
      fprintf(out, "flash %d %llu %llu\n", m, (unsigned long long)flash.code_reads[m],
              (unsigned long long)flash.data_reads[m]);
  }
  fclose(out);
}

static int read_ranges(const char* path) {
  FILE* file = fopen(path, "r");
  if (file == NULL) return -1;
  unsigned long long lo, hi;
  char kind;
  int model;
  while (n_ranges < MAX_RANGES && fscanf(file, "%llx %llx %c %d", &lo, &hi, &kind, &model) == 4) {
    if (model >= MAX_MODELS) break;
    ranges[n_ranges].lo = lo;
    ranges[n_ranges].hi = hi;
    ranges[n_ranges].kind = kind;
    ranges[n_ranges].model = model;
    n_ranges++;
  }
  fclose(file);
  return 0;
}

/* "LO:HI:WS:READ_BYTES:CODE_LINES:DATA_LINES:READS_PER_LINE" (hex addresses, decimal figures). */
static int read_flash(const char* spec) {
  unsigned long long lo, hi;
  unsigned ws, read_bytes, code_lines, data_lines, per_line;
  if (sscanf(spec, "%llx:%llx:%u:%u:%u:%u:%u", &lo, &hi, &ws, &read_bytes, &code_lines, &data_lines, &per_line) != 7)
    return -1;
  if (hi <= lo || read_bytes == 0 || per_line == 0 || per_line > FC_MAX_READS_PER_LINE || code_lines > FC_MAX_LINES ||
      data_lines > FC_MAX_LINES)
    return -1;
  flash.on = 1;
  flash.lo = lo;
  flash.hi = hi;
  flash.wait_states = ws;
  fc_init(&flash.code, code_lines, per_line, read_bytes);
  fc_init(&flash.data, data_lines, per_line, read_bytes);
  return 0;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
  (void)info;
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "ranges=", 7) == 0 && read_ranges(argv[i] + 7) != 0) return -1;
    if (strncmp(argv[i], "out=", 4) == 0) snprintf(out_path, sizeof out_path, "%s", argv[i] + 4);
    if (strcmp(argv[i], "model=m4") == 0) cycle_model = TC_MODEL_M4;
    if (strcmp(argv[i], "model=m55") == 0) cycle_model = TC_MODEL_M55;
    if (strncmp(argv[i], "flash=", 6) == 0 && read_flash(argv[i] + 6) != 0) return -1;
  }
  if (flash.on && cycle_model < 0) return -1; /* wait states on top of no estimate would mean nothing */
  if (n_ranges == 0 || out_path[0] == '\0') return -1;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
