/* Thumb-2 instruction classes and their cycle costs, behind the cycle estimate of
 * `mlfbuild run --profile`. Pure C (no QEMU): opprofile.c includes it, and the tests compile it alone
 * (gcc -shared) and call tc_insn_cycles / tc_insn_class through ctypes.
 *
 * Decoding follows the ARMv7-M / Armv8.1-M Architecture Reference Manuals' Thumb encoding tables.
 * Two models (docs/benchmarks.md, "Cycle estimate", gives the sources and what each leaves out):
 *   TC_MODEL_M4  - Cortex-M4 TRM (r0p1) table 3-1 and its load/store timing rules, FPU table 7-1.
 *                  P (pipeline refill after a taken branch) is the middle of the TRM's 1..3: 2;
 *                  SDIV/UDIV the middle of its 2..12: 7 (the plugin cannot see the operands).
 *   TC_MODEL_M55 - scalar code as the M4 (LLVM's Cortex-M55 scheduling model: "a lot like the M4");
 *                  every MVE instruction takes two beats on the dual-beat datapath (2 cycles), and one
 *                  that follows a vector instruction of the other pipe (load/store vs arithmetic)
 *                  overlaps it by one cycle; LE/LETP loop back without a refill (low-overhead loops).
 */
#include <stdint.h>

enum tc_model { TC_MODEL_M4 = 0, TC_MODEL_M55 = 1 };

enum tc_class {
  TC_ALU,           /* data processing, moves, IT-free hints: 1 */
  TC_MUL,           /* MUL, MLA, SMLAD, SMULL, SMLAL, ...: 1 */
  TC_DIV,           /* SDIV, UDIV: 2..12 */
  TC_LOAD,          /* LDR/LDRB/LDRH/LDRSB/LDRSH/LDREX: 2, 1 when pipelined after a load */
  TC_STORE,         /* STR/STRB/STRH/STREX: 1 with an immediate offset, 2 with a register offset */
  TC_LOAD_MULTI,    /* LDM, POP without PC: 1+N */
  TC_STORE_MULTI,   /* STM, PUSH: 1+N */
  TC_LOAD_DUAL,     /* LDRD: 1+N, N=2 */
  TC_STORE_DUAL,    /* STRD: 1+N, N=2 */
  TC_BRANCH,        /* B, BL, B.W: 1+P */
  TC_BRANCH_COND,   /* B<c>, CBZ, CBNZ: 1, or 1+P when taken */
  TC_BRANCH_REG,    /* BX, BLX, MOV PC / ADD PC: 1+P */
  TC_LOAD_PC,       /* LDR PC: 2+P */
  TC_POP_PC,        /* POP / LDM with PC: 1+N+P */
  TC_TABLE_BRANCH,  /* TBB, TBH: 2+P */
  TC_IT,            /* IT: 1 */
  TC_LOOP_START,    /* DLS, WLS, DLSTP, WLSTP (Armv8.1-M): 1 */
  TC_LOOP_END,      /* LE, LETP (Armv8.1-M): 1, no refill on the M55 when it loops */
  TC_FP_ALU,        /* VADD, VSUB, VMUL, VNMUL, VABS, VNEG, VCMP, VCVT, VMOV, VMRS, VMSR: 1 */
  TC_FP_MAC,        /* VMLA, VMLS, VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS: 3 */
  TC_FP_DIV,        /* VDIV, VSQRT: 14 */
  TC_FP_MOVE2,      /* VMOV of two core registers: 2 */
  TC_FP_LOAD,       /* VLDR: 2 (3 for a doubleword) */
  TC_FP_STORE,      /* VSTR: 2 (3 for a doubleword) */
  TC_FP_LOAD_MULTI, /* VLDM, VPOP: 1+N */
  TC_FP_STORE_MULTI,/* VSTM, VPUSH: 1+N */
  TC_VEC_LOAD,      /* MVE VLDR*, VLD2x, VLD4x: 2 beats */
  TC_VEC_STORE,     /* MVE VSTR*, VST2x, VST4x: 2 beats */
  TC_VEC_ALU,       /* MVE arithmetic, multiply, reduction: 2 beats */
  TC_VEC_PRED,      /* VPST, VPT: 1 */
  TC_CLASS_COUNT
};

