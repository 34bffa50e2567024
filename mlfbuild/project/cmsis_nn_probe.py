"""Running a CMSIS-NN tree's get_buffer_size functions where its code cannot reach this machine.

The scratch sizes come from the library's own functions, so the user's tree is run. Preferably on the
board's own core in QEMU: a bare-metal program built with the cross compiler and the board's CPU flags
(the library's DSP/MVE paths, as the firmware compiles them) prints one size a line on the CMSDK UART
and stops QEMU with a system reset (`-no-reboot`). The guest has no processes and no files, and QEMU
runs without semihosting (which would open files and run commands on the host). A hardware board's
core runs on the QEMU board with the same core. For the host board, or without QEMU, the cross
compiler or a QEMU board for the core, the probe is a native program of the library's host variants
run in a PID namespace of its own (util-linux `unshare`): whatever it starts dies with it.
Either way the run is waited on by its exit status, not by its output, and stopped whole at a time limit.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..boards import Board, list_boards
from ..errors import BuildError, InvalidInputError
from ..resources import setup_hint
from ..toolchain import first_error, limit_memory, run_compiler

FEATURE_MACROS = {"dsp": "__ARM_FEATURE_DSP", "mve": "__ARM_FEATURE_MVE"}  # what the library's paths test
PROBE_SECONDS = 30  # the size functions are arithmetic: they return in microseconds
PROBE_OUTPUT_BYTES = 64 * 1024  # one short line per call
_DONE = "."  # the last line of a probe that ran to its end
_FAULT = "!"  # the line the probe prints when the core faults
# The namespaces a native probe runs in: a PID namespace needs root, or a user namespace around it.
_CONTAINMENTS = (("--pid", "--fork", "--kill-child"),
                 ("--user", "--map-root-user", "--pid", "--fork", "--kill-child"))


@dataclass(frozen=True)
class ProbeTarget:
    """Where the size functions run: a QEMU board's core (`board`), built with `compiler` and the
    firmware's `arch_flags`; or (board None) this machine, in a PID namespace of its own."""

    board: Board | None = None
    compiler: str = ""
    arch_flags: tuple[str, ...] = ()
    qemu: str = "qemu-system-arm"

    @property
    def emulated(self) -> bool:
        return self.board is not None

    def describe(self) -> str:
        return f"on a {self.board.cpu.core} in QEMU {self.board.qemu.machine}" if self.board else \
            "on this machine, in a PID namespace of its own"


NATIVE = ProbeTarget()


def probe_target(board: Board, compiler: str, arch_flags: list[str], qemu: str = "qemu-system-arm") -> ProbeTarget:
    """The board's own core in QEMU (or a QEMU board with the same core and a CMSDK UART), when QEMU
    and the cross compiler are installed; otherwise this machine."""
    if board.is_host or board.cpu is None or shutil.which(qemu) is None or shutil.which(compiler) is None:
        return NATIVE
    runner = board if _can_run(board) else next((b for b in list_boards() if _can_run(b) and
                                                  b.cpu.core == board.cpu.core), None)
    return ProbeTarget(runner, compiler, tuple(arch_flags), qemu) if runner else NATIVE


def _can_run(board: Board) -> bool:
    return board.is_emulated and board.qemu is not None and board.console.uart == "cmsdk" and board.memory is not None


def probe_program(blocks: list[str], target: ProbeTarget) -> str:
    """The C of the probe: each block prints one size (`print_size(...)`)."""
    body = "".join(blocks)
    if not target.emulated:
        return ("#include <stdio.h>\n#include \"arm_nnfunctions.h\"\n\n"
                "static void print_size(long size) { printf(\"%ld\\n\", size); }\n\n"
                f"int main(void)\n{{\n{body}  return 0;\n}}\n")
    return _BARE_METAL.replace("@UART@", f"0x{target.board.console.base:08X}u").replace("@BODY@", body)


