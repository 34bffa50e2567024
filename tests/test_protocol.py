"""The console protocol: the firmware's C and the Python side agree on the wire format, and the
client holds up against short, damaged and endless replies without a real firmware."""

from __future__ import annotations

import re
import struct
import threading
from pathlib import Path

import pytest

from mlfbuild.console.client import TEXT_TAIL_BYTES, Client
from mlfbuild.console.frames import (ERRORS, HELLO_LAYOUT, MIN_PAYLOAD, REPLIES, REQUESTS, RUN_LAYOUT, SYNC, VERSION,
                                     Damaged, Frame, Text, decode_stream, encode_frame)
from mlfbuild.errors import RunError

FIRMWARE_MAIN = Path(__file__).resolve().parents[1] / "templates" / "project" / "src" / "main.c"


# -- the firmware and the client speak the same protocol -------------------------------------

def _c_source() -> str:
    return FIRMWARE_MAIN.read_text()


def _c_define(name: str) -> int:
    match = re.search(rf"^#define {name} (0x[0-9A-Fa-f]+|\d+)u?$", _c_source(), re.M)
    assert match, f"{name} is not defined in {FIRMWARE_MAIN.name}"
    return int(match.group(1), 0)


def test_the_version_and_sync_bytes_match_the_firmware():
    assert _c_define("PROTOCOL_VERSION") == VERSION
    assert bytes([_c_define("SYNC0"), _c_define("SYNC1")]) == SYNC


def test_the_error_codes_and_their_texts_match_the_firmware():
    source = _c_source()
    enum = re.search(r"enum \{ (ERR_\w+ = \d+(?:, ERR_\w+ = \d+)*) \};", source)
    assert enum, "the ERR_ enum is missing"
    codes = {name: int(value) for name, value in re.findall(r"(ERR_\w+) = (\d+)", enum.group(1))}
    assert sorted(codes.values()) == sorted(ERRORS)
    sent = set(re.findall(r'send_error\((ERR_\w+), "([^"]+)"\)', source))
    assert {(codes[name], text) for name, text in sent} == set(ERRORS.items())


def test_the_request_and_reply_letters_match_the_firmware():
    source = _c_source()
    handled = set(re.findall(r"^\s+case '([A-Z])':", source, re.M))
    replies = set(re.findall(r"send_frame\('([a-z])'", source))
    assert handled == set(REQUESTS)
    assert replies == set(REPLIES)


def test_the_reply_layouts_match_the_firmware():
    source = _c_source()
    # hello: the board name starts after the fixed part; run: the error text after 16 bytes.
    assert f"send_frame('h', reply, {struct.calcsize(HELLO_LAYOUT)}u" in source
    assert f"uint32_t n = {struct.calcsize(RUN_LAYOUT)}u;" in source
    assert MIN_PAYLOAD == struct.calcsize(RUN_LAYOUT)


# -- the decoder -----------------------------------------------------------------------------

def test_a_frame_that_fails_its_checksum_is_damaged_text_and_the_next_frame_is_found():
    good = encode_frame("p", b"pong", 3)
    bad = bytearray(encode_frame("p", b"lost", 2))
    bad[-1] ^= 0xFF
    items, rest = decode_stream(b"boot\n" + bytes(bad) + good)
    assert rest == b""
    assert items[0] == Text(b"boot\n")
    assert sum(isinstance(item, Damaged) for item in items) == 1
    assert items[-1] == Frame("p", b"pong", 3)
    assert b"".join(item.data for item in items[:-1]) == b"boot\n" + bytes(bad)


def test_a_frame_may_begin_inside_a_damaged_one():
    inner = encode_frame("q", b"", 9)
    outer = SYNC + struct.pack("<BBH", ord("p"), 1, len(inner)) + inner + b"\x00\x00"  # a wrong CRC
    items, _ = decode_stream(outer)
    assert Frame("q", b"", 9) in items


# -- the client against byte streams ---------------------------------------------------------

class ReplyingPort:
    """Answers each request frame with `replies[kind]` (payload), keeping the request's number."""

    def __init__(self, replies: dict[str, bytes], noise: bytes = b""):
        self.replies, self.noise, self.out = replies, noise, bytearray()

    def write(self, data: bytes) -> int:
        kind, seq = chr(data[2]), data[3]
        if kind in self.replies:
            self.out += encode_frame(kind.lower() if kind != "W" else "k", self.replies[kind], seq)
        return len(data)

    def read(self, size: int = 1) -> bytes:
        if self.noise:
            return self.noise[:size] if size < len(self.noise) else self.noise
        data = bytes(self.out[:size])
        del self.out[:size]
        return data


@pytest.mark.parametrize("kind, call", [("X", lambda c: c.run(0)), ("H", lambda c: c.hello())])
def test_short_reply_frames_are_a_run_error_not_a_crash(kind, call):
    client = Client(ReplyingPort({kind: b"\x01\x02"}), timeout=2)
    with pytest.raises(RunError, match="shorter than"):
        call(client)


def test_a_max_payload_below_the_protocol_minimum_is_refused():
    hello = struct.pack(HELLO_LAYOUT, VERSION, 1, 1000, MIN_PAYLOAD - 1) + b"board"
    client = Client(ReplyingPort({"H": hello}), timeout=2)
    with pytest.raises(RunError, match="largest payload"):
        client.hello()


def test_another_protocol_version_asks_for_a_rebuild():
    hello = struct.pack(HELLO_LAYOUT, VERSION + 1, 1, 1000, 256) + b"board"
    with pytest.raises(RunError, match="rebuild"):
        Client(ReplyingPort({"H": hello}), timeout=2).hello()


def test_damaged_replies_are_counted_and_the_request_is_answered():
    port = ReplyingPort({"P": b"pong"})
    client = Client(port, timeout=2)
    bad = bytearray(encode_frame("p", b"junk", 200))
    bad[-2] ^= 0x55
    port.out += b"text " + bytes(bad)
    assert client.ping(b"") == b"pong"
    assert client.damaged == 1 and b"text " in client.text


def test_text_after_the_banner_in_the_same_read_is_kept_for_the_protocol():
    port = ReplyingPort({})
    port.out += b"boot\r\nm-ready\r\n" + encode_frame("p", b"early", 5)
    client = Client(port, timeout=2)
    client.wait_for_banner()
    assert client.receive_frame(float("inf"), "a frame") == Frame("p", b"early", 5)


def test_a_frame_before_the_banner_is_refused():
    port = ReplyingPort({})
    port.out += b"boot\r\n" + encode_frame("p", b"", 1) + b"m-ready\r\n"
    with pytest.raises(RunError, match="before its start-up banner"):
        Client(port, timeout=2).wait_for_banner()


def _finishes(action, seconds: float) -> BaseException | None:
    """Run `action` on a thread; fail when it is still going after `seconds` (a hang)."""
    outcome: list = []

    def target():
        try:
            action()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("noise", [b"." * 4096, bytes(range(256)) * 16, SYNC[:1] * 4096, SYNC * 2048])
def test_a_console_that_never_goes_quiet_cannot_hold_a_request_past_its_deadline(noise):
    client = Client(ReplyingPort({}, noise=noise), timeout=1.0)
    error = _finishes(lambda: client.request("P", b"", "p"), 10)
    assert isinstance(error, RunError) and "no reply" in str(error)
    assert len(client.text) <= 2 * TEXT_TAIL_BYTES  # what is kept of the text is bounded