static const char* const tc_class_names[TC_CLASS_COUNT] = {
    "alu", "mul", "div", "load", "store", "load_multi", "store_multi", "load_dual", "store_dual",
    "branch", "branch_cond", "branch_reg", "load_pc", "pop_pc", "table_branch", "it", "loop_start",
    "loop_end", "fp_alu", "fp_mac", "fp_div", "fp_move2", "fp_load", "fp_store", "fp_load_multi",
    "fp_store_multi", "vec_load", "vec_store", "vec_alu", "vec_pred"};

struct tc_insn {
  uint8_t cls;
  uint8_t words;      /* registers (32-bit words) moved by a multiple or dual transfer */
  int8_t rt;          /* register a single load writes (-1: none) */
  int8_t rn, rm;      /* address registers of a load/store (-1: none) */
  int8_t rd;          /* register a data-processing instruction writes (-1: none) */
  uint8_t reg_offset; /* load/store with a register offset */
  uint8_t it_count;   /* IT: how many instructions its block covers */
};

#define TC_REFILL 2   /* P: Cortex-M4 TRM, "ranges from 1 to 3" */
#define TC_DIVIDE 7   /* SDIV/UDIV: Cortex-M4 TRM, "2-12" */

static int tc_popcount(uint32_t v) {
  int n = 0;
  for (; v; v &= v - 1) n++;
  return n;
}

static struct tc_insn tc_plain(uint8_t cls) {
  struct tc_insn insn = {cls, 0, -1, -1, -1, -1, 0, 0};
  return insn;
}

static struct tc_insn tc_memory(uint8_t cls, int rt, int rn, int rm) {
  struct tc_insn insn = tc_plain(cls);
  insn.rt = (int8_t)(cls == TC_LOAD ? rt : -1);
  insn.rn = (int8_t)rn;
  insn.rm = (int8_t)rm;
  insn.reg_offset = rm >= 0;
  return insn;
}

static struct tc_insn tc_alu(int rd) {
  struct tc_insn insn = tc_plain(TC_ALU);
  insn.rd = (int8_t)(rd == 15 ? -1 : rd);
  return insn;
}