# A bare-metal program for Cortex-M: its own vector table and reset, the CMSDK UART polled, and a
# system reset to end (QEMU runs with -no-reboot, so the reset ends QEMU).
_BARE_METAL = r"""#include <stdint.h>
#include "arm_nnfunctions.h"

#define REG32(address) (*(volatile uint32_t *)(address))
#define UART_DATA REG32(@UART@ + 0x00u)
#define UART_STATE REG32(@UART@ + 0x04u) /* bit 0: TX buffer full */
#define UART_CTRL REG32(@UART@ + 0x08u)  /* bit 0: TX enable */
#define UART_BAUDDIV REG32(@UART@ + 0x10u)
#define SCB_AIRCR REG32(0xE000ED0Cu)
#define SCB_CPACR REG32(0xE000ED88u)

extern uint32_t _sbss[], _ebss[], _estack[];

static void put(char c) { while (UART_STATE & 1u) {} UART_DATA = (uint8_t)c; }

static void print_size(long size)
{
  char digits[24];
  int count = 0;
  unsigned long magnitude = size < 0 ? 0ul - (unsigned long)size : (unsigned long)size;
  if (size < 0) put('-');
  do { digits[count++] = (char)('0' + magnitude % 10u); magnitude /= 10u; } while (magnitude);
  while (count) put(digits[--count]);
  put('\n');
}

static void stop(void)
{
  SCB_AIRCR = 0x05FA0004u; /* SYSRESETREQ */
  for (;;) {}
}

void mlf_probe_fault(void) { put('!'); put('\n'); stop(); }

static void probe(void)
{
@BODY@}

void mlf_probe_reset(void)
{
  for (uint32_t *word = _sbss; word < _ebss; ++word) *word = 0;
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  SCB_CPACR |= 0xFu << 20; /* CP10, CP11: the FPU and MVE */
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
  UART_BAUDDIV = 16u;
  UART_CTRL = 1u;
  probe();
  put('.');
  put('\n');
  stop();
}

__attribute__((section(".isr_vector"), used)) static void (*const vectors[16])(void) = {
  (void (*)(void))_estack, mlf_probe_reset, mlf_probe_fault, mlf_probe_fault, mlf_probe_fault, mlf_probe_fault,
  mlf_probe_fault, 0, 0, 0, 0, mlf_probe_fault, mlf_probe_fault, 0, mlf_probe_fault, mlf_probe_fault,
};
"""


def _linker_script(board: Board) -> str:
    """Code in flash, data and the stack in RAM: QEMU's ELF loader puts .data where it runs."""
    flash, ram = board.memory.flash, board.memory.ram
    return (f"MEMORY\n{{\n  FLASH (rx) : ORIGIN = 0x{flash.origin:08X}, LENGTH = 0x{flash.length:X}\n"
            f"  RAM (rwx) : ORIGIN = 0x{ram.origin:08X}, LENGTH = 0x{ram.length:X}\n}}\n"
            "ENTRY(mlf_probe_reset)\nSECTIONS\n{\n"
            "  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH\n"
            "  .text : { *(.text .text.*) *(.rodata .rodata.*) } > FLASH\n"
            "  .data : { *(.data .data.*) } > RAM\n"
            "  .bss (NOLOAD) : { _sbss = .; *(.bss .bss.* COMMON) . = ALIGN(4); _ebss = .; } > RAM\n"
            "  _estack = ORIGIN(RAM) + LENGTH(RAM);\n}\n")


