"""Every shell command in README.md and docs/export.md, copied as written, runs in a fresh folder.

Each ```sh block runs line by line through bash in a folder of its own, in order, with the files the
docs name staged there from the shared fixtures (kws.tar, model.tar, kws.npz, vww.tar, jobs.json,
../shared/...) and `app/` written from docs/export.md's own C and CMake blocks, as a reader of that
page would write it. Not run here, and listed so that a new command cannot slip by unrun:
scripts/quickstart.sh and scripts/test.sh (.ci/run runs both), `pip install mlfbuild-*.whl`
(tests/test_newcomer.py builds the wheel) and the docker lines (tests/test_docker_image.py,
-m exhaustive)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.cross, pytest.mark.qemu]

RUN_ELSEWHERE = ("bash scripts/quickstart.sh", "bash scripts/test.sh", "pip install mlfbuild-", "docker build ",
                 "docker run ")
# What the docs call their inputs, per page: (fixture set, file) or text.
README_FILES = {"kws.tar": ("tvm-0.13", "kws_aot_c_unpacked_usmp.tar"), "model.tar": ("tvm-0.13", "kws_aot_c_unpacked_usmp.tar"),
                "kws.npz": ("tvm-0.13", "kws.npz"),
                "jobs.json": json.dumps([{"mlf": "kws.tar", "references": ["kws=kws.npz"], "samples": 1}])}
# docs/export.md renames two modules TVM named `default`.
EXPORT_FILES = {"kws.tar": ("tvm-0.13", "kws_aot_c_unpacked_nousmp.tar"), "vww.tar": ("tvm-0.13", "kws_graph_c.tar")}


def _blocks(doc: str, language: str = "sh") -> list[tuple[int, list[str]]]:
    text = (REPO / doc).read_text()
    return [(text[:m.start()].count("\n") + 1, [line for line in m.group(1).splitlines() if line.strip()])
            for m in re.finditer(rf"```{language}\n(.*?)```", text, re.S)]


def _shell_blocks() -> list[tuple[str, int, list[str]]]:
    return [(doc, line, lines) for doc in ("README.md", "docs/export.md") for line, lines in _blocks(doc)]


def test_every_command_not_run_here_is_one_the_module_names():
    skipped = [c for _, _, lines in _shell_blocks() for c in lines if c.startswith(RUN_ELSEWHERE)]
    assert len(skipped) == len(RUN_ELSEWHERE), skipped


def _app_from_export_md(app: Path) -> None:
    """app/main.c and app/CMakeLists.txt from docs/export.md's C interface and CMake blocks."""
    (c_block,) = [lines for _, lines in _blocks("docs/export.md", "c") if any("tvmgen_kws_run" in l for l in lines)]
    split = next(i for i, line in enumerate(c_block) if line.startswith("struct tvmgen_"))
    main = [*c_block[:split], "int main(void) {", *c_block[split:], "  return (int)status;", "}"]
    (cmake_block,) = [lines for _, lines in _blocks("docs/export.md", "cmake")]
    app.mkdir()
    (app / "main.c").write_text("\n".join(main) + "\n")
    (app / "CMakeLists.txt").write_text("\n".join(cmake_block) + "\n")


def _stage(root: Path, files: dict, fixtures_dir: Path, models_dir: Path, third_party_dir: Path) -> Path:
    shared = root / "shared"
    shared.mkdir()
    for name, target in (("models", models_dir), ("third_party", third_party_dir), ("fixtures", fixtures_dir)):
        (shared / name).symlink_to(target.resolve())
    work = root / "work"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix))
    for name, source in files.items():
        if isinstance(source, tuple):
            shutil.copy(fixtures_dir / source[0] / source[1], work / name)
        else:
            (work / name).write_text(source)
    _app_from_export_md(work / "app")
    return work


@pytest.mark.parametrize("doc, line, lines", _shell_blocks(), ids=[f"{d}:{n}" for d, n, _ in _shell_blocks()])
def test_the_docs_commands_run_as_written(doc, line, lines, fixtures_dir, models_dir, third_party_dir, tmp_path):
    commands = [c for c in lines if not c.startswith(RUN_ELSEWHERE)]
    if not commands:
        return  # a block of commands run elsewhere (the module docstring says where)
    files = EXPORT_FILES if doc == "docs/export.md" else README_FILES
    work = _stage(tmp_path, files, fixtures_dir, models_dir, third_party_dir)
    env = dict(os.environ, PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=900)
        assert done.returncode == 0, f"{doc}:{line}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
