"""The flashing methods, in one list: the names a board file's `flashing.method` may take, each with
the module and class under mlfbuild/flash/ that implement it (imported only when used). Add a
method: write mlfbuild/flash/<module>.py and add its line here."""

from __future__ import annotations

FLASHERS: dict[str, tuple[str, str]] = {
    "stm32-uart": ("mlfbuild.flash.stm32_uart", "Stm32UartFlasher"),
    "samba": ("mlfbuild.flash.samba", "SambaFlasher"),
    "uf2": ("mlfbuild.flash.uf2", "Uf2Flasher"),
    "mcuboot-serial": ("mlfbuild.flash.mcuboot", "McubootSerialFlasher"),
    "pyocd": ("mlfbuild.flash.probe", "PyocdFlasher"),
    "openocd": ("mlfbuild.flash.probe", "OpenocdFlasher"),
}
