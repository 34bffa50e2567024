"""`mlfbuild monitor`: frame decoding as pure functions, the read loop over a PTY, port discovery and
the shared serial-port opener (mlfbuild/serialport.py)."""

from __future__ import annotations

import io
import os
import struct
import threading
import time
from types import SimpleNamespace

import pytest
import serial

from mlfbuild import cli
from mlfbuild.errors import FlashError, InvalidInputError, UsageError
from mlfbuild.console.frames import Frame, Text, decode_stream, encode_frame
from mlfbuild.console.monitor import MonitorDecoder, describe_frame, monitor_loop
from mlfbuild.serialport import find_port, list_candidates, open_port


pytestmark = pytest.mark.deadline(20)  # no test here may hang


HELLO = encode_frame("h", struct.pack("<BBII", 1, 2, 16_000_000, 1024) + b"nucleo-f446re")
RUN = encode_frame("x", struct.pack("<iIII", 0, 12345, 2048, 512))


# -- decode_stream ------------------------------------------------------------------------------


def test_text_and_frames_are_split():
    data = b"boot ok\r\n" + HELLO + b"m-ready\r\n" + RUN
    items, rest = decode_stream(data)
    assert rest == b""
    assert items == [Text(b"boot ok\r\n"), Frame("h", HELLO[6:-2]), Text(b"m-ready\r\n"), Frame("x", RUN[6:-2])]


def test_every_split_point_gives_the_same_result():
    data = b"a\xa5b" + HELLO + b"\xa5" + RUN + b"tail"
    whole = MonitorDecoder().feed(data)
    for cut in range(len(data) + 1):
        d = MonitorDecoder()
        assert d.feed(data[:cut]) + d.feed(data[cut:]) + d.flush() == whole, cut
    one = MonitorDecoder()
    assert "".join(one.feed(bytes([b])) for b in data) + one.flush() == whole


def test_incomplete_frame_is_kept_until_more_arrives():
    items, rest = decode_stream(b"x" + HELLO[:9])
    assert items == [Text(b"x")] and rest == HELLO[:9]
    items, rest = decode_stream(HELLO[:9], final=True)
    assert rest == b"" and b"".join(i.data for i in items) == HELLO[:9]


@pytest.mark.parametrize("data", [
    b"\xa5\x00 not a frame",                                       # second sync byte missing
    b"\xa5\x5ah\xff\xff" + b"x" * 10,                              # absurd length: text
    HELLO[:-1] + bytes([HELLO[-1] ^ 1]),                           # bad CRC: text
])
def test_damaged_or_false_frames_are_text(data):
    items, rest = decode_stream(data, final=True)
    assert rest == b""
    assert all(isinstance(i, Text) for i in items)
    assert b"".join(i.data for i in items) == data


def test_describe_frames():
    assert describe_frame(Frame("h", HELLO[6:-2])) == ("[frame h] hello: protocol 1, 2 model(s), timer 16000000 Hz, "
                                                       "max payload 1024, board nucleo-f446re")
    assert describe_frame(Frame("x", RUN[6:-2])) == ("[frame x] run: status 0, 12345 ticks, workspace peak 2048 B, "
                                                     "stack peak 512 B")
    assert describe_frame(Frame("z", b"\x03unknown command")) == "[frame z] error 3 (unknown command): unknown command"
    assert describe_frame(Frame("z", b"\x05frame timeout")) == "[frame z] error 5 (frame timeout): frame timeout"
    assert describe_frame(Frame("o", bytes(range(20)))).startswith("[frame o] output, 20 bytes: 00 01 02")
    assert describe_frame(Frame("X", b"\x00")) == "[frame X] request inference, 1 bytes: 00"
    assert describe_frame(Frame("h", b"\x01")) == "[frame h] malformed 1-byte payload: 01"
    assert describe_frame(Frame("?", b"")) == "[frame ?] 0 bytes"


def test_decoder_puts_frames_on_their_own_lines_and_keeps_utf8():
    d = MonitorDecoder()
    text = "température".encode()
    out = d.feed(b"no newline" + RUN + text[:2]) + d.feed(text[2:] + b"\x01\r\n") + d.flush()
    assert out == ("no newline\n[frame x] run: status 0, 12345 ticks, workspace peak 2048 B, stack peak 512 B\n"
                   "température\\x01\r\n")
    raw = MonitorDecoder(decode_frames=False)
    assert "[frame" not in raw.feed(RUN)


# -- the loop over a real PTY --------------------------------------------------------------------


