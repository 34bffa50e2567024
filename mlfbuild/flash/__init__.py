"""Flashing boards: one module per flashing method, chosen by the board's `flashing.method`.

    job = load_job(Path("build/tiny-nucleo-f446re"))          # image + board data, checked
    result = flash(job, FlashOptions(port="/dev/ttyUSB0"))    # FlashError (exit 8) on failure

`flash()` refuses an image that cannot fit before any port is opened. A method module provides a
class with `method` and `flash(job, options, progress) -> result`.
"""

from __future__ import annotations

import importlib

from ..errors import BoardError
from ..flash_methods import FLASHERS
from .image import FlashJob, load_job
from .options import FlashOptions
from .progress import Progress


def flasher_class(method: str):
    try:
        module, name = FLASHERS[method]
    except KeyError:
        raise BoardError(f"no flasher for flashing method '{method}' (known: {', '.join(sorted(FLASHERS))})") from None
    return getattr(importlib.import_module(module), name)


def flash(job: FlashJob, options: FlashOptions, progress: Progress | None = None, method: str | None = None,
          **flasher_kwargs):
    """Check the job, then flash it with `method` (default: the board's). Returns the method's result."""
    job.check()
    return flasher_class(method or job.flashing.method)(**flasher_kwargs).flash(job, options, progress)


__all__ = ["FlashJob", "FlashOptions", "Progress", "flash", "flasher_class", "load_job"]
