"""`mlfbuild ports`: serial ports with USB ids, known bootloaders and probes marked from the data table."""

from __future__ import annotations

import json

import pytest

from fake_samba import CHIPS, FakeSamba, PortEntry
from mlfbuild import cli
from mlfbuild.boards import list_boards
from mlfbuild.errors import InvalidInputError
from mlfbuild.ports import format_ports, list_ports, load_known


def test_the_table_names_only_shipped_boards_and_no_id_twice():
    known = load_known()
    names = {b.name for b in list_boards()}
    assert known and all(set(d.boards) <= names for d in known.values())
    assert known[(0x2341, 0x004D)].kind == "bootloader" and known[(0x0483, 0x374B)].kind == "probe"


def test_ports_mark_the_bootloader_the_sketch_and_unknown_devices():
    entries = [PortEntry("/dev/ttyACM1", 0x2341, 0x004D, "Arduino Zero"),
               PortEntry("/dev/ttyACM0", 0x0483, 0x374B, "STM32 STLink"),
               PortEntry("/dev/ttyUSB0", 0x1A86, 0x7523, "USB Serial"),
               PortEntry("/dev/ttyS0", None, None, "n/a")]
    ports = list_ports(lambda: entries)
    assert [p.device for p in ports] == ["/dev/ttyACM0", "/dev/ttyACM1", "/dev/ttyS0", "/dev/ttyUSB0"]
    by_device = {p.device: p for p in ports}
    assert by_device["/dev/ttyACM1"].known.name == "Arduino Zero bootloader (SAM-BA)"
    assert by_device["/dev/ttyACM0"].known.kind == "probe"
    assert by_device["/dev/ttyUSB0"].known is None and by_device["/dev/ttyUSB0"].usb_id == "1A86:7523"
    text = format_ports(ports)
    assert "2341:004D  bootloader: Arduino Zero bootloader (SAM-BA)" in text
    assert "--port /dev/ttyACM1 --reset none" in text
    assert format_ports([]).startswith("no serial ports found")


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_the_fake_boards_ids_are_known_in_both_modes(chip):
    fake = FakeSamba(chip, app=True)
    fake.start()
    try:
        (sketch,) = list_ports(fake.comports)
        assert sketch.known and sketch.known.kind == "sketch"
    finally:
        fake.stop()
    with FakeSamba(chip) as fake:
        (bootloader,) = list_ports(fake.comports)
        assert bootloader.known and bootloader.known.kind == "bootloader"


def test_ports_command_json(monkeypatch, capsys):
    import serial.tools.list_ports

    monkeypatch.setattr(serial.tools.list_ports, "comports",
                        lambda: [PortEntry("/dev/ttyACM0", 0x239A, 0x0020, "Metro M4")])
    assert cli.main(["ports", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "mlfbuild-ports/1"
    (entry,) = document["ports"]
    assert entry["usb_id"] == "239A:0020" and entry["kind"] == "bootloader" and entry["boards"] == ["metro-m4"]


def test_a_broken_table_is_one_line(tmp_path):
    bad = tmp_path / "ids.toml"
    bad.write_text('[[device]]\nvid = 1\npid = 2\nkind = "modem"\nname = "x"\n')
    with pytest.raises(InvalidInputError, match="device\\[0\\]: kind must be one of"):
        load_known(bad)