static struct tc_insn tc_decode16(uint32_t hw) {
  if ((hw >> 13) == 0) return tc_alu(hw & 7); /* shift by immediate, ADD/SUB register or imm3 */
  if ((hw >> 13) == 1) return tc_alu(((hw >> 11) & 3) == 1 ? -1 : (int)((hw >> 8) & 7)); /* MOV/CMP/ADD/SUB imm8 */
  if ((hw >> 10) == 0x10) { /* data processing */
    unsigned op = (hw >> 6) & 0xF;
    if (op == 0xD) {
      struct tc_insn insn = tc_plain(TC_MUL);
      insn.rd = (int8_t)(hw & 7);
      return insn;
    }
    return tc_alu(op == 0x8 || op == 0xA || op == 0xB ? -1 : (int)(hw & 7)); /* TST, CMP, CMN */
  }
  if ((hw >> 10) == 0x11) { /* special data processing, branch and exchange */
    unsigned op = (hw >> 8) & 3;
    unsigned rd = ((hw >> 4) & 8) | (hw & 7);
    if (op == 3) return tc_plain(TC_BRANCH_REG); /* BX, BLX */
    if (op != 1 && rd == 15) return tc_plain(TC_BRANCH_REG); /* ADD PC / MOV PC */
    return tc_alu(op == 1 ? -1 : (int)rd);
  }
  if ((hw >> 11) == 0x9) return tc_memory(TC_LOAD, (hw >> 8) & 7, 15, -1); /* LDR literal */
  if ((hw >> 12) == 0x5) { /* register offset */
    unsigned opb = (hw >> 9) & 7;
    return tc_memory(opb <= 2 ? TC_STORE : TC_LOAD, hw & 7, (hw >> 3) & 7, (hw >> 6) & 7);
  }
  if ((hw >> 13) == 3 || (hw >> 12) == 8) /* STR/LDR(B) imm, STRH/LDRH imm */
    return tc_memory((hw >> 11) & 1 ? TC_LOAD : TC_STORE, hw & 7, (hw >> 3) & 7, -1);
  if ((hw >> 12) == 9) return tc_memory((hw >> 11) & 1 ? TC_LOAD : TC_STORE, (hw >> 8) & 7, 13, -1);
  if ((hw >> 12) == 0xA) return tc_alu((hw >> 8) & 7); /* ADR, ADD Rd, SP */
  if ((hw >> 12) == 0xB) { /* miscellaneous */
    if ((hw & 0xF500) == 0xB100) return tc_plain(TC_BRANCH_COND); /* CBZ, CBNZ */
    if ((hw & 0xFE00) == 0xB400) {
      struct tc_insn insn = tc_plain(TC_STORE_MULTI);
      insn.words = (uint8_t)(tc_popcount(hw & 0x1FF));
      insn.rn = 13;
      return insn;
    }
    if ((hw & 0xFE00) == 0xBC00) {
      struct tc_insn insn = tc_plain(hw & 0x100 ? TC_POP_PC : TC_LOAD_MULTI);
      insn.words = (uint8_t)(tc_popcount(hw & 0x1FF));
      insn.rn = 13;
      return insn;
    }
    if ((hw & 0xFF00) == 0xBF00 && (hw & 0xF)) {
      struct tc_insn insn = tc_plain(TC_IT);
      unsigned mask = hw & 0xF;
      insn.it_count = (uint8_t)(4 - (__builtin_ctz(mask)));
      return insn;
    }
    return tc_alu(-1);
  }
  if ((hw >> 12) == 0xC) { /* STM, LDM */
    struct tc_insn insn = tc_plain((hw >> 11) & 1 ? TC_LOAD_MULTI : TC_STORE_MULTI);
    insn.words = (uint8_t)tc_popcount(hw & 0xFF);
    insn.rn = (int8_t)((hw >> 8) & 7);
    return insn;
  }
  if ((hw >> 12) == 0xD) {
    unsigned cond = (hw >> 8) & 0xF;
    return cond >= 0xE ? tc_alu(-1) : tc_plain(TC_BRANCH_COND); /* UDF, SVC : B<c> */
  }
  if ((hw >> 11) == 0x1C) return tc_plain(TC_BRANCH);
  return tc_alu(-1);
}

