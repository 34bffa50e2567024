/*
 * platform_cortexm.c — the mlfrt platform API on bare-metal Cortex-M (ARMv6-M, ARMv7-M, ARMv8-M
 * mainline):
 *   console  polled UART driver chosen at compile time (MLFRT_UART_CMSDK | _PL011 | _STM32 |
 *            _STM32F7 | _SERCOM | _NRF), registers at MLFRT_UART_BASE
 *   timer    SysTick at MLFRT_SYSTICK_HZ with a periodic interrupt (MLFRT_TICK_RATE_HZ) that
 *            extends the 24-bit counter to 64 bits
 *   exit     semihosting SYS_EXIT_EXTENDED (MLFRT_SEMIHOSTING) or "[[exit N]]" + wfi
 *   faults   mlfrt_fault_entry: prints "*** FAULT pc=... cfsr=... hfsr=..." and exits with
 *            MLFRT_FAULT_EXIT_CODE
 *   stack    mlfrt_stack_peak() scans the pattern painted by Reset_Handler
 * See mlfrt_config.h for every option.
 */
#include <stdint.h>

#include "mlfrt.h"

#if !defined(__ARM_ARCH_6M__) && !defined(__ARM_ARCH_7M__) && !defined(__ARM_ARCH_7EM__) && \
    !defined(__ARM_ARCH_8M_MAIN__) && !defined(__ARM_ARCH_8_1M_MAIN__)
#error "mlfrt's Cortex-M platform supports ARMv6-M, ARMv7-M, ARMv7E-M, ARMv8-M mainline and ARMv8.1-M only"
#endif

#if (defined(MLFRT_UART_CMSDK) + defined(MLFRT_UART_PL011) + defined(MLFRT_UART_STM32) + \
     defined(MLFRT_UART_STM32F7) + defined(MLFRT_UART_SERCOM) + defined(MLFRT_UART_NRF)) != 1
#error "define exactly one of MLFRT_UART_CMSDK, MLFRT_UART_PL011, MLFRT_UART_STM32, MLFRT_UART_STM32F7, MLFRT_UART_SERCOM, MLFRT_UART_NRF"
#endif
#ifndef MLFRT_UART_BASE
#error "define MLFRT_UART_BASE (the console UART's register base address)"
#endif

#define REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))
#define UART_REG(offset) REG32((uintptr_t)(MLFRT_UART_BASE) + (offset))

/* System control space (same addresses on ARMv7-M and ARMv8-M). */
#define SYST_CSR REG32(0xE000E010u)
#define SYST_RVR REG32(0xE000E014u)
#define SYST_CVR REG32(0xE000E018u)
#define SCB_ICSR REG32(0xE000ED04u)
#define SCB_CCR REG32(0xE000ED14u)
#define SCB_CFSR REG32(0xE000ED28u)
#define SCB_HFSR REG32(0xE000ED2Cu)
#define SCB_MMFAR REG32(0xE000ED34u)
#define SCB_BFAR REG32(0xE000ED38u)
#define ICSR_PENDSTSET (1u << 26)
#define ICSR_PENDSTCLR (1u << 25)

static inline void dsb(void) { __asm__ volatile("dsb" ::: "memory"); }

/* ---- Board register writes (clock enables, pin muxing) --------------------------------------- */

static void board_init(void) {
#ifdef MLFRT_BOARD_INIT_WRITES
  static const uint32_t writes[] = {MLFRT_BOARD_INIT_WRITES};
  _Static_assert(sizeof(writes) / sizeof(writes[0]) % 3 == 0, "MLFRT_BOARD_INIT_WRITES needs addr,clear,set triples");
  for (uint32_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i += 3) {
    volatile uint32_t* reg = (volatile uint32_t*)(uintptr_t)writes[i];
    *reg = (*reg & ~writes[i + 1]) | writes[i + 2];
    dsb();
    (void)*reg; /* read back: gives a just-enabled peripheral clock time to start */
  }
#endif
}

/* ---- UART drivers ------------------------------------------------------------------------------
 * Each provides uart_init(), uart_tx_ready(), uart_tx(c), uart_rx_ready(), uart_rx(). */

