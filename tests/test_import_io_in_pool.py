"""`mlfbuild import --memory min` plans the model's inputs and outputs inside its workspace pool (TVM's
use_workspace_io): tvmgen_<mod>_map_inputs/_map_outputs give their bytes, run copies an application's
own buffers in and out, and the firmware, `run`, `export` and `size` hold no io buffers of their own.
`--memory floor` keeps them the application's."""

from __future__ import annotations

import json
import subprocess
import tarfile

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases of every operator family with tflitewriter
from conftest import cli
from litert_oracle import run_seeded
from mlfbuild.importer import import_tflite
from mlfbuild.mlf.reader import read_mlf
from test_import_memory import DS_CHAIN, MOBILENET_HEAD, PADDED_BLOCK, STRIPED_HEAD_INPUT, _SAME
from tflitewriter import chain_model


def _member(mlf, name: str) -> str:
    with tarfile.open(mlf) as tar:
        return tar.extractfile(f"./{name}").read().decode()


def test_min_plans_the_inputs_and_outputs_in_the_pool_and_floor_keeps_them_the_applications(tmp_path):
    model = chain_model(np.random.default_rng(5), DS_CHAIN, input_shape=(1, 25, 5, 8)).write(tmp_path / "k.tflite")
    floor = import_tflite(model, tmp_path / "floor.tar", module="k")
    least = import_tflite(model, tmp_path / "min.tar", module="k", memory="min")
    io = sum(least.graph.tensors[i].nbytes for i in (*least.graph.inputs, *least.graph.outputs))
    assert (floor.io_bytes, least.io_bytes) == (io, 0)
    assert not floor.layout.io_in_pool and least.layout.io_in_pool
    # the input's bytes are reused: the pool holds less than the floor's pool and io buffers together
    assert least.pool_bytes < floor.pool_bytes + floor.io_bytes
    header = _member(least.mlf, "codegen/host/include/tvmgen_k.h")
    assert "struct tvmgen_k_inputs tvmgen_k_map_inputs(void);" in header
    assert "struct tvmgen_k_outputs tvmgen_k_map_outputs(void);" in header
    assert "map_inputs" not in _member(floor.mlf, "codegen/host/include/tvmgen_k.h")
    main = json.loads(_member(least.mlf, "metadata.json"))["modules"]["k"]["memory"]["functions"]["main"][0]
    assert main["io_size_bytes"] == 0 and main["workspace_size_bytes"] == least.pool_bytes
    main = json.loads(_member(floor.mlf, "metadata.json"))["modules"]["k"]["memory"]["functions"]["main"][0]
    assert main["io_size_bytes"] == io
    shown = cli("inspect", str(least.mlf))
    assert shown.returncode == 0 and "are inside the workspace: tvmgen_k_map_inputs" in shown.stdout
    assert read_mlf(least.mlf, tmp_path / "m").modules[0].io_in_pool
    assert not read_mlf(floor.mlf, tmp_path / "f").modules[0].io_in_pool
    # where the map functions point: inside the pool, no two tensors live together sharing bytes
    offsets = [least.layout.pool_offset(i) for i in (*least.graph.inputs, *least.graph.outputs)]
    assert all(0 <= at and at + least.graph.tensors[i].nbytes <= least.pool_bytes
               for at, i in zip(offsets, (*least.graph.inputs, *least.graph.outputs)))


