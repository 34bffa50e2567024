"""Which float ABI a firmware is built with, given the board and any LLVM objects the MLF ships.

A board fixes the core and whether it has an FPU; the calling convention is a build choice. Objects
that TVM compiled with the soft-float calling convention (softfp: FPU code, core-register arguments)
link into a board with an FPU when the whole firmware uses softfp too.
"""

from __future__ import annotations

from ..boards import Board
from ..errors import InvalidInputError
from ..mlf.model import Module, ObjectFile

# Architecture level of each core: an object built for a core may run on cores of the same family at
# the same or a higher level (v7-M code runs on v7E-M; v7E-M code needs DSP instructions).
_CORE_LEVEL = {"cortex-m0": 0, "cortex-m0plus": 0, "cortex-m1": 0, "cortex-m3": 1, "cortex-m4": 2,
               "cortex-m7": 3, "cortex-m33": 2, "cortex-m55": 4}


# Cores with the DSP extension (the ACLE SIMD32 intrinsics of <arm_acle.h>: __smlad, __sxtb16, ...).
# Cortex-M33 makes it optional; QEMU's and the common M33 parts have it.
_DSP_CORES = {"cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85"}


def check_c_code(board: Board, module: Module) -> None:
    """Generated C that calls ACLE DSP intrinsics (TVM's arm_cpu micro-kernels) runs only on a core
    with the DSP extension: refuse other boards before the compiler fails on the intrinsics. mlfbuild
    import's generated kernels include it only for a core with DSP (and plain-C twins elsewhere)."""
    if "arm_acle.h" not in module.system_headers or (not board.is_host and board.cpu.core in _DSP_CORES):
        return
    if module.imported_from:
        return
    where = "the host" if board.is_host else f"board {board.name} ({board.cpu.core}, no DSP extension)"
    raise InvalidInputError(f"{module.name}: TVM generated this code for {module.target_cpu or 'a Cortex-M core'} with "
                            f"DSP intrinsics (<arm_acle.h>, arm_cpu schedules); it cannot run on {where}: build for "
                            f"a board with one of {', '.join(sorted(_DSP_CORES))}")


def board_has_fpu(board: Board) -> bool:
    return board.cpu.float_abi in ("hard", "softfp")


def float_abi_for(board: Board, objects: list[ObjectFile]) -> str | None:
    if board.is_host:
        if objects:
            raise InvalidInputError(f"{objects[0].path}: LLVM object code for {objects[0].cpu or objects[0].machine} "
                                    "cannot run on the host board; build for a Cortex-M board")
        return None
    wanted = {o.float_abi for o in objects}
    for obj in objects:
        _check_object(board, obj)
    if not objects:
        return board.cpu.float_abi
    if "hard" in wanted and len(wanted - {"hard"}) > 0:
        raise InvalidInputError(f"the MLF mixes hard-float and soft-float objects ({', '.join(sorted(wanted))}); "
                                "they cannot be linked together")
    if "hard" in wanted:
        return "hard"
    if board_has_fpu(board):
        return "softfp"
    return "soft"


def _check_object(board: Board, obj: ObjectFile) -> None:
    if obj.machine != board.cpu.elf_machine:
        raise InvalidInputError(f"{obj.path}: object code for {obj.machine}, but board {board.name} needs "
                                f"{board.cpu.elf_machine}; re-export the model for this board's target")
    if obj.has_fpu_code and not board_has_fpu(board):
        raise InvalidInputError(f"{obj.path}: object code uses the FPU ({obj.float_abi}-float, {obj.cpu}), but board "
                                f"{board.name} ({board.cpu.core}) has none; re-export with -mfloat-abi=soft")
    needed, available = _CORE_LEVEL.get(obj.cpu or "", 0), _CORE_LEVEL.get(board.cpu.core, 0)
    if needed > available:
        raise InvalidInputError(f"{obj.path}: object code built for {obj.cpu} does not run on board {board.name} "
                                f"({board.cpu.core}); re-export with -mcpu={board.cpu.core}")
