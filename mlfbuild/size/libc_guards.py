"""Recursion in libc that libc's own guard bounds, relied on only once the image's instructions show
the guard.

newlib's stdio set-up (libc/stdio/findfp.c, newlib 2.x to 4.2): `__sfp(d)` calls `__sinit(_GLOBAL_REENT)`
while `_GLOBAL_REENT->__sdidinit` is 0, and `__sinit(s)` calls `__sfp(s)` three times, having set
`s->__sdidinit = 1` first when `s == _GLOBAL_REENT`. gcc splits `__sinit` into its `__sdidinit` test
and an out-of-line body, `__sinit.part.0`, which is what `__sfp` calls. So the body, entered for any
reent, calls `__sfp`, which may enter the body once more, for the global reent, whose own `__sfp`
calls find the flag set and go no deeper:

    __sinit.part.0 -> __sfp -> __sinit.part.0 [global reent] -> __sfp [stdio set up]

The walker gets that chain (two copies of each function, the last `__sfp` without the call back)
instead of the cycle, when the disassembly shows, with the same flag offset K and the address of
`_global_impure_ptr` from the symbol table:
  __sfp:           the global reent loaded through `_global_impure_ptr`, its word at K loaded and
                   tested (`cbz`), and the only call of `__sinit.part.0` at that test's target with
                   r0 = the global reent (the instruction before the target does not fall through);
  __sinit.part.0:  r0 compared with the global reent and, before the first call of `__sfp`, 1 stored
                   at [r0, #K] on equality (`moveq`/`streq`), r0 unchanged until then.
Any other code keeps the cycle, and the bound falls back to the board's reserve with the reason.
"""

from __future__ import annotations

import re
from dataclasses import replace

SINIT_BODY, SFP = "__sinit.part.0", "__sfp"
GUARDED = (SINIT_BODY, SFP)
SINIT_FOR_GLOBAL = f"{SINIT_BODY} [global reent]"
SFP_SET_UP = f"{SFP} [stdio set up]"

Instruction = tuple[int, str, str]  # address, mnemonic, operands

_LITERAL_LOAD = re.compile(r"(r\d+), \[pc, #\d+\]\s+@ \(([0-9a-f]+) <")
_LOAD = re.compile(r"(r\d+), \[(r\d+), #(\d+)\]$")


def unroll_newlib_sinit(functions: dict, listing: dict[str, list[Instruction]], global_reent_pointer: int | None) -> bool:
    """Replace the `__sinit.part.0` <-> `__sfp` cycle by its bounded chain when the guard is in the
    code (see the module's doc); True when it was."""
    if not all(name in functions and name in listing for name in GUARDED) or global_reent_pointer is None:
        return False
    offset = _sfp_guard_offset(listing[SFP], global_reent_pointer)
    if offset is None or not _sinit_sets_flag_first(listing[SINIT_BODY], global_reent_pointer, offset):
        return False
    sinit, sfp = functions[SINIT_BODY], functions[SFP]
    functions[SFP_SET_UP] = replace(sfp, calls=sfp.calls - {SINIT_BODY})
    functions[SINIT_FOR_GLOBAL] = replace(sinit, calls=(sinit.calls - {SFP}) | {SFP_SET_UP})
    functions[SFP] = replace(sfp, calls=(sfp.calls - {SINIT_BODY}) | {SINIT_FOR_GLOBAL})
    return True


_NO_WRITE = ("str", "cmp", "cmn", "tst", "teq", "it", "b", "cb", "push", "stm", "vstr", "vpush", "nop", ".word")


def _writes(mnemonic: str, operands: str, register: str) -> bool:
    """Whether the instruction may change `register` (erring towards yes)."""
    if mnemonic.startswith(_NO_WRITE):
        return False
    if mnemonic.startswith(("ldrd", "ldm", "pop", "vpop")):
        return re.search(rf"\b{register}\b", operands) is not None
    return operands.startswith(f"{register},") or operands == register


def _literal(code: list[Instruction], address: int) -> int | None:
    word = next((operands for at, mnemonic, operands in code if at == address and mnemonic == ".word"), None)
    return int(word, 16) if word else None


def _global_reent_register(code: list[Instruction], pointer: int, until: int) -> str | None:
    """The register that holds *_global_impure_ptr (loaded from a literal holding its address)."""
    holding = None
    for index, (_, mnemonic, operands) in enumerate(code[:until]):
        literal = _LITERAL_LOAD.match(operands) if mnemonic.startswith("ldr") else None
        if literal and _literal(code, int(literal.group(2), 16)) == pointer:
            holding = literal.group(1)
            continue
        load = _LOAD.match(operands) if mnemonic.split(".")[0] == "ldr" else None
        if holding and load and load.group(2) == holding and load.group(3) == "0":
            reent = load.group(1)  # it must hold until `until`
            return None if any(_writes(m, o, reent) for _, m, o in code[index + 1:until]) else reent
        if holding and _writes(mnemonic, operands, holding):
            holding = None
    return None


def _sfp_guard_offset(code: list[Instruction], pointer: int) -> int | None:
    """K when __sfp calls __sinit.part.0 only as shown in the module's doc."""
    calls = [i for i, (_, mnemonic, operands) in enumerate(code)
             if mnemonic.split(".")[0] in ("bl", "b") and operands.endswith(f"<{SINIT_BODY}>")]
    if len(calls) != 1 or calls[0] < 2:
        return None
    call = calls[0]
    target = code[call - 1][0]
    before, before_operands = code[call - 2][1].split(".")[0], code[call - 2][2]
    if before != "b" and not (before == "pop" and "pc" in before_operands):
        return None  # the test's target must be reached by the branch alone
    branches = [i for i, (_, m, o) in enumerate(code) if re.search(rf"\b{target:x} <", o)]
    if len(branches) != 1 or code[branches[0]][1] != "cbz":
        return None
    test = branches[0]
    flag = code[test][2].split(",")[0]
    reent = _global_reent_register(code, pointer, test)
    if reent is None or code[call - 1][1:] != ("mov", f"r0, {reent}"):
        return None
    last_write = max((i for i in range(test) if _writes(code[i][1], code[i][2], flag)), default=None)
    load = _LOAD.match(code[last_write][2]) if last_write is not None and code[last_write][1] == "ldr" else None
    return int(load.group(3)) if load and load.group(1) == flag and load.group(2) == reent else None


def _sinit_sets_flag_first(code: list[Instruction], pointer: int, offset: int) -> bool:
    first_call = next((i for i, (_, m, o) in enumerate(code) if m == "bl" and o.endswith(f"<{SFP}>")), None)
    if first_call is None:
        return False
    reent = _global_reent_register(code, pointer, first_call)
    if reent is None or any(m.startswith(("b", "cb")) for _, m, _ in code[:first_call]):
        return False  # straight-line code up to the first call, or the store might be skipped
    compared, one = False, None
    for _, mnemonic, operands in code[:first_call]:
        if mnemonic == "cmp" and operands in (f"r0, {reent}", f"{reent}, r0"):
            compared = True
        elif mnemonic.startswith("moveq") and operands.endswith(", #1"):
            one = operands.split(",")[0]
        elif compared and one and mnemonic.startswith("streq") and operands == f"{one}, [r0, #{offset}]":
            return True
        elif operands.startswith("r0,") and not mnemonic.startswith(("str", "cmp")):
            return False  # r0 is no longer the reent being set up
    return False
