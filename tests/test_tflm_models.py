"""TFLM's own example models, imported, built and run against LiteRT's reference kernels bit for bit
(exhaustive: the models come from the tflite-micro repository, gathered under $MLFBUILD_TFLM_MODELS,
default ../shared/models-tflm; they are never copied into this project)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import cli
from litert_oracle import run_seeded

# file → samples compared. keyword_scrambled_8bit is not here: its int8 SVDF state is TFLM's alone
# (LiteRT's reference kernel reads it as int16 and crashes); its refusal is tested with the SVDF's.
MODELS = {"hello_world_int8.tflite": 20, "micro_speech_quantized.tflite": 20, "trained_lstm_int8.tflite": 20,
          "micro_speech_lstm.tflite": 10, "dtln.tflite": 10, "keyword_scrambled.tflite": 10,
          "mobilenet_v2_quantized_1x3x224x224.tflite": 20}


def _run_against_litert(model, board, tree, out, samples: int) -> dict:
    inputs, outputs = run_seeded(model, seed=3, samples=samples)
    reference = out.with_suffix(".npz")
    np.savez(reference, **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    run = cli("run", str(model), "-b", board, "--cmsis-nn", str(tree), "-o", str(out), "--reference", str(reference),
              "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# Every model on the host and the M55, but mobilenet_v2 (its 3.7 MB of weights fit no QEMU board's flash);
# keyword_scrambled on the M4F too (arm_softmax_s8_s16's DSP code, its int8 → int16 softmax).
CASES = [(name, board) for name in sorted(MODELS) for board in ("host", "mps3-an547")
         if board == "host" or not name.startswith("mobilenet_v2")] + [("keyword_scrambled.tflite", "mps2-an386")]


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("name, board", CASES)
def test_tflm_example_model_equals_litert(name, board, tflm_models_dir, cmsis_nn, tmp_path):
    result = _run_against_litert(tflm_models_dir / name, board, cmsis_nn("v6.0.0"), tmp_path / "build",
                                 MODELS[name] if board == "host" else 2)
    compared = [o for m in result["models"] for o in m["outputs"]]
    assert result["status"] == "pass" and compared and all(o["max_abs_error"] == 0 for o in compared)


@pytest.mark.exhaustive
@pytest.mark.cross
def test_person_detect_runs_with_a_verdict_saying_what_was_checked(tflm_models_dir, cmsis_nn, tmp_path):
    """LiteRT refuses person_detect (its biases say quantized dimension 3): the run says so before
    building and checks the firmware against its host twin."""
    run = cli("run", str(tflm_models_dir / "person_detect.tflite"), "-b", "host", "--cmsis-nn",
              str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "build"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert "LiteRT cannot run" in run.stderr and "host twin" in run.stderr
    assert json.loads(run.stdout)["models"][0]["reference"] == "host"
