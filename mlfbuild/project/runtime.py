"""Our C runtime (crt/) as project files: the one list of what goes into the firmware's runtime.

TVM's standalone CRT, the alternative (`--runtime tvm`), is tvm_runtime.py."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..boards import Board
from ..resources import data_dir

# Sources of crt/src that belong to one platform only; every other file is portable.
_PLATFORM_ONLY = {"host": ("platform_host.c",), "mcu": ("platform_cortexm.c", "startup_cortexm.c", "newlib_syscalls.c")}
# Sources of crt/src that are board support (start-up, console, timer, exit), not what a model calls:
# an application on its own BSP links the model library without them.
_BOARD_SUPPORT = ("platform_host.c", "platform_cortexm.c", "startup_cortexm.c", "newlib_syscalls.c", "mlfrt_common.c")
# console.uart -> the C macros that select its driver in crt/src/platform_cortexm.c.
UART_DRIVER_MACROS = {
    "cmsdk": ("MLFRT_UART_CMSDK",),  # Arm CMSDK APB UART (MPS2/MPS3)
    "pl011": ("MLFRT_UART_PL011",),  # Arm PL011 (Stellaris, Musca)
    "stm32": ("MLFRT_UART_STM32",),  # STM32 F1/F2/F4 USART (SR/DR layout)
    "stm32f7": ("MLFRT_UART_STM32F7",),  # STM32 F7/L4/H7 USART (ISR/RDR/TDR layout)
    "stm32-lpuart": ("MLFRT_UART_STM32F7", "MLFRT_UART_LPUART"),  # same registers, BRR = 256*clk/baud
    "sercom": ("MLFRT_UART_SERCOM",),  # Microchip SAMD21/SAMD51 SERCOM in USART mode
    "nrf": ("MLFRT_UART_NRF",),  # Nordic nRF51/nRF52 UART (not UARTE): TXD/RXD registers and events
    "stdio": (),  # host: stdin/stdout
}


def crt_sources(board: Board) -> list[str]:
    """The crt/ C files (relative to crt/) a firmware for `board` compiles: every source of
    crt/src except those of the other platform."""
    platform = "host" if board.is_host else "mcu"
    excluded = {name for kind, names in _PLATFORM_ONLY.items() if kind != platform for name in names}
    return [f"src/{path.name}" for path in sorted((data_dir("crt") / "src").glob("*.c")) if path.name not in excluded]


def is_board_support(source: str) -> bool:
    """Whether a crt_sources() entry is board support rather than the runtime a model calls."""
    return source.rsplit("/", 1)[-1] in _BOARD_SUPPORT


def crt_defines(board: Board) -> list[str]:
    """The -D flags crt/ needs for `board` (crt/README.md, "Macros per board"). Values contain no spaces,
    quotes or braces, so they can go into a Makefile or a shell command unquoted."""
    if board.is_host:
        return ["-DMLFRT_HOST=1"]
    assert board.timer is not None
    console = board.console
    defines = [f"-D{macro}=1" for macro in UART_DRIVER_MACROS[console.uart]]
    defines += [f"-DMLFRT_UART_BASE=0x{console.base:08X}u", f"-DMLFRT_UART_BAUD={console.baud}u",
                f"-DMLFRT_UART_CLOCK_HZ={console.clock_hz}u", f"-DMLFRT_SYSTICK_HZ={board.timer.systick_hz}u",
                f"-DMLFRT_SEMIHOSTING={1 if board.semihosting else 0}"]
    if console.init:
        triples = ",".join(f"0x{w.addr:08X}u,0x{w.clear:08X}u,0x{w.set:08X}u" for w in console.init)
        defines.append(f"-DMLFRT_BOARD_INIT_WRITES={triples}")
    return defines


@functools.cache
def crt_setting(name: str) -> int:
    """A numeric option's default in crt/include/mlfrt_config.h, the one place it is stated."""
    config = (data_dir("crt") / "include" / "mlfrt_config.h").read_text()
    match = re.search(rf"^#define {name} (\d+)u?$", config, re.M)
    if match is None:
        raise LookupError(f"mlfrt_config.h has no numeric default for {name}")
    return int(match.group(1))


def fault_exit_code() -> int:
    """What the firmware exits with after reporting a fault (MLFRT_FAULT_EXIT_CODE)."""
    return crt_setting("MLFRT_FAULT_EXIT_CODE")


@dataclass(frozen=True)
class RuntimeChoice:
    name: str  # builtin | tvm
    crt_dir: Path | None = None


@dataclass
class RuntimeFiles:
    sources: list[str]
    includes: list[str]
    defines: list[str]
    notes: list[str] = field(default_factory=list)
    # Third-party runtime C (TVM's CRT with --runtime tvm): compiled like model code, with these flags.
    library_sources: list[str] = field(default_factory=list)
    library_flags: list[str] = field(default_factory=list)


def builtin_runtime_files(board: Board, writer) -> RuntimeFiles:
    """Our crt/: its headers, and every source of crt/src except those of the other platform."""
    crt = data_dir("crt")
    for path in sorted((crt / "include").rglob("*.h")):
        writer.copy(path, f"crt/include/{path.relative_to(crt / 'include')}")
    sources = []
    for source in crt_sources(board):
        writer.copy(crt / source, f"crt/{source}")
        sources.append(f"crt/{source}")
    for path in sorted((crt / "src").glob("*.h")):
        writer.copy(path, f"crt/src/{path.name}")
    return RuntimeFiles(sources=sources, includes=["crt/include"], defines=crt_defines(board))
