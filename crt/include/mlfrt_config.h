/*
 * mlfrt_config.h — every compile-time option of mlfrt, the small C runtime of mlfbuild.
 *
 * Each option has a default here; override it with -D on the command line (the rendered
 * Makefile passes the board's values, see crt/README.md and mlfbuild.boards.Board.c_defines()).
 * Options that only matter on Cortex-M are ignored by the host build.
 */
#ifndef MLFRT_CONFIG_H_
#define MLFRT_CONFIG_H_

/* ---- Console UART (Cortex-M) -------------------------------------------------------------
 * Exactly one driver macro must be defined (to 1) on Cortex-M builds:
 *   MLFRT_UART_CMSDK    Arm CMSDK APB UART (MPS2/MPS3: an385/an386/an500/an505/an547)
 *   MLFRT_UART_PL011    Arm PL011 (Stellaris lm3s6965evb, Musca)
 *   MLFRT_UART_STM32    STM32 F1/F2/F4 USART: SR 0x00, DR 0x04, BRR 0x08, CR1 0x0C
 *   MLFRT_UART_STM32F7  STM32 F7/L4/L4+/H7 USART and LPUART: CR1 0x00, BRR 0x0C, ISR 0x1C,
 *                       RDR 0x24, TDR 0x28
 * plus, with MLFRT_UART_STM32F7 only:
 *   MLFRT_UART_LPUART   1 = the peripheral is an LPUART (BRR = 256 * clock / baud)
 */
#ifndef MLFRT_UART_LPUART
#define MLFRT_UART_LPUART 0
#endif

/* Base address of the console UART's registers (required on Cortex-M; no default). */
/* #define MLFRT_UART_BASE 0x40004000u */

/* Line rate in baud. QEMU ignores it; real boards need it to match the host side. */
#ifndef MLFRT_UART_BAUD
#define MLFRT_UART_BAUD 115200u
#endif

/* Clock of the UART peripheral in Hz, for the baud divisor. QEMU ignores it. */
#ifndef MLFRT_UART_CLOCK_HZ
#define MLFRT_UART_CLOCK_HZ 25000000u
#endif

/* Optional register writes done by mlfrt_init() before the UART is touched (clock enables,
 * GPIO alternate functions): a comma-separated list of uint32 triples addr,clear,set meaning
 * `*addr = (*addr & ~clear) | set`. Undefined = none. Example (USART2 on an STM32F4):
 *   -DMLFRT_BOARD_INIT_WRITES=0x40023830u,0u,0x1u,0x40023840u,0u,0x20000u */
/* #define MLFRT_BOARD_INIT_WRITES */

/* ---- Timer (Cortex-M) ----------------------------------------------------------------------
 * SysTick input clock in Hz (the processor clock; CLKSOURCE = 1). SysTick runs from
 * mlfrt_init() on, with a period of MLFRT_SYSTICK_HZ / MLFRT_TICK_RATE_HZ ticks and an
 * interrupt per period that extends the 24-bit counter. mlfrt_timer_hz() returns this value. */
#ifndef MLFRT_SYSTICK_HZ
#define MLFRT_SYSTICK_HZ 25000000u
#endif

/* SysTick interrupts per second (1000 = 1 ms). A periodic interrupt also avoids QEMU's ~1 s
 * stall on the first received byte. MLFRT_SYSTICK_HZ / MLFRT_TICK_RATE_HZ must be 2..2^24. */
#ifndef MLFRT_TICK_RATE_HZ
#define MLFRT_TICK_RATE_HZ 1000u
#endif

/* ---- Exit ----------------------------------------------------------------------------------
 * 1: mlfrt_exit() uses Arm semihosting SYS_EXIT_EXTENDED, so QEMU (with
 *    -semihosting-config enable=on) exits with the code. Without a debugger or QEMU's
 *    semihosting the BKPT instruction locks the core up: use 0 on real boards.
 * 0: mlfrt_exit() prints "[[exit N]]" on the console and sleeps forever (wfi). */
#ifndef MLFRT_SEMIHOSTING
#define MLFRT_SEMIHOSTING 0
#endif

/* Exit code after a fault (HardFault and friends on Cortex-M, SIGSEGV/SIGBUS/SIGILL/SIGFPE on
 * the host), after the "*** FAULT ..." line. */
#ifndef MLFRT_FAULT_EXIT_CODE
#define MLFRT_FAULT_EXIT_CODE 3
#endif

/* ---- Console text ------------------------------------------------------------------------
 * 1: mlfrt_puts() sends "\r\n" for "\n" (serial terminals). mlfrt_putc()/mlfrt_write() never
 * translate. Default: 1 on Cortex-M, 0 on the host. */
#ifndef MLFRT_CRLF
#if defined(__arm__) || defined(__thumb__)
#define MLFRT_CRLF 1
#else
#define MLFRT_CRLF 0
#endif
#endif

/* ---- Stack measurement (Cortex-M) ----------------------------------------------------------
 * 1: Reset_Handler fills the stack region (_sstack up to the current SP minus
 *    MLFRT_STACK_PAINT_MARGIN) with MLFRT_STACK_PAINT_WORD, and mlfrt_stack_peak() reports the
 *    deepest use so far. 0: no painting, mlfrt_stack_peak() returns 0. */
#ifndef MLFRT_STACK_PAINT
#define MLFRT_STACK_PAINT 1
#endif
#ifndef MLFRT_STACK_PAINT_WORD
#define MLFRT_STACK_PAINT_WORD 0xA5A5A5A5u
#endif
#ifndef MLFRT_STACK_PAINT_MARGIN
#define MLFRT_STACK_PAINT_MARGIN 64u
#endif

/* ---- Workspace allocator (TVMBackendAllocWorkspace) ----------------------------------------
 * Alignment of every allocation in bytes (power of two, >= 8). TVM assumes 16. */
#ifndef MLFRT_WORKSPACE_ALIGN
#define MLFRT_WORKSPACE_ALIGN 16u
#endif

#endif /* MLFRT_CONFIG_H_ */
