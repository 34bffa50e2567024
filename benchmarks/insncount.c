/* A QEMU 7.2 TCG plugin that counts guest instructions: all of them, and those whose address lies
 * in a set of ranges read from a file ("ranges=PATH": one "lo hi" pair of hex addresses per line,
 * half-open). Debian ships no qemu-plugin.h, so the handful of API declarations is written here
 * (QEMU plugin API version 1). Build: gcc -O2 -shared -fPIC -o libinsncount.so insncount.c
 * Use:   qemu-system-arm ... -plugin ./libinsncount.so,ranges=r.txt -d plugin -D out.txt */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
extern struct qemu_plugin_insn* qemu_plugin_tb_get_insn(const struct qemu_plugin_tb* tb, size_t idx);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn* insn);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb*));
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb* tb, enum qemu_plugin_op op, void* ptr,
                                                     uint64_t imm);
extern void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn* insn, enum qemu_plugin_op op,
                                                       void* ptr, uint64_t imm);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, void (*cb)(qemu_plugin_id_t, void*), void* userdata);
extern void qemu_plugin_outs(const char* string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t total, in_range;
static uint64_t ranges[4096][2];
static size_t n_ranges;

static int inside(uint64_t address) {
  size_t lo = 0, hi = n_ranges;
  while (lo < hi) { /* ranges are sorted and disjoint */
    size_t mid = (lo + hi) / 2;
    if (address < ranges[mid][0]) hi = mid;
    else if (address >= ranges[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  size_t n = qemu_plugin_tb_n_insns(tb);
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, n);
  for (size_t i = 0; i < n; i++) {
    struct qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
    if (inside(qemu_plugin_insn_vaddr(insn))) {
      qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &in_range, 1);
    }
  }
}

static void report_at_exit(qemu_plugin_id_t id, void* userdata) {
  (void)id;
  (void)userdata;
  char line[128];
  snprintf(line, sizeof line, "insncount: total=%llu in_range=%llu\n", (unsigned long long)total,
           (unsigned long long)in_range);
  qemu_plugin_outs(line);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info,
                                                               int argc, char** argv) {
  (void)info;
  for (int i = 0; i < argc; i++) {
    if (strncmp(argv[i], "ranges=", 7) != 0) continue;
    FILE* file = fopen(argv[i] + 7, "r");
    if (file == NULL) return -1;
    unsigned long long lo, hi;
    while (n_ranges < 4096 && fscanf(file, "%llx %llx", &lo, &hi) == 2) {
      ranges[n_ranges][0] = lo;
      ranges[n_ranges][1] = hi;
      n_ranges++;
    }
    fclose(file);
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
  return 0;
}
