"""mlfbuild.mlf.archive: TVM-style tars unpack; hostile, broken and oversized ones are refused
cleanly (one-line ArchiveError, nothing left behind, nothing written outside the destination).

Every archive is built here at test time with tarfile/gzip/zlib; no binary fixtures.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlfbuild.errors import ArchiveError, InvalidInputError
from mlfbuild.mlf.archive import DEFAULT_MAX_TOTAL_BYTES, sha256_of, unpack
from conftest import REPO

MTIME = 1767225600
MiB = 1024 * 1024
GiB = 1024 * MiB

# What TVM's _make_tar produces for a small full-model export (abridged).
TVM_FILES = {
    "metadata.json": b'{"version": 7}\n',
    "codegen/host/src/default_lib0.c": b"int x = 0;\n",
    "codegen/host/src/default_lib1.c": b"int y = 1;\n",
    "executor-config/graph/default.graph": b"{}",
    "parameters/default.params": b"\x00" * 64,
    "src/default.relay": b"def @main() { 0 }\n",
}


# --- building archives ----------------------------------------------------------------------------

def member(name: str, data: bytes | None = b"", *, type: bytes = tarfile.REGTYPE, **attrs) -> tuple:
    """A (TarInfo, data) pair; `data=None` for members without a body."""
    info = tarfile.TarInfo(name)
    info.type = type
    info.mtime = MTIME
    info.mode = 0o755 if type == tarfile.DIRTYPE else 0o644
    if data is not None and type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    return info, data


def tar_bytes(members: list[tuple], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def tvm_members(files: dict[str, bytes] = TVM_FILES, *, with_dirs: bool = True) -> list[tuple]:
    """'.' first, './'-prefixed, sorted, with the odd ownership and modes real exports carry."""
    dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
    out = [member(".", None, type=tarfile.DIRTYPE)] if with_dirs else []
    if with_dirs:
        out += [member(f"./{d}", None, type=tarfile.DIRTYPE, mode=0o700, uid=1000) for d in dirs]
    out += [member(f"./{p}", data, mode=0o4777, uid=1000, uname="tvm") for p, data in sorted(files.items())]
    return out


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def header_block(name: str, size: int, type: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mtime = size, type, MTIME
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def raw_header(name: str, size_field: bytes, type: bytes = tarfile.REGTYPE) -> bytes:
    """A ustar header with a hand-written size field and a correct checksum."""
    block = bytearray(header_block(name, 0, type))
    block[124:136] = size_field
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


END = bytes(2 * tarfile.BLOCKSIZE)


def snapshot(root: Path) -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(Path(folder, name).relative_to(root).as_posix())
    return found


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_refused(tmp_path: Path, archive: Path, member_name: str | None = None, match: str = "",
                   **limits) -> str:
    before = snapshot(tmp_path)
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as caught:
        unpack(archive, dest, **limits)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, message
    assert str(archive) in message
    if member_name is not None:
        assert repr(member_name) in message, message
    assert match in message, message
    assert not dest.exists()
    assert snapshot(tmp_path) == before, "something was written or left behind"
    return message


# --- archives that must unpack --------------------------------------------------------------------

def test_tvm_style_pax_tar(tmp_path):
    archive = write(tmp_path / "in" / "model.tar", tar_bytes(tvm_members()))
    dest = tmp_path / "out"
    assert unpack(archive, dest) == dest
    assert files_under(dest) == TVM_FILES
    # modes and owners from the archive are ignored
    for path in dest.rglob("*"):
        assert path.stat().st_mode & 0o7777 == (0o755 if path.is_dir() else 0o644), path
    assert dest.stat().st_mode & 0o777 == 0o755
    # no temporary sibling is left
    assert snapshot(tmp_path) == {"in", "in/model.tar", "out"} | {f"out/{p}" for p in snapshot(dest)}


@pytest.mark.parametrize("name", ["model.tar.gz", "model.tgz", "model.tar"])
def test_gzip_detected_by_magic_not_suffix(tmp_path, name):
    archive = write(tmp_path / name, gzip.compress(tar_bytes(tvm_members()), mtime=0))
    assert files_under(unpack(archive, tmp_path / "out")) == TVM_FILES


def test_plain_tar_named_tgz(tmp_path):
    archive = write(tmp_path / "model.tgz", tar_bytes(tvm_members()))
    assert files_under(unpack(archive, tmp_path / "out")) == TVM_FILES


def test_tar_without_directory_entries(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes(tvm_members(with_dirs=False)))
    assert files_under(unpack(archive, tmp_path / "out")) == TVM_FILES


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT],
                         ids=["gnu", "ustar", "pax"])
def test_long_names_in_every_format(tmp_path, fmt):
    # GNU longname / ustar prefix / PAX path headers are handled by tarfile and are fine.
    deep = "codegen/host/src/" + "d" * 60 + "/" + "f" * 80 + ".c"
    archive = write(tmp_path / "model.tar", tar_bytes([member(f"./{deep}", b"ok")], fmt))
    assert files_under(unpack(archive, tmp_path / "out")) == {deep: b"ok"}


def test_names_without_dot_slash_and_with_redundant_slashes(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes([member("a//b.c", b"1"), member("././c/./d.c", b"2")]))
    assert files_under(unpack(archive, tmp_path / "out")) == {"a/b.c": b"1", "c/d.c": b"2"}


def test_empty_regular_file_is_kept(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes([member("./empty.c", b""), member("./x", b"1")]))
    assert files_under(unpack(archive, tmp_path / "out")) == {"empty.c": b"", "x": b"1"}


def test_existing_empty_destination_is_replaced(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes(tvm_members()))
    (tmp_path / "out").mkdir()
    assert files_under(unpack(archive, tmp_path / "out")) == TVM_FILES


def test_destination_parent_is_created(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes(tvm_members()))
    assert files_under(unpack(archive, tmp_path / "work" / "mlf")) == TVM_FILES


def test_exactly_at_the_limits(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes([member("./a", b"x" * 100), member("./b", b"y" * 100)]))
    unpack(archive, tmp_path / "out", max_total_bytes=200, max_member_bytes=100)


def test_unpacked_folder_is_returned_as_is(tmp_path):
    folder = tmp_path / "mlf"
    for rel, data in TVM_FILES.items():
        write(folder / rel, data)
    (folder / "codegen" / "link.c").symlink_to("host/src/default_lib0.c")
    before = snapshot(tmp_path)
    assert unpack(folder, tmp_path / "out") == folder
    assert snapshot(tmp_path) == before


# --- destinations and folders that are refused ----------------------------------------------------

def test_non_empty_destination_is_refused(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes(tvm_members()))
    write(tmp_path / "out" / "keep.txt", b"mine")
    with pytest.raises(ArchiveError, match="not an empty folder"):
        unpack(archive, tmp_path / "out")
    assert files_under(tmp_path / "out") == {"keep.txt": b"mine"}
    assert snapshot(tmp_path) == {"model.tar", "out", "out/keep.txt"}


def test_destination_that_is_a_file_is_refused(tmp_path):
    archive = write(tmp_path / "model.tar", tar_bytes(tvm_members()))
    write(tmp_path / "out", b"mine")
    with pytest.raises(ArchiveError):
        unpack(archive, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == b"mine"


def test_missing_source(tmp_path):
    with pytest.raises(ArchiveError, match="no such archive"):
        unpack(tmp_path / "nope.tar", tmp_path / "out")


@pytest.mark.parametrize("target", ["../../outside", "/etc/passwd"])
def test_folder_with_symlink_pointing_outside_is_refused(tmp_path, target):
    folder = tmp_path / "mlf"
    write(folder / "metadata.json", b"{}")
    (folder / "codegen").mkdir()
    (folder / "codegen" / "evil").symlink_to(target)
    with pytest.raises(ArchiveError, match="points outside") as caught:
        unpack(folder, tmp_path / "out")
    assert "codegen/evil" in str(caught.value) and "\n" not in str(caught.value)


def test_folder_with_symlink_loop_is_refused(tmp_path):
    folder = tmp_path / "mlf"
    folder.mkdir()
    (folder / "a").symlink_to("b")
    (folder / "b").symlink_to("a")
    with pytest.raises(ArchiveError):
        unpack(folder, tmp_path / "out")


def test_archive_error_is_invalid_input():
    assert issubclass(ArchiveError, InvalidInputError) and ArchiveError.exit_code == 3
    assert DEFAULT_MAX_TOTAL_BYTES == 512 * MiB


# --- hostile names --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, reason", [
    ("../x", "'..'"),
    ("./../x", "'..'"),
    ("a/../../x", "'..'"),
    ("a/b/..", "'..'"),
    ("..\\x", "backslash"),
    ("a\\..\\..\\x", "backslash"),
    ("a\nb", "control"),
    ("a\x7fb", "control"),
], ids=["dotdot", "dot-slash-dotdot", "dotdot-inside", "dotdot-last", "backslash", "backslash-inside",
        "newline", "del"])
def test_hostile_names_are_refused(tmp_path, name, reason):
    archive = write(tmp_path / "in" / "evil.tar", tar_bytes([member("./ok.c", b"ok"), member(name, b"pwned")]))
    assert_refused(tmp_path, archive, name, reason)


def test_absolute_path_is_refused(tmp_path):
    target = tmp_path / "pwned"
    archive = write(tmp_path / "in" / "evil.tar", tar_bytes([member(str(target), b"pwned")]))
    assert_refused(tmp_path, archive, str(target), "absolute")
    assert not target.exists()


def test_nul_in_pax_path_is_refused(tmp_path):
    info, data = member("./placeholder", b"x")
    info.pax_headers = {"path": "ok.c\x00../../pwned"}
    archive = write(tmp_path / "in" / "evil.tar", tar_bytes([(info, data)]))
    assert_refused(tmp_path, archive, "ok.c\x00../../pwned", "control")


def test_file_named_dot_is_refused(tmp_path):
    archive = write(tmp_path / "in" / "evil.tar", tar_bytes([member("./", None, type=tarfile.DIRTYPE),
                                                             member("./x", b"1"), member("./.", b"2")]))
    assert_refused(tmp_path, archive, "./.", "root")


# --- member types ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, attrs, reason", [
    (tarfile.SYMTYPE, {"linkname": "/etc/passwd"}, "symbolic link"),
    (tarfile.SYMTYPE, {"linkname": "metadata.json"}, "symbolic link"),
    (tarfile.LNKTYPE, {"linkname": "./metadata.json"}, "hard link"),
    (tarfile.CHRTYPE, {"devmajor": 1, "devminor": 3}, "device"),
    (tarfile.BLKTYPE, {"devmajor": 8, "devminor": 0}, "device"),
    (tarfile.FIFOTYPE, {}, "FIFO"),
    (b"Z", {}, "unsupported member type"),
], ids=["symlink-out", "symlink-in", "hardlink", "chardev", "blockdev", "fifo", "unknown"])
def test_special_members_are_refused(tmp_path, kind, attrs, reason):
    special = member("./codegen/special", None, type=kind, **attrs)
    archive = write(tmp_path / "in" / "evil.tar",
                    tar_bytes([member("./metadata.json", b"{}"), special, member("./after", b"x")]))
    assert_refused(tmp_path, archive, "./codegen/special", reason)


def test_gnu_sparse_member_is_refused(tmp_path):
    block = bytearray(raw_header("./sparse", b"%011o\0" % 0, tarfile.GNUTYPE_SPARSE))
    block[257:265] = b"ustar  \0"  # GNU magic, so tarfile parses the sparse fields
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    archive = write(tmp_path / "in" / "evil.tar", bytes(block) + END)
    assert_refused(tmp_path, archive, "./sparse", "sparse")


# --- duplicates -----------------------------------------------------------------------------------

@pytest.mark.parametrize("first, second, reason", [
    (member("./a.c", b"1"), member("./a.c", b"2"), "duplicate"),
    (member("./a.c", b"1"), member("a.c", b"2"), "duplicate"),
    (member("./a", None, type=tarfile.DIRTYPE), member("./a", None, type=tarfile.DIRTYPE), "duplicate"),
    (member("./a", b"file"), member("./a", None, type=tarfile.DIRTYPE), "both a file and a folder"),
    (member("./a", None, type=tarfile.DIRTYPE), member("./a", b"file"), "both a file and a folder"),
    (member("./a/b.c", b"implies a/"), member("./a", b"file"), "both a file and a folder"),
    (member("./a", b"file"), member("./a/b.c", b"under a file"), "parent folder is also a file"),
], ids=["same", "same-after-normalising", "dir-dir", "file-then-dir", "dir-then-file",
        "implied-dir-then-file", "file-then-child"])
def test_duplicates_are_refused(tmp_path, first, second, reason):
    archive = write(tmp_path / "in" / "dup.tar", tar_bytes([first, second]))
    assert_refused(tmp_path, archive, second[0].name, reason)


# --- sizes ----------------------------------------------------------------------------------------

def test_member_over_the_member_limit(tmp_path):
    archive = write(tmp_path / "in" / "big.tar", tar_bytes([member("./small", b"x"), member("./big", b"x" * 5000)]))
    assert_refused(tmp_path, archive, "./big", "per member", max_member_bytes=4096)


def test_member_over_the_total_limit_defaults_member_limit(tmp_path):
    archive = write(tmp_path / "in" / "big.tar", tar_bytes([member("./big", b"x" * 5000)]))
    assert_refused(tmp_path, archive, "./big", "per member", max_total_bytes=4096)


def test_total_over_the_limit(tmp_path):
    members = [member(f"./f{i}", b"x" * 1000) for i in range(10)]
    archive = write(tmp_path / "in" / "many.tar", tar_bytes(members))
    assert_refused(tmp_path, archive, "./f4", "more than 4500 bytes", max_total_bytes=4500)


def test_header_size_smaller_than_the_data(tmp_path):
    # The header claims 10 bytes, 2000 follow: the surplus is read as the next "header" and must
    # not be taken for a clean end of the archive.
    data = header_block("./liar", 10) + b"A" * 2048 + END
    archive = write(tmp_path / "in" / "lie.tar", data)
    assert_refused(tmp_path, archive, "./liar", "truncated or corrupt")


def test_header_size_larger_than_the_data(tmp_path):
    data = header_block("./liar", 100_000) + b"A" * 1024
    archive = write(tmp_path / "in" / "lie.tar", data)
    assert_refused(tmp_path, archive, "./liar", "truncated")


def test_negative_base256_size(tmp_path):
    data = raw_header("./neg", b"\xff" * 12) + END
    archive = write(tmp_path / "in" / "neg.tar", data)
    assert_refused(tmp_path, archive, "./neg", "negative size")


def test_huge_base256_size(tmp_path):
    data = raw_header("./huge", b"\x80" + b"\x00" * 3 + (1 << 62).to_bytes(8, "big")) + b"\0" * 4096
    archive = write(tmp_path / "in" / "huge.tar", data)
    assert_refused(tmp_path, archive, "./huge", "per member")


def test_oversized_pax_header_is_refused_before_it_is_read(tmp_path):
    # tarfile would read a PAX header's payload into memory in one piece.
    data = header_block("././@PaxHeader", 3 * GiB, tarfile.XHDTYPE) + b"\0" * 4096
    archive = write(tmp_path / "in" / "pax.tar", data)
    assert_refused(tmp_path, archive, None, "extended header")


def test_chained_pax_headers_are_refused(tmp_path):
    body = b" comment=hello\n"
    record = b"%d%s" % (len(body) + 2, body)
    one = header_block("././@PaxHeader", len(record), tarfile.XHDTYPE) + record.ljust(512, b"\0")
    data = header_block("./first", 1) + b"x".ljust(512, b"\0") + one * 40 + header_block("./x", 0) + END
    archive = write(tmp_path / "in" / "chain.tar", data)
    assert_refused(tmp_path, archive, "./first", "chained extended headers")


# --- not tars, broken tars ------------------------------------------------------------------------

def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("metadata.json", "{}")
    return buffer.getvalue()


@pytest.mark.parametrize("content, hint", [
    # Seeded: unseeded bytes start with the gzip magic once in 65,536 runs.
    (random.Random(4096).randbytes(4096), "not a tar"),
    (zip_bytes(), "zip"),
    (json.dumps({"version": 7, "modules": {}}).encode() * 40, "not a tar"),
    (b"", "not a tar"),
    (b"\x1f\x8b" + random.Random(600).randbytes(600), "gzip"),
], ids=["random", "zip", "json", "empty-file", "gzip-magic-garbage"])
def test_not_a_tar(tmp_path, content, hint):
    archive = write(tmp_path / "in" / "model.tar", content)
    assert_refused(tmp_path, archive, None, hint)


def test_gzip_of_not_a_tar(tmp_path):
    archive = write(tmp_path / "in" / "model.tar.gz", gzip.compress(b"{" + b"\"k\": 1, " * 200 + b"}"))
    assert_refused(tmp_path, archive, None, "not a tar")


def valid_tar() -> bytes:
    return tar_bytes(tvm_members())


def offset_of(data: bytes, name: str) -> int:
    """Header offset of member `name` in an uncompressed tar."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getmember(name).offset