#if defined(MLFRT_UART_CMSDK)
/* Arm CMSDK APB UART: prints nothing until CTRL.TXEN is set (QEMU included); BAUDDIV >= 16. */
#define UART_DATA UART_REG(0x00u)
#define UART_STATE UART_REG(0x04u) /* bit 0 TX buffer full, bit 1 RX buffer full */
#define UART_CTRL UART_REG(0x08u)  /* bit 0 TX enable, bit 1 RX enable */
#define UART_BAUDDIV UART_REG(0x10u)
static void uart_init(void) {
  uint32_t div = (uint32_t)((MLFRT_UART_CLOCK_HZ) / (MLFRT_UART_BAUD));
  UART_BAUDDIV = div < 16u ? 16u : div;
  UART_CTRL = 0x3u;
}
static int uart_tx_ready(void) { return (UART_STATE & 0x1u) == 0; }
static void uart_tx(uint8_t c) { UART_DATA = c; }
static int uart_rx_ready(void) { return (UART_STATE & 0x2u) != 0; }
static int uart_rx(void) { return (int)(UART_DATA & 0xFFu); }

#elif defined(MLFRT_UART_PL011)
/* Arm PL011: IBRD/FBRD are latched by the LCRH write that follows them. */
#define UART_DR UART_REG(0x00u)
#define UART_FR UART_REG(0x18u) /* bit 4 RX FIFO empty, bit 5 TX FIFO full */
#define UART_IBRD UART_REG(0x24u)
#define UART_FBRD UART_REG(0x28u)
#define UART_LCRH UART_REG(0x2Cu)
#define UART_CR UART_REG(0x30u)
static void uart_init(void) {
  /* divisor in 1/64 units: clock / (16 * baud) * 64 = 4 * clock / baud, rounded */
  uint64_t div64 = ((uint64_t)(MLFRT_UART_CLOCK_HZ) * 4u + (MLFRT_UART_BAUD) / 2u) / (MLFRT_UART_BAUD);
  UART_CR = 0;
  UART_IBRD = (uint32_t)(div64 >> 6) == 0 ? 1u : (uint32_t)(div64 >> 6);
  UART_FBRD = (uint32_t)(div64 & 0x3Fu);
  UART_LCRH = 0x60u;  /* 8 data bits, no parity, 1 stop bit, FIFOs off */
  UART_CR = 0x301u;   /* UARTEN | TXE | RXE */
}
static int uart_tx_ready(void) { return (UART_FR & 0x20u) == 0; }
static void uart_tx(uint8_t c) { UART_DR = c; }
static int uart_rx_ready(void) { return (UART_FR & 0x10u) == 0; }
static int uart_rx(void) { return (int)(UART_DR & 0xFFu); }

#elif defined(MLFRT_UART_STM32)
/* STM32 F1/F2/F4 USART. QEMU's model drops RX bytes until CR1.UE|RE are set. Reading SR then
   DR also clears an overrun. */
#define USART_SR UART_REG(0x00u) /* bit 5 RXNE, bit 7 TXE */
#define USART_DR UART_REG(0x04u)
#define USART_BRR UART_REG(0x08u)
#define USART_CR1 UART_REG(0x0Cu)
static void uart_init(void) {
  USART_CR1 = 0;
  USART_BRR = ((MLFRT_UART_CLOCK_HZ) + (MLFRT_UART_BAUD) / 2u) / (MLFRT_UART_BAUD); /* OVER8 = 0 */
  USART_CR1 = (1u << 13) | (1u << 3) | (1u << 2);                                   /* UE | TE | RE */
}
static int uart_tx_ready(void) { return (USART_SR & 0x80u) != 0; }
static void uart_tx(uint8_t c) { USART_DR = c; }
static int uart_rx_ready(void) { return (USART_SR & 0x20u) != 0; }
static int uart_rx(void) { return (int)(USART_DR & 0xFFu); }

