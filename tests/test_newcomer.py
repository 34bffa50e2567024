"""What a new user meets first: flags as other tools spell them (-b BOARD, --opt -O2, board aliases),
"did you mean", messages that say what is wrong and nothing misleading, help pages with examples,
JSON with a schema name, colour only on a terminal, progress counts, the project file, the bundled
example, and a README whose commands exist."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mlfbuild import cli
from mlfbuild.boards import list_boards, load_board, load_board_file
from mlfbuild.errors import BoardError, InvalidInputError, RunError
from mlfbuild.run import ModelRun, RunResult, run_build
from mlfbuild.console.client import Client
from mlfbuild.run.report import format_run, model_properties
from conftest import REPO, cli as run_mlfbuild

EXAMPLE = REPO / "examples" / "tiny_aot.tar"
EXAMPLE_REFERENCE = REPO / "examples" / "tiny_aot.npz"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _cli(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_mlfbuild(*args, cwd=cwd, env=env or ENV, stdin=subprocess.DEVNULL, timeout=600)




@pytest.fixture(scope="module")
def host_build(tmp_path_factory) -> Path:
    """The example built for the host with `-b host --opt -O2`: both spellings under test at once."""
    out = tmp_path_factory.mktemp("host") / "build"
    result = _cli("build", str(EXAMPLE), "-b", "host", "--opt", "-O2", "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


# --- flags as other tools spell them -------------------------------------------------------------

def test_opt_and_board_take_their_values_as_separate_words(host_build):
    record = json.loads((host_build / "build.json").read_text())
    assert record["board"]["name"] == "host"
    assert "-O2" in record["flags"]["cflags"]


def test_build_progress_counts_the_files_it_compiles(tmp_path):
    out = tmp_path / "b"
    first = _cli("build", str(EXAMPLE), "-b", "host", "-o", str(out))
    counts = re.findall(r"\[(\d+)/(\d+)\] CC ", first.stderr)
    assert counts and counts[-1][0] == counts[-1][1] == str(len(counts)), first.stderr
    (out / "project" / "src" / "main.c").touch()
    again = _cli("build", str(EXAMPLE), "-b", "host", "-o", str(out))
    assert re.findall(r"\[(\d+)/(\d+)\] CC +(\S+)", again.stderr) == [("1", "1", "src/main.c")], again.stderr


def test_flash_and_monitor_take_the_baud_rate_as_baud_only(tmp_path):
    for command in (["flash", str(tmp_path)], ["monitor"]):
        result = _cli(*command, "-b", "9600")
        assert result.returncode == 2 and "unrecognized arguments: -b" in result.stderr, result.stderr


def test_board_aliases_name_the_same_boards():
    assert load_board("nucleo_f446re").name == "nucleo-f446re"
    assert load_board("qemu_cortex_m3").name == "lm3s6965evb"
    assert load_board("mps2_an386").name == load_board("mps2/an386").name == "mps2-an386"
    assert load_board("disco_f407vg").name == "stm32f4-discovery"


def test_aliases_are_unique_and_never_another_board_s_name():
    boards = list_boards()
    names = {b.name for b in boards}
    aliases = [a for b in boards for a in b.aliases]
    assert len(aliases) == len(set(aliases)) and not set(aliases) & names


def test_aliases_in_a_user_board_file(tmp_path):
    text = (REPO / "boards" / "mps2-an385.toml").read_text().replace('"mps2-an385"', '"mine"', 1)
    (tmp_path / "mine.toml").write_text(re.sub(r"(?m)^aliases = .*$", 'aliases = ["my_board"]', text))
    assert load_board("my_board", [tmp_path / "mine.toml"]).name == "mine"
    (tmp_path / "mine.toml").write_text(re.sub(r"(?m)^aliases = .*$", 'aliases = ["My Board"]', text))
    with pytest.raises(BoardError, match=r"mine.toml: aliases: 'My Board'"):
        load_board_file(tmp_path / "mine.toml")


def test_boards_lists_the_aliases(capsys):
    assert cli.main(["boards"]) == 0
    assert re.search(r"lm3s6965evb .*\(also: qemu_cortex_m3\)", capsys.readouterr().out)


@pytest.mark.cross
def test_an_alias_builds_into_the_folder_of_the_board_s_name(tmp_path):
    result = _cli("build", str(EXAMPLE), "-b", "qemu_cortex_m3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build" / "tiny_aot-lm3s6965evb" / "firmware.elf").is_file()


# --- did you mean ---------------------------------------------------------------------------------

def test_unknown_board_suggests_the_closest(capsys):
    assert cli.main(["build", str(EXAMPLE), "-b", "mps2-an368"]) == 3
    assert "unknown board 'mps2-an368' (did you mean 'mps2-an386'?)" in capsys.readouterr().err


def test_mistyped_flag_and_command_get_a_suggestion(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "x", "--refrence", "r.npz"])
    assert exit_.value.code == 2
    assert "did you mean '--reference'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["biuld", "x"])
    assert "did you mean 'build'?" in capsys.readouterr().err


# --- messages -------------------------------------------------------------------------------------

def test_run_on_a_folder_that_is_neither_build_nor_mlf(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert cli.main(["run", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{tmp_path}: neither a build folder (no build.json) nor an unpacked MLF (no metadata.json)" in err


def test_run_of_an_mlf_names_the_mlf_not_a_deleted_temporary_folder():
    result = _cli("run", str(EXAMPLE), "-b", "host", "--reference", str(EXAMPLE_REFERENCE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ran {EXAMPLE} on host")
    assert "mlfbuild-run-" not in result.stdout + result.stderr


def test_a_failed_build_inside_run_names_no_deleted_folder(tmp_path):
    from mlfwriter import TinyModel, tar_tree

    files = TinyModel().files()
    files["codegen/host/src/tiny_lib1.c"] += b"\nthis is not C;\n"
    result = _cli("run", str(tar_tree(files, tmp_path / "broken.tar")), "-b", "host")
    assert result.returncode == 4
    line = result.stderr.strip().splitlines()[-1]
    assert "mlfbuild-run-" not in line and "<temporary build folder>" in line and "-o DIR" in line


def test_measured_latency_in_ms_and_inferences_per_second():
    model = ModelRun(name="kws", ticks=[25_000], timer_hz=25_000_000, workspace_peak=1024, stack_peak=None,
                     outputs={})
    text = format_run(RunResult(target="b", board="host", models=[model], exit_code=0, seconds=0.1))
    assert "kws: 1.00 ms per inference, 1,000 inferences/s (25,000 ticks at 25,000,000 Hz" in text
    assert "stack peak not measured" in text
    assert model.to_json()["latency_ms"] == 1.0 and model.to_json()["stack_peak"] is None


def test_qemu_time_leads_with_instructions_and_is_called_qemu_s():
    """Under -icount one instruction takes one virtual nanosecond: 585,120 ticks at 25 MHz are 23.4 ms of
    QEMU's clock, which a 25 MHz Cortex-M4 would take about a second for. Instructions lead."""
    model = ModelRun(name="kws", ticks=[585_120], timer_hz=25_000_000, workspace_peak=1024, stack_peak=512,
                     outputs={}, icount_shift=0)
    text = format_run(RunResult(target="b", board="mps2-an386", models=[model], exit_code=0, seconds=0.1))
    assert ("kws: 23,404,800 instructions per inference in QEMU (585,120 ticks at 25,000,000 Hz; 1 run(s), "
            "identical: 23.4 ms of QEMU's -icount clock, not the speed of any chip)") in text
    assert "ms per inference" not in text and "inferences/s" not in text
    document = model.to_json()
    assert document["clock"] == "qemu-icount" and document["qemu_instructions"] == 23_404_800
    assert document["latency_ms"] == pytest.approx(23.4048)   # kept, documented as QEMU's virtual time
    assert model_properties(model)["clock"] == "qemu-icount" and model_properties(model)["instructions"] == 23_404_800
    shifted = ModelRun(name="kws", ticks=[585_120], timer_hz=25_000_000, workspace_peak=0, stack_peak=0,
                       outputs={}, icount_shift=2)   # one instruction per 4 ns
    assert shifted.qemu_instructions == 5_851_200
    quick = ModelRun(name="kws", ticks=[0], timer_hz=25_000_000, workspace_peak=0, stack_peak=0, outputs={},
                     icount_shift=0)
    assert "under one timer tick (fewer than 40 instructions) per inference in QEMU" in \
        format_run(RunResult(target="b", board="mps2-an386", models=[quick], exit_code=0, seconds=0.1))
    host = ModelRun(name="kws", ticks=[25_000], timer_hz=25_000_000, workspace_peak=0, stack_peak=None, outputs={})
    assert host.to_json()["clock"] == "timer" and host.to_json()["qemu_instructions"] is None
    assert "instructions" not in model_properties(host) and model_properties(host)["clock"] == "timer"