@pytest.mark.parametrize("where", ["mid-data", "boundary", "mid-header", "before-end-marker"])
def test_truncated_tar(tmp_path, where):
    data = valid_tar()
    last = "./src/default.relay"
    start = offset_of(data, last)  # its data (18 bytes) follows the 512-byte header
    cut, blamed, match = {
        "mid-data": (start + 512 + 5, last, "(in member"),
        "boundary": (start, "./parameters/default.params", "(after member"),
        "mid-header": (start + 100, "./parameters/default.params", "(after member"),
        "before-end-marker": (start + 1024, last, "(after member"),
    }[where]
    archive = write(tmp_path / "in" / "cut.tar", data[:cut])
    message = assert_refused(tmp_path, archive, blamed, "truncated")
    assert match in message


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95, 0.999])
def test_truncated_gzip(tmp_path, keep):
    data = gzip.compress(valid_tar(), mtime=0)
    archive = write(tmp_path / "in" / "cut.tar.gz", data[:int(len(data) * keep)])
    assert_refused(tmp_path, archive, None, "")


def test_truncated_gzip_missing_only_the_trailer(tmp_path):
    data = gzip.compress(valid_tar(), mtime=0)
    archive = write(tmp_path / "in" / "cut.tar.gz", data[:-4])
    assert_refused(tmp_path, archive, None, "gzip")


