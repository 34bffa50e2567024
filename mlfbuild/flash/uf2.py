"""UF2: the USB Flashing Format of bootloaders that show up as a drive (Adafruit, Seeed, many others).

A UF2 file is a sequence of 512-byte blocks, each self-contained: two start magics, flags, the
flash address, the payload size, the block's number, the block count, the family id (flag
0x2000), 476 bytes of data of which the payload is the start, and an end magic. All fields are
little-endian uint32 (the format's specification, github.com/microsoft/uf2). We write 256-byte
payloads (always valid, and a multiple of every page size below 476) with the family id set, so a
bootloader of another chip family ignores the file.

Flashing is a copy: the bootloader's drive is the mounted folder that holds INFO_UF2.TXT; writing
the file's last block makes the bootloader start the application (and the drive goes away).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..errors import FlashError, UsageError
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress

MAGIC_START0 = 0x0A324655   # "UF2\n"
MAGIC_START1 = 0x9E5D5157
MAGIC_END = 0x0AB16F30
FLAG_FAMILY_ID_PRESENT = 0x00002000
BLOCK_SIZE = 512
DATA_SIZE = 476
PAYLOAD_SIZE = 256
INFO_FILE = "INFO_UF2.TXT"
FILE_NAME = "firmware.uf2"
_HEADER = struct.Struct("<8I")


def encode(image: bytes, address: int, family: int) -> bytes:
    """The UF2 file that writes `image` at `address` on chips of `family`. The last payload is
    padded with 0xFF, the value of erased flash."""
    if address % PAYLOAD_SIZE:
        raise UsageError(f"UF2 address 0x{address:08X} is not a multiple of {PAYLOAD_SIZE} (a flash page boundary)")
    if not image:
        raise UsageError("nothing to put in a UF2 file: the image is empty")
    count = (len(image) + PAYLOAD_SIZE - 1) // PAYLOAD_SIZE
    blocks = []
    for number in range(count):
        payload = image[number * PAYLOAD_SIZE:(number + 1) * PAYLOAD_SIZE].ljust(PAYLOAD_SIZE, b"\xff")
        header = _HEADER.pack(MAGIC_START0, MAGIC_START1, FLAG_FAMILY_ID_PRESENT, address + number * PAYLOAD_SIZE,
                              PAYLOAD_SIZE, number, count, family)
        blocks.append(header + payload.ljust(DATA_SIZE, b"\x00") + struct.pack("<I", MAGIC_END))
    return b"".join(blocks)


def write_build_file(folder: Path, image: bytes, address: int, family: int) -> Path:
    """firmware.uf2 beside firmware.bin in a build folder."""
    path = Path(folder) / FILE_NAME
    path.write_bytes(encode(image, address, family))
    return path


def is_bootloader_drive(folder: Path) -> bool:
    """A UF2 bootloader's drive holds INFO_UF2.TXT (FAT is case-insensitive, so any case)."""
    try:
        return any(entry.name.upper() == INFO_FILE and entry.is_file() for entry in Path(folder).iterdir())
    except OSError:
        return False


def mounted_folders(mounts: Path = Path("/proc/mounts")) -> list[Path]:
    """Mount points of removable-looking file systems (vfat/msdos/exfat) from /proc/mounts."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return []
    folders = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("vfat", "msdos", "exfat", "fuseblk"):
            # /proc/mounts escapes spaces and other characters as octal (\040)
            folders.append(Path(fields[1].encode().decode("unicode_escape")))
    return folders


def find_drive(candidates: Iterable[Path]) -> Path:
    """The one UF2 bootloader drive among `candidates`; FlashError when there is none or several."""
    drives = sorted({Path(c) for c in candidates if is_bootloader_drive(Path(c))})
    if len(drives) > 1:
        raise UsageError(f"several UF2 bootloader drives are mounted ({', '.join(map(str, drives))}); "
                         "choose one with --drive")
    if not drives:
        raise FlashError("no UF2 bootloader drive is mounted (a drive holding INFO_UF2.TXT): double-tap the "
                         "board's reset button to enter the bootloader, wait for the drive, or give it with --drive")
    return drives[0]


@dataclass
class Uf2Timeouts:
    drive: float = 10.0   # seconds to wait for the bootloader's drive to be mounted
    poll: float = 0.25


@dataclass
class Uf2Result:
    address: int
    size: int
    drive: Path
    verified: bool = False
    started: bool = True
    verification: str = "written to the bootloader drive (the bootloader checks each block)"


class Uf2Flasher:
    method = "uf2"

    def __init__(self, *, mounts: Callable[[], list[Path]] = mounted_folders, sleep=time.sleep):
        self._mounts = mounts
        self._sleep = sleep

    def flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None = None) -> Uf2Result:
        job.check()
        family = job.flashing.uf2_family
        if family is None:
            raise UsageError(f"{job.board or 'the board'} declares no UF2 family id (flashing.uf2_family): "
                             "it has no UF2 bootloader mlfbuild knows of")
        data = encode(job.image, job.address, family)
        drive = self._drive(options)
        progress = progress or Progress(silent=True)
        target = drive / FILE_NAME
        try:
            with open(target, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise FlashError(f"copying {FILE_NAME} to the UF2 drive {drive} failed: {exc.strerror or exc}") from None
        progress.note(f"wrote {len(data) // BLOCK_SIZE} UF2 blocks ({len(job.image)} bytes of firmware, family "
                      f"0x{family:08X}) to {target}")
        return Uf2Result(address=job.address, size=len(job.image), drive=drive)

    def _drive(self, options: FlashOptions) -> Path:
        if options.drive:
            drive = Path(options.drive)
            if not is_bootloader_drive(drive):
                raise FlashError(f"{drive} is not a UF2 bootloader drive (no {INFO_FILE} in it)")
            return drive
        timeouts = options.timeouts if isinstance(options.timeouts, Uf2Timeouts) else Uf2Timeouts()
        deadline = time.monotonic() + timeouts.drive
        while True:
            try:
                return find_drive(self._mounts())
            except FlashError:
                if time.monotonic() >= deadline:
                    raise
            self._sleep(timeouts.poll)