@pytest.mark.qemu
@pytest.mark.cross
def test_a_qemu_run_says_its_time_is_qemu_s(build_firmware, tmp_path):
    out = build_firmware(EXAMPLE, "mps2-an386")
    junit = tmp_path / "run.xml"
    result = _cli("run", str(out), "--reference", str(EXAMPLE_REFERENCE), "--junit", str(junit))
    assert result.returncode == 0, result.stderr
    assert re.search(r"tiny: [\d,]+ instructions per inference in QEMU \([\d,]+ ticks at 25,000,000 Hz; 1 run\(s\), "
                     r"identical: [\d.,]+ ms of QEMU's -icount clock, not the speed of any chip\)", result.stdout), \
        result.stdout
    model = json.loads((out / "run.json").read_text())["models"][0]
    assert model["clock"] == "qemu-icount" and model["qemu_instructions"] == round(model["ticks"][-1] * 40)
    from xml.etree import ElementTree
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(junit).getroot().iter("property")}
    assert properties["clock"] == "qemu-icount" and int(properties["instructions"]) == model["qemu_instructions"]


def test_host_run_says_the_stack_was_not_measured(host_build):
    result = _cli("run", str(host_build), "--reference", str(EXAMPLE_REFERENCE))
    assert result.returncode == 0, result.stderr
    assert "stack peak not measured" in result.stdout and "stack peak 0 B" not in result.stdout
    assert re.search(r"tiny: [\d.,]+ ms per inference, [\d,.]+ inferences/s", result.stdout), result.stdout
    assert "stack_peak" not in json.loads((host_build / "run.json").read_text())["models"][0] or \
        json.loads((host_build / "run.json").read_text())["models"][0]["stack_peak"] is None


