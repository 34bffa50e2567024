"""UF2: firmware.uf2 of a real build checked block by block against the UF2 specification
(github.com/microsoft/uf2 README: magics, flags, family id, numbering, payload), reassembled by
Adafruit's uf2conv (a reader we did not write), and flashing by copying it to a folder that stands
in for the bootloader's drive."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlfbuild import cli
from mlfbuild.boards import load_board
from mlfbuild.errors import FlashError, UsageError
from mlfbuild.flash import FlashOptions, flash, load_job
from mlfbuild.flash.uf2 import Uf2Flasher, Uf2Timeouts, encode, find_drive, mounted_folders
from conftest import REPO

EXAMPLE = REPO / "examples" / "tiny_aot.tar"
BOARD = "feather-nrf52840-express"
SPEC_MAGIC_START0, SPEC_MAGIC_START1, SPEC_MAGIC_END = 0x0A324655, 0x9E5D5157, 0x0AB16F30
SPEC_FLAG_FAMILY = 0x00002000
NRF52840_FAMILY = 0xADA52840   # utils/uf2families.json: "NRF52840"


def spec_blocks(data: bytes) -> list[dict]:
    """Parse a UF2 file as the specification lays out a block (written from the spec's table)."""
    assert len(data) % 512 == 0, "a UF2 file is whole 512-byte blocks"
    blocks = []
    for offset in range(0, len(data), 512):
        raw = data[offset:offset + 512]
        fields = struct.unpack_from("<8I", raw, 0)
        blocks.append({"magic0": fields[0], "magic1": fields[1], "flags": fields[2], "address": fields[3],
                       "size": fields[4], "number": fields[5], "count": fields[6], "family": fields[7],
                       "data": raw[32:32 + 476], "magic_end": struct.unpack_from("<I", raw, 508)[0]})
    return blocks


def check_against_spec(data: bytes, image: bytes, origin: int, family: int) -> None:
    blocks = spec_blocks(data)
    assert len(blocks) == (len(image) + 255) // 256
    flash = bytearray()
    for number, block in enumerate(blocks):
        assert (block["magic0"], block["magic1"], block["magic_end"]) == (SPEC_MAGIC_START0, SPEC_MAGIC_START1,
                                                                         SPEC_MAGIC_END)
        assert block["flags"] == SPEC_FLAG_FAMILY                   # family id present, main flash
        assert block["family"] == family
        assert (block["number"], block["count"]) == (number, len(blocks))
        assert block["size"] == 256 and block["address"] % 4 == 0
        assert block["address"] == origin + len(flash)             # contiguous from the flash origin
        assert block["data"][256:] == bytes(476 - 256)              # unused data bytes are zero
        flash += block["data"][:256]
    assert bytes(flash[:len(image)]) == image
    assert set(flash[len(image):]) <= {0xFF}                        # padding is erased flash


def make_uf2_build(folder: Path, image: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "firmware.bin").write_bytes(image)
    record = {"board": load_board(BOARD).to_json(), "outputs": {"firmware.bin": hashlib.sha256(image).hexdigest()}}
    (folder / "build.json").write_text(json.dumps(record))
    return folder


def fake_drive(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "INFO_UF2.TXT").write_text("UF2 Bootloader 0.9.0\nModel: Adafruit Feather nRF52840 Express\n"
                                         "Board-ID: nRF52840-Feather-revD\n")
    return folder


@pytest.mark.parametrize("size", [1, 255, 256, 257, 4096, 6085])
def test_encode_follows_the_spec(size):
    image = hashlib.shake_256(str(size).encode()).digest(size)
    check_against_spec(encode(image, 0x26000, NRF52840_FAMILY), image, 0x26000, NRF52840_FAMILY)


@settings(max_examples=60, deadline=None)
@given(image=st.binary(min_size=1, max_size=3000), page=st.integers(0, 0xFFFF), family=st.integers(0, 2**32 - 1))
def test_encode_property(image, page, family):
    check_against_spec(encode(image, page * 256, family), image, page * 256, family)


def test_encode_refuses_unaligned_addresses_and_empty_images():
    with pytest.raises(UsageError, match="multiple of 256"):
        encode(b"\0" * 16, 0x26004, NRF52840_FAMILY)
    with pytest.raises(UsageError, match="empty"):
        encode(b"", 0x26000, NRF52840_FAMILY)


@pytest.mark.cross
def test_build_writes_firmware_uf2_that_reassembles_to_firmware_bin(build_firmware, tmp_path):
    out = build_firmware(EXAMPLE, BOARD)
    board = load_board(BOARD)
    image, uf2 = (out / "firmware.bin").read_bytes(), (out / "firmware.uf2").read_bytes()
    check_against_spec(uf2, image, board.memory.flash.origin, NRF52840_FAMILY)
    record = json.loads((out / "build.json").read_text())
    assert record["outputs"]["firmware.uf2"] == hashlib.sha256(uf2).hexdigest()
    # Adafruit's uf2conv, reading the file on its own, gives back firmware.bin at the same origin.
    result = subprocess.run([shutil.which("uf2conv") or str(Path(cli.sys.executable).parent / "uf2conv"),
                             str(out / "firmware.uf2"), "--convert", "--output", str(tmp_path / "back.bin")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0x26000" in result.stdout.lower() or "0x00026000" in result.stdout.lower()
    back = (tmp_path / "back.bin").read_bytes()
    assert back[:len(image)] == image and set(back[len(image):]) <= {0xFF}


@pytest.mark.cross
def test_boards_without_a_family_get_no_uf2(build_firmware):
    assert not (build_firmware(EXAMPLE, "nucleo-f446re") / "firmware.uf2").exists()


def test_flash_copies_the_uf2_to_the_given_drive(tmp_path, capsys):
    image = hashlib.shake_256(b"fw").digest(3000)
    build = make_uf2_build(tmp_path / "build", image)
    drive = fake_drive(tmp_path / "NRF52BOOT")
    assert cli.main(["flash", str(build), "--drive", str(drive)]) == 0
    check_against_spec((drive / "firmware.uf2").read_bytes(), image, 0x26000, NRF52840_FAMILY)
    assert "written to the bootloader drive" in capsys.readouterr().out


def test_flash_finds_the_drive_by_its_info_file(tmp_path):
    image = hashlib.shake_256(b"fw2").digest(700)
    job = load_job(make_uf2_build(tmp_path / "build", image))
    other = tmp_path / "USBSTICK"
    other.mkdir()
    drive = fake_drive(tmp_path / "NRF52BOOT")
    (drive / "INFO_UF2.TXT").rename(drive / "info_uf2.txt")          # FAT is case-insensitive
    flasher = Uf2Flasher(mounts=lambda: [other, drive])
    result = flash(job, FlashOptions(port=""), method="uf2", mounts=lambda: [other, drive])
    assert result.drive == drive and not (other / "firmware.uf2").exists()
    check_against_spec((drive / "firmware.uf2").read_bytes(), image, 0x26000, NRF52840_FAMILY)
    assert flasher._drive(FlashOptions(port="")) == drive


def test_no_drive_waits_then_exits_8(tmp_path):
    build = make_uf2_build(tmp_path / "build", b"\x01" * 64)
    sleeps = []
    with pytest.raises(FlashError, match="no UF2 bootloader drive") as info:
        flash(load_job(build), FlashOptions(port="", timeouts=Uf2Timeouts(drive=0.05, poll=0.01)),
              mounts=lambda: [tmp_path], sleep=sleeps.append)
    assert info.value.exit_code == 8 and sleeps
    assert cli.main(["flash", str(build), "--drive", str(tmp_path)]) == 8   # no INFO_UF2.TXT there
    assert not (tmp_path / "firmware.uf2").exists()


def test_several_drives_ask_for_one(tmp_path):
    with pytest.raises(UsageError, match="--drive"):
        find_drive([fake_drive(tmp_path / "A"), fake_drive(tmp_path / "B")])


def test_a_board_without_uf2_refuses_the_method(tmp_path):
    build = tmp_path / "nucleo"
    build.mkdir()
    (build / "firmware.bin").write_bytes(b"\0" * 64)
    (build / "build.json").write_text(json.dumps({"board": load_board("nucleo-f446re").to_json()}))
    assert cli.main(["flash", str(build), "--method", "uf2", "--drive", str(fake_drive(tmp_path / "D"))]) == 2


def test_mounted_folders_reads_fat_mounts(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/sda1 / ext4 rw 0 0\n/dev/sdb /media/me/NRF52\\040BOOT vfat rw 0 0\n")
    assert mounted_folders(mounts) == [Path("/media/me/NRF52 BOOT")]
    assert mounted_folders(tmp_path / "missing") == []


@pytest.mark.cross
def test_a_rebuild_for_a_board_without_uf2_removes_the_old_uf2(tmp_path):
    from mlfbuild.build import build

    build(EXAMPLE, BOARD, tmp_path / "out")
    assert (tmp_path / "out" / "firmware.uf2").is_file()
    build(EXAMPLE, "nucleo-f446re", tmp_path / "out")
    assert not (tmp_path / "out" / "firmware.uf2").exists()
