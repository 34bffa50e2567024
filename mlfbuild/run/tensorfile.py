"""Tensor files (`--input`, `--reference`: NumPy .npz or .npy) — untrusted input, read with bounds.

The file must be a regular file of at most MAX_TENSOR_FILE_BYTES; every array's header (shape and
dtype) must describe exactly the bytes that follow it, so a header that declares 2^40 elements is
refused before anything is allocated; Python objects (pickles) are refused.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError
from ..untrusted import read_regular

# Inputs and outputs of a model that fits a microcontroller are kilobytes to a few megabytes.
MAX_TENSOR_FILE_BYTES = 256 << 20
_NPZ_MAGIC, _NPY_MAGIC = b"PK", b"\x93NUMPY"


def load_tensors(path: Path | None) -> dict[str, np.ndarray]:
    """name → array (a bare .npy gives the name ""); InvalidInputError for anything else."""
    if path is None:
        return {}
    data = read_regular(Path(path), "tensor file", MAX_TENSOR_FILE_BYTES)
    if not data.startswith((_NPZ_MAGIC, _NPY_MAGIC)):
        raise InvalidInputError(f"{path}: not a NumPy .npz or .npy file")
    try:
        if data.startswith(_NPY_MAGIC):
            _check_array(io.BytesIO(data), len(data), path, "")
            return {"": np.load(io.BytesIO(data), allow_pickle=False)}
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if sum(member.file_size for member in members) > MAX_TENSOR_FILE_BYTES:
                raise InvalidInputError(f"{path}: its arrays unpack to more than {MAX_TENSOR_FILE_BYTES >> 20} MiB")
            for member in members:
                with archive.open(member) as stream:
                    _check_array(stream, member.file_size, path, member.filename)
        with np.load(io.BytesIO(data), allow_pickle=False) as tensors:
            return {key: tensors[key] for key in tensors.files}
    except (OSError, ValueError, EOFError, KeyError, TypeError, zipfile.BadZipFile, zlib.error) as exc:
        if "pickle" in str(exc):
            raise InvalidInputError(f"{path}: holds Python objects, not plain numeric tensors") from None
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(f"{path}: not a readable .npz/.npy tensor file ({why})") from None


def _check_array(stream, size: int, path: Path, member: str) -> None:
    """The .npy header of `stream` (`size` bytes in all) must describe exactly the data after it."""
    where = f"{path}: {member}" if member else str(path)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    if dtype.hasobject:
        raise InvalidInputError(f"{where}: holds Python objects, not plain numeric tensors")
    elements = 1
    for dimension in shape:
        elements *= dimension
    declared = elements * dtype.itemsize
    held = size - stream.tell()
    if declared != held:
        raise InvalidInputError(f"{where}: its header declares {elements:,} elements of {dtype} ({declared:,} B), "
                                f"the file holds {held:,} B")
