"""Property tests for the parsers of untrusted input not covered elsewhere: board files, the
firmware's console replies, tensor files and ELF files given to `size`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlfbuild.boards import load_board_file
from mlfbuild.errors import BoardError, InvalidInputError, RunError
from mlfbuild.run import _load_tensors
from mlfbuild.run.protocol import Client, encode_frame
from mlfbuild.size import size_report

REPO = Path(__file__).resolve().parents[1]
BOARD = (REPO / "boards" / "mps2-an386.toml").read_text()
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.data())
def test_board_files_fail_only_with_board_errors(tmp_path_factory, data):
    lines = BOARD.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        choice = data.draw(st.sampled_from(["drop", "replace", "garble", "value"]))
        if choice == "drop":
            lines.pop(index)
        elif choice == "replace":
            lines[index] = data.draw(st.text(max_size=30))
        elif choice == "garble":
            line = lines[index]
            cut = data.draw(st.integers(0, len(line)))
            lines[index] = line[:cut] + data.draw(st.text(max_size=5)) + line[cut:]
        elif "=" in lines[index]:
            key = lines[index].split("=", 1)[0]
            value = data.draw(st.sampled_from(['"x"', "-1", "0", "true", "[]", "{}", "1e99", "0xFFFFFFFFFFFF", '""']))
            lines[index] = f"{key}= {value}"
    path = tmp_path_factory.mktemp("board") / "mps2-an386.toml"
    path.write_bytes("\n".join(lines).encode("utf-8", errors="replace"))
    try:
        load_board_file(path)
    except BoardError as exc:
        assert "\n" not in str(exc)


class _Replay:
    """A port that plays back fixed bytes, then stays silent."""

    def __init__(self, data: bytes):
        self.stream = io.BytesIO(data)
        self.written = b""

    def read(self, size=1):
        return self.stream.read(size)

    def write(self, data):
        self.written += data
        return len(data)


@SETTINGS
@given(noise=st.binary(max_size=200), reply=st.binary(max_size=40), kind=st.sampled_from("hpzxo?"),
       seq=st.sampled_from([0, 1, 2, 255]))
def test_console_replies_never_crash_the_client(noise, reply, kind, seq):
    stream = noise + encode_frame(kind, reply, seq)
    client = Client(_Replay(stream), timeout=0.05)
    try:
        client.request("P", b"x", "p")
    except RunError as exc:
        assert "\n" not in str(exc)


def test_the_client_skips_replies_that_answer_other_requests():
    client = Client(_Replay(b""), timeout=0.5, attempt_seconds=0.5)
    seq = client._seq % 255 + 1  # the number the next request gets
    client.port = _Replay(encode_frame("z", b"\x04bad arguments", 0)  # about a frame that was not ours
                          + encode_frame("h", b"", seq)  # stale traffic that happens to carry our number
                          + encode_frame("p", b"old", (seq + 7) % 256)  # the answer to some earlier request
                          + encode_frame("p", b"pong", seq))
    assert client.request("P", b"pong", "p") == b"pong"
    assert client.unexpected == {"h"}
    client.port = _Replay(encode_frame("h", b"", seq % 255 + 1))
    with pytest.raises(RunError, match="replies of the wrong kind came: h"):
        client.request("P", b"", "p")


def test_a_refusal_of_our_own_request_ends_it_with_the_firmware_s_reason():
    client = Client(_Replay(b""), timeout=0.5)
    client.port = _Replay(encode_frame("z", b"\x04bad arguments", client._seq % 255 + 1))
    with pytest.raises(RunError, match="the firmware refused 'R': bad arguments"):
        client.request("R", b"\x09", "o")


@SETTINGS
@given(blob=st.binary(max_size=400))
def test_arbitrary_bytes_as_console_never_crash_the_client(blob):
    client = Client(_Replay(blob), timeout=0.05)
    try:
        client.hello()
    except RunError:
        pass


@SETTINGS
@given(blob=st.binary(max_size=300), suffix=st.sampled_from([".npz", ".npy"]))
def test_tensor_files_fail_only_with_invalid_input(tmp_path_factory, blob, suffix):
    path = tmp_path_factory.mktemp("tensors") / f"t{suffix}"
    path.write_bytes(blob)
    try:
        _load_tensors(path)
    except InvalidInputError:
        pass


def test_a_real_tensor_file_with_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "evil.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InvalidInputError):
        _load_tensors(path)


@SETTINGS
@given(blob=st.binary(max_size=600))
def test_size_refuses_broken_elf_files(tmp_path_factory, blob):
    folder = tmp_path_factory.mktemp("elf")
    (folder / "firmware.elf").write_bytes(b"\x7fELF" + blob)
    record = json.loads(json.dumps({"board": {"name": "x", "kind": "qemu", "memory": {
        "flash": {"origin": 0, "length": 1 << 20}, "ram": {"origin": 0x20000000, "length": 1 << 16},
        "stack_bytes": 1024, "heap_bytes": 0}}, "library": {"modules": []}, "models": []}))
    try:
        size_report(folder / "firmware.elf", record)
    except InvalidInputError as exc:
        assert "\n" not in str(exc)
