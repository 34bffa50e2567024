/*
 * startup_cortexm.c — vector table and reset handler for ARMv6-M, ARMv7-M and ARMv8-M mainline
 * cores (Cortex-M0/M0+, M3, M4, M7, M33, M55). Needs the symbols of templates/linker.ld.j2.
 *
 * Reset_Handler, in order: enable the FPU/MVE (CPACR) when the build uses it, point VTOR at
 * our table, set MSPLIM on ARMv8-M, copy .data, zero .bss, paint the stack (MLFRT_STACK_PAINT),
 * run constructors, call main() and hand its result to mlfrt_exit().
 * Every exception other than reset and SysTick goes to mlfrt_fault_entry (weak aliases, so a
 * firmware may define its own handler), which reports and exits (platform_cortexm.c).
 */
#include <stdint.h>

#include "mlfrt.h"

#if !defined(__ARM_ARCH_6M__) && !defined(__ARM_ARCH_7M__) && !defined(__ARM_ARCH_7EM__) && \
    !defined(__ARM_ARCH_8M_MAIN__) && !defined(__ARM_ARCH_8_1M_MAIN__)
#error "mlfrt's Cortex-M startup supports ARMv6-M, ARMv7-M, ARMv7E-M, ARMv8-M mainline and ARMv8.1-M only"
#endif

/* External interrupt vectors after the 16 system ones (none is enabled by mlfrt; all go to the
   fault report if one fires anyway). */
#define MLFRT_VECTOR_IRQS 32

/* Symbols from the linker script. Declared as arrays so the compiler makes no size assumptions. */
extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _sstack[], _estack[];
typedef void (*mlfrt_ctor_t)(void);
extern mlfrt_ctor_t __preinit_array_start[], __preinit_array_end[];
extern mlfrt_ctor_t __init_array_start[], __init_array_end[];

int main(void);
/* platform_cortexm.c's console set-up; weak, so this start-up also links with a board support of
   the user's own that has none. */
__attribute__((weak)) void mlfrt_console_early_init(void);
void Reset_Handler(void);
void SysTick_Handler(void);   /* platform_cortexm.c */
void mlfrt_fault_entry(void);
__attribute__((noreturn)) void mlfrt_fault_report(uint32_t pc, uint32_t lr, uint32_t exc_return); /* platform_cortexm.c */

/* Common entry of every fault/unexpected exception. Before anything else it:
   1. (not on ARMv6-M, which has no such bit) sets CCR.BFHFNMIGN so that bus errors of data accesses made while reporting (a bad frame
      pointer, a wrong UART address) are ignored instead of locking the core up;
   2. picks the stack that holds the exception frame (EXC_RETURN bit 2: 0 = MSP, 1 = PSP) and
      loads the stacked PC (frame[6]) and LR (frame[5]);
   3. moves MSP back to _estack, so reporting works even after a stack overflow;
   then jumps to mlfrt_fault_report(pc, lr, exc_return), which never returns. */
#if defined(__ARM_ARCH_6M__)
/* Thumb-1 only: no IT blocks, no immediate ORR/TST, and a far jump through a register. */
__attribute__((naked, used)) void mlfrt_fault_entry(void) {
  __asm__ volatile(
      "mov   r2, lr               \n" /* r2 = EXC_RETURN */
      "movs  r3, #4               \n"
      "tst   r2, r3               \n"
      "bne   1f                   \n"
      "mrs   r3, msp              \n"
      "b     2f                   \n"
      "1:                         \n"
      "mrs   r3, psp              \n"
      "2:                         \n"
      "ldr   r0, [r3, #24]        \n" /* stacked PC */
      "ldr   r1, [r3, #20]        \n" /* stacked LR */
      "ldr   r3, =_estack         \n"
      "msr   msp, r3              \n"
      "isb                        \n"
      "ldr   r3, =mlfrt_fault_report \n"
      "bx    r3                   \n"
      ".ltorg                     \n");
}
#else
__attribute__((naked, used)) void mlfrt_fault_entry(void) {
  __asm__ volatile(
      "ldr   r1, =0xE000ED14      \n" /* SCB->CCR */
      "ldr   r2, [r1]             \n"
      "orr   r2, r2, #0x100       \n" /* BFHFNMIGN */
      "str   r2, [r1]             \n"
      "dsb                        \n"
      "isb                        \n"
      "mov   r2, lr               \n" /* r2 = EXC_RETURN */
      "tst   r2, #4               \n"
      "ite   eq                   \n"
      "mrseq r3, msp              \n"
      "mrsne r3, psp              \n"
      "ldr   r0, [r3, #24]        \n" /* stacked PC */
      "ldr   r1, [r3, #20]        \n" /* stacked LR */
      "ldr   r3, =_estack         \n"
      "msr   msp, r3              \n"
      "isb                        \n"
      "b     mlfrt_fault_report   \n"
      ".ltorg                     \n");
}
#endif

