"""Fuzzing the firmware's own console parser (templates/project/src/main.c): the framed protocol
and the MLPerf Tiny text dialect read whatever arrives on the console. The host build of the
example, compiled with AddressSanitizer and UndefinedBehaviorSanitizer, is fed random bytes,
well-formed frames with random contents and MLPerf commands with random arguments; afterwards it
must still answer a hello and exit cleanly, with no sanitizer report."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlfbuild.console.client import Client
from mlfbuild.console.frames import encode_frame
from mlfbuild.run.transports import HostTransport
from conftest import REPO

EXAMPLE = REPO / "examples" / "tiny_aot.tar"
SANITIZERS = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"


@pytest.fixture(scope="module")
def sanitized_firmware(build_firmware, tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("asan") / "project"
    shutil.copytree(build_firmware(EXAMPLE, "host") / "project", project, ignore=shutil.ignore_patterns("build"))
    made = subprocess.run(["make", "-C", str(project), "-j2", f"ARCH_FLAGS={SANITIZERS}", "build/firmware.elf"],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    return project / "build" / "firmware.elf"


# Frame kinds the firmware serves, except Q (it would end the session we check afterwards).
# Injected frames use sequence numbers below 128; the checking client numbers its requests from
# 200, so the firmware's answers to the noise cannot pass for answers to the check.
_seqs = st.integers(0, 127)
_frames = st.builds(lambda kind, seq, payload: encode_frame(kind, payload, seq),
                    st.sampled_from("HPDWXRZh"), _seqs, st.binary(max_size=300))
# Mostly the real tensor (model 0, index 0: 16 input bytes, 4 output bytes), offsets near its end.
_tensor_args = st.builds(lambda model, index, offset, body: struct.pack("<BBI", model, index, offset) + body,
                         st.sampled_from([0, 0, 0, 1, 255]), st.sampled_from([0, 0, 0, 1, 255]),
                         st.one_of(st.integers(0, 40), st.integers(0, 2**32 - 1)), st.binary(max_size=250))
_addressed = st.builds(lambda kind, seq, payload: encode_frame(kind, payload, seq),
                       st.sampled_from("WRD"), _seqs, _tensor_args)
_mlperf = st.builds(lambda command: command.encode() + b"%", st.one_of(
    st.sampled_from(["name", "profile", "help", "timestamp", "results", "db print", "bogus", ""]),
    st.builds("db load {}".format, st.integers(-5, 2**33)),
    st.builds(lambda data: "db " + data.hex(), st.binary(max_size=30)),
    st.builds("infer {} {}".format, st.integers(0, 3), st.integers(0, 2)),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz 0123456789-%", max_size=90)))
_noise = st.binary(max_size=120)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.one_of(_frames, _addressed, _mlperf, _noise), min_size=1, max_size=8))
def test_console_input_never_breaks_the_firmware(sanitized_firmware, chunks):
    transport = HostTransport(sanitized_firmware)
    transport.start()
    client = Client(transport.port, timeout=15, is_alive=transport.is_alive)
    client._seq = 200  # see _seqs
    try:
        client.wait_for_banner()
        transport.port.write(b"".join(chunks))
        assert client.hello().models == 1
        client.quit(0)
    finally:
        ending = transport.close(10)
    assert ending.exit_code == 0, ending.console[-2000:]
    assert "Sanitizer" not in ending.console, ending.console[-2000:]
