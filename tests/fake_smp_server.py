"""A fake MCUboot in serial recovery on a pseudo-terminal: the SMP server side of what mcumgr
clients talk to (MCUboot's boot_serial), used by tests/test_flash_mcuboot.py.

It speaks the serial transport (base64 lines framed with 0x06 0x09 / 0x04 0x14, length + CRC16, as
the `smp` package encodes and decodes them) and answers:
  image upload (group 1, command 1)  writes chunks into slot 0 (erased to 0xFF) at the expected offset
  image state read (group 1, command 0)  the slot's hash as MCUboot computes it: SHA-256 over the
                                         image header, body and protected TLVs
  OS reset (group 0, command 5)      records the reset
  anything else                      rc 8 (MGMT_ERR_ENOTSUP), as boot_serial does
Faults: `upload_rc` answers every upload with that error code; `corrupt_at` flips a stored byte.
"""

from __future__ import annotations

import hashlib
import os
import select
import struct
import threading
import tty

import cbor2
from smp import header as smpheader
from smp import packet

MGMT_ERR_ENOTSUP = 8
IMAGE_MAGIC = 0x96F3B83D


class FakeMcuboot:
    def __init__(self, slot_size: int = 0x77000, upload_rc: int | None = None, corrupt_at: int | None = None):
        self.slot = bytearray(b"\xff" * slot_size)
        self.slot_size = slot_size
        self.upload_rc, self.corrupt_at = upload_rc, corrupt_at
        self.expected_length = 0
        self.written = 0
        self.resets = 0
        self.requests: list[tuple[int, int]] = []
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.port = os.ttyname(slave)
        self._slave = slave
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "FakeMcuboot":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self.master)
        os.close(self._slave)

    @property
    def image(self) -> bytes:
        return bytes(self.slot[:self.written])

    # -- transport ---------------------------------------------------------------------------
    def _serve(self) -> None:
        line = bytearray()
        decoder = None
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            for byte in chunk:
                line.append(byte)
                if byte != ord("\n"):
                    continue
                raw, line = bytes(line), bytearray()
                if raw.startswith(b"\x06\x09"):
                    decoder = packet.decode()
                    next(decoder)
                elif not raw.startswith(b"\x04\x14") or decoder is None:
                    continue                           # console text, not SMP
                try:
                    decoder.send(raw)
                except StopIteration as done:
                    decoder = None
                    self._answer(done.value)

    def _send(self, request: smpheader.Header, body: dict) -> None:
        payload = cbor2.dumps(body)
        op = smpheader.OP.READ_RSP if request.op == smpheader.OP.READ else smpheader.OP.WRITE_RSP
        response = smpheader.Header(op=op, version=request.version, flags=smpheader.Flag(0), length=len(payload),
                                    group_id=request.group_id, sequence=request.sequence,
                                    command_id=request.command_id)
        for line in packet.encode(bytes(response) + payload, line_length=128):
            os.write(self.master, line)

    # -- MCUboot's commands --------------------------------------------------------------------
    def _answer(self, frame: bytes) -> None:
        request = smpheader.Header.loads(frame[:smpheader.Header.SIZE])
        body = cbor2.loads(frame[smpheader.Header.SIZE:]) if len(frame) > smpheader.Header.SIZE else {}
        key = (int(request.group_id), int(request.command_id))
        self.requests.append(key)
        if key == (1, 1):
            self._send(request, self._upload(body))
        elif key == (1, 0):
            try:
                state = {"slot": 0, "version": self._version(), "hash": self._hash()}
            except ValueError:                         # an empty slot: no image to describe
                state = {"slot": 0, "version": "0.0.0"}
            self._send(request, {"images": [state]})
        elif key == (0, 5):
            self.resets += 1
            self._send(request, {"rc": 0})
        else:
            self._send(request, {"rc": MGMT_ERR_ENOTSUP})

    def _upload(self, body: dict) -> dict:
        if self.upload_rc is not None:
            return {"rc": self.upload_rc}
        offset, data = body.get("off"), body.get("data", b"")
        if offset == 0:
            length = body.get("len")
            if not isinstance(length, int) or length > self.slot_size:
                return {"rc": 3}                       # MGMT_ERR_EINVAL
            self.expected_length, self.written = length, 0
            self.slot[:] = b"\xff" * self.slot_size    # MCUboot erases the slot first
        if offset != self.written:
            return {"rc": 0, "off": self.written}      # out of order: tell the client where we are
        self.slot[offset:offset + len(data)] = data
        self.written += len(data)
        if self.corrupt_at is not None and self.written > self.corrupt_at:
            self.slot[self.corrupt_at] ^= 0x01
            self.corrupt_at = None
        return {"rc": 0, "off": self.written}

    def _fields(self) -> tuple[int, int, int, tuple[int, int, int, int]]:
        magic, _load, hdr_size, protect_tlv, img_size, _flags = struct.unpack_from("<IIHHII", self.slot, 0)
        version = struct.unpack_from("<BBHI", self.slot, 20)
        if magic != IMAGE_MAGIC:
            raise ValueError("no MCUboot image header in slot 0")
        return hdr_size, protect_tlv, img_size, version

    def _hash(self) -> bytes:
        hdr_size, protect_tlv, img_size, _ = self._fields()
        return hashlib.sha256(bytes(self.slot[:hdr_size + img_size + protect_tlv])).digest()

    def _version(self) -> str:
        major, minor, revision, build = self._fields()[3]
        return f"{major}.{minor}.{revision}.{build}"