void NMI_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void HardFault_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void MemManage_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void BusFault_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void UsageFault_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void SecureFault_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void SVC_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void DebugMon_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void PendSV_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));
void Default_Handler(void) __attribute__((weak, alias("mlfrt_fault_entry")));

/* Entry 0 is the initial stack pointer, the others are handlers: a union keeps both typed. */
typedef union {
  void (*handler)(void);
  const void* stack_top;
} mlfrt_vector_t;

#define IRQ4 {.handler = Default_Handler}, {.handler = Default_Handler}, \
             {.handler = Default_Handler}, {.handler = Default_Handler}

__attribute__((used, section(".isr_vector"))) const mlfrt_vector_t mlfrt_vector_table[16 + MLFRT_VECTOR_IRQS] = {
    {.stack_top = _estack},
    {.handler = Reset_Handler},
    {.handler = NMI_Handler},
    {.handler = HardFault_Handler},
    {.handler = MemManage_Handler},
    {.handler = BusFault_Handler},
    {.handler = UsageFault_Handler},
    {.handler = SecureFault_Handler}, /* reserved on ARMv7-M */
    {.handler = 0},
    {.handler = 0},
    {.handler = 0},
    {.handler = SVC_Handler},
    {.handler = DebugMon_Handler},
    {.handler = 0},
    {.handler = PendSV_Handler},
    {.handler = SysTick_Handler},
    IRQ4, IRQ4, IRQ4, IRQ4, IRQ4, IRQ4, IRQ4, IRQ4, /* IRQ 0..31 */
};

#define SCB_CPACR (*(volatile uint32_t*)0xE000ED88u)
#define SCB_VTOR (*(volatile uint32_t*)0xE000ED08u)

/* The loops below must stay plain loops: no memcpy/memset calls and no vector code (the FPU/MVE
   may not be on yet, and the stack is being painted under our feet). */
__attribute__((used, noreturn, optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")))
void Reset_Handler(void) {
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  SCB_CPACR |= 0xFu << 20; /* CP10 and CP11 full access: FPU (and MVE on M55) */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
#if defined(__ARM_ARCH_6M__)
  /* The Cortex-M0 has no VTOR (its table must be at 0); an M0+ behind a bootloader has one. */
  if ((uintptr_t)mlfrt_vector_table != 0) SCB_VTOR = (uint32_t)(uintptr_t)mlfrt_vector_table;
#else
  SCB_VTOR = (uint32_t)(uintptr_t)mlfrt_vector_table;
#endif
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
  /* Stack limit: overflowing the .stack section raises a UsageFault (STKOF) on ARMv8-M. */
  __asm__ volatile("msr msplim, %0" : : "r"(_sstack));
#endif

  uint32_t* src = _sidata;
  uint32_t* dst = _sdata;
  while ((uintptr_t)dst < (uintptr_t)_edata) *dst++ = *src++;
  for (dst = _sbss; (uintptr_t)dst < (uintptr_t)_ebss;) *dst++ = 0;

#if MLFRT_STACK_PAINT
  {
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    volatile uint32_t* p = _sstack;
    while ((uintptr_t)p + MLFRT_STACK_PAINT_MARGIN < sp) *p++ = MLFRT_STACK_PAINT_WORD;
  }
#endif

  if (mlfrt_console_early_init) mlfrt_console_early_init();
  for (mlfrt_ctor_t* f = __preinit_array_start; (uintptr_t)f < (uintptr_t)__preinit_array_end; f++) (*f)();
  for (mlfrt_ctor_t* f = __init_array_start; (uintptr_t)f < (uintptr_t)__init_array_end; f++) (*f)();

  mlfrt_exit(main());
}