#elif defined(MLFRT_UART_STM32F7)
/* STM32 F7/L4/L4+/H7 USART and LPUART (same registers; LPUART's BRR is 256 * clock / baud). */
#define USART_CR1 UART_REG(0x00u) /* bit 0 UE, bit 2 RE, bit 3 TE */
#define USART_CR3 UART_REG(0x08u) /* bit 12 OVRDIS */
#define USART_BRR UART_REG(0x0Cu)
#define USART_ISR UART_REG(0x1Cu) /* bit 0 PE, 1 FE, 2 NE, 3 ORE, 5 RXNE, 7 TXE */
#define USART_ICR UART_REG(0x20u)
#define USART_RDR UART_REG(0x24u)
#define USART_TDR UART_REG(0x28u)
static void uart_init(void) {
  USART_CR1 = 0;
  USART_CR3 = 1u << 12; /* overrun detection off: a late reader loses bytes but never stalls */
#if MLFRT_UART_LPUART
  USART_BRR = (uint32_t)(((uint64_t)(MLFRT_UART_CLOCK_HZ) * 256u + (MLFRT_UART_BAUD) / 2u) / (MLFRT_UART_BAUD));
#else
  USART_BRR = ((MLFRT_UART_CLOCK_HZ) + (MLFRT_UART_BAUD) / 2u) / (MLFRT_UART_BAUD); /* OVER8 = 0 */
#endif
  USART_CR1 = (1u << 3) | (1u << 2) | (1u << 0); /* TE | RE | UE */
}
static int uart_tx_ready(void) { return (USART_ISR & 0x80u) != 0; }
static void uart_tx(uint8_t c) { USART_TDR = c; }
static int uart_rx_ready(void) {
  uint32_t isr = USART_ISR;
  if (isr & 0xFu) USART_ICR = 0xFu; /* clear PE/FE/NE/ORE so reception goes on */
  return (isr & 0x20u) != 0;
}
static int uart_rx(void) { return (int)(USART_RDR & 0xFFu); }

#elif defined(MLFRT_UART_SERCOM)
/* Microchip SAMD21/SAMD51 SERCOM in USART mode (same register layout on both). The board's init
   writes enable its clocks, mux its pins and put the pad choice (CTRLA.TXPO/RXPO) into CTRLA;
   this keeps those bits and adds: internal clock, LSB first, 16x arithmetic baud. */
#define SERCOM_CTRLA UART_REG(0x00u)    /* bit 1 ENABLE, MODE[4:2], TXPO[17:16], RXPO[21:20], DORD 30 */
#define SERCOM_CTRLB UART_REG(0x04u)    /* bit 16 TXEN, bit 17 RXEN */
#define SERCOM_BAUD (*(volatile uint16_t*)((uintptr_t)(MLFRT_UART_BASE) + 0x0Cu))
#define SERCOM_INTFLAG (*(volatile uint8_t*)((uintptr_t)(MLFRT_UART_BASE) + 0x18u)) /* 0 DRE, 2 RXC */
#define SERCOM_STATUS (*(volatile uint16_t*)((uintptr_t)(MLFRT_UART_BASE) + 0x1Au)) /* 1 FERR, 2 BUFOVF */
#define SERCOM_SYNCBUSY UART_REG(0x1Cu)
#define SERCOM_DATA UART_REG(0x28u)
static void uart_init(void) {
  uint32_t pads = SERCOM_CTRLA & 0x00330000u;
  SERCOM_CTRLA = pads | (1u << 30) | (1u << 2); /* DORD, MODE = USART with internal clock */
  while (SERCOM_SYNCBUSY != 0u) {
  }
  SERCOM_CTRLB = (1u << 17) | (1u << 16); /* RXEN, TXEN, 8 data bits, 1 stop bit */
  while (SERCOM_SYNCBUSY != 0u) {
  }
  /* BAUD = 65536 * (1 - 16 * baud / clock), rounded */
  SERCOM_BAUD = (uint16_t)(65536u - (uint32_t)(((uint64_t)(MLFRT_UART_BAUD) * 16u * 65536u +
                                                (MLFRT_UART_CLOCK_HZ) / 2u) / (MLFRT_UART_CLOCK_HZ)));
  SERCOM_CTRLA |= 1u << 1; /* ENABLE */
  while (SERCOM_SYNCBUSY != 0u) {
  }
}
static int uart_tx_ready(void) { return (SERCOM_INTFLAG & 0x1u) != 0; }
static void uart_tx(uint8_t c) { SERCOM_DATA = c; }
static int uart_rx_ready(void) {
  if (SERCOM_STATUS & 0x6u) SERCOM_STATUS = 0x6u; /* clear FERR/BUFOVF so reception goes on */
  return (SERCOM_INTFLAG & 0x4u) != 0;
}
static int uart_rx(void) { return (int)(SERCOM_DATA & 0xFFu); }
#elif defined(MLFRT_UART_NRF)
/* Nordic nRF51/nRF52 UART (the one without EasyDMA); the pins are the board's console.init writes
   to PSELTXD/PSELRXD. TXDRDY is raised when a byte has left, so only bytes after the first wait
   for it. RXDRDY is cleared before RXD is read: the read lets the next byte in, which raises it again. */