def test_a_reference_for_a_model_that_does_not_exist(host_build, capsys):
    assert cli.main(["run", str(host_build), "--reference", f"tinny={EXAMPLE_REFERENCE}"]) == 3
    err = capsys.readouterr().err
    assert f"--reference tinny={EXAMPLE_REFERENCE}: this firmware has no model 'tinny' (did you mean 'tiny'?)" in err
    assert "MODEL=PATH" not in err  # the syntax was right


def test_a_reference_whose_header_declares_2_to_the_40_elements_is_invalid_input(host_build, tmp_path, capsys):
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|i1", "fortran_order": False, "shape": (1 << 40,)})
    reference = tmp_path / "huge.npz"
    with zipfile.ZipFile(reference, "w") as archive:
        archive.writestr("input.npy", header.getvalue() + bytes(16))
        archive.writestr("output_0.npy", header.getvalue() + bytes(16))
    assert cli.main(["run", str(host_build), "--reference", str(reference)]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "input.npy: its header declares 1,099,511,627,776 elements" in err, err


@pytest.mark.parametrize("content", [b"a,b\n1,2\n", b"", None])
def test_a_reference_that_is_not_numpy_is_one_plain_line(tmp_path, content, capsys):
    from mlfbuild.run.tensorfile import load_tensors

    path = tmp_path / "ref.npz"
    if content is None:  # a real .npy of Python objects
        path = tmp_path / "ref.npy"
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    else:
        path.write_bytes(content)
    with pytest.raises(InvalidInputError) as error:
        load_tensors(path)
    message = str(error.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert "pickle" not in message.lower()


def test_toolchain_hint_names_the_missing_tool_for_any_prefix(tmp_path, capsys):
    assert cli.main(["build", str(EXAMPLE), "--toolchain-prefix", "riscv64-unknown-elf-", "-o", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert "'riscv64-unknown-elf-gcc' not found" in err and "--toolchain-prefix 'riscv64-unknown-elf-'" in err
    assert "install gcc" not in err


def test_setup_script_hint_only_in_a_checkout(monkeypatch, tmp_path):
    from mlfbuild import resources
    from mlfbuild.toolchain import find_tools

    with pytest.raises(Exception, match=r"scripts/setup.sh"):
        find_tools(["no-such-tool-gcc"], "arm-none-eabi-")
    monkeypatch.setattr(resources, "_PACKAGE_DIR", tmp_path / "site-packages" / "mlfbuild")
    with pytest.raises(Exception) as error:
        find_tools(["no-such-tool-gcc"], "arm-none-eabi-")
    assert "setup.sh" not in str(error.value) and "gcc-arm-none-eabi" in str(error.value)


class _Silent:
    def read(self, size: int = 1) -> bytes:
        return b""

    def write(self, data: bytes) -> int:
        return len(data)


def test_a_timeout_names_the_request_in_words():
    with pytest.raises(RunError) as error:
        Client(_Silent(), timeout=0.3, attempt_seconds=0.1).request("R", b"", "o")
    assert "the reply to the output read request" in str(error.value) and "'R'" not in str(error.value)


# --- JSON documents -------------------------------------------------------------------------------

def test_every_json_output_names_its_schema(host_build, tmp_path, capsys):
    from mlfbuild import schemas

    assert cli.main(["inspect", str(EXAMPLE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == schemas.INSPECT == "mlfbuild-inspect/1"
    assert cli.main(["boards", "--json"]) == 0
    boards = json.loads(capsys.readouterr().out)
    assert boards["schema"] == "mlfbuild-boards/1" and "mps2-an386" in {b["name"] for b in boards["boards"]}
    assert cli.main(["run", str(host_build), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "mlfbuild-run/1"
    assert cli.main(["size", str(host_build), "--json"]) == 0
    base = tmp_path / "base.json"
    base.write_text(capsys.readouterr().out)
    assert json.loads(base.read_text())["schema"] == "mlfbuild-size/1"
    assert cli.main(["size", str(host_build), "--diff", str(base), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "mlfbuild-size-diff/1"


def test_docs_json_documents_every_schema():
    from mlfbuild import schemas

    doc = (REPO / "docs" / "json.md").read_text()
    names = [v for k, v in vars(schemas).items() if k.isupper()]
    assert len(names) == 8
    for name in names:
        assert f"`{name}`" in doc, name


# --- help pages -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [c.name for c in cli.COMMANDS])
def test_help_has_examples_that_parse_and_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "examples:\n  mlfbuild " in text and "exit codes: 0 " in text
    examples = re.findall(r"(?m)^  mlfbuild (.*)$", text.split("examples:")[1])
    assert examples
    parser = cli.build_parser()
    for example in examples:
        for part in re.split(r"\s*&&\s*mlfbuild\s+", example):
            argv = part.split(">")[0].split()
            assert cli.parse_arguments(parser, argv).command == argv[0]


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["build", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "cross compiler prefix (default: arm-none-eabi-)" in text
    assert "parallel compile jobs (default:" in text


# --- colour ---------------------------------------------------------------------------------------

def _stderr_through_a_terminal(args: list[str], env: dict) -> bytes:
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "mlfbuild", *args], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    out = b""
    try:
        while select.select([leader], [], [], 30)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        process.wait(timeout=30)
        os.close(leader)
    return out


def test_colour_on_a_terminal_unless_no_color(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "NO_COLOR"} | {"TERM": "xterm"}
    coloured = _stderr_through_a_terminal(["run", str(tmp_path / "missing")], env)
    assert b"\x1b[31merror:\x1b[0m" in coloured, coloured
    plain = _stderr_through_a_terminal(["run", str(tmp_path / "missing")], env | {"NO_COLOR": "1"})
    assert b"error:" in plain and b"\x1b[" not in plain
    piped = _cli("run", str(tmp_path / "missing"), env=env)
    assert "error:" in piped.stderr and "\x1b[" not in piped.stderr


# --- progress of long runs ------------------------------------------------------------------------

def test_run_reports_each_inference_and_the_cli_shows_a_count(host_build):
    from mlfbuild.cliargs import RepeatProgress

    calls = []
    run_build(host_build, repeat=3, progress=lambda *call: calls.append(call))
    assert calls == [("tiny", 1, 3), ("tiny", 2, 3), ("tiny", 3, 3)]

    class Terminal:
        text = ""

        def isatty(self):
            return True

        def write(self, text):
            self.text += text

        def flush(self):
            pass

    screen = Terminal()
    show = RepeatProgress(screen, interval=0.0)
    for done in (1, 2, 3):
        show("tiny", done, 3)
    assert screen.text == "\r  tiny: 1/3 inferences\r  tiny: 2/3 inferences\r  tiny: 3/3 inferences\n"
    quiet = Terminal()
    show = RepeatProgress(quiet, interval=60.0)  # a short run: nothing at all
    for done in (1, 2, 3):
        show("tiny", done, 3)
    assert quiet.text == ""


# --- the project file -----------------------------------------------------------------------------

def _project(folder: Path, text: str) -> None:
    (folder / "mlfbuild.toml").write_text(text)


def test_project_file_drives_build_run_and_size(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path, f'mlf = "{EXAMPLE}"\nboard = "host"\nopt = "-O1"\nreferences = ["{EXAMPLE_REFERENCE}"]\n'
                       '[budgets]\nflash = "1M"\n')
    assert cli.main(["build"]) == 0
    out = tmp_path / "build" / "tiny_aot-host"
    assert "-O1" in json.loads((out / "build.json").read_text())["flags"]["cflags"]
    capsys.readouterr()
    assert cli.main(["run", str(out)]) == 0
    assert "result: pass" in capsys.readouterr().out  # the file's reference was used
    assert cli.main(["size", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["flash"]["budget"] == 1 << 20
    assert cli.main(["build", "--opt", "-O3", "-o", "other"]) == 0  # a flag wins over the file
    assert "-O3" in json.loads((tmp_path / "other" / "build.json").read_text())["flags"]["cflags"]


def test_run_with_no_target_runs_the_projects_build_folder(tmp_path, monkeypatch, capsys):
    """`mlfbuild run` after `mlfbuild build`, both from mlfbuild.toml: it rebuilt into a temporary folder,
    so run.json (the stack peak, the profile) never reached the build folder `size` reads."""
    monkeypatch.chdir(tmp_path)
    _project(tmp_path, f'mlf = "{EXAMPLE}"\nboard = "host"\nreferences = ["{EXAMPLE_REFERENCE}"]\n')
    out = tmp_path / "build" / "tiny_aot-host"
    assert cli.main(["run"]) == 0  # no build yet: built where `mlfbuild build` would put it
    assert (out / "build.json").is_file() and (out / "run.json").is_file()
    elf = (out / "firmware.elf").stat().st_mtime_ns
    (out / "run.json").unlink()
    capsys.readouterr()
    assert cli.main(["run"]) == 0 and "result: pass" in capsys.readouterr().out
    assert (out / "run.json").is_file() and (out / "firmware.elf").stat().st_mtime_ns == elf  # run, not rebuilt


def test_project_file_budget_fails_the_build(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path, f'mlf = "{EXAMPLE}"\nboard = "host"\n[budgets]\nflash = 1024\n')
    assert cli.main(["build"]) == 5
    assert cli.main(["build", "--budget-flash", "1M"]) == 0


def test_project_file_mistakes_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path, 'borad = "host"\n')
    assert cli.main(["build", str(EXAMPLE)]) == 3
    err = capsys.readouterr().err
    assert "mlfbuild.toml: borad: unknown key (did you mean 'board'?)" in err and err.count("\n") == 1
    _project(tmp_path, 'opt = "-O9"\n')
    assert cli.main(["build", str(EXAMPLE)]) == 3
    assert "mlfbuild.toml: opt: must be one of" in capsys.readouterr().err
    _project(tmp_path, 'board = "host"\n')
    assert cli.main(["build"]) == 2
    assert "no MLF given" in capsys.readouterr().err


# --- the bundled example and the packages -------------------------------------------------------

def test_example_command_writes_the_bundled_example(tmp_path, capsys):
    assert cli.main(["example", str(tmp_path / "ex")]) == 0
    for name in ("tiny_aot.tar", "tiny_aot.npz"):
        assert (tmp_path / "ex" / name).read_bytes() == (REPO / "examples" / name).read_bytes()
    assert cli.main(["example", str(tmp_path / "ex")]) == 0  # the same files again: fine
    (tmp_path / "ex" / "tiny_aot.npz").write_bytes(b"mine")
    assert cli.main(["example", str(tmp_path / "ex")]) == 2
    assert (tmp_path / "ex" / "tiny_aot.npz").read_bytes() == b"mine"


@pytest.mark.parametrize("points_to", ["outside/made.tar", "outside/tiny_aot.tar"], ids=["dangling", "the-example"])
def test_example_never_writes_through_a_symbolic_link(tmp_path, capsys, points_to):
    folder, outside = tmp_path / "ex", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    if points_to.endswith("tiny_aot.tar"):
        (tmp_path / points_to).write_bytes((REPO / "examples" / "tiny_aot.tar").read_bytes())
    (folder / "tiny_aot.tar").symlink_to(tmp_path / points_to)
    before = sorted(p.name for p in outside.iterdir())
    assert cli.main(["example", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tiny_aot.tar: is a symbolic link" in err, err
    assert sorted(p.name for p in outside.iterdir()) == before and not (folder / "tiny_aot.npz").exists()


def test_the_wheel_carries_the_example(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(REPO)], check=True, timeout=300)
    (wheel,) = tmp_path.glob("mlfbuild-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"mlfbuild/_data/examples/tiny_aot.tar", "mlfbuild/_data/examples/tiny_aot.npz"} <= names


def test_stm32flash_is_a_test_only_package():
    def words(name):
        text = (REPO / "docker" / name).read_text()
        return [w for line in text.splitlines() for w in line.split("#")[0].split()]

    assert "stm32flash" not in words("apt-packages.txt")
    assert "stm32flash" in words("apt-packages-test.txt")


# --- the test command's note ---------------------------------------------------------------------

def test_skips_for_missing_fixtures_end_with_a_note(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "CI"} | {"MLFBUILD_FIXTURES": str(tmp_path / "none")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_build.py", "-k", "too_big_for_the_board"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("note: 1 test(s) skipped: the MLF fixtures are not at") and "$MLFBUILD_FIXTURES" in last


# --- the README's commands ------------------------------------------------------------------------

def _readme_command_lines() -> list[str]:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n\n", 2)[1]
    return [m.replace("\\|", "|") for m in re.findall(r"(?m)^\| `(mlfbuild [^`]+)`", table)]


def test_readme_command_table_lists_every_command():
    listed = {line.split()[1] for line in _readme_command_lines()}
    assert listed == {c.name for c in cli.COMMANDS}


@pytest.mark.parametrize("line", _readme_command_lines())
def test_every_readme_command_line_runs_with_help(line):
    words = line.split()
    result = _cli(words[1], "--help")
    assert result.returncode == 0, result.stderr
    for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", " ".join(words[2:])):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", result.stdout), (line, flag)
