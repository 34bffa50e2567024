/* QEMU TCG plugin (plugin API version 1, QEMU >= 6) behind `mlfbuild run --profile`: instructions
 * and calls per operator function, and per inference, of every model in a firmware.
 *
 * ranges=PATH lists the firmware's functions, one per line: "lo hi kind model" (hex addresses,
 * half-open; kind E = a model's executor (its run function), O = an operator, I = the application
 * around the models (main.c)). Each executed translation block is charged to the function it starts
 * in; code outside every range (runtime, libc, CMSIS-NN, interrupts) is charged to the function
 * that was running before it, so an operator's figure includes what it calls. Blocks executed while
 * no model runs (kind I last) are not counted. A block that starts at a function's first address
 * is a call.
 * out=PATH receives one line per range at exit: "index calls instructions first-call", then "model M runs
 * instructions" per model (runs = calls of its executor).
 * Debian ships no qemu-plugin.h, so the few declarations used are written here from QEMU's
 * include/qemu/qemu-plugin.h (API version 1). Build: gcc -O2 -shared -fPIC -o libopprofile.so opprofile.c */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb* tb);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb*));
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb* tb, void (*cb)(unsigned int, void*),
                                                 enum qemu_plugin_cb_flags flags, void* userdata);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void*), void* userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_RANGES 8192
#define MAX_MODELS 64

static struct {
  uint64_t lo, hi;
  char kind;
  int model;
  uint64_t calls, insns, first_call; /* first_call: 1 + how many calls came before (0: never called) */
} ranges[MAX_RANGES];
static uint64_t calls_so_far;
static size_t n_ranges;
static uint64_t model_insns[MAX_MODELS];
static int running_model = -1; /* the model whose code runs now; -1: none */
static long current = -1;      /* the range charged for code outside every range */
static char out_path[1024];

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

/* Block facts packed into the callback's pointer (no allocation): range + 1, entry flag, length. */
static void on_exec(unsigned int vcpu, void* userdata) {
  (void)vcpu;
  uintptr_t packed = (uintptr_t)userdata;
  long index = (long)(packed >> 16) - 1;
  int entry = (int)((packed >> 15) & 1u);
  uint64_t n = packed & 0x7fffu;
  if (index >= 0) {
    if (ranges[index].kind == 'I') {
      running_model = -1;
      current = -1;
      return;
    }
    if (ranges[index].kind == 'E') running_model = ranges[index].model;
    if (running_model < 0) return;
    current = index;
    if (entry) {
      if (ranges[index].calls++ == 0) ranges[index].first_call = ++calls_so_far;
    }
  }
  if (running_model < 0 || current < 0) return;
  ranges[current].insns += n;
  model_insns[running_model] += n;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  uint64_t start = qemu_plugin_tb_vaddr(tb);
  long index = find(start);
  uintptr_t packed = ((uintptr_t)(index + 1) << 16) |
                     ((index >= 0 && ranges[index].lo == start) ? (1u << 15) : 0u) |
                     (qemu_plugin_tb_n_insns(tb) & 0x7fffu);
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, (void*)packed);
}

static void at_exit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  FILE* out = fopen(out_path, "w");
  if (out == NULL) return;
  for (size_t i = 0; i < n_ranges; i++) {
    fprintf(out, "%zu %llu %llu %llu\n", i, (unsigned long long)ranges[i].calls, (unsigned long long)ranges[i].insns,
            (unsigned long long)ranges[i].first_call);
  }
  for (int m = 0; m < MAX_MODELS; m++) {
    uint64_t runs = 0;
    for (size_t i = 0; i < n_ranges; i++) {
      if (ranges[i].kind == 'E' && ranges[i].model == m) runs += ranges[i].calls;
    }
    if (runs) fprintf(out, "model %d %llu %llu\n", m, (unsigned long long)runs, (unsigned long long)model_insns[m]);
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

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
  (void)info;
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "ranges=", 7) == 0 && read_ranges(argv[i] + 7) != 0) return -1;
    if (strncmp(argv[i], "out=", 4) == 0) snprintf(out_path, sizeof out_path, "%s", argv[i] + 4);
  }
  if (n_ranges == 0 || out_path[0] == '\0') return -1;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
