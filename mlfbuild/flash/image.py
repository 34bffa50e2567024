"""What to flash: the image of a build folder and the board's flashing data from its build.json.

build.json (mlfbuild/build.py) records the board exactly as it was built, so flashing does not
depend on the board files still being the same. Every check that needs no device (size, alignment,
board kind) is made here, before any port is opened.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..boards import FlashSectors, Flashing, McubootLayout, MemoryRegion
from ..errors import FlashError, InvalidInputError, UsageError


@dataclass(frozen=True)
class FlashJob:
    """An image and where it goes. `flash` is the board's whole flash region."""

    image: bytes
    address: int
    flashing: Flashing
    flash: MemoryRegion
    board: str = ""
    source: Path | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def end(self) -> int:
        return self.address + len(self.image)

    def check(self) -> None:
        """Refuse what can be refused without a device: FlashError/InvalidInputError."""
        where = f" ({self.source})" if self.source else ""
        if not self.image:
            raise InvalidInputError(f"the image is empty{where}: nothing to flash")
        if self.address % 4:
            raise UsageError(f"flash address 0x{self.address:08X} is not 4-byte aligned "
                                    "(the STM32 bootloader writes whole words)")
        if not self.flash.contains(self.address):
            raise UsageError(f"flash address 0x{self.address:08X} is outside {self.board or 'the board'}'s "
                                    f"flash 0x{self.flash.origin:08X}-0x{self.flash.end - 1:08X}")
        room = self.flash.end - self.address
        if len(self.image) > room:
            raise FlashError(f"the image is {len(self.image)} bytes but {self.board or 'the board'} has only "
                             f"{room} bytes of flash from 0x{self.address:08X} (ends at 0x{self.flash.end:08X}); "
                             f"nothing was sent to the device{where}")


def _flashing_from_json(data: dict, where: str) -> tuple[Flashing, MemoryRegion]:
    try:
        board = data["board"]
        f = board["flashing"]
        region = board["memory"]["flash"]
        flash = MemoryRegion(int(region["origin"]), int(region["length"]))
        sectors = tuple(FlashSectors(int(s["count"]), int(s["size"])) for s in f.get("sectors", ()))
        flashing = Flashing(method=str(f["method"]), address=int(f["address"]), reset=str(f["reset"]),
                            sectors=sectors, baud=int(f.get("baud", 115200)),
                            chip_id=None if f.get("chip_id") is None else int(f["chip_id"]),
                            notes=str(f.get("notes", "")), **_extras_from_json(f))
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where}: board.flashing or board.memory.flash is malformed ({exc!r})") from None
    if (not sectors and flashing.method == "stm32-uart") or any(s.count < 1 or s.size < 1 for s in sectors):
        raise InvalidInputError(f"{where}: board.flashing.sectors is empty or malformed")
    return flashing, flash


def _extras_from_json(f: dict) -> dict:
    """The optional flashing data (boards.Flashing.to_json writes only what a board declares)."""
    family, target, mcuboot = f.get("uf2_family"), f.get("pyocd_target"), f.get("mcuboot")
    return {"uf2_family": None if family is None else int(family),
            "pyocd_target": None if target is None else str(target),
            "openocd_config": tuple(str(c) for c in f.get("openocd_config", ())),
            "mcuboot": None if mcuboot is None else McubootLayout(
                int(mcuboot["header_size"]), int(mcuboot["slot_size"]), int(mcuboot["align"]), str(mcuboot["version"]))}


def load_job(target: Path, address: int | None = None) -> FlashJob:
    """The FlashJob for a build folder (or a file inside one: firmware.elf/.bin, build.json)."""
    from ..record import load as load_record

    target = Path(target)
    if not target.exists():
        raise InvalidInputError(f"{target}: no such build folder")
    folder = target if target.is_dir() else target.parent
    build = load_record(folder)
    record, where, board = build.data, str(build.path), build.board
    name = build.board_name
    if build.board_kind != "hardware" or "flashing" not in board:
        raise InvalidInputError(f"{folder} was built for {name} (kind = {build.board_kind}), which has no "
                                "flashing method; only hardware boards can be flashed (`mlfbuild boards`)")
    flashing, flash = _flashing_from_json(record, where)
    binary = folder / "firmware.bin"
    if not binary.is_file():
        raise InvalidInputError(f"{folder}: firmware.bin is missing (rebuild with `mlfbuild build`)")
    image = binary.read_bytes()
    warnings = []
    expected = build.outputs.get("firmware.bin")
    if expected and hashlib.sha256(image).hexdigest() != expected:
        warnings.append(f"{binary} differs from the one recorded in build.json (changed after the build?)")
    job = FlashJob(image=image, address=flashing.address if address is None else address, flashing=flashing,
                   flash=flash, board=name, source=binary, warnings=tuple(warnings))
    return job
