"""Options shared by every flashing method (a method ignores what does not apply to it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class FlashOptions:
    port: str
    baud: int = 115200
    parity: str = "even"          # the STM32 bootloader speaks 8E1; "none" for PTYs and some bridges
    verify: bool = True
    reset: str = "dtr-rts"        # dtr-rts | manual | none
    erase: str = "sectors"        # sectors (only what the image covers) | all (mass erase)
    start: bool = True            # run the application afterwards (reset or GO)
    ignore_chip_id: bool = False
    attempts: int = 5             # per block / per command
    repairs: int = 2              # sector re-erase + rewrite rounds per flash
    timeouts: Any = None          # method-specific (an3155.Timeouts); None = the method's defaults
    drive: str | None = None      # uf2: the bootloader's mounted drive (default: the one holding INFO_UF2.TXT)
    probe: str | None = None      # pyocd/openocd: the probe's serial number (default: the one connected)
