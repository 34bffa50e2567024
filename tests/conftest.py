"""Shared pytest fixtures.

`fixtures_dir`: the folder of real TVM-made MLF tarballs (read-only inputs, never copied into the
repo). Taken from $MLFBUILD_FIXTURES, else `shared/fixtures` beside the repository. When it is
missing, tests that use it fail under CI (CI=true) and are skipped elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES_ENV = "MLFBUILD_FIXTURES"


def fixtures_path() -> Path:
    """Where the real MLF fixtures are expected (whether or not they exist)."""
    configured = os.environ.get(FIXTURES_ENV)
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The fixtures folder; fails the test under CI=true when it is missing, skips it otherwise."""
    path = fixtures_path()
    if not path.is_dir():
        message = f"MLF fixtures folder not found: {path} (set ${FIXTURES_ENV})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def manifest_entries() -> list[tuple[str, dict]]:
    """(fixture set, manifest entry) for every real MLF, for parametrised tests. When the folder is
    missing this is one placeholder, so that the test asks for `fixtures_dir` and fails in CI."""
    import json

    root = fixtures_path()
    entries = []
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        for entry in json.loads(manifest.read_text())["fixtures"]:
            entries.append((manifest.parent.name, entry))
    return entries or [("missing", {"file": "missing"})]


def entry_id(item: tuple[str, dict]) -> str:
    return f"{item[0]}/{item[1]['file']}"


@pytest.fixture(scope="session")
def build_firmware(tmp_path_factory):
    """build_firmware(mlf, board, **ProjectOptions) → build folder; each combination is built once
    per session (our code with -Werror), so build and run tests share the work."""
    from mlfbuild.build import build
    from mlfbuild.project import ProjectOptions

    root = tmp_path_factory.mktemp("builds")
    cache: dict[tuple, Path] = {}

    def get(mlf: Path, board: str, **options) -> Path:
        key = (str(mlf), board, tuple(sorted(options.items())))
        if key not in cache:
            out = root / f"{len(cache)}-{Path(mlf).name.split('.')[0]}-{board}"
            build(Path(mlf), board, out, options=ProjectOptions(werror=True, **options), jobs=2)
            cache[key] = out
        return cache[key]

    return get


def references_for(fixture_set: str, entry: dict, fixtures: Path) -> list[str]:
    return [f"{m['mod_name']}={fixtures / fixture_set / m['reference_npz']}" for m in entry["modules"]]


def arm_cpu_schedules(entry: dict) -> bool:
    """Compiled with TVM's arm_cpu schedules (target `c -keys=arm_cpu,...`): their int8 operators are
    tensorized into Cortex-M DSP micro-kernels (<arm_acle.h> intrinsics, inline assembly)."""
    return "-keys=arm_cpu" in str(entry.get("target", ""))


# The Cortex-M7 board the arm_cpu fixtures also run on, besides the default Cortex-M4 one.
ARM_CPU_EXTRA_BOARD = "mps2-an500"


def buildable(entry: dict, board: str) -> bool:
    """Fixtures whose code builds: not the known-defective ones, not CMSIS-NN (needs the library),
    LLVM Cortex-M objects only for Cortex-M boards, and DSP micro-kernels (arm_cpu schedules of
    integer models) only for cores with the DSP extension (not the host, not Cortex-M3)."""
    if "target" not in entry:  # the placeholder for missing fixtures: let the test ask for them
        return True
    if entry.get("known_issue") or entry.get("cmsisnn") or entry["file"] == "kws_aot_llvm_cm4_packed.tar":
        return False
    if arm_cpu_schedules(entry) and _integer_model(entry) and not _has_dsp(board):
        return False
    return not (board == "host" and entry["target"].startswith("llvm"))


def _has_dsp(board: str) -> bool:
    from mlfbuild.boards import load_board

    loaded = load_board(board)
    return not loaded.is_host and loaded.cpu.core in ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")


def _integer_model(entry: dict) -> bool:
    return all(tensor["dtype"].startswith(("int", "uint")) for tensor in entry.get("inputs", []))


def fixture_boards(default_boards: tuple[str, ...]) -> list[tuple[tuple[str, dict], str]]:
    """(fixture, board) pairs to build or run: every buildable fixture on each default board, and
    the arm_cpu fixtures on the Cortex-M7 board too."""
    pairs = [(item, board) for board in default_boards for item in manifest_entries() if buildable(item[1], board)]
    pairs += [(item, ARM_CPU_EXTRA_BOARD) for item in manifest_entries()
              if arm_cpu_schedules(item[1]) and buildable(item[1], ARM_CPU_EXTRA_BOARD)]
    return pairs
