"""MCUboot serial recovery: sign firmware.bin with imgtool (MCUboot's own tool) for the board's
layout (flashing.mcuboot: header size, slot size, alignment, version), upload it over the console
UART with SMP through smpclient, check the slot's image hash, then reset into the application.

    imgtool sign --header-size H --pad-header --slot-size S --align A --version V [--key K] bin signed
    imgtool verify signed                      -> the image digest MCUboot will report for the slot
    SMP: image upload (group 1, command 1) in chunks; image state read (group 1, command 0) to
    compare the slot's hash; OS reset (group 0, command 5)

MCUboot waits for SMP when it was built with serial recovery and is entered that way (on most
boards: hold a button while pressing reset), so `reset` is manual.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import BuildError, FlashError, UsageError
from .image import FlashJob
from .options import FlashOptions
from .progress import Progress

TOOL_TIMEOUT = 120.0


@dataclass
class McubootTimeouts:
    request: float = 5.0       # one SMP request (a chunk)
    first_chunk: float = 40.0  # the first chunk: MCUboot erases the slot before it answers


@dataclass
class McubootResult:
    address: int
    size: int
    signed_size: int
    digest: str
    verified: bool
    started: bool


def imgtool_command() -> list[str]:
    if importlib.util.find_spec("imgtool") is None:
        raise BuildError("imgtool not found: install it with `pip install 'mlfbuild[flash]'` (or `pip install imgtool`)")
    return [sys.executable, "-m", "imgtool.main"]


def sign_command(job: FlashJob, source: Path, out: Path, key: str | None = None) -> list[str]:
    layout = job.flashing.mcuboot
    assert layout is not None
    cmd = [*imgtool_command(), "sign", "--header-size", f"0x{layout.header_size:X}", "--pad-header",
           "--slot-size", f"0x{layout.slot_size:X}", "--align", str(layout.align), "--version", layout.version]
    return cmd + (["--key", key] if key else []) + [str(source), str(out)]


def _tool(cmd: list[str], step: str, run: Callable) -> str:
    try:
        result = run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise FlashError(f"imgtool did not finish {step} within {TOOL_TIMEOUT:.0f} s") from None
    output = (result.stdout or "") + (result.stderr or "")
    if result.returncode != 0:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        raise FlashError(f"imgtool failed to {step} (exit {result.returncode}): {lines[-1] if lines else 'no output'}")
    return output


def sign(job: FlashJob, key: str | None = None, run: Callable = subprocess.run) -> tuple[bytes, str]:
    """The signed image and its SHA-256 digest (as `imgtool verify` reports it)."""
    with tempfile.TemporaryDirectory(prefix="mlfbuild-mcuboot-") as tmp:
        source, signed = Path(tmp) / "firmware.bin", Path(tmp) / "signed.bin"
        source.write_bytes(job.image)
        _tool(sign_command(job, source, signed, key), "sign the image", run)
        verify = [*imgtool_command(), "verify"] + (["--key", key] if key else []) + [str(signed)]
        report = _tool(verify, "verify the signed image", run)
        digest = re.search(r"Image digest:\s*([0-9a-fA-F]{64})", report)
        if digest is None:
            raise FlashError(f"imgtool verify did not report the image digest: {report.strip()[:200]}")
        return signed.read_bytes(), digest.group(1).lower()


class McubootSerialFlasher:
    method = "mcuboot-serial"

    def __init__(self, *, run: Callable = subprocess.run, key: str | None = None):
        self._run, self._key = run, key

    def flash(self, job: FlashJob, options: FlashOptions, progress: Progress | None = None) -> McubootResult:
        job.check()
        if job.flashing.mcuboot is None:
            raise UsageError(f"{job.board or 'the board'} has no MCUboot layout ([flashing.mcuboot])")
        progress = progress or Progress(silent=True)
        image, digest = sign(job, self._key, self._run)
        progress.note(f"signed with imgtool: {len(image)} bytes, version {job.flashing.mcuboot.version}, "
                      f"digest {digest[:16]}…")
        timeouts = options.timeouts if isinstance(options.timeouts, McubootTimeouts) else McubootTimeouts()
        verified = asyncio.run(_upload(options, image, digest, timeouts, progress))
        return McubootResult(address=job.address, size=len(job.image), signed_size=len(image), digest=digest,
                             verified=verified, started=options.start)


async def _upload(options: FlashOptions, image: bytes, digest: str, timeouts: McubootTimeouts,
                  progress: Progress) -> bool:
    from smpclient import SMPClient
    from smpclient.generics import error, success
    from smpclient.requests.image_management import ImageStatesRead
    from smpclient.requests.os_management import ResetWrite
    from smpclient.transport.serial import SMPSerialTransport

    client = SMPClient(SMPSerialTransport(baudrate=options.baud), options.port, timeout_s=timeouts.request)
    step = "connect"
    try:
        await client.connect()
        step = "upload"
        stage = progress.stage("upload", len(image))
        done = 0
        async for offset in client.upload(image, slot=0, first_timeout_s=timeouts.first_chunk,
                                          subsequent_timeout_s=timeouts.request):
            stage.advance(offset - done)
            done = offset
        stage.finish(f"{len(image)} bytes")
        verified = False
        if options.verify:
            step = "read the image state"
            states = await client.request(ImageStatesRead())
            if error(states):
                raise FlashError(f"MCUboot refused the image state read after the upload: {states}")
            slot = next((s for s in states.images if (s.slot or 0) == 0 and (s.image or 0) == 0), None)
            reported = slot.hash.hex() if slot is not None and slot.hash else None
            if reported != digest:
                raise FlashError(f"verify failed: MCUboot reports image hash {reported} for slot 0, "
                                 f"the signed image's is {digest}")
            verified = True
        if options.start:
            step = "reset"
            reset = await client.request(ResetWrite())
            # MCUboot answers {"rc": 0} (an application's SMP server an empty map): both are success.
            if not success(reset) and int(getattr(reset, "rc", -1)) != 0:
                raise FlashError(f"MCUboot refused the reset: {reset}")
        return verified
    except FlashError:
        raise
    except Exception as exc:   # smpclient raises its own, pydantic's, serial's and asyncio's errors
        raise FlashError(f"MCUboot serial recovery on {options.port} failed to {step}: "
                         f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    finally:
        try:
            await client.disconnect()
        except Exception:
            pass