#define NRF_TASKS_STARTRX UART_REG(0x000u)
#define NRF_TASKS_STARTTX UART_REG(0x008u)
#define NRF_EVENTS_RXDRDY UART_REG(0x108u)
#define NRF_EVENTS_TXDRDY UART_REG(0x11Cu)
#define NRF_ENABLE UART_REG(0x500u)
#define NRF_RXD UART_REG(0x518u)
#define NRF_TXD UART_REG(0x51Cu)
#define NRF_BAUDRATE UART_REG(0x524u)
#define NRF_CONFIG UART_REG(0x56Cu)
/* BAUDRATE = baud * 2^32 / 16 MHz, rounded to the 4096 steps the peripheral has (gives the
   datasheet's table: 115200 -> 0x01D7E000, 38400 -> 0x009D5000). Folded at compile time. */
#define NRF_BAUDRATE_CODE \
  ((uint32_t)((((uint64_t)(MLFRT_UART_BAUD) << 32) / 16000000u + 0x800u) & 0xFFFFF000u))
static uint8_t s_nrf_tx_started;
static void uart_init(void) {
  NRF_ENABLE = 0;
  NRF_BAUDRATE = NRF_BAUDRATE_CODE;
  NRF_CONFIG = 0; /* no parity, no flow control */
  NRF_ENABLE = 4; /* UART */
  NRF_EVENTS_TXDRDY = 0;
  NRF_EVENTS_RXDRDY = 0;
  NRF_TASKS_STARTTX = 1;
  NRF_TASKS_STARTRX = 1;
  s_nrf_tx_started = 0;
}
static int uart_tx_ready(void) { return !s_nrf_tx_started || NRF_EVENTS_TXDRDY != 0; }
static void uart_tx(uint8_t c) {
  NRF_EVENTS_TXDRDY = 0;
  NRF_TXD = c;
  s_nrf_tx_started = 1;
}
static int uart_rx_ready(void) { return NRF_EVENTS_RXDRDY != 0; }
static int uart_rx(void) {
  NRF_EVENTS_RXDRDY = 0;
  return (int)(NRF_RXD & 0xFFu);
}
#endif

static uint8_t s_uart_ready;
/* A byte is dropped after this many polls of a transmitter that never gets ready, so no write waits
   without bound (a UART left disabled, a dead one while reporting a fault). One byte at 9600 baud
   is about 1 ms: far fewer polls than this at any core clock. */
#define TX_POLL_LIMIT 50000000u
static uint32_t s_tx_poll_limit = TX_POLL_LIMIT;

void mlfrt_putc(uint8_t c) {
  uint32_t polls = 0;
  while (!uart_tx_ready()) {
    if (++polls >= s_tx_poll_limit) return;
  }
  uart_tx(c);
}

/* ---- SysTick timer ----------------------------------------------------------------------------- */

#define SYSTICK_RELOAD ((uint32_t)((MLFRT_SYSTICK_HZ) / (MLFRT_TICK_RATE_HZ)) - 1u)
_Static_assert((MLFRT_SYSTICK_HZ) / (MLFRT_TICK_RATE_HZ) >= 2u &&
                   (MLFRT_SYSTICK_HZ) / (MLFRT_TICK_RATE_HZ) <= 0x1000000u,
               "MLFRT_SYSTICK_HZ / MLFRT_TICK_RATE_HZ must be 2..2^24 (SysTick is 24-bit)");