/* Coprocessor space: FP (coprocessors 10 and 11) and MVE. */
static struct tc_insn tc_decode_coproc(uint32_t hw1, uint32_t hw2) {
  unsigned coproc = (hw2 >> 8) & 0xF;
  int fp = (coproc & 0xE) == 0xA;
  if ((hw1 & 0xEF00) == 0xEF00) return tc_plain(TC_VEC_ALU); /* MVE data processing (0xEF.., 0xFF..) */
  if ((hw1 & 0xEE00) == 0xEC00) { /* 0xEC, 0xED, 0xFC, 0xFD: loads and stores, two-register moves */
    int load = (hw1 >> 4) & 1;
    if (!fp) return tc_plain(load ? TC_VEC_LOAD : TC_VEC_STORE);
    if ((hw1 & 0xFFE0) == 0xEC40) return tc_plain(TC_FP_MOVE2); /* VMOV two core <-> two S / one D */
    if ((hw1 & 0xFF20) == 0xED00) { /* VLDR, VSTR */
      struct tc_insn insn = tc_plain(load ? TC_FP_LOAD : TC_FP_STORE);
      insn.words = (uint8_t)((coproc & 1) ? 2 : 1);
      insn.rn = (int8_t)(hw1 & 0xF);
      return insn;
    }
    struct tc_insn insn = tc_plain(load ? TC_FP_LOAD_MULTI : TC_FP_STORE_MULTI);
    insn.words = (uint8_t)(hw2 & 0xFF); /* imm8 counts words for both S and D lists */
    insn.rn = (int8_t)(hw1 & 0xF);
    return insn;
  }
  /* 0xEE.., 0xFE..: data processing and register transfers */
  if (!fp) return tc_plain((hw1 & 0xFFBF) == 0xFE31 && (hw2 & 0x1FFF) == 0x0F4D ? TC_VEC_PRED : TC_VEC_ALU); /* VPST */
  if (hw1 & 0x1000) return tc_plain(TC_FP_ALU); /* VSEL, VMAXNM, VRINT, VCVT (Armv8): 1 */
  if (hw2 & 0x10) return tc_plain(TC_FP_ALU);   /* VMOV core <-> S, VMRS, VMSR */
  unsigned opc1 = (hw1 >> 4) & 0xB, opc2 = hw1 & 0xF, opc3 = (hw2 >> 6) & 3;
  switch (opc1) {
    case 0x0: case 0x1: case 0x9: case 0xA: return tc_plain(TC_FP_MAC);
    case 0x8: return tc_plain(TC_FP_DIV);
    case 0xB: return tc_plain(opc2 == 1 && opc3 == 3 ? TC_FP_DIV : TC_FP_ALU); /* VSQRT */
    default: return tc_plain(TC_FP_ALU);
  }
}

static struct tc_insn tc_decode32(uint32_t hw1, uint32_t hw2) {
  unsigned op1 = (hw1 >> 11) & 3;
  if (op1 == 1) {
    if ((hw1 & 0xFE40) == 0xE800) { /* LDM, STM (PUSH, POP) */
      int load = (hw1 >> 4) & 1;
      struct tc_insn insn = tc_plain(load ? ((hw2 & 0x8000) ? TC_POP_PC : TC_LOAD_MULTI) : TC_STORE_MULTI);
      insn.words = (uint8_t)tc_popcount(hw2 & 0xFFFF);
      insn.rn = (int8_t)(hw1 & 0xF);
      return insn;
    }
    if ((hw1 & 0xFE40) == 0xE840) { /* dual, exclusive, table branch */
      int load = (hw1 >> 4) & 1;
      if (hw1 & 0x0120) { /* P or W: LDRD, STRD */
        struct tc_insn insn = tc_plain(load ? TC_LOAD_DUAL : TC_STORE_DUAL);
        insn.words = 2;
        insn.rn = (int8_t)(hw1 & 0xF);
        return insn;
      }
      if ((hw1 & 0xFFF0) == 0xE8D0 && (hw2 & 0xFFE0) == 0xF000) return tc_plain(TC_TABLE_BRANCH);
      return tc_memory(load ? TC_LOAD : TC_STORE, (hw2 >> 12) & 0xF, hw1 & 0xF, -1); /* LDREX, STREX */
    }
    if ((hw1 & 0xFE00) == 0xEA00) return tc_alu((hw2 >> 8) & 0xF); /* data processing, shifted register */
    return tc_decode_coproc(hw1, hw2);
  }
  if (op1 == 2) {
    if (!(hw2 & 0x8000)) return tc_alu((hw2 >> 8) & 0xF); /* data processing, immediate */
    unsigned op = (hw2 >> 12) & 7;
    if ((op & 5) == 0) {
      if (((hw1 >> 7) & 7) != 7) return tc_plain(TC_BRANCH_COND); /* B<c>.W */
      return tc_alu(-1); /* MSR, MRS, hints, barriers */
    }
    if ((op & 5) == 1) return tc_plain(TC_BRANCH);   /* B.W */
    if ((op & 5) == 5) return tc_plain(TC_BRANCH);   /* BL */
    if ((op & 5) == 4 && (hw2 & 1)) { /* Armv8.1-M branch future and low-overhead loops */
      if ((hw1 & 0xFFCF) == 0xF00F && (hw2 & 0xF001) == 0xC001) return tc_plain(TC_LOOP_END); /* LE, LETP */
      if ((hw1 & 0xFF80) == 0xF000 && ((hw2 & 0xF001) == 0xC001 || hw2 == 0xE001))
        return tc_plain(TC_LOOP_START); /* WLS, DLS, WLSTP, DLSTP */
      return tc_alu(-1);
    }
    return tc_alu(-1);
  }
  /* op1 == 3 */
  if ((hw1 & 0xFE00) == 0xF800) {
    if ((hw1 & 0xFF10) == 0xF800) { /* store single */
      int reg = !(hw1 & 0x80) && (hw2 & 0x0FC0) == 0;
      return tc_memory(TC_STORE, (hw2 >> 12) & 0xF, hw1 & 0xF, reg ? (int)(hw2 & 0xF) : -1);
    }
    /* loads: byte, halfword, word (and PLD with Rt = PC) */
    unsigned rt = (hw2 >> 12) & 0xF, rn = hw1 & 0xF;
    int word = ((hw1 >> 5) & 3) == 2;
    if (rt == 15 && !word) return tc_alu(-1); /* PLD, PLI */
    if (rt == 15) return tc_plain(TC_LOAD_PC);
    int reg = rn != 15 && !(hw1 & 0x80) && (hw2 & 0x0FC0) == 0;
    return tc_memory(TC_LOAD, rt, rn, reg ? (int)(hw2 & 0xF) : -1);
  }
  if ((hw1 & 0xFF00) == 0xFA00) return tc_alu((hw2 >> 8) & 0xF); /* data processing, register */
  if ((hw1 & 0xFF80) == 0xFB00) {                                 /* multiply, MAC */
    struct tc_insn insn = tc_plain(TC_MUL);
    insn.rd = (int8_t)((hw2 >> 8) & 0xF);
    return insn;
  }
  if ((hw1 & 0xFF80) == 0xFB80) { /* long multiply, long MAC, divide */
    unsigned op1b = (hw1 >> 4) & 7, op2 = (hw2 >> 4) & 0xF;
    if ((op1b == 1 || op1b == 3) && op2 == 0xF) return tc_plain(TC_DIV);
    return tc_plain(TC_MUL);
  }
  if ((hw1 & 0xEC00) == 0xEC00) return tc_decode_coproc(hw1, hw2);
  return tc_alu(-1);
}

