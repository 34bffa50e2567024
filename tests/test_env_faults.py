"""Environment faults: an output path that cannot be used, a full disk, a closed or full stdout,
Ctrl-C while the program loads, two builds into one folder, compiler errors the assembler reports
and names that would break a Markdown table. Each ends in one line and a distinct exit code, never
a traceback, and loses nothing that was already done."""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import signal
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest

from mlfbuild import cli
from mlfbuild.errors import MlfError
from mlfbuild.outfolder import LOCK_FILE
from mlfbuild.size.markdown import md_code, md_text
from mlfbuild.toolchain import _failure
from conftest import REPO
from mlfwriter import TinyModel, tar_tree



def _mlfbuild(*args: str, limit_file_bytes: int | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The real program; `limit_file_bytes` makes every file write beyond that size fail with EFBIG,
    as a full disk fails it (no root or special file system needed)."""

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failing write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

    return subprocess.run([sys.executable, "-m", "mlfbuild", *args], capture_output=True, text=True, timeout=300,
                          preexec_fn=limited if limit_file_bytes is not None else None, **kwargs)


def _one_line(result: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if not line.lstrip().startswith("[")]  # progress
    assert len(lines) == 1 and lines[0].startswith("mlfbuild: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def tiny(tmp_path) -> tuple[Path, Path]:
    model = TinyModel()
    mlf = tar_tree(model.files(), tmp_path / "tiny.tar")
    reference = tmp_path / "tiny.npz"
    np.savez(reference, input=model.input, output=model.reference(model.input))
    return mlf, reference


# -- the output folder ---------------------------------------------------------------------------

def test_an_output_folder_under_a_file_is_a_usage_error(tiny, tmp_path):
    (tmp_path / "file").write_text("x")
    _one_line(_mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(tmp_path / "file" / "out")), 2,
              "is a file, not a folder")


def test_an_output_folder_that_is_a_file_is_a_usage_error(tiny, tmp_path):
    (tmp_path / "file").write_text("keep me")
    _one_line(_mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(tmp_path / "file")), 2, "not a folder")
    assert (tmp_path / "file").read_text() == "keep me"


@pytest.mark.parametrize("root", ["/proc", "/sys"])
def test_an_output_folder_where_nothing_can_be_created_is_a_usage_error(tiny, root):
    # /proc and /sys refuse new folders even to root, so this holds whoever runs the tests.
    _one_line(_mlfbuild("build", str(tiny[0]), "-b", "host", "-o", f"{root}/mlfbuild-out"), 2,
              "cannot create the output folder")


def test_a_full_disk_while_unpacking_is_not_the_inputs_fault(tiny, tmp_path):
    out = tmp_path / "out"
    result = _mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(out), limit_file_bytes=100)
    _one_line(result, 9, "cannot unpack member", "File too large")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # no half-unpacked folder is left


def test_a_full_disk_while_writing_the_size_snapshot_is_one_line(tiny, tmp_path, monkeypatch, capsys):
    real_write_text = Path.write_text

    def full_for_size_json(self, *args, **kwargs):
        if self.name == "size.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_for_size_json)
    code = cli.main(["build", str(tiny[0]), "-b", "host", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 9, err
    assert "cannot write" in err and "size.json: No space left on device" in err


def test_a_second_build_into_a_folder_in_use_is_refused_with_the_holders_pid(tiny, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with open(out / LOCK_FILE, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write(f"{os.getpid()}\n")
        held.flush()
        result = _mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(out))
    _one_line(result, 2, "in use by another mlfbuild", f"pid {os.getpid()}")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]


def test_two_builds_into_one_folder_at_once_one_wins_the_other_is_told(tiny, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "mlfbuild", "build", str(tiny[0]), "-b", "host", "-o", str(out)]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = sorted([(p.wait(timeout=300), p.communicate()[1]) for p in (first, second)])
    assert [code for code, _ in results] == [0, 2], results
    assert "in use by another mlfbuild" in results[1][1] and "Traceback" not in results[1][1]
    ran = _mlfbuild("run", str(out), "--reference", str(tiny[1]))
    assert ran.returncode == 0, ran.stderr


# -- the run's own files ---------------------------------------------------------------------------

@pytest.fixture
def tiny_build(tiny, tmp_path) -> Path:
    out = tmp_path / "build"
    result = _mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_junit_into_a_missing_folder_is_written_there(tiny, tiny_build, tmp_path):
    junit = tmp_path / "reports" / "ci" / "run.xml"
    result = _mlfbuild("run", str(tiny_build), "--reference", str(tiny[1]), "--junit", str(junit))
    assert result.returncode == 0, result.stderr
    assert "<testsuite" in junit.read_text()


def test_junit_that_cannot_be_written_keeps_the_verdict_on_screen(tiny, tiny_build, tmp_path):
    (tmp_path / "file").write_text("x")
    result = _mlfbuild("run", str(tiny_build), "--reference", str(tiny[1]), "--junit", str(tmp_path / "file" / "r.xml"))
    _one_line(result, 2, "cannot write")
    assert "pass" in result.stdout


def test_a_run_whose_record_cannot_be_written_still_passes(tiny, tiny_build):
    (tiny_build / "run.json").mkdir()  # as unwritable as a read-only folder, even for root
    result = _mlfbuild("run", str(tiny_build), "--reference", str(tiny[1]))
    assert result.returncode == 0, result.stderr
    assert "pass" in result.stdout and "Traceback" not in result.stderr
    assert "warning: the run was not recorded" in result.stderr


def test_a_run_on_a_full_disk_still_passes(tiny, tiny_build):
    # 64 bytes: enough for Python to find a usable temporary folder, not for run.json
    result = _mlfbuild("run", str(tiny_build), "--reference", str(tiny[1]), limit_file_bytes=64)
    assert result.returncode == 0, result.stderr
    assert "warning: the run was not recorded" in result.stderr and "File too large" in result.stderr


# -- standard output and start-up ---------------------------------------------------------------

def test_stdout_to_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "mlfbuild", "boards", "--json"], stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 9, result.stderr
    assert result.stderr.strip() == "mlfbuild: error: cannot write to standard output: No space left on device"


def test_stdout_to_a_closed_pipe_ends_quietly():
    reader, writer = os.pipe()
    os.close(reader)  # like `| head` having read all it wanted
    try:
        result = subprocess.run([sys.executable, "-m", "mlfbuild", "boards", "--json"], stdout=writer,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)
    assert result.returncode == 128 + signal.SIGPIPE and result.stderr == ""


def test_a_closed_stdout_is_said_not_silently_lost():
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "boards"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, timeout=60,
                            preexec_fn=lambda: os.close(1))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("mlfbuild: error: cannot write to standard output: "
                                     "Bad file descriptor (standard output is closed)")


# (command, a module it loads once it runs: the command line itself loads neither)
@pytest.mark.parametrize("args, loaded", [(["boards"], "mlfbuild.boards"),
                                          (["import", "missing.tflite"], "numpy")])
def test_ctrl_c_while_the_library_loads_is_one_line(args, loaded):
    """The console script's own entry point, with Ctrl-C arriving as the command's library is imported."""
    module, function = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["mlfbuild"].split(":")
    program = f"""
import sys
import tempfile
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {loaded!r}:
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
sys.argv = ["mlfbuild", *{args!r}]
from {module} import {function} as entry
sys.exit(entry())
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip() == "mlfbuild: interrupted"


# -- what the compiler and the size report say -------------------------------------------------------

def test_an_assembler_error_is_found_and_placed_in_the_models_file(tmp_path):
    mlf = tar_tree(TinyModel(behaviour="bad_asm").files(), tmp_path / "bad.tar")
    line = _one_line(_mlfbuild("build", str(mlf), "-b", "host", "-o", str(tmp_path / "out")), 4,
                     "compilation failed", "Error:", "no_such_instruction_here")
    assert "tiny_lib1.c" in line


def test_make_echoing_the_error_is_not_taken_for_it():
    log = "CC   model/x_lib1.c\n/tmp/ccQ.s: Assembler messages:\n/tmp/ccQ.s:9: Error: bad instruction `zz'\n" \
          "make: *** [Makefile:40: build/model/x_lib1.o] Error 1"
    message = str(_failure(log, Path("proj"), ""))
    assert "Error: bad instruction `zz'" in message and "(in proj/model/x_lib1.c)" in message


@pytest.mark.parametrize("said", ["/usr/bin/ld: cannot find -lstdc++_nano: No such file or directory",
                                  "/usr/bin/ld: build/app/b.o:(.bss.x+0x0): multiple definition of `x'; "
                                  "build/app/a.o:(.bss.x+0x0): first defined here"])
def test_a_link_error_is_lds_own_words_and_blames_no_source(said):
    log = (f"CC   model/x_lib1.c\nCXX  app/main.cpp\nLD   build/firmware.elf\n{said}\n"
           "collect2: error: ld returned 1 exit status\nmake: *** [Makefile:71: build/firmware.elf] Error 1")
    message = str(_failure(log, Path("proj"), ""))
    assert f"compilation failed: {said}; 1 more error line(s) in the log" == message


def test_a_cpp_error_is_placed_in_its_file():
    log = ("CXX  app/main.cpp\nCC   model/x_lib1.c\napp/main.cpp:1:14: error: exception handling disabled, use "
           "'-fexceptions' to enable\nmake: *** [Makefile:109: build/app/main.o] Error 1")
    assert "(in proj/app/main.cpp): app/main.cpp:1:14: error: exception handling" in str(_failure(log, Path("proj"), ""))


def test_a_long_error_line_is_shown_whole():
    name = "tvmgen_" + "m" * 1000 + "_fused_add"
    log = f"model/a_lib1.c:3:5: error: '{name}' undeclared (first use in this function)\nmake: *** Error 1"
    assert f"'{name}' undeclared (first use in this function)" in str(_failure(log, Path("p"), ""))


def test_a_symbol_that_assembly_defines_in_the_models_file_is_the_models(tmp_path):
    mlf = tar_tree(TinyModel(behaviour="asm_table").files(), tmp_path / "asm.tar")
    out = tmp_path / "out"
    assert _mlfbuild("build", str(mlf), "-b", "host", "-o", str(out)).returncode == 0
    result = _mlfbuild("size", str(out), "--json")
    assert result.returncode == 0, result.stderr
    import json

    symbols = json.loads(result.stdout)["symbols"]
    table = next(s for s in symbols if s["name"] == "tiny_asm_table")
    assert table["category"] == "model" and table["flash"] + table["ram"] == 256


@pytest.mark.parametrize("name", ["a`b", "``", "x|y", "`start", "end`", "a\nb", "<b>*x*</b>"])
def test_markdown_names_stay_inside_their_cell(name):
    row = f"| 1 | {md_code(name)} | {md_text(name)} |"
    assert "\n" not in row
    unescaped_pipes = [i for i, c in enumerate(row) if c == "|" and (i == 0 or row[i - 1] != "\\")]
    assert len(unescaped_pipes) == 4
    code = md_code(name)
    fence = len(code) - len(code.lstrip("`"))
    assert "`" * fence not in code[fence:-fence]  # the span cannot close early
    assert "<b>" not in md_text(name) and "*x*" not in md_text(name)


def test_the_compilers_memory_limit_stays_under_a_hard_limit_already_set():
    # Under a hard limit lower than --build-memory (ulimit -v, a container), raising it would fail
    # every compiler start; the limit is the lower of the two.
    probe = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    code = ("import resource, sys\nfrom mlfbuild.toolchain import run_compiler\n"
            "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
            f"for memory in (8 << 30, 256 << 20): print(run_compiler([sys.executable, '-c', {probe!r}], "
            "memory=memory).stdout.strip())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(3 << 30), str(256 << 20)]


def test_a_full_disk_while_compiling_is_the_machines_fault_not_the_models(tiny, tmp_path):
    # The file-size limit stops the compiler as a full disk (or a full TMPDIR) stops its writes.
    result = _mlfbuild("build", str(tiny[0]), "-b", "host", "-o", str(tmp_path / "out"), limit_file_bytes=40_000)
    line = _one_line(result, 9, "the disk refused a file while compiling", "File size limit exceeded",
                     f"temporary files go to {tempfile.gettempdir()}")
    assert "compilation failed" not in line


@pytest.mark.parametrize("said", ["cc1: error writing to /tmp/ccQx.s: No space left on device",
                                  "Fatal error: can't close build/src/models.o: Disk quota exceeded"])
def test_the_compilers_word_for_a_full_disk_is_a_storage_error(said):
    from mlfbuild.errors import StorageError

    log = f"CC   src/models.c\n{said}\nmake: *** [Makefile:93: build/src/models.o] Error 1"
    error = _failure(log, Path("proj"), "")
    assert type(error) is StorageError and said in str(error) and "proj/src/models.c" in str(error)


@pytest.mark.parametrize("read_only, code", [(True, 9), (False, 2)], ids=["read-only-file-system", "no-permission"])
def test_an_output_folder_that_cannot_be_written_follows_the_one_rule(tmp_path, monkeypatch, read_only, code):
    # What the kernel answers for a folder on a read-only mount, or one whose mode forbids writing.
    from mlfbuild import outfolder

    folder = tmp_path / "out"
    folder.mkdir()
    flags = os.ST_RDONLY if read_only else 0
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: type("V", (), {"f_flag": flags})())
    with pytest.raises(MlfError) as caught:
        outfolder.prepare(folder)
    assert caught.value.exit_code == code and "the output folder is not writable" in str(caught.value)
    assert ("Read-only file system" if read_only else "Permission denied") in str(caught.value)