/* SysTick facts (ARMv7-M ARM, DDI 0403, B3.3 "The system timer, SysTick": SysTick operation,
   SYST_CSR, SYST_CVR; ARMv8-M: DDI 0553, B11.1): the counter counts down to 0 and reloads from
   SYST_RVR on the next clock; the step from 1 to 0 pends the SysTick exception (TICKINT = 1), and
   a write to SYST_CVR sets it to 0 without pending anything. So a period of RELOAD + 1 clocks
   begins when the counter reaches 0, and that 0 is its first clock. ICSR.PENDSTSET (B3.2.4) is
   one bit, however many reloads it stands for. Reading SYST_CSR clears COUNTFLAG; nothing here
   reads or needs it. */
#define SYSTICK_PERIOD ((uint64_t)SYSTICK_RELOAD + 1u)

static volatile uint32_t s_periods; /* periods begun: reloads seen by the interrupt (or by systick_now) */
static uint64_t s_last_now;         /* the last systick_now() */
static uint64_t s_epoch;            /* mlfrt_timer_start() */

void SysTick_Handler(void) { s_periods++; }

/* Ticks since SysTick was started. Interrupts are masked for the few reads so that the period
   count and the counter belong together; a reload whose interrupt is pending but not yet taken
   (PENDSTSET) is counted here, with the counter re-read after it. That re-read can still see the
   0 (under QEMU -icount it comes a few instructions, less than one SysTick clock, after the step),
   which is the new period's first tick, not the old one's last. */
static uint64_t systick_now(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask" : "=r"(primask));
  __asm__ volatile("cpsid i" ::: "memory");
  uint32_t periods = s_periods;
  uint32_t count = SYST_CVR & 0xFFFFFFu;
  if (SCB_ICSR & ICSR_PENDSTSET) {
    count = SYST_CVR & 0xFFFFFFu; /* re-read: now certainly after the step to 0 */
    periods++;
  }
  uint64_t now = (uint64_t)periods * SYSTICK_PERIOD + (count == 0 ? 0u : SYSTICK_PERIOD - count);
  /* Two reloads with one pending bit: the exception was not taken for a whole period. Hardware
     clocking SysTick from the core cannot do that with interrupts masked this briefly, but QEMU
     without -icount runs SysTick on host time and can stall the emulated core for longer than a
     period on a loaded host. The reading then falls below the last one, which proves the missed
     reload: count it once, for good. (Under -icount, or on a core, this never happens.) */
  if (now < s_last_now) {
    s_periods++;
    now += SYSTICK_PERIOD;
  }
  s_last_now = now;
  __asm__ volatile("msr primask, %0" : : "r"(primask) : "memory");
  return now;
}

static void systick_init(void) {
  SYST_CSR = 0;
  /* A reload just before the stop may still be pending (interrupts masked, or QEMU's core not yet
     scheduled): it belongs to the old count, and if it were taken now it would add a period to
     the new one. PENDSTCLR withdraws it (B3.2.4). */
  SCB_ICSR = ICSR_PENDSTCLR;
  SYST_RVR = SYSTICK_RELOAD;
  SYST_CVR = 0;
  s_periods = 0;
  s_last_now = 0;
  /* ENABLE | TICKINT | CLKSOURCE = processor clock. The written 0 stays until the reload on the
     next clock and pends nothing: systick_now() reads it as tick 0 of period 0. */
  SYST_CSR = 0x7u;
}

/* Restarting SysTick (not just noting the time) puts its periodic interrupt at the same phase
   relative to what follows, so a measured stretch that runs the same instructions meets its
   interrupts at the same places: under QEMU -icount it reads the same ticks every time. */
void mlfrt_timer_start(void) {
  systick_init();
  s_epoch = systick_now();
}

uint64_t mlfrt_timer_ticks64(void) { return systick_now() - s_epoch; }

uint32_t mlfrt_timer_ticks(void) { return (uint32_t)mlfrt_timer_ticks64(); }

uint32_t mlfrt_timer_hz(void) { return (uint32_t)(MLFRT_SYSTICK_HZ); }

/* ---- Init and input ------------------------------------------------------------------------------ */

/* The console is ready before main, as every board support package makes it: startup_cortexm.c
   calls this after .data and .bss and before constructors, so a printf in a constructor or in main
   before mlfrt_init() reaches the UART instead of waiting on a transmitter nobody enabled. */
void mlfrt_console_early_init(void) {
  board_init();
  uart_init();
  s_uart_ready = 1;
}

void mlfrt_init(void) {
  if (!s_uart_ready) mlfrt_console_early_init();
  systick_init();
  mlfrt_timer_start();
}

