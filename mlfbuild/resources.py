"""Find the data folders (templates/, boards/, crt/) whether installed from a wheel or run from a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder `name` (templates, boards or crt).

    A wheel carries them under mlfbuild/_data/; a checkout or an editable install
    has them at the repository root, next to the package.
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mlfbuild data folder '{name}' is missing from the installation")


def setup_hint() -> str:
    """' (bash scripts/setup.sh does)' in a checkout, which has that script; '' in an installed wheel."""
    return " (bash scripts/setup.sh does)" if (_PACKAGE_DIR.parent / "scripts" / "setup.sh").is_file() else ""