def build_probe(work: Path, program: str, sources: list[str], includes: list[str], undefined: list[str],
                target: ProbeTarget, memory: int) -> Path:
    """The probe's executable (an ELF for QEMU, or a native program)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "probe.c").write_text(program)
    # -include stdint.h: v4.1.0's Internal/arm_nn_compiler.h uses uint32_t before any header defines it.
    common = ["-std=gnu11", "-w", "-include", "stdint.h", *undefined, *includes, str(work / "probe.c"), *sources]
    if target.emulated:
        (work / "probe.ld").write_text(_linker_script(target.board))
        compiler = shutil.which(target.compiler)
        command = [compiler, *target.arch_flags, "-Os", "-ffunction-sections", "-fdata-sections", *common,
                   "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", f"-T{work / 'probe.ld'}",
                   "-Wl,--gc-sections", "-o", str(work / "probe.elf"), "-lm"]
        executable = work / "probe.elf"
    else:
        compiler = shutil.which("gcc") or shutil.which("cc")
        if compiler is None:
            raise BuildError("CMSIS-NN scratch buffers are sized by running the library's get_buffer_size functions, "
                             "and neither QEMU with the cross compiler nor a host C compiler (gcc or cc) is on PATH")
        command = [compiler, "-O0", *common, "-o", str(work / "probe"), "-lm"]
        executable = work / "probe"
    built = run_compiler(command, memory=memory)
    if built.returncode != 0:
        raise BuildError(f"could not build the CMSIS-NN buffer-size probe with {Path(compiler).name}: "
                         f"{first_error(built.stderr, memory)}")
    return executable


def run_probe(executable: Path, target: ProbeTarget, count: int, memory: int) -> list[int]:
    """The `count` sizes the probe prints, one a line."""
    sizes = executable.parent / "probe.out"  # the UART's bytes, or the native program's standard output
    if target.emulated:
        command = [target.qemu, "-M", target.board.qemu.machine, "-display", "none", "-monitor", "none",
                   "-serial", f"file:{sizes}", "-no-reboot", *target.board.qemu.extra_args, "-kernel", str(executable)]
        code = _run_waited(command, executable.parent / "qemu.log", None)  # QEMU maps its guest's memory
    else:
        code = _run_waited([*_containment(), str(executable)], sizes, memory)
    lines = _read_lines(sizes)
    where = f"the CMSIS-NN buffer-size probe (the tree's get_buffer_size functions, run {target.describe()})"
    if _FAULT in lines:
        raise InvalidInputError(f"{where} faulted")
    if target.emulated and lines[-1:] == [_DONE]:
        lines = lines[:-1]
    elif target.emulated or code != 0:
        raise InvalidInputError(f"{where} failed (exit {code})")
    if len(lines) != count or not all(line.lstrip("-").isdigit() for line in lines):
        raise InvalidInputError(f"{where} printed {len(lines)} size(s) for {count} call(s)")
    return [int(line) for line in lines]


def _read_lines(path: Path) -> list[str]:
    """The first PROBE_OUTPUT_BYTES of what the probe printed (nothing, when QEMU did not start)."""
    try:
        with open(path, "rb") as said:
            return said.read(PROBE_OUTPUT_BYTES).decode(errors="replace").split()
    except FileNotFoundError:
        return []


def _run_waited(command: list[str], output: Path, memory: int | None) -> int:
    """Run `command` with its standard output to a file (its errors beside it), waited on by its exit
    status (a child it leaves holding the file does not keep us waiting), its process group stopped
    after PROBE_SECONDS."""
    with open(output, "wb") as sink, open(output.with_suffix(".err"), "wb") as errors:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=errors,
                                   start_new_session=True, preexec_fn=limit_memory(memory) if memory else None)
    try:
        code = process.wait(timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise InvalidInputError(f"the CMSIS-NN buffer-size probe (the tree's get_buffer_size functions) did not "
                                f"finish within {PROBE_SECONDS} s and was stopped") from None
    except BaseException:  # Ctrl-C: nothing of the probe outlives us
        _kill_group(process)
        raise
    return code


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


@functools.lru_cache(maxsize=1)
def _containment() -> tuple[str, ...]:
    """The `unshare` command that gives the probe a PID namespace this machine allows: when the
    probe (the namespace's first process) ends, the kernel ends everything it started."""
    unshare = shutil.which("unshare")
    if unshare is not None:
        for flags in _CONTAINMENTS:
            try:
                tried = subprocess.run([unshare, *flags, "true"], stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if tried.returncode == 0:
                return (unshare, *flags)
    raise BuildError("CMSIS-NN scratch buffers are sized by running the tree's get_buffer_size functions, which "
                     "mlfbuild runs only where they cannot reach this machine: in QEMU (install qemu-system-arm and "
                     f"gcc-arm-none-eabi{setup_hint()}), or for the host board in a PID namespace of their own, "
                     "which `unshare --pid` (util-linux) could not make here")
