"""The wheel carries its data folders and works from a fresh virtual environment; the set-up
script, the Dockerfile and the README agree on the Debian packages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import REPO



@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(REPO)], check=True)
    (path,) = out.glob("mlfbuild-*.whl")
    return path


def test_wheel_carries_templates_boards_and_crt(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("mlfbuild/_data/templates/project/src/main.c", "mlfbuild/_data/templates/linker.ld.j2",
                     "mlfbuild/_data/boards/mps2-an386.toml", "mlfbuild/_data/crt/include/mlfrt.h",
                     "mlfbuild/_data/crt/src/backend.c", "mlfbuild/cli.py"):
        assert required in names
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_installs_and_builds_in_a_fresh_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = env_dir / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", "--disable-pip-version-check", str(wheel)], check=True)
    cli = env_dir / "bin" / "mlfbuild"
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    boards = subprocess.run([str(cli), "boards"], capture_output=True, text=True, cwd=tmp_path, env=clean_env)
    assert boards.returncode == 0 and "mps2-an386" in boards.stdout
    # The quick start from the wheel alone: the example comes out of the installed package.
    assert subprocess.run([str(cli), "example", "ex"], cwd=tmp_path, env=clean_env).returncode == 0
    built = subprocess.run([str(cli), "build", "ex/tiny_aot.tar", "--board", "host", "-o", str(tmp_path / "out")],
                           capture_output=True, text=True, cwd=tmp_path, env=clean_env)
    assert built.returncode == 0, built.stderr
    assert str(REPO) not in (tmp_path / "out" / "project" / "Makefile").read_text()
    ran = subprocess.run([str(cli), "run", "out", "--reference", "ex/tiny_aot.npz"], capture_output=True, text=True,
                         cwd=tmp_path, env=clean_env)
    assert ran.returncode == 0 and "result: pass" in ran.stdout, ran.stderr
    # An installed wheel has no scripts/setup.sh: its hints do not send the user there.
    no_cross = subprocess.run([str(cli), "build", "ex/tiny_aot.tar", "-o", "cross"], capture_output=True, text=True,
                              cwd=tmp_path, env=clean_env | {"PATH": str(env_dir / "bin")})
    assert no_cross.returncode == 4 and "gcc-arm-none-eabi" in no_cross.stderr, no_cross.stderr
    assert "setup.sh" not in no_cross.stderr


def _package_list(name: str = "apt-packages.txt") -> list[str]:
    text = (REPO / "docker" / name).read_text()
    return [word for line in text.splitlines() for word in line.split("#")[0].split()]


def test_one_package_list_for_setup_and_docker():
    packages = _package_list() + _package_list("apt-packages-test.txt")
    assert {"gcc-arm-none-eabi", "libnewlib-arm-none-eabi", "qemu-system-arm", "chromium"} <= set(packages)
    setup = (REPO / "scripts" / "setup.sh").read_text()
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert "docker/apt-packages.txt" in setup and "docker/apt-packages-test.txt" in setup
    assert "apt-packages.txt" in dockerfile
    for text in (setup, dockerfile):  # neither file keeps a second copy of the list
        for line in text.splitlines():
            if "apt-get install" in line or "xargs" in line:
                assert not set(re.findall(r"[\w.+-]+", line)) & set(packages), line


def test_readme_documents_the_two_commands_and_ci_uses_them():
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/quickstart.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    docker_build = re.search(r"docker build[^\n]*", (REPO / "docker" / "Dockerfile").read_text()).group(0)
    assert docker_build in readme


def test_docker_context_leaves_out_what_git_ignores_and_git_itself():
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert ".git" in ignored
    for pattern in (REPO / ".gitignore").read_text().split():
        name = pattern.strip("/")
        assert name in ignored or f"**/{name}" in ignored, pattern
