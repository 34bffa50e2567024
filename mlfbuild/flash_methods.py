"""The flashing methods, in one list: the names a board file's `flashing.method` may take, each with
the module and class under mlfbuild/flash/ that implement it (imported only when used), and the link
it reaches the board through. Add a method: write mlfbuild/flash/<module>.py and add its lines here."""

from __future__ import annotations

FLASHERS: dict[str, tuple[str, str]] = {
    "stm32-uart": ("mlfbuild.flash.stm32_uart", "Stm32UartFlasher"),
    "samba": ("mlfbuild.flash.samba", "SambaFlasher"),
    "uf2": ("mlfbuild.flash.uf2", "Uf2Flasher"),
    "mcuboot-serial": ("mlfbuild.flash.mcuboot", "McubootSerialFlasher"),
    "pyocd": ("mlfbuild.flash.probe", "PyocdFlasher"),
    "openocd": ("mlfbuild.flash.probe", "OpenocdFlasher"),
}

# The link each method reaches the board through; `flash --port/--probe/--drive` chooses one of that kind.
LINKS: dict[str, str] = {
    "stm32-uart": "port",
    "samba": "port",
    "mcuboot-serial": "port",
    "uf2": "drive",
    "pyocd": "probe",
    "openocd": "probe",
}

LINK_WORDS = {"port": "a serial port", "probe": "a debug probe", "drive": "the bootloader's USB drive"}

# What each method talks to on the board, for messages that point from one method to another.
METHOD_WORDS = {
    "stm32-uart": "the STM32 ROM bootloader over a USB-UART adapter",
    "samba": "the SAM-BA bootloader over the native USB port",
    "mcuboot-serial": "MCUboot's serial recovery over the console UART",
    "uf2": "the UF2 bootloader's USB drive",
    "pyocd": "the on-board debug probe through pyOCD",
    "openocd": "the on-board debug probe through OpenOCD",
}


def uses_port(method: str) -> bool:
    return LINKS.get(method) == "port"


def methods_of(flashing) -> list[str]:
    """The methods a board's flashing data (boards.Flashing) supports: its own, and each other one whose
    data the board file carries (an STM32 board with a debug probe keeps its ROM bootloader's chip id)."""
    methods = [flashing.method]
    if flashing.method in ("pyocd", "openocd") and flashing.chip_id is not None and flashing.sectors:
        methods.append("stm32-uart")
    optional = {"uf2": flashing.uf2_family is not None, "mcuboot-serial": flashing.mcuboot is not None,
                "pyocd": bool(flashing.pyocd_target), "openocd": bool(flashing.openocd_config)}
    return methods + [name for name, carried in optional.items() if carried and name not in methods]


def link_option_problem(option: str, method: str, flashing, board: str) -> str | None:
    """Why `--option` (port, probe or drive) cannot be given with `method`, on one line; None when it can."""
    if method not in LINKS or LINKS[method] == option:     # an unknown method is refused by its lookup
        return None
    users = [name for name, link in LINKS.items() if link == option]
    line = (f"--{option} does not apply to --method {method}, which reaches {board} through "
            f"{LINK_WORDS[LINKS[method]]}; --{option} is for {', '.join(users)}")
    offers = [name for name in methods_of(flashing) if LINKS.get(name) == option]
    if offers:
        line += "; use " + " or ".join(f"--method {name} ({METHOD_WORDS[name]})" for name in offers)
    else:
        line += f" ({board} has none of them)"
    return line
