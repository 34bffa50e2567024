"""Unpack an MLF tarball safely, or accept an already-unpacked folder.

An MLF comes from wherever the user got it, so the archive is treated as hostile: every member is
checked before anything is written, files are written by hand (never `extractall`) inside a private
temporary folder next to `dest`, and that folder only becomes `dest` by a rename once the whole
archive has been read. Reading is streamed ("r|"), so memory stays bounded whatever the archive
claims about itself, and the size limits are checked against headers *and* against the bytes
actually copied.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from ..errors import ArchiveError, StorageError, os_error, storage_problem

DEFAULT_MAX_TOTAL_BYTES = 512 * 1024 * 1024

_CHUNK = 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
# Only named in the "not a tar" message, so that a user who zipped their MLF knows why.
_OTHER_FORMATS = {b"PK\x03\x04": "zip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
# A TVM export has a few hundred members; the cap stops an inode/recursion bomb of empty entries
# (tarfile also keeps every TarInfo in memory, even when streaming).
_MAX_MEMBERS = 20_000
# PAX and GNU long-name headers are read by tarfile into memory in one piece, so bound them before
# tarfile sees them. Real ones are a few hundred bytes.
_MAX_EXTENDED_HEADER = 1024 * 1024
_MAX_HEADER_CHAIN = 16  # tarfile follows chained extended headers by recursion
_EXTENDED_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                   tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
# Errors that reading a broken tar or gzip stream can raise (tarfile lets a few non-TarErrors out).
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError, ValueError,
                OverflowError, RecursionError)


def unpack(source: Path, dest: Path, *, max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
           max_member_bytes: int | None = None) -> Path:
    """Unpack the MLF `source` (.tar, .tar.gz/.tgz, or an unpacked folder) and return its root.

    A folder is only checked (no symlink may lead outside it) and returned as is; `dest` is unused.
    An archive is unpacked into `dest`, which must not exist or be an empty folder. On any error
    nothing is left behind and ArchiveError says, in one line, which archive and member is at fault.
    """
    source, dest = Path(source), Path(dest)
    if source.is_dir():
        _check_folder(source)
        return source
    if not source.is_file():
        raise ArchiveError(f"{_show(source)}: no such archive file")
    if dest.is_symlink() or (dest.exists() and not (dest.is_dir() and not any(dest.iterdir()))):
        raise ArchiveError(f"{_show(dest)}: cannot unpack {_show(source)} here: "
                           "it already exists and is not an empty folder")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        # A sibling of dest, so the final rename stays on one filesystem; mkdtemp makes it 0o700,
        # so nobody else can plant anything in it while we write.
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    except OSError as exc:
        raise os_error(exc, f"{_show(dest)}: cannot unpack {_show(source)} here") from None
    try:
        extractor = _Extractor(source, tmp, max_total_bytes,
                               max_total_bytes if max_member_bytes is None else max_member_bytes)
        extractor.run()
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, dest)  # POSIX rename atomically replaces an empty folder
        except OSError as exc:
            raise os_error(exc, f"{_show(dest)}: cannot move unpacked {_show(source)} into place") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def sha256_of(path: Path) -> str:
    """SHA-256 of a file's bytes (as `sha256sum` prints it), or a stable digest of a folder.

    The folder digest covers sorted relative paths, entry kinds, symlink targets and file contents,
    so it identifies an unpacked MLF independently of mtimes, ownership and walk order.
    """
    path = Path(path)
    try:
        if path.is_dir():
            return _hash_folder(path)
        digest = hashlib.sha256()
        with open(path, "rb") as stream:
            _feed(digest, stream)
        return digest.hexdigest()
    except OSError as exc:
        raise ArchiveError(f"{_show(path)}: cannot read ({_detail(exc)})") from None


# --- archives -------------------------------------------------------------------------------------

class _Extractor:
    """One unpacking run: the limits, the running totals and the names seen so far."""

    def __init__(self, source: Path, root: Path, max_total: int, max_member: int):
        self.source = source
        self.root = root
        self.root_real = root.resolve()
        self.max_total = max_total
        self.max_member = max_member
        self.total = 0          # bytes of file data written (plus extended headers read)
        self.members = 0
        self.header_depth = 0
        self.current: str | None = None  # raw name of the last member read, for messages
        self.in_data = False             # reading current's data (rather than the next header)
        self.files: set[str] = set()
        self.dirs: set[str] = set()      # explicit and implied folders
        self.seen: set[str] = set()      # normalised names of explicit members

    def fail(self, reason: str, name: str | None = None) -> NoReturn:
        where = f"member {name!r}: " if name is not None else ""
        raise ArchiveError(f"{_show(self.source)}: {where}{reason}")

    def run(self) -> None:
        try:
            raw = open(self.source, "rb")
        except OSError as exc:
            self.fail(f"cannot read ({_detail(exc)})")
        with raw:
            magic = raw.read(8)
            raw.seek(0)
            gz = gzip.GzipFile(fileobj=raw, mode="rb") if magic.startswith(_GZIP_MAGIC) else None
            stream = _TailReader(gz if gz is not None else raw)
            try:
                with tarfile.open(fileobj=stream, mode="r|", tarinfo=self._tarinfo_class()) as tar:
                    while (info := tar.next()) is not None:
                        self.current = info.name
                        self._member(tar, info)
                    stopped_at = tar.offset
            except ArchiveError:
                raise
            except _READ_ERRORS as exc:
                self._read_failed(exc, magic, stream.error)
            # tarfile silently stops at a header it cannot parse or at a short read once past the
            # first member, so a cut or corrupted archive would look complete: insist on a real
            # end-of-archive (zero) block where it stopped.
            if stream.block_at(stopped_at) != bytes(tarfile.BLOCKSIZE):
                self._after_last("archive is truncated or corrupt: no end-of-archive marker")
            if not self.files:
                self.fail("archive contains no files")
            if gz is not None:
                self._drain(gz)

    def _tarinfo_class(self) -> type[tarfile.TarInfo]:
        extractor = self

        class BoundedTarInfo(tarfile.TarInfo):
            # tarfile's source names _proc_member as the hook for subclasses; it runs before
            # tarfile reads an extended header's payload into memory.
            def _proc_member(self, tar):  # type: ignore[override]
                if self.type == tarfile.GNUTYPE_SPARSE:
                    extractor.fail("sparse files are not supported", self.name)
                if self.type not in _EXTENDED_TYPES:
                    return super()._proc_member(tar)
                if not 0 <= self.size <= _MAX_EXTENDED_HEADER:
                    extractor._after_last(f"extended header of {self.size} bytes "
                                          f"(at most {_MAX_EXTENDED_HEADER} allowed)")
                extractor.total += self.size
                if extractor.total > extractor.max_total:
                    extractor._after_last(f"archive unpacks to more than {extractor.max_total} bytes")
                extractor.header_depth += 1
                try:
                    if extractor.header_depth > _MAX_HEADER_CHAIN:
                        extractor._after_last("too many chained extended headers")
                    return super()._proc_member(tar)
                finally:
                    extractor.header_depth -= 1

        return BoundedTarInfo

    def _member(self, tar: tarfile.TarFile, info: tarfile.TarInfo) -> None:
        name = info.name
        self.members += 1
        if self.members > _MAX_MEMBERS:
            self.fail(f"more than {_MAX_MEMBERS} members", name)
        rel = self._normalise(name)
        self._check_type(info)
        if rel == "":
            if not info.isdir():
                self.fail("a file cannot be the archive root", name)
            return  # the '.' entry TVM writes first
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self.files:
                self.fail("its parent folder is also a file in the archive", name)
        if (info.isdir() and rel in self.files) or (not info.isdir() and rel in self.dirs):
            self.fail("is both a file and a folder in the archive", name)
        if rel in self.seen:
            self.fail("duplicate member (the same path appears earlier in the archive)", name)
        self.seen.add(rel)

        target = self.root.joinpath(*parts)
        # Defence in depth: the name checks above already rule this out.
        real = target.resolve()
        if real == self.root_real or not real.is_relative_to(self.root_real):
            self.fail("resolves outside the destination folder", name)
        try:
            self._make_dirs(parts if info.isdir() else parts[:-1])
            if not info.isdir():
                self.files.add(rel)
                self._write_file(tar, info, target)
        except OSError as exc:
            if storage_problem(exc):  # the disk's fault, not the archive's
                raise StorageError(f"{_show(self.source)}: cannot unpack member {name!r}: {_detail(exc)}") from None
            self.fail(f"cannot write it ({_detail(exc)})", name)

    def _normalise(self, name: str) -> str:
        """'./a//b/' → 'a/b'; '.' → ''. Refuses anything that could escape or mean two things."""
        if not name.isprintable():
            self.fail("control or non-printable character in name", name)
        if "\\" in name:
            self.fail("backslash in name", name)
        if name.startswith("/"):
            self.fail("absolute path", name)
        parts = name.split("/")
        if ".." in parts:
            self.fail("'..' in path", name)
        return "/".join(p for p in parts if p not in ("", "."))

    def _check_type(self, info: tarfile.TarInfo) -> None:
        if info.isreg() and info.sparse is None:
            if info.size < 0:
                self.fail(f"negative size {info.size} in header", info.name)
            return
        if info.isdir():
            return
        if info.issym():
            reason = f"symbolic link (to {info.linkname!r}) not allowed"
        elif info.islnk():
            reason = f"hard link (to {info.linkname!r}) not allowed"
        elif info.ischr() or info.isblk():
            reason = "device file not allowed"
        elif info.isfifo():
            reason = "FIFO not allowed"
        elif info.isreg():
            reason = "sparse files are not supported"
        else:
            reason = f"unsupported member type {info.type.decode('latin-1')!r}"
        self.fail(reason, info.name)

    def _make_dirs(self, parts: list[str]) -> None:
        for i in range(1, len(parts) + 1):
            rel = "/".join(parts[:i])
            if rel in self.dirs:
                continue
            path = self.root.joinpath(*parts[:i])
            os.mkdir(path, 0o755)  # parents were made first; never follows a link (none exist)
            os.chmod(path, 0o755)  # whatever the umask and the archive say
            self.dirs.add(rel)

    def _write_file(self, tar: tarfile.TarFile, info: tarfile.TarInfo, target: Path) -> None:
        if info.size > self.max_member:
            self.fail(f"{info.size} bytes, over the limit of {self.max_member} bytes per member",
                      info.name)
        if self.total + info.size > self.max_total:
            self.fail(f"archive unpacks to more than {self.max_total} bytes", info.name)
        data = tar.extractfile(info)
        assert data is not None  # regular files always have a data stream
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        with os.fdopen(os.open(target, flags, 0o644), "wb") as out:
            written = 0
            self.in_data = True
            while chunk := data.read(_CHUNK):
                written += len(chunk)
                if written > info.size:  # cannot happen with tarfile, but the limit must hold anyway
                    self.fail("more data than its header declares", info.name)
                self.total += len(chunk)
                if self.total > self.max_total:
                    self.fail(f"archive unpacks to more than {self.max_total} bytes", info.name)
                out.write(chunk)
        self.in_data = False
        if written != info.size:
            self.fail(f"truncated: {written} of {info.size} bytes", info.name)
        os.chmod(target, 0o644)

    def _drain(self, gz: gzip.GzipFile) -> None:
        """Read the gzip stream to its end so its CRC and length are checked (bounded: a bomb
        hidden after the tar's end marker is refused, not inflated forever)."""
        left = self.max_total
        try:
            while chunk := gz.read(_CHUNK):
                left -= len(chunk)
                if left < 0:
                    self.fail("too much data after the end of the tar archive")
        except _READ_ERRORS as exc:
            self.fail(f"corrupt gzip data after the tar archive ({_detail(exc)})")

    def _read_failed(self, exc: BaseException, magic: bytes, source_error: BaseException | None) -> NoReturn:
        # source_error: the file or the gzip decompressor failed, rather than tar parsing
        # (tarfile rewraps some of those errors, so ask the reader what happened).
        gzipped = magic.startswith(_GZIP_MAGIC)
        what = "gzip stream" if gzipped and source_error is not None else "archive"
        detail = _detail(source_error or exc)
        if self.current is not None:
            self._after_last(f"{what} is truncated or corrupt: {detail}")
        if source_error is not None:
            self.fail(f"not a valid gzip file ({detail})" if gzipped else f"cannot read ({detail})")
        kind = next((k for m, k in _OTHER_FORMATS.items() if magic.startswith(m)), None)
        hint = f"; this looks like a {kind} file" if kind else ""
        self.fail(f"not a tar archive ({detail}){hint}")

    def _after_last(self, reason: str) -> NoReturn:
        if self.current is None:
            self.fail(reason)
        where = "in" if self.in_data else "after"
        raise ArchiveError(f"{_show(self.source)}: {reason} ({where} member {self.current!r})")


class _TailReader:
    """The (decompressed) tar stream as tarfile reads it, remembering the last bytes read so the
    block where tarfile stopped can be inspected afterwards."""

    _KEEP = 64 * 1024  # tarfile reads ahead one 10 KiB record at most

    def __init__(self, raw: BinaryIO | gzip.GzipFile):
        self._raw = raw
        self._pos = 0
        self._tail = bytearray()
        self.error: BaseException | None = None  # what reading or decompressing raised, if anything

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._raw.read(size)
        except (EOFError, zlib.error, OSError) as exc:  # BadGzipFile is an OSError
            self.error = exc
            raise
        self._pos += len(data)
        self._tail += data
        if len(self._tail) > 2 * self._KEEP:  # trim in batches: amortised one copy per byte
            del self._tail[:len(self._tail) - self._KEEP]
        return data

    def block_at(self, offset: int) -> bytes:
        start = offset - (self._pos - len(self._tail))
        if start < 0:
            return b""
        return bytes(self._tail[start:start + tarfile.BLOCKSIZE])


# --- folders --------------------------------------------------------------------------------------

def _check_folder(root: Path) -> None:
    root_real = root.resolve()
    try:
        for folder, dirnames, filenames in os.walk(root, onerror=_reraise):
            for name in dirnames + filenames:
                path = Path(folder, name)
                if not path.is_symlink():
                    continue
                rel = path.relative_to(root).as_posix()
                try:
                    real = path.resolve()
                except RuntimeError:  # a symlink loop (Python < 3.13)
                    raise ArchiveError(f"{_show(root)}: symlink {rel!r} is a loop") from None
                if not real.is_relative_to(root_real):
                    raise ArchiveError(f"{_show(root)}: symlink {rel!r} points outside the folder "
                                       f"(to {os.readlink(path)!r})")
    except OSError as exc:
        raise ArchiveError(f"{_show(root)}: cannot read ({_detail(exc)})") from None


def _hash_folder(root: Path) -> str:
    entries: list[tuple[bytes, Path]] = []
    for folder, dirnames, filenames in os.walk(root, onerror=_reraise):
        for name in dirnames + filenames:
            path = Path(folder, name)
            entries.append((os.fsencode(path.relative_to(root).as_posix()), path))
    digest = hashlib.sha256(b"mlfbuild-folder-v1\0")
    for rel, path in sorted(entries):
        # Kind, length-prefixed path and (for files) size before content: no two trees collide.
        digest.update(len(rel).to_bytes(8, "big") + rel)
        if path.is_symlink():
            digest.update(b"L" + os.fsencode(os.readlink(path)) + b"\0")
        elif path.is_dir():
            digest.update(b"D")
        elif path.is_file():
            with open(path, "rb") as stream:
                digest.update(b"F" + os.fstat(stream.fileno()).st_size.to_bytes(8, "big"))
                _feed(digest, stream)
        else:
            digest.update(b"O")
    return digest.hexdigest()


def _reraise(exc: OSError) -> None:
    raise exc  # os.walk would otherwise skip unreadable folders silently


def _feed(digest: Any, stream: BinaryIO) -> None:
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)


# --- messages -------------------------------------------------------------------------------------

def _show(path: Path) -> str:
    text = str(path)
    return text if text.isprintable() else repr(text)


def _detail(exc: BaseException) -> str:
    """An exception's text on one line (some carry newlines), or its type when it has none."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return " ".join(text.split()) or type(exc).__name__