@pytest.mark.cross
def test_a_firmware_runs_on_the_pools_own_io_bytes_and_size_says_so(cmsis_nn, tmp_path):
    model = chain_model(np.random.default_rng(5), DS_CHAIN, input_shape=(1, 25, 5, 8)).write(tmp_path / "k.tflite")
    assert cli("import", str(model), "-o", str(tmp_path / "k.tar"), "--memory", "min").returncode == 0
    run = cli("run", str(tmp_path / "k.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass" and all(o["max_abs_error"] == 0 for o in result["models"][0]["outputs"])
    models_c = (tmp_path / "b" / "project" / "src" / "models.c").read_text()
    assert "tvmgen_k_map_inputs()" in models_c and ".bss.mlf_io" not in models_c
    size = json.loads(cli("size", str(tmp_path / "b"), "--json").stdout)
    module = size["modules"][0]
    io_row = next(row for row in module["predicted_vs_linked"] if row["kind"] == "io")
    assert io_row["linked"] == io_row["predicted"] == 0 and "inside the USMP pool" in io_row["explanation"]
    assert "not proven" not in (module["workspace_pool"].get("reason") or "")
    assert max(module["workspace_pool"]["live_bytes"]) <= module["workspace_pool"]["bytes"]


_APP = r"""
#include <stdio.h>
#include <string.h>
#include "mlf_k.h"
#include "reference.h"
static uint8_t own_input[MLF_K_INPUT_0_BYTES], own_output[MLF_K_OUTPUT_0_BYTES];
int main(void) {
  int differ = 0;
  for (int s = 0; s < SAMPLES; ++s) {
    struct tvmgen_k_inputs inputs = tvmgen_k_map_inputs();   /* the pool's own bytes */
    struct tvmgen_k_outputs outputs = tvmgen_k_map_outputs();
    memcpy(inputs.MLF_K_INPUT_0_C_NAME, input_data[s], MLF_K_INPUT_0_BYTES);
    if (tvmgen_k_run(&inputs, &outputs) != 0) return 2;
    differ += memcmp(outputs.MLF_K_OUTPUT_0_C_NAME, output_data[s], MLF_K_OUTPUT_0_BYTES) != 0;
    struct tvmgen_k_inputs mine = { .MLF_K_INPUT_0_C_NAME = own_input };   /* buffers of its own */
    struct tvmgen_k_outputs theirs = { .MLF_K_OUTPUT_0_C_NAME = own_output };
    memcpy(own_input, input_data[s], MLF_K_INPUT_0_BYTES);
    if (tvmgen_k_run(&mine, &theirs) != 0) return 2;
    differ += memcmp(own_output, output_data[s], MLF_K_OUTPUT_0_BYTES) != 0;
  }
  printf("in pool %d, differ %d\n", MLF_K_IO_IN_POOL, differ);
  return differ != 0;
}
"""


def _c_rows(arrays) -> str:
    return ",\n".join("{" + ", ".join(str(int(v)) for v in np.asarray(a).reshape(-1).view(np.uint8)) + "}" for a in arrays)


@pytest.mark.cross
def test_an_exported_library_is_run_through_its_map_functions_or_buffers_of_its_own(cmsis_nn, tmp_path):
    """The exported header says where the io is; an application writing the input where
    tvmgen_k_map_inputs points, and one handing buffers of its own, both get LiteRT's outputs."""
    model = chain_model(np.random.default_rng(8), MOBILENET_HEAD, input_shape=STRIPED_HEAD_INPUT).write(tmp_path / "k.tflite")
    assert cli("import", str(model), "-o", str(tmp_path / "k.tar"), "--name", "k", "--memory", "min").returncode == 0
    folder = tmp_path / "export"
    done = cli("export", str(tmp_path / "k.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(folder))
    assert done.returncode == 0, done.stderr
    header = next(folder.rglob("mlf_k.h")).read_text()
    assert "#define MLF_K_IO_IN_POOL 1" in header and "tvmgen_k_map_inputs()" in header
    assert "tvmgen_k_map_inputs()" in next(folder.rglob("main.c")).read_text()
    inputs, outputs = run_seeded(model, seed=3, samples=2)
    (tmp_path / "reference.h").write_text(
        f"#define SAMPLES 2\nstatic const unsigned char input_data[2][{next(iter(inputs.values()))[0].nbytes}] = {{\n"
        f"{_c_rows(next(iter(inputs.values())))}}};\n"
        f"static const unsigned char output_data[2][{outputs[0][0].nbytes}] = {{\n{_c_rows(outputs[0])}}};\n")
    (tmp_path / "app.c").write_text(_APP)
    mk = next(folder.rglob("mlf.mk"))
    (tmp_path / "Makefile").write_text(
        f"MLF_DIR := {mk.parent}\ninclude $(MLF_DIR)/mlf.mk\n"
        f"app: {tmp_path}/app.c $(MLF_K_SOURCES) $(MLF_K_ARENA_SOURCES) $(MLF_K_CMSIS_NN_SOURCES) "
        "$(MLFBUILD_RUNTIME_SOURCES) $(MLFBUILD_BOARD_SOURCES)\n"
        f"\tgcc -I{tmp_path} $(MLF_K_CFLAGS) $(MLF_K_CMSIS_NN_FLAGS) $(MLFBUILD_BOARD_CFLAGS) $^ "
        "$(MLFBUILD_BOARD_LDFLAGS) -lm -o $@\n")
    built = subprocess.run(["make", "-C", str(tmp_path), "app"], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    ran = subprocess.run([str(tmp_path / "app")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "in pool 1, differ 0" in ran.stdout, ran.stdout + ran.stderr


# a PAD before a VALID depthwise layer, and before the model's first convolution
_VALID_STRIDE2 = ("CONV_2D", dict(_SAME, padding="VALID", kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, out_channels=8))
_PAD_FIRST = (PADDED_BLOCK[2], _VALID_STRIDE2, *MOBILENET_HEAD[1:])


@pytest.mark.cross
@pytest.mark.parametrize("block, shape", [pytest.param(PADDED_BLOCK, (1, 20, 12, 6), marks=pytest.mark.exhaustive),
                                          (_PAD_FIRST, STRIPED_HEAD_INPUT)],
                         ids=["before depthwise layers", "before the first convolution, in stripes"])
def test_a_pad_before_a_valid_convolution_is_folded_into_it_and_equals_litert(block, shape, cmsis_nn, tmp_path):
    model = chain_model(np.random.default_rng(6), block, input_shape=shape).write(tmp_path / "p.tflite")
    least = import_tflite(model, tmp_path / "p.tar", memory="min")
    floor = import_tflite(model, tmp_path / "f.tar")
    assert not any(step.operator.name == "PAD" for step in least.steps)
    assert any(step.operator.name == "PAD" for step in floor.steps)  # the floor's plan is today's
    if shape == STRIPED_HEAD_INPUT:  # the folded layer starts the stripes
        assert "stripes of rows" in least.steps[0].note and "operators 1 (CONV_2D)" in least.steps[0].note
    else:
        assert any("(PAD) folded in" in step.note for step in least.steps)
    assert least.pool_bytes < floor.pool_bytes + floor.io_bytes
    run = cli("run", str(tmp_path / "p.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass" and all(o["max_abs_error"] == 0 for o in result["models"][0]["outputs"])


# --- exhaustive: the MLPerf Tiny models (and TFLM's mobilenet_v2) under --memory min -------------------

_MLPERF = {"kws": "kws_ref_model.tflite", "vww": "vww_96_int8.tflite", "ic": "pretrainedResnet_quant.tflite",
           "ad": "ad01_int8.tflite"}


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("name", sorted(_MLPERF))
def test_every_mlperf_model_under_min_equals_litert_over_100_samples(name, board, models_dir, cmsis_nn, tmp_path):
    mlf = tmp_path / f"{name}.tar"
    assert cli("import", str(models_dir / _MLPERF[name]), "-o", str(mlf), "--memory", "min").returncode == 0
    run = cli("run", str(mlf), "-b", board, "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "100", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass" and all(o["max_abs_error"] == 0 for o in result["models"][0]["outputs"])
    assert "not proven" not in run.stderr


@pytest.mark.exhaustive
@pytest.mark.cross
def test_tflm_mobilenet_v2_under_min_equals_litert_over_100_samples(tflm_models_dir, cmsis_nn, tmp_path):
    """Its PADs folded into its depthwise layers: the pool at the largest tensor, under half the floor's."""
    model = tflm_models_dir / "mobilenet_v2_quantized_1x3x224x224.tflite"
    floor = import_tflite(model, tmp_path / "floor.tar")
    least = import_tflite(model, tmp_path / "min.tar", memory="min")
    assert least.pool_bytes <= floor.pool_bytes // 2
    run = cli("run", str(least.mlf), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "100", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass" and all(o["max_abs_error"] == 0 for o in result["models"][0]["outputs"])