int mlfrt_getc(uint32_t timeout_ms) {
  uint64_t start = systick_now();
  uint64_t limit = (uint64_t)timeout_ms * ((MLFRT_SYSTICK_HZ) / 1000u); /* no 64-bit division linked */
  for (;;) {
    if (uart_rx_ready()) return uart_rx();
    if (timeout_ms != 0 && systick_now() - start >= limit) return -1;
  }
}

/* ---- Exit ------------------------------------------------------------------------------------------ */

#if MLFRT_SEMIHOSTING
/* Arm semihosting on M-profile: BKPT 0xAB, r0 = operation, r1 = argument block. */
static uint32_t semihost_call(uint32_t op, const void* arg) {
  register uint32_t r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static void semihost_exit(uint32_t code) {
  const uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, code};
  semihost_call(0x20u /* SYS_EXIT_EXTENDED: exit status = code */, block);
  /* Fallback for hosts without SYS_EXIT_EXTENDED: SYS_EXIT can only say 0 or "not 0". */
  semihost_call(0x18u /* SYS_EXIT */, (const void*)(uintptr_t)(code == 0 ? 0x20026u : 0x20023u));
}
#endif

__attribute__((noreturn)) static void finish(uint32_t code, int announce) {
#if MLFRT_SEMIHOSTING
  (void)announce;
  semihost_exit(code);
#else
  if (announce) {
    mlfrt_puts("[[exit ");
    mlfrt_put_u32(code);
    mlfrt_puts("]]\n");
  }
#endif
  for (;;) __asm__ volatile("wfi");
}

void mlfrt_exit(int code) { finish((code < 0 || code > 255) ? 255u : (uint32_t)code, 1); }

/* ---- Faults ------------------------------------------------------------------------------------------ */

static volatile uint32_t s_in_fault;

/* Called by mlfrt_fault_entry (startup_cortexm.c) on a fresh stack. */
__attribute__((noreturn, used)) void mlfrt_fault_report(uint32_t pc, uint32_t lr, uint32_t exc_return);

void mlfrt_fault_report(uint32_t pc, uint32_t lr, uint32_t exc_return) {
  if (s_in_fault) finish(MLFRT_FAULT_EXIT_CODE, 0); /* fault while reporting: just leave */
  s_in_fault = 1;
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
#if defined(__ARM_ARCH_6M__) /* no configurable fault status registers: everything is a HardFault */
  uint32_t cfsr = 0, hfsr = 0, bfar = 0, mmfar = 0;
#else
  uint32_t cfsr = SCB_CFSR, hfsr = SCB_HFSR, bfar = SCB_BFAR, mmfar = SCB_MMFAR;
#endif
  s_tx_poll_limit = 1000000u;
  if (!s_uart_ready) {
    uart_init();
    s_uart_ready = 1;
  }
  mlfrt_puts("\n*** FAULT pc=0x");
  mlfrt_put_hex32(pc);
  mlfrt_puts(" cfsr=0x");
  mlfrt_put_hex32(cfsr);
  mlfrt_puts(" hfsr=0x");
  mlfrt_put_hex32(hfsr);
  mlfrt_puts(" bfar=0x");
  mlfrt_put_hex32(bfar);
  mlfrt_puts(" mmfar=0x");
  mlfrt_put_hex32(mmfar);
  mlfrt_puts(" lr=0x");
  mlfrt_put_hex32(lr);
  mlfrt_puts(" exc_return=0x");
  mlfrt_put_hex32(exc_return);
  mlfrt_puts(" exc=");
  mlfrt_put_u32(ipsr & 0x1FFu);
  mlfrt_puts("\n");
  finish(MLFRT_FAULT_EXIT_CODE, 1);
}

/* ---- Stack measurement ---------------------------------------------------------------------------- */

extern uint32_t _sstack[], _estack[];

size_t mlfrt_stack_peak(void) {
#if MLFRT_STACK_PAINT
  const volatile uint32_t* p = _sstack;
  while ((uintptr_t)p < (uintptr_t)_estack && *p == MLFRT_STACK_PAINT_WORD) p++;
  return (size_t)((uintptr_t)_estack - (uintptr_t)p);
#else
  return 0;
#endif
}
