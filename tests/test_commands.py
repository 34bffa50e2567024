"""The command list, each command's exit codes, and the README's command table agree with the
program: every command line the table quotes runs with --help, and the codes it lists are the
codes the command's --help states."""

from __future__ import annotations

import keyword

import re
import subprocess
import sys

import pytest

from mlfbuild.commands import COMMANDS, Command
from conftest import REPO, cli

EXPECTED = ["import", "inspect", "boards", "build", "run", "reference", "size", "export", "flash", "monitor", "matrix",
            "ports", "example"]


def _readme_rows() -> list[tuple[str, str]]:
    """(command line, exit-code column) of every row of the README's command table."""
    rows = []
    for line in (REPO / "README.md").read_text().splitlines():
        match = re.match(r"^\| `(mlfbuild [^`]+)` \|.*\| ([0-9, –-]+) \|$", line)
        if match:
            rows.append((match.group(1).replace("\\|", "|"), match.group(2)))
    return rows


def _codes(text: str) -> set[int]:
    codes: set[int] = set()
    for first, last in re.findall(r"(\d+)(?:[–-](\d+))?", text):
        codes.update(range(int(first), int(last or first) + 1))
    return codes


def _help(name: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfbuild", name, "--help"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def test_the_command_list():
    assert [c.name for c in COMMANDS] == EXPECTED
    for command in COMMANDS:
        assert isinstance(command, Command) and command.help
        module = command.name + ("_" if keyword.iskeyword(command.name) else "")  # `import` is a keyword
        assert (REPO / "mlfbuild" / "commands" / f"{module}.py").is_file(), command.name


def test_the_readme_table_has_a_row_per_command():
    assert [line.split()[1] for line, _ in _readme_rows()] == EXPECTED


@pytest.mark.parametrize("line, codes", _readme_rows(), ids=lambda v: v.split()[1] if v.startswith("mlfbuild") else "")
def test_each_readme_command_runs_with_help_and_lists_the_codes_its_help_states(line, codes):
    name = line.split()[1]
    result = _help(name)
    assert result.returncode == 0, result.stderr
    assert f"usage: mlfbuild {name}" in result.stdout
    stated = result.stdout.split("exit codes:", 1)[1]
    assert _codes(codes) == _codes(re.sub(r"\([^)]*\)", "", stated)), (codes, stated)


def test_every_usage_error_is_exit_2():
    for name in EXPECTED:
        result = subprocess.run([sys.executable, "-m", "mlfbuild", name, "--no-such-flag"], capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        assert result.returncode == 2, (name, result.stderr)
        assert "Traceback" not in result.stderr


def test_inspect_shows_numbers_with_separators_and_says_what_tvms_io_figure_is(fixtures_dir):
    """`io 161722 B` read as the firmware's I/O; it is TVM's AOT figure (inputs and outputs are 502 B)."""
    done = cli("inspect", str(fixtures_dir / "tvm-0.18" / "kws_aot_c_unpacked_usmp.tar"))
    assert done.returncode == 0, done.stderr
    assert ("memory device 1: workspace 104,192 B, constants 53,296 B, io 161,722 B (TVM's figure; the inputs "
            "and outputs are 502 B)") in done.stdout


def test_every_help_example_runs_mlfbuild_in_each_of_its_commands():
    """`size build/kws --json > base.json && size build/kws --diff base.json` ran binutils' size second."""
    from mlfbuild.cliargs import GUIDE

    for command, (examples, _) in GUIDE.items():
        for example in examples:
            later = [part.strip() for part in example.split("&&")[1:]]
            assert all(part.startswith("mlfbuild ") for part in later), (command, example)
