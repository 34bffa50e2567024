"""`run --reference host`: the firmware against its own MLF compiled for the host — the same sources
and plan, no TVM, no LiteRT — exactly, on as many samples as asked, for every executor kind and for
CMSIS-NN on the DSP and MVE cores (the library's generic C on the host)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, THIRD_PARTY_ENV, cli, required_folder
from mlfwriter import TinyModel

BOARD = "mps2-an386"


def _own_copy(build: Path, tmp_path: Path) -> Path:
    """A run against the host twin builds it inside the build folder (host-twin/): on a copy, so the
    build that other tests (and other pytest-xdist workers) read at the same time stays as built."""
    return shutil.copytree(build, tmp_path / build.name)


@pytest.mark.qemu
def test_the_firmware_matches_its_host_twin_on_many_samples(build_firmware, tmp_path):
    out = _own_copy(build_firmware(REPO / "examples" / "tiny_aot.tar", BOARD), tmp_path)
    done = cli("run", str(out), "--reference", "host", "--samples", "100")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference: host (the same MLF compiled for the host" in done.stdout
    assert "100/100 exact, max |diff| 0 LSB" in done.stdout
    assert json.loads((out / "host-twin" / "build.json").read_text())["board"]["name"] == "host"


@pytest.mark.qemu
def test_a_firmware_whose_model_was_damaged_after_the_mlf_fails_against_its_twin(build_firmware, tmp_path):
    """One weight changed in the firmware's copy of the model: the MLF is intact, so its host twin
    computes what the model should, and the run fails — with no tolerance, whatever was asked."""
    built = build_firmware(REPO / "examples" / "tiny_aot.tar", BOARD)
    out = tmp_path / "damaged"
    out.mkdir()
    for name in ("build.json", "firmware.elf"):
        (out / name).write_bytes((built / name).read_bytes())
    (out / "mlf").symlink_to(built / "mlf", target_is_directory=True)
    elf = bytearray((out / "firmware.elf").read_bytes())
    weights = TinyModel().w1.tobytes()
    at = elf.find(weights)
    assert at > 0 and elf.find(weights, at + 1) < 0
    elf[at] ^= 0x40
    (out / "firmware.elf").write_bytes(bytes(elf))
    done = cli("run", str(out), "--reference", "host", "--samples", "100", "--atol", "100")
    assert done.returncode == 7, done.stdout + done.stderr
    assert "rule: exact" in done.stdout and "MISMATCH" in done.stdout


@pytest.mark.qemu
@pytest.mark.parametrize("name", ["tvm-0.18/kws_graph_c", "tvm-0.18/kws_aot_packed", "tvm-0.13/kws_aot_c_unpacked_nousmp"])
def test_every_executor_kind_matches_its_host_twin(fixtures_dir, build_firmware, name, tmp_path):
    out = _own_copy(build_firmware(fixtures_dir / f"{name}.tar", BOARD), tmp_path)
    done = cli("run", str(out), "--reference", "host", "--samples", "3")
    assert done.returncode == 0 and "3/3 exact" in done.stdout, done.stdout + done.stderr


@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_cmsis_nn_firmware_matches_its_host_twin_exactly(fixtures_dir, third_party_dir, build_firmware, board, tmp_path):
    """DSP (M4F) and MVE (M55) paths against the library's generic C on the host: bit-exact on kws,
    whose first layer (TVM's depthwise call, kept on the host) runs as a convolution on both cores."""
    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)
    out = _own_copy(build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", board, cmsis_nn=tree), tmp_path)
    record = json.loads((out / "build.json").read_text())
    replaced = [p for p in record["cmsis_nn"]["scratch"]["prepared"] if p["kind"] == "replacement"]
    assert [(p["function"], p["kernel"], p["replacement"]) for p in replaced] == \
        [("tvmgen_kws_cmsis_nn_main_0", "arm_depthwise_conv_wrapper_s8", "arm_convolve_wrapper_s8")]
    assert any("arm_depthwise_conv_wrapper_s8 -> arm_convolve_wrapper_s8" in note for note in record["notes"])
    done = cli("run", str(out), "--reference", "host", "--samples", "5")
    assert done.returncode == 0 and "5/5 exact, max |diff| 0 LSB" in done.stdout, done.stdout + done.stderr
