"""The users' Docker image built by a real engine (`docker build`, `docker run`): at most half the
3.78 GB the image took while it carried C++ libraries for every application, and able to run
`run --reference MODEL.tflite` (LiteRT inside). A build downloads about 1.5 GB of Debian packages and
needs a Docker engine (and, where Docker Hub is out of reach, root for docker/debian-base.sh), so it
runs only with `-m exhaustive`; tests/test_packaging.py checks the Dockerfile in every CI run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.exhaustive, pytest.mark.cross, pytest.mark.qemu]

TAG = "mlfbuild:test"
IMAGE_BEFORE = 3_780_000_000  # bytes: the image with Debian's libstdc++ for newlib always in it
LOCAL_AUTHORITIES = Path("/usr/local/share/ca-certificates")  # certificates this machine's admin added


def _docker(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _base_image() -> str:
    """Debian's own slim image where the registry answers, else one made from a Debian mirror."""
    if _docker("image", "inspect", "debian:bookworm-slim").returncode == 0 or \
            _docker("pull", "debian:bookworm-slim", timeout=300).returncode == 0:
        return "debian:bookworm-slim"
    made = subprocess.run(["bash", str(REPO / "docker" / "debian-base.sh")], capture_output=True, text=True,
                          timeout=1800)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    info = _docker("info", timeout=60)
    if info.returncode != 0:
        pytest.fail(f"no Docker engine answers `docker info`: {info.stderr.strip()[:200]}")
    args = ["--build-arg", f"BASE={_base_image()}"]
    # A TLS-inspecting proxy's authority, as a user behind one passes it (the Dockerfile's CA_CERT_PEM).
    authorities = "".join(p.read_text() for p in sorted(LOCAL_AUTHORITIES.glob("*.crt")))
    if authorities:
        args += ["--build-arg", f"CA_CERT_PEM={authorities}"]
    built = _docker("build", "--network", "host", *args, "-f", str(REPO / "docker" / "Dockerfile"), "-t", TAG,
                    str(REPO))
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    return TAG


def test_the_image_is_at_most_half_the_size_it_was(image):
    size = int(_docker("image", "inspect", "-f", "{{.Size}}", image).stdout)
    assert size <= IMAGE_BEFORE // 2, f"{size:,} B"


def test_the_image_runs_an_imported_model_against_its_tflite_with_litert(image, models_dir, third_party_dir,
                                                                         tmp_path):
    tmp_path.chmod(0o777)
    model = "/shared/models/kws_ref_model.tflite"
    done = _docker("run", "--rm", "-v", f"{models_dir.resolve()}:/shared/models:ro",
                   "-v", f"{third_party_dir.resolve()}:/shared/third_party:ro", "-v", f"{tmp_path}:/work",
                   image, "run", model, "-b", "mps2-an386", "--cmsis-nn", "/shared/third_party/cmsis-nn-v6.0.0",
                   "--reference", model, "--samples", "3", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the original model, run with LiteRT" in done.stdout and "result: pass" in done.stdout


def test_the_image_builds_and_runs_the_bundled_example(image, tmp_path):
    tmp_path.chmod(0o777)
    for step in (["example", "ex"], ["build", "ex/tiny_aot.tar", "-b", "mps2-an386", "-o", "build/example"],
                 ["run", "build/example", "--reference", "ex/tiny_aot.npz"]):
        done = _docker("run", "--rm", "-v", f"{tmp_path}:/work", image, *step, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "result: pass" in done.stdout
