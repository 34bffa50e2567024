"""Putting a chip into its ROM bootloader and back, through the serial port's control lines.

"dtr-rts" (see docs/flashing.md for the wiring and the voltages):
    DTR drives BOOT0: asserted (pyserial `dtr = True`) = BOOT0 high.
    RTS drives NRST:  asserted (pyserial `rts = True`) = NRST low, the chip held in reset.
  enter: DTR on, RTS on, 100 ms, RTS off (the chip leaves reset and samples BOOT0 = 1: system
         memory boots), 100 ms, DTR off (BOOT0 low again, so the next reset runs the application).
  leave: DTR off, RTS on, 100 ms, RTS off (reset with BOOT0 = 0: the application starts).
"manual": the user holds BOOT0 high and presses RESET when asked (Enter to continue on a terminal).
"none":   the chip is already in its bootloader; nothing is done.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from ..errors import FlashError
from ..serialport import set_lines

RESETS = ("dtr-rts", "manual", "none", "touch-1200")   # touch-1200: SAM-BA boards (flash/samba.py)
PULSE = 0.1  # seconds: reset pulse and bootloader start-up time


def enter_bootloader(ser, method: str, *, sleep: Callable[[float], None] = time.sleep,
                     ask: Callable[[str], None] | None = None) -> None:
    if method == "dtr-rts":
        set_lines(ser, dtr=True, rts=True, error=FlashError)   # BOOT0 high, NRST low
        sleep(PULSE)
        set_lines(ser, rts=False, error=FlashError)            # release reset: boots system memory
        sleep(PULSE)
        set_lines(ser, dtr=False, error=FlashError)            # BOOT0 low for the next reset
        try:
            ser.reset_input_buffer()                           # glitches from the reset
        except Exception:  # noqa: BLE001 - not every URL handler implements it
            pass
    elif method == "manual":
        message = ("put the board into its bootloader: hold BOOT0 high (or fit the BOOT0 jumper) and "
                   "press RESET")
        (ask or _ask)(message)
    elif method != "none":
        raise FlashError(f"unknown reset method '{method}' (use one of {', '.join(RESETS)})")


def leave_bootloader(ser, method: str, *, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Reset into the application. True when done here; False when the caller should send GO."""
    if method != "dtr-rts":
        return False
    set_lines(ser, dtr=False, rts=True, error=FlashError)      # BOOT0 low, NRST low
    sleep(PULSE)
    set_lines(ser, rts=False, error=FlashError)                # release: the application runs
    return True


def _ask(message: str) -> None:
    if sys.stdin is not None and sys.stdin.isatty():
        print(f"mlfbuild: {message}, then press Enter", file=sys.stderr, flush=True)
        try:
            input()
        except EOFError:
            pass
    else:
        print(f"mlfbuild: {message} (not a terminal: continuing)", file=sys.stderr, flush=True)