@pytest.mark.parametrize("position", [0.2, 0.5, 0.8])
def test_corrupt_gzip_data(tmp_path, position):
    data = bytearray(gzip.compress(valid_tar(), mtime=0))
    at = 10 + int((len(data) - 18) * position)
    data[at:at + 8] = bytes(b ^ 0x5A for b in data[at:at + 8])
    archive = write(tmp_path / "in" / "bad.tar.gz", bytes(data))
    assert_refused(tmp_path, archive, None, "")


def test_gzip_with_wrong_crc(tmp_path):
    data = bytearray(gzip.compress(valid_tar(), mtime=0))
    data[-8] ^= 0xFF
    archive = write(tmp_path / "in" / "crc.tar.gz", bytes(data))
    assert_refused(tmp_path, archive, None, "gzip")


def test_empty_tar(tmp_path):
    archive = write(tmp_path / "in" / "empty.tar", tar_bytes([]))
    assert_refused(tmp_path, archive, None, "no files")


def test_tar_with_only_directories(tmp_path):
    dirs = [member(".", None, type=tarfile.DIRTYPE), member("./codegen", None, type=tarfile.DIRTYPE),
            member("./codegen/host", None, type=tarfile.DIRTYPE)]
    archive = write(tmp_path / "in" / "dirs.tar.gz", gzip.compress(tar_bytes(dirs)))
    assert_refused(tmp_path, archive, None, "no files")


