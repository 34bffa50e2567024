"""Shared pytest fixtures.

`fixtures_dir`: the folder of real TVM-made MLF tarballs (read-only inputs, never copied into the
repo). Taken from $MLFBUILD_FIXTURES, else `../shared/fixtures` from the repository root. When it is
missing, tests that use it fail under CI (CI=true) and are skipped elsewhere.

`models_dir`: the same for the original models the fixtures were compiled from (the MLPerf Tiny
.tflite files): $MLFBUILD_MODELS, else `../shared/models` from the repository root.

`third_party_dir`: the same for unchanged exports of libraries that generated code calls
(cmsis-nn-v4.1.0/, cmsis-nn-v6.0.0/): $MLFBUILD_THIRD_PARTY, else `../shared/third_party` from the repository root;
`cmsis_nn(version)` gives one of those trees.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES_ENV = "MLFBUILD_FIXTURES"
THIRD_PARTY_ENV = "MLFBUILD_THIRD_PARTY"
MODELS_ENV = "MLFBUILD_MODELS"
TFLM_MODELS_ENV = "MLFBUILD_TFLM_MODELS"


def cli(*args: str, cwd: Path = REPO, env: dict | None = None, timeout: float | None = None,
        stdin=None) -> subprocess.CompletedProcess:
    """`python -m mlfbuild ARGS` as a user runs it: its own process, output captured as text."""
    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout, stdin=stdin)


def as_from_a_terminal() -> None:
    """preexec_fn for a child that a test will Ctrl-C: SIGINT handled by default, as a terminal's
    foreground job has it. A test run started in the background by a non-interactive shell ignores
    SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _deadline(request):
    """A test marked `deadline(seconds)` fails with TimeoutError instead of hanging past it
    (SIGALRM: for tests that talk to ports and processes that might never answer)."""
    marker = request.node.get_closest_marker("deadline")
    if marker is None:
        yield
        return
    seconds = marker.args[0]

    def expire(*_):
        raise TimeoutError(f"test took longer than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def fixtures_path() -> Path:
    """Where the real MLF fixtures are expected (whether or not they exist)."""
    configured = os.environ.get(FIXTURES_ENV)
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def third_party_path() -> Path:
    """Where the third-party library trees are expected (whether or not they exist)."""
    configured = os.environ.get(THIRD_PARTY_ENV)
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "third_party"


def models_path() -> Path:
    """Where the original .tflite models are expected (whether or not they exist)."""
    configured = os.environ.get(MODELS_ENV)
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "models"


def tflm_models_path() -> Path:
    """Where TFLM's own example models are expected (tflite-micro's hello_world_int8, micro_speech_quantized,
    person_detect, trained_lstm_int8, keyword_scrambled*, mobilenet_v2_quantized_1x3x224x224 .tflite
    files, gathered in one folder; only exhaustive tests read them)."""
    configured = os.environ.get(TFLM_MODELS_ENV)
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "models-tflm"


def required_folder(path: Path, what: str, env: str) -> Path:
    """`path`; fails the test under CI=true when it is missing, skips it otherwise."""
    if not path.is_dir():
        message = f"{what} folder not found: {path} (set ${env})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def pytest_unconfigure(config) -> None:
    """End a run that skipped tests for want of the shared folders with how many, and how to get them
    (here, after the summary line, so that it is the last thing said)."""
    terminalreporter = config.pluginmanager.getplugin("terminalreporter")
    if terminalreporter is None:
        return
    reasons = [str(r.longrepr) for r in terminalreporter.stats.get("skipped", [])]
    for what, path, env, how in (
            ("MLF fixtures", fixtures_path(), FIXTURES_ENV, "MLFs exported by Apache TVM 0.8, 0.13 and 0.18"),
            ("original models", models_path(), MODELS_ENV, "the MLPerf Tiny .tflite files, from "
             "github.com/mlcommons/tiny benchmark/training/*/trained_models"),
            ("third-party libraries", third_party_path(), THIRD_PARTY_ENV,
             "git clone --branch v4.1.0 / v6.0.0 https://github.com/ARM-software/CMSIS-NN "
             "into cmsis-nn-v4.1.0/ and cmsis-nn-v6.0.0/"),
            ("TFLM example models", tflm_models_path(), TFLM_MODELS_ENV, "the .tflite files of tflite-micro's "
             "examples and models folders, gathered in one folder")):
        count = sum(f"{what} folder not found" in reason for reason in reasons)
        if count:
            terminalreporter.write_line(
                f"note: {count} test(s) skipped: the {what} are not at {path} ({how}; see README.md, Tests). "
                f"Set ${env} to their folder to run them"
                + ("." if env == TFLM_MODELS_ENV else "; under CI=true they fail instead."), yellow=True, bold=True)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return required_folder(fixtures_path(), "MLF fixtures", FIXTURES_ENV)


@pytest.fixture(scope="session")
def models_dir() -> Path:
    return required_folder(models_path(), "original models", MODELS_ENV)


@pytest.fixture(scope="session")
def tflm_models_dir() -> Path:
    """TFLM's example models are not part of the shared material (CI has no copy), so only the exhaustive
    tests read them and their absence skips, under CI too."""
    path = tflm_models_path()
    if not path.is_dir():
        pytest.skip(f"TFLM example models folder not found: {path} (set ${TFLM_MODELS_ENV})")
    return path


@pytest.fixture(scope="session")
def third_party_dir() -> Path:
    return required_folder(third_party_path(), "third-party libraries", THIRD_PARTY_ENV)


@pytest.fixture(scope="session")
def cmsis_nn(third_party_dir):
    """cmsis_nn("v4.1.0") → that CMSIS-NN tree (fails under CI, skips elsewhere when missing). One
    path per tree, so builds through `build_firmware` with it are shared across test files."""
    return lambda version: required_folder(third_party_dir / f"cmsis-nn-{version}", f"CMSIS-NN {version}",
                                           THIRD_PARTY_ENV)


def manifest_entries() -> list[tuple[str, dict]]:
    """(fixture set, manifest entry) for every real MLF, for parametrised tests. When the folder is
    missing this is one placeholder, so that the test asks for `fixtures_dir` and fails in CI."""
    import json

    root = fixtures_path()
    entries = []
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        for entry in json.loads(manifest.read_text())["fixtures"]:
            entries.append((manifest.parent.name, {**entry, "fixture_set": manifest.parent.name}))
    return entries or [("missing", {"file": "missing"})]


def entry_id(item: tuple[str, dict]) -> str:
    return f"{item[0]}/{item[1]['file']}"


@pytest.fixture(scope="session")
def build_firmware(tmp_path_factory, _tool_use_log):
    """build_firmware(mlf, board, **ProjectOptions) → build folder; each combination is built once
    per run (our code with -Werror), so build and run tests share the work. The MLF counts by its
    name and bytes, not its path: the same small MLF written by several tests into their own folders
    (mlfwriter's tarballs are byte-for-byte reproducible) is built once. Under pytest-xdist the
    builds live in a folder all workers share, each behind a lock, so a firmware two workers need is
    still built once. A test that gets a cross-compiled build counts as using the cross compiler even
    when another test built it first, so its `cross` mark is checked whatever order the tests run in."""
    from mlfbuild.build import build
    from mlfbuild.project import ProjectOptions

    root = shared_tmp_folder(tmp_path_factory, "builds")
    known: dict[tuple, Path] = {}

    def get(mlf: Path, board: str, **options) -> Path:
        key = (_file_identity(Path(mlf)), board, tuple(sorted(options.items())))
        if board != "host":
            _note_tool_use(_tool_use_log, "arm-none-eabi-gcc")
        if key not in known:
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            out = root / f"{digest}-{Path(mlf).name.split('.')[0]}-{board}"
            done = root / f"{digest}.done"
            with _exclusive(root / f"{digest}.lock"):
                if not done.exists():  # not built yet, or a failed attempt left a partial folder
                    shutil.rmtree(out, ignore_errors=True)
                    build(Path(mlf), board, out, options=ProjectOptions(werror=True, **options), jobs=2)
                    done.touch()
            known[key] = out
        return known[key]

    return get


def shared_tmp_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this run's temporary root that every pytest-xdist worker sees (each worker's own
    basetemp is a child of that root); without xdist, a folder of the basetemp."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / f"shared-{name}"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _exclusive(lock: Path):
    """Hold an flock on `lock` (created if missing) for the block: one worker at a time."""
    with open(lock, "a") as stream:
        fcntl.flock(stream, fcntl.LOCK_EX)
        yield