static int tc_is_wide(uint32_t hw1) { return (hw1 >> 11) >= 0x1D; }

static struct tc_insn tc_decode(const uint8_t* bytes, unsigned size) {
  uint32_t hw1 = (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8);
  if (size == 4 && tc_is_wide(hw1)) return tc_decode32(hw1, (uint32_t)bytes[2] | ((uint32_t)bytes[3] << 8));
  return tc_decode16(hw1);
}

static int tc_is_vector(uint8_t cls) { return cls >= TC_VEC_LOAD && cls <= TC_VEC_ALU; }
static int tc_is_single_memory(uint8_t cls) { return cls == TC_LOAD || cls == TC_STORE; }
static int tc_is_memory(uint8_t cls) {
  return tc_is_single_memory(cls) || (cls >= TC_LOAD_MULTI && cls <= TC_STORE_DUAL) ||
         (cls >= TC_FP_LOAD && cls <= TC_FP_STORE_MULTI);
}

/* Cycles of `insn` after `prev` (NULL: first of its block), a taken conditional branch excluded
 * (tc_taken_penalty adds it when the plugin sees the branch taken). */
static unsigned tc_cycles(int model, const struct tc_insn* insn, const struct tc_insn* prev) {
  unsigned cycles;
  switch (insn->cls) {
    case TC_DIV: cycles = TC_DIVIDE; break;
    case TC_LOAD: cycles = 2; break;
    case TC_STORE: cycles = insn->reg_offset ? 2 : 1; break;
    case TC_LOAD_MULTI: case TC_STORE_MULTI: case TC_LOAD_DUAL: case TC_STORE_DUAL:
    case TC_FP_LOAD_MULTI: case TC_FP_STORE_MULTI: cycles = 1u + insn->words; break;
    case TC_BRANCH: case TC_BRANCH_REG: cycles = 1 + TC_REFILL; break;
    case TC_LOAD_PC: case TC_TABLE_BRANCH: cycles = 2 + TC_REFILL; break;
    case TC_POP_PC: cycles = 1u + insn->words + TC_REFILL; break;
    case TC_FP_MAC: cycles = 3; break;
    case TC_FP_DIV: cycles = 14; break;
    case TC_FP_MOVE2: cycles = 2; break;
    case TC_FP_LOAD: case TC_FP_STORE: cycles = 1u + insn->words; break;
    case TC_VEC_LOAD: case TC_VEC_STORE: case TC_VEC_ALU: cycles = 2; break;
    default: cycles = 1; break;
  }
  if (prev == 0) return cycles;
  /* Cortex-M4 TRM 3.3.2: a load or store right after a single load whose result it does not use as
   * an address is pipelined with it (one cycle less; a store with an immediate offset already takes one)... */
  if (tc_is_single_memory(insn->cls) && prev->cls == TC_LOAD && prev->rt != insn->rn && prev->rt != insn->rm &&
      cycles > 1)
    cycles -= 1;
  /* ...and one whose address depends on the data-processing instruction just before stalls a cycle. */
  if (tc_is_memory(insn->cls) && (prev->cls == TC_ALU || prev->cls == TC_MUL) && prev->rd >= 0 &&
      (prev->rd == insn->rn || prev->rd == insn->rm))
    cycles += 1;
  /* Cortex-M55: the second beat pair of a vector instruction overlaps the next one on the other pipe. */
  if (model == TC_MODEL_M55 && tc_is_vector(insn->cls) && tc_is_vector(prev->cls) &&
      (insn->cls == TC_VEC_ALU) != (prev->cls == TC_VEC_ALU))
    cycles -= 1;
  return cycles;
}