def test_data_after_the_tar_inside_gzip_is_bounded(tmp_path):
    # A gzip bomb hidden after the tar's end marker is not inflated without limit.
    tail = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = tail.compress(bytes(64 * MiB)) + tail.flush()
    archive = write(tmp_path / "in" / "tail.tar.gz", gzip.compress(valid_tar()) + bomb)
    assert_refused(tmp_path, archive, None, "after the end", max_total_bytes=8 * MiB)


# --- 2 GiB of zeros -------------------------------------------------------------------------------

_ZEROS = bytes(MiB)


def zeros_gzip_member(mebibytes: int) -> tuple[bytes, bytes, int]:
    """A gzip member holding `mebibytes` MiB of zeros, as (head, repeated body chunk, trailer),
    made with one zlib.compressobj fed 1 MiB zero chunks: after a full flush the compressor is
    back in its initial state, so every further chunk compresses to the same bytes and the whole
    stream is a few MB without compressing 2 GiB."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(_ZEROS) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(_ZEROS) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert first == again
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(_ZEROS, crc)
    head = b"\x1f\x8b\x08\x00" + MTIME.to_bytes(4, "little") + b"\x02\xff"
    trailer = deflate.flush() + crc.to_bytes(4, "little") + ((mebibytes * MiB) & 0xFFFFFFFF).to_bytes(4, "little")
    return head, first, trailer


@pytest.fixture(scope="module")
def zeros_member() -> tuple[bytes, bytes, int]:
    return zeros_gzip_member(2048 + 1)  # 2 GiB of file data + 1 MiB for padding and the end marker


def write_zeros_gzip(path: Path, member: tuple, prefix: bytes = b"", mebibytes: int = 2049) -> Path:
    head, chunk, trailer = member
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:  # streamed: the test never holds more than one chunk
        out.write(prefix + head)
        for _ in range(mebibytes):
            out.write(chunk)
        out.write(trailer)
    return path


def test_zeros_gzip_member_is_a_valid_gzip():
    head, chunk, trailer = zeros_gzip_member(3)
    assert gzip.decompress(head + chunk * 3 + trailer) == bytes(3 * MiB)


def run_bounded(archive: Path, dest: Path) -> tuple[str, int, float]:
    """unpack in a fresh interpreter; returns (outcome, peak RSS growth in bytes, seconds)."""
    script = (
        "import resource, sys, time\n"
        "from pathlib import Path\n"
        "from mlfbuild.errors import ArchiveError\n"
        "from mlfbuild.mlf.archive import unpack\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    unpack(Path(sys.argv[1]), Path(sys.argv[2]))\n"
        "    outcome = 'accepted'\n"
        "except ArchiveError as exc:\n"
        "    outcome = str(exc)\n"
        "seconds = time.monotonic() - start\n"
        "unit = 1 if sys.platform == 'darwin' else 1024  # ru_maxrss is bytes on macOS, KiB elsewhere\n"
        "growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * unit\n"
        "print(growth, seconds, outcome, sep='\\n')\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(archive), str(dest)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    growth, seconds, outcome = result.stdout.rstrip("\n").split("\n", 2)
    return outcome, int(growth), float(seconds)


def test_two_gib_of_zeros_in_a_tar_gz_is_refused_with_bounded_memory(tmp_path, zeros_member):
    header = header_block("./weights.bin", 2 * GiB)
    prefix = gzip.compress(header, mtime=0)  # a separate gzip member; gzip readers concatenate them
    archive = write_zeros_gzip(tmp_path / "in" / "bomb.tar.gz", zeros_member, prefix)
    assert archive.stat().st_size < 4 * MiB
    before = snapshot(tmp_path)
    outcome, growth, seconds = run_bounded(archive, tmp_path / "out")
    assert "'./weights.bin'" in outcome and "per member" in outcome and str(archive) in outcome
    assert growth < 200 * MiB and seconds < 10
    assert snapshot(tmp_path) == before


def test_two_gib_of_raw_zeros_gzip_is_refused_with_bounded_memory(tmp_path, zeros_member):
    archive = write_zeros_gzip(tmp_path / "in" / "zeros.tar.gz", zeros_member)
    before = snapshot(tmp_path)
    outcome, growth, seconds = run_bounded(archive, tmp_path / "out")
    assert "no files" in outcome and str(archive) in outcome
    assert growth < 200 * MiB and seconds < 10
    assert snapshot(tmp_path) == before


def test_two_gib_pax_header_bomb_is_refused_quickly(tmp_path, zeros_member):
    header = header_block("././@PaxHeader", 2 * GiB, tarfile.XHDTYPE)
    archive = write_zeros_gzip(tmp_path / "in" / "pax.tar.gz", zeros_member, gzip.compress(header, mtime=0))
    start = time.monotonic()
    assert_refused(tmp_path, archive, None, "extended header")
    assert time.monotonic() - start < 5


def test_two_gib_member_with_raised_member_limit_is_refused_on_its_header(tmp_path, zeros_member):
    # The header passes the per-member check but not the total one: refused before any data is read.
    start = time.monotonic()
    header = header_block("./weights.bin", 2 * GiB)
    archive = write_zeros_gzip(tmp_path / "in" / "bomb.tar.gz", zeros_member, gzip.compress(header, mtime=0))
    assert_refused(tmp_path, archive, "./weights.bin", "more than 8388608 bytes", max_total_bytes=8 * MiB,
                   max_member_bytes=4 * GiB)
    assert time.monotonic() - start < 5


def test_data_longer_than_its_header_is_cut_off(tmp_path, monkeypatch):
    # tarfile never hands out more than the header's size; if it ever did, the copy loop counts
    # the bytes itself and stops.
    archive = write(tmp_path / "in" / "lie.tar", tar_bytes([member("./liar", b"0123456789")]))
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda self, info: io.BytesIO(b"x" * (3 * MiB)))
    assert_refused(tmp_path, archive, "./liar", "more data than its header declares")


# --- sha256_of ------------------------------------------------------------------------------------

def test_sha256_of_file(tmp_path):
    archive = write(tmp_path / "model.tar", valid_tar())
    assert sha256_of(archive) == hashlib.sha256(archive.read_bytes()).hexdigest()


def test_sha256_of_folder_is_stable_and_content_sensitive(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for rel, data in TVM_FILES.items():
        write(a / rel, data)
    for rel, data in reversed(list(TVM_FILES.items())):  # other creation order, other mtimes
        write(b / rel, data)
    os.utime(b / "metadata.json", (0, 0))
    assert sha256_of(a) == sha256_of(b)
    assert len(sha256_of(a)) == 64
    (b / "metadata.json").write_bytes(b'{"version": 5}\n')
    assert sha256_of(a) != sha256_of(b)
    (b / "metadata.json").write_bytes(TVM_FILES["metadata.json"])
    (b / "empty").mkdir()
    assert sha256_of(a) != sha256_of(b)
    (b / "empty").rmdir()
    (b / "src" / "default.relay").rename(b / "src" / "other.relay")
    assert sha256_of(a) != sha256_of(b)


def test_sha256_of_folder_matches_its_unpacked_archive(tmp_path):
    folder = tmp_path / "mlf"
    for rel, data in TVM_FILES.items():
        write(folder / rel, data)
    archive = write(tmp_path / "model.tar", valid_tar())
    assert sha256_of(unpack(archive, tmp_path / "out")) == sha256_of(folder)


def test_sha256_of_missing_path(tmp_path):
    with pytest.raises(ArchiveError):
        sha256_of(tmp_path / "nope")


# --- property: never anything but success-inside-dest or ArchiveError -----------------------------

def check_unpack_outcome(data: bytes, name: str = "model.tar") -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        archive = write(root / name, data)
        dest = root / "out"
        try:
            unpack(archive, dest, max_total_bytes=1 * MiB)
        except ArchiveError as exc:
            assert "\n" not in str(exc)
            assert not dest.exists()
            assert snapshot(root) == {name}
            return
        dest_real = dest.resolve()
        for path in dest.rglob("*"):
            assert not path.is_symlink()
            assert path.is_file() or path.is_dir()
            assert path.resolve().is_relative_to(dest_real)
        assert {p.split("/")[0] for p in snapshot(root)} == {name, "out"}


_VALID = tar_bytes(tvm_members())
with tarfile.open(fileobj=io.BytesIO(_VALID)) as _tar:
    _VALID_HEADERS = [info.offset for info in _tar]
_VALID_GZ = gzip.compress(_VALID, mtime=0)
_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(st.binary(max_size=4096))
def test_random_bytes_never_escape(data):
    check_unpack_outcome(data)


@_PROPERTY
@given(st.binary(max_size=2048))
def test_random_bytes_with_gzip_magic_never_escape(data):
    check_unpack_outcome(b"\x1f\x8b" + data, "model.tar.gz")


def mutated(base: bytes, headers: list[int] = ()):
    """`base` with a few bytes overwritten (half of them inside a header block, where tarfile
    parses) and, half of the time, cut short."""
    anywhere = st.integers(0, len(base) - 1)
    position = st.one_of(anywhere, st.tuples(st.sampled_from(headers), st.integers(0, 511)).map(sum)) \
        if headers else anywhere
    return st.tuples(
        st.lists(st.tuples(position, st.integers(0, 255)), min_size=0, max_size=8),
        st.one_of(st.just(len(base)), st.integers(0, len(base))),
    ).map(lambda spec: _apply(base, *spec))


def _apply(base: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    data = bytearray(base)
    for position, value in edits:
        data[position] = value
    return bytes(data[:cut])


@_PROPERTY
@given(mutated(_VALID, _VALID_HEADERS))
def test_mutated_tar_never_escapes(data):
    check_unpack_outcome(data)


# ustar header fields (offset, length): name, mode, size, type, linkname, magic+version, prefix
_FIELDS = [(0, 100), (100, 8), (124, 12), (156, 1), (157, 100), (257, 8), (345, 155)]


@_PROPERTY
@given(st.lists(st.tuples(st.sampled_from(_VALID_HEADERS), st.sampled_from(_FIELDS), st.binary(min_size=1)),
                min_size=1, max_size=4))
def test_headers_with_fuzzed_fields_and_valid_checksums_never_escape(edits):
    # Checksums are recomputed, so tarfile accepts the headers and the member checks are reached.
    data = bytearray(_VALID)
    for header, (start, length), value in edits:
        data[header + start:header + start + length] = value[:length].ljust(length, b"\0")
        block = data[header:header + 512]
        block[148:156] = b" " * 8
        data[header + 148:header + 156] = b"%06o\0 " % sum(block)
    check_unpack_outcome(bytes(data))


@_PROPERTY
@given(mutated(_VALID_GZ))
def test_mutated_tar_gz_never_escapes(data):
    check_unpack_outcome(data, "model.tar.gz")


@_PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["a", "b", ".", "..", "", "c\\d", "/", "./", "e\n"]),
                          st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE])),
                min_size=1, max_size=6),
       st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT]))
def test_random_member_names_never_escape(parts, fmt):
    members = []
    for i in range(0, len(parts), 2):
        name = "/".join(p for p, _ in parts[i:i + 2])
        kind = parts[i][1]
        members.append(member(name, None if kind != tarfile.REGTYPE else b"x", type=kind,
                              linkname="../../x" if kind == tarfile.SYMTYPE else ""))
    check_unpack_outcome(tar_bytes(members, fmt))