def test_monitor_loop_over_a_pty():
    master, slave = os.openpty()
    ser = open_port(os.ttyname(slave), baudrate=115200, timeout=0.05, dtr=False, rts=False)
    out = io.StringIO()
    done = threading.Event()

    def device():
        os.write(master, b"boot\r\n" + HELLO[:7])
        time.sleep(0.1)
        os.write(master, HELLO[7:] + b"bye\r\n")
        time.sleep(0.2)
        done.set()

    threading.Thread(target=device, daemon=True).start()
    try:
        why = monitor_loop(ser, out, stop=done.is_set)
    finally:
        ser.close()
        os.close(master)
        os.close(slave)
    assert why == "stopped"
    assert out.getvalue() == ("boot\r\n[frame h] hello: protocol 1, 2 model(s), timer 16000000 Hz, max payload 1024, "
                              "board nucleo-f446re\nbye\r\n")


def test_monitor_command_ends_when_the_port_goes_away(capsys):
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.close(slave)

    def device():
        time.sleep(0.2)
        os.write(master, b"hello from the board\r\n" + RUN)
        time.sleep(0.2)
        os.close(master)                    # unplugged

    threading.Thread(target=device, daemon=True).start()
    rc = cli.main(["monitor", "--port", path])
    captured = capsys.readouterr()
    assert "hello from the board\r\n[frame x] run: status 0" in captured.out
    assert rc == 1 and "port closed" in captured.err


# -- serialport: opening and discovery ------------------------------------------------------------


def test_open_port_errors_name_the_port_and_use_the_callers_class(tmp_path):
    with pytest.raises(InvalidInputError, match=r"cannot open serial port .*ttyNONE: no such port"):
        open_port(str(tmp_path / "ttyNONE"))
    with pytest.raises(FlashError, match=r"ttyNONE for flashing: no such port"):
        open_port(str(tmp_path / "ttyNONE"), error=FlashError, purpose="flashing")
    with pytest.raises(UsageError, match="unknown parity"):
        open_port("loop://", parity="mark")


def test_open_port_busy_and_urls():
    master, slave = os.openpty()
    path = os.ttyname(slave)
    try:
        first = open_port(path, error=FlashError)
        with pytest.raises(FlashError, match="the port is busy"):
            open_port(path, error=FlashError)
        first.close()
        open_port(path).close()
    finally:
        os.close(master)
        os.close(slave)
    loop = open_port("loop://", baudrate=57600, parity="even", timeout=0.1)
    loop.write(b"ping")
    assert loop.read(4) == b"ping" and loop.parity == serial.PARITY_EVEN
    loop.close()


def _port(device, description="n/a", hwid="n/a", vid=None, pid=None):
    return SimpleNamespace(device=device, description=description, hwid=hwid, vid=vid, pid=pid)


def test_find_port_with_no_one_or_several_ports():
    with pytest.raises(UsageError, match="no USB serial port found"):
        find_port(lambda: [])
    with pytest.raises(UsageError, match="no USB serial port found"):
        find_port(lambda: [_port("/dev/ttyS0"), _port("/dev/ttyS1")])          # built-in UARTs only
    usb = _port("/dev/ttyUSB0", "CP2102 USB to UART Bridge Controller", "USB VID:PID=10C4:EA60", 0x10C4, 0xEA60)
    assert find_port(lambda: [_port("/dev/ttyS0"), usb]) == "/dev/ttyUSB0"
    acm = _port("/dev/ttyACM0", "STM32 STLink", "USB VID:PID=0483:374B", 0x0483, 0x374B)
    with pytest.raises(UsageError, match=r"2 USB serial ports found, pick one with --port: /dev/ttyACM0 "
                                         r"\(STM32 STLink\), /dev/ttyUSB0 \(CP2102"):
        find_port(lambda: [usb, acm, _port("/dev/ttyS0")])
    assert [p.device for p in list_candidates(lambda: [_port("/dev/cu.usbserial-1410")])] == ["/dev/cu.usbserial-1410"]


def test_flash_without_port_uses_discovery(tmp_path, monkeypatch, capsys):
    import json

    from mlfbuild.boards import load_board
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "firmware.bin").write_bytes(b"\0" * 64)
    (folder / "build.json").write_text(json.dumps({"board": load_board("nucleo-f446re").to_json()}))
    monkeypatch.setattr(serial.tools.list_ports, "comports", lambda *a, **k: [])
    rc = cli.main(["flash", str(folder), "--method", "stm32-uart"])
    assert rc == 2
    assert "no USB serial port found" in capsys.readouterr().err


def test_sequence_numbers_are_shown():
    items, _ = decode_stream(encode_frame("k", b"\x00", seq=7) + encode_frame("W", b"\x00\x00", seq=7))
    assert [describe_frame(i) for i in items] == ["[frame k #7] input written", "[frame W #7] request input write, 2 bytes: 00 00"]