/* Extra cycles when a conditional branch (or a loop end) is taken. */
static unsigned tc_taken_penalty(int model, const struct tc_insn* insn) {
  if (insn->cls == TC_LOOP_END) return model == TC_MODEL_M55 ? 0 : TC_REFILL;
  if (insn->cls == TC_BRANCH_COND) return TC_REFILL;
  return 0;
}

/* Branch classes whose cost depends on whether they are taken (in an IT block, every branch). */
__attribute__((unused)) static int tc_is_conditional_branch(uint8_t cls) { return cls == TC_BRANCH_COND || cls == TC_LOOP_END; }
__attribute__((unused)) static int tc_is_branch(uint8_t cls) {
  return (cls >= TC_BRANCH && cls <= TC_TABLE_BRANCH) || cls == TC_LOOP_END;
}

/* Entry points for the tests (ctypes). */
__attribute__((visibility("default"))) int tc_insn_class(const uint8_t* bytes, unsigned size) {
  return tc_decode(bytes, size).cls;
}

__attribute__((visibility("default"))) const char* tc_class_name(int cls) {
  return cls >= 0 && cls < TC_CLASS_COUNT ? tc_class_names[cls] : "?";
}

__attribute__((visibility("default"))) unsigned tc_insn_cycles(int model, const uint8_t* bytes, unsigned size,
                                                               const uint8_t* prev_bytes, unsigned prev_size) {
  struct tc_insn insn = tc_decode(bytes, size);
  if (prev_bytes == 0) return tc_cycles(model, &insn, 0);
  struct tc_insn prev = tc_decode(prev_bytes, prev_size);
  return tc_cycles(model, &insn, &prev);
}

__attribute__((visibility("default"))) unsigned tc_insn_taken_penalty(int model, const uint8_t* bytes, unsigned size) {
  struct tc_insn insn = tc_decode(bytes, size);
  return tc_taken_penalty(model, &insn);
}
