"""The wheel carries its data folders and works from a fresh virtual environment; the set-up
script, the Dockerfile and the README agree on the Debian packages."""

from __future__ import annotations

import os
import re
import shutil
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


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of docker/Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in (REPO / "docker" / "Dockerfile").read_text().splitlines()
                                           if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def _apt_step(tmp_path, **build_args) -> tuple[list[str], str]:
    """The image's apt RUN step run by sh with apt-get and update-ca-certificates recorded, not run:
    the packages it installs and the proxy configuration it writes (docker is not needed)."""
    run = next(args for kind, args in _dockerfile_instructions() if kind == "RUN" and "apt-get install" in args)
    for name in ("apt-packages.txt", "apt-packages-cxx.txt"):
        shutil.copy(REPO / "docker" / name, tmp_path / name)
    (tmp_path / "apt.conf.d").mkdir(exist_ok=True)
    (tmp_path / "ca").mkdir(exist_ok=True)
    script = (run.replace("/tmp/", f"{tmp_path}/").replace("/etc/apt/apt.conf.d/", f"{tmp_path}/apt.conf.d/")
              .replace("/usr/local/share/ca-certificates/", f"{tmp_path}/ca/").replace("/var/lib/apt/lists/*", ""))
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for tool in ("apt-get", "update-ca-certificates"):
        (stubs / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls\n')
        (stubs / tool).chmod(0o755)
    proxy = tmp_path / "proxy-seen"
    script = script.replace(" && rm -rf", f" && cat {tmp_path}/apt.conf.d/* > {proxy} 2>/dev/null || true; rm -rf")
    env = {"PATH": f"{stubs}:/usr/bin:/bin", **build_args}
    done = subprocess.run(["sh", "-ec", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    (tmp_path / "calls").unlink()
    install = next(c for c in calls if c.startswith("apt-get install")).split()[2:]
    return install + [c for c in calls if c.startswith("update-ca")], proxy.read_text() if proxy.exists() else ""


def test_the_docker_image_is_lean_by_default_with_options_for_cxx_proxies_and_authorities(tmp_path):
    """The image was 3.78 GB, 1.57 GB of it libstdc++ for newlib that only C++ applications need, had
    no LiteRT for `run --reference MODEL.tflite`, and no way through a proxy. Checked without a Docker
    engine: the Dockerfile is parsed and its apt step run with the package tools recorded."""
    instructions = _dockerfile_instructions()
    args = {a.split("=")[0] for kind, a in instructions if kind == "ARG"}
    assert {"CXX", "APT_PROXY", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "CA_CERT_PEM"} <= args
    assert "libstdc++-arm-none-eabi-newlib" not in _package_list()
    assert "libstdc++-arm-none-eabi-newlib" in _package_list("apt-packages-cxx.txt")
    assert "docker/apt-packages-cxx.txt" in (REPO / "scripts" / "setup.sh").read_text()  # a dev machine has C++
    pip = next(a for kind, a in instructions if kind == "RUN" and "pip install" in a)
    assert '"/opt/mlfbuild[reference]"' in pip
    assert not any(kind == "ENV" and ("PROXY" in a or "INDEX" in a) for kind, a in instructions)  # not kept

    lean, proxy = _apt_step(tmp_path)
    assert "gcc-arm-none-eabi" in lean and "qemu-system-arm" in lean and "python3-venv" in lean
    assert "libstdc++-arm-none-eabi-newlib" not in lean and "g++" not in lean and not proxy
    assert not any(c.startswith("update-ca") for c in lean)
    cxx, _ = _apt_step(tmp_path, CXX="1")
    assert set(cxx) - set(lean) == {"libstdc++-arm-none-eabi-newlib", "g++"}
    behind, proxy = _apt_step(tmp_path, APT_PROXY="http://proxy.example:3128",
                              CA_CERT_PEM="-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")
    assert proxy.strip() == 'Acquire::http::Proxy "http://proxy.example:3128";'
    assert "update-ca-certificates" in behind[-1]
    assert "BEGIN CERTIFICATE" in (tmp_path / "ca" / "extra-ca.crt").read_text()


def test_the_base_image_can_come_from_a_debian_mirror():
    """Where Docker Hub is out of reach: docker/debian-base.sh makes the base and BASE takes it (the
    build itself runs in tests/test_docker_image.py, -m exhaustive)."""
    instructions = _dockerfile_instructions()
    assert instructions[0] == ("ARG", "BASE=debian:bookworm-slim") and instructions[1] == ("FROM", "${BASE}")
    script = REPO / "docker" / "debian-base.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "--variant=minbase bookworm" in script.read_text()
    assert "docker/debian-base.sh" in (REPO / "README.md").read_text()