def _file_identity(path: Path) -> tuple[str, str]:
    """(name, sha256 of the bytes) of a file, read once per version of it."""
    stat = path.stat()
    return path.name, _sha256(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def references_for(fixture_set: str, entry: dict, fixtures: Path) -> list[str]:
    return [f"{m['mod_name']}={fixtures / fixture_set / m['reference_npz']}" for m in entry["modules"]]


# Boards whose core has no DSP extension: code with ACLE DSP intrinsics is refused there.
NO_DSP_BOARDS = ("host", "mps2-an385", "lm3s6965evb")


@functools.lru_cache(maxsize=None)
def calls_dsp_intrinsics(mlf: Path) -> bool:
    """Whether the MLF's generated C includes <arm_acle.h> (TVM's arm_cpu micro-kernels)."""
    with tarfile.open(mlf) as tar:
        return any(b"<arm_acle.h>" in tar.extractfile(m).read() for m in tar.getmembers()
                   if m.isfile() and m.name.endswith(".c"))


def arm_cpu_schedules(entry: dict) -> bool:
    """Compiled with TVM's arm_cpu schedules (target `c -keys=arm_cpu,...`): their int8 operators are
    tensorized into Cortex-M DSP micro-kernels (<arm_acle.h> intrinsics, inline assembly)."""
    return "-keys=arm_cpu" in str(entry.get("target", ""))


# The Cortex-M7 board the arm_cpu fixtures also run on, besides the default Cortex-M4 one.
ARM_CPU_EXTRA_BOARD = "mps2-an500"


def buildable(entry: dict, board: str) -> bool:
    """Fixtures whose code builds: not the known-defective ones, not CMSIS-NN (needs the library),
    LLVM Cortex-M objects only for Cortex-M boards, DSP intrinsics only on cores that have them.
    `entry` comes from manifest_entries() (it knows its fixture set)."""
    if "target" not in entry:  # the placeholder for missing fixtures: let the test ask for them
        return True
    if entry.get("known_issue") or entry.get("cmsisnn") or entry["file"] == "kws_aot_llvm_cm4_packed.tar":
        return False
    if board in NO_DSP_BOARDS and calls_dsp_intrinsics(fixtures_path() / entry["fixture_set"] / entry["file"]):
        return False
    return not (board == "host" and entry["target"].startswith("llvm"))


def fixture_boards(default_boards: tuple[str, ...]) -> list[tuple[tuple[str, dict], str]]:
    """(fixture, board) pairs to build or run: every buildable fixture on each default board, and
    the arm_cpu fixtures on the Cortex-M7 board too."""
    pairs = [(item, board) for board in default_boards for item in manifest_entries() if buildable(item[1], board)]
    pairs += [(item, ARM_CPU_EXTRA_BOARD) for item in manifest_entries()
              if arm_cpu_schedules(item[1]) and buildable(item[1], ARM_CPU_EXTRA_BOARD)]
    return pairs


# -- markers that tell the truth ----------------------------------------------------------------
# `qemu` and `cross` must be on every test that starts qemu-system-arm or arm-none-eabi-gcc (so
# that `-m "not qemu"` really leaves them out). Rather than trust each file's marks, the session
# puts small wrappers for those tools first on PATH: each notes which test ran it (pytest's
# PYTEST_CURRENT_TEST, which subprocesses inherit), then runs the real tool. A test that used a
# tool without its mark fails at teardown, naming the mark to add.
TRACKED_TOOLS = {"qemu-system-arm": "qemu", "arm-none-eabi-gcc": "cross"}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.get_closest_marker("qemu") and not item.get_closest_marker("cross"):
            item.add_marker(pytest.mark.cross)  # firmware run in QEMU is cross-compiled first
    # `exhaustive` tests run every shared fixture through a feature CI checks one per kind: only when asked.
    if "exhaustive" not in (config.getoption("markexpr") or ""):
        skipped = [item for item in items if item.get_closest_marker("exhaustive")]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            items[:] = [item for item in items if not item.get_closest_marker("exhaustive")]


@pytest.fixture(scope="session")
def _tool_use_log(tmp_path_factory) -> Path | None:
    import stat
    folder = tmp_path_factory.mktemp("tracked-tools")
    log = folder / "uses.log"
    log.touch()
    for tool in TRACKED_TOOLS:
        real = shutil.which(tool)
        if real is None:
            continue
        wrapper = folder / tool
        wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "${{PYTEST_CURRENT_TEST%% (*}}|{tool}" >> "{log}"\n'
                           f'exec "{real}" "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    return log


def _note_tool_use(log: Path, tool: str) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0]
    with open(log, "a") as stream:
        stream.write(f"{test}|{tool}\n")


@pytest.fixture(autouse=True)
def _markers_tell_the_truth(request, _tool_use_log):
    yield
    used = {line.rsplit("|", 1)[1] for line in _tool_use_log.read_text().splitlines()
            if line.rsplit("|", 1)[0] == request.node.nodeid}
    missing = sorted({TRACKED_TOOLS[tool] for tool in used} - {m.name for m in request.node.iter_markers()})
    if missing:
        pytest.fail(f"this test runs {', '.join(sorted(used))} but is not marked {', '.join(missing)}", pytrace=False)
