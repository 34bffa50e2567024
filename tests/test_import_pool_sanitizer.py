"""Imported models' pool plans checked against the running code, as TVM's are (tests/pool_sanitizer.py):
the static analysis reads the importer's C, and AddressSanitizer then runs that C with every region
the analysis claims as an allocation of its own, poisoned outside its claimed life. The outputs must
equal the same C's with the importer's own layout. In-place operators, views (RESHAPE) of in-place
outputs, recurrent states and CMSIS-NN scratch buffers are in the models checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pool_sanitizer
import tflitecases  # noqa: F401 - registers the cases of every operator family with tflitewriter
from conftest import cli
from mlfbuild.canalysis.cfront import runtime_include_dir
from mlfbuild.canalysis.pool import read_usmp_pool
from mlfbuild.importer import import_tflite
from mlfbuild.mlf.reader import read_mlf
from test_import_operators import operator_cases
from test_import_memory import DS_CHAIN, HEAD_INPUT, MOBILENET_HEAD, PADDED_BLOCK, STRIPED_HEAD_INPUT, chains_model
from test_import_ops_recurrent import _LSTM_CASES, lstm_model
from tflitewriter import KWS_CHAIN, RESIDUAL_CHAIN, bundle_model, chain_model

_IN_PLACE_VIEW = (("CONV_2D", {"padding": "SAME", "stride_h": 1, "stride_w": 1}), "RELU", "RESHAPE",
                  "FULLY_CONNECTED")


def _models(tmp_path):
    rng = np.random.default_rng(21)
    return {"kws chain": chain_model(rng, KWS_CHAIN).write(tmp_path / "kws.tflite"),
            "residual chain": chain_model(rng, RESIDUAL_CHAIN).write(tmp_path / "residual.tflite"),
            "view of an in-place output": chain_model(rng, _IN_PLACE_VIEW).write(tmp_path / "view.tflite"),
            "lstm stack": lstm_model(tmp_path / "lstm.tflite", 2, _LSTM_CASES["converter's"]),
            "every operator": bundle_model(rng, operator_cases(1)[:60]).write(tmp_path / "ops.tflite"),
            "convolution chains": chains_model(rng, 4).write(tmp_path / "chains.tflite"),
            "depthwise-separable stack": chain_model(rng, DS_CHAIN, input_shape=(1, 25, 5, 8)).write(tmp_path / "ds.tflite"),
            "mobilenet head": chain_model(rng, MOBILENET_HEAD, input_shape=HEAD_INPUT).write(tmp_path / "mh.tflite"),
            "striped mobilenet head": chain_model(rng, MOBILENET_HEAD, input_shape=STRIPED_HEAD_INPUT).write(tmp_path / "smh.tflite"),
            "padded block": chain_model(rng, PADDED_BLOCK, input_shape=(1, 20, 12, 6)).write(tmp_path / "pb.tflite")}


def _checked_against_its_own_layout(model, tree, out, memory="floor"):
    """Build `model` for the host, then check the C the build compiles (the importer's, with the CMSIS-NN
    scratch buffers the build supplies) under the sanitizer."""
    out.mkdir()
    import_tflite(model, out / "model.tar", memory=memory)
    built = cli("build", str(out / "model.tar"), "-b", "host", "--cmsis-nn", str(tree), "-o", str(out / "b"))
    assert built.returncode == 0, built.stderr
    assert "not proven" not in built.stderr, built.stderr
    project = out / "b" / "project"
    module = read_mlf(out / "model.tar", out / "mlf").modules[0]
    sources = {str(path.relative_to(project)): path.read_text()
               for path in sorted((project / "model" / "codegen" / "host" / "src").glob("*.c"))}
    headers = (project / "model" / "codegen" / "host" / "include", project / "src", project / "lib" / "cmsis-nn" / "Include")
    record = json.loads((out / "b" / "build.json").read_text()).get("cmsis_nn") or {"sources": []}
    library = [project / "lib" / "cmsis-nn" / source for source in record["sources"]]
    # the scratch region the build supplies, and the runtime's TVMAPISetLastError the size checks call
    library += sorted((project / "src").glob("mlf_cmsis_nn_scratch.c")) + [project / "crt" / "src" / "backend.c"]
    pool = read_usmp_pool(sources, module.name, headers)
    assert not pool.problem and pool.regions, pool.problem
    include = [*headers, runtime_include_dir()]
    reference = pool_sanitizer.build_and_run(module, sources, None, include, out / "own", library, checked=False)
    checked = pool_sanitizer.build_and_run(module, sources, pool, include, out / "checked", library)
    assert checked == reference and checked.endswith("status 0\n")
    return json.loads((out / "b" / "build.json").read_text())


_EXHAUSTIVE = pytest.mark.exhaustive  # the rest of the kinds: more of the same checks, not new ones


@pytest.mark.cross
@pytest.mark.parametrize("name", ["view of an in-place output", "lstm stack",
                                  *[pytest.param(n, marks=_EXHAUSTIVE) for n in ("kws chain", "residual chain",
                                                                                 "every operator")]])
def test_an_imported_models_pool_claims_hold_under_the_sanitizer(name, cmsis_nn, tmp_path):
    _checked_against_its_own_layout(_models(tmp_path)[name], cmsis_nn("v6.0.0"), tmp_path / "check")


@pytest.mark.cross
@pytest.mark.parametrize("name", ["striped mobilenet head", "kws chain",
                                  *[pytest.param(n, marks=_EXHAUSTIVE) for n in ("mobilenet head", "depthwise-separable stack",
                                                                                 "convolution chains", "padded block")]])
def test_a_min_memory_plans_claims_hold_under_the_sanitizer(name, cmsis_nn, tmp_path):
    """Outputs written over their inputs row by row, the first layers in stripes, the inputs and
    outputs in the pool: every tensor a region of its own, every access within it during its life, and
    the outputs those of the real layout, tensors sharing bytes."""
    model = _models(tmp_path)[name]
    _checked_against_its_own_layout(model, cmsis_nn("v6.0.0"), tmp_path / "check", memory="min")
    if name == "striped mobilenet head":
        assert any("stripes of rows" in step.note for step in import_tflite(model, tmp_path / "m.tar", memory="min").steps)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("model", ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"])
def test_the_mlperf_models_min_plans_hold_under_the_sanitizer(model, models_dir, cmsis_nn, tmp_path):
    """The patched plans of the real models: stripes, row bands, folded pads, io in the pool."""
    _checked_against_its_own_layout(models_dir / f"{model}.tflite", cmsis_nn("v6.0.0"), tmp_path / "check", memory="min")


# The real models as `import` and `build` take them: TFLM's (not shared material: skipped when absent)
# and MLPerf Tiny's, with each memory plan.
_REAL_MODELS = [*[("mlperf", f"{name}.tflite", "floor") for name in ("kws_ref_model", "vww_96_int8",
                                                                     "pretrainedResnet_quant", "ad01_int8")],
                *[("tflm", name, memory) for name in ("mobilenet_v2_quantized_1x3x224x224.tflite", "person_detect.tflite")
                  for memory in ("floor", "min")]]


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("source, name, memory", _REAL_MODELS)
def test_every_real_models_pool_is_proven_and_holds_under_the_sanitizer(source, name, memory, request, cmsis_nn,
                                                                       tmp_path):
    """The analysis proves the importer's whole plan (the build records its verdict: the floor it
    proves, the plan re-made at it or kept as already as small), and the sanitizer holds the code to it."""
    folder = request.getfixturevalue("models_dir" if source == "mlperf" else "tflm_models_dir")
    record = _checked_against_its_own_layout(folder / name, cmsis_nn("v6.0.0"), tmp_path / "check", memory=memory)
    pool = record["models"][0]["workspace_pool"]
    assert pool["producer"] == "mlfbuild's importer" and pool["floor_bytes"] is not None, pool
    assert pool["replanned"] or not pool["reason"].startswith("not proven"), pool


_ON_CORES = [(source, name, memory) for source, name, memory in
             [*_REAL_MODELS, *[("mlperf", f"{n}.tflite", "min") for n in ("kws_ref_model", "vww_96_int8",
                                                                           "pretrainedResnet_quant", "ad01_int8")]]
             if not name.startswith("mobilenet_v2")]  # its 3.7 MB of weights fit no QEMU board's flash


@pytest.mark.exhaustive
@pytest.mark.qemu  # the build probes CMSIS-NN's buffer sizes on the board's core
@pytest.mark.cross
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("source, name, memory", _ON_CORES)
def test_every_real_models_pool_is_proven_on_the_dsp_and_mve_cores(source, name, memory, board, request, cmsis_nn,
                                                                   tmp_path):
    """The code the cores compile (generated DSP and MVE kernels, read with the cross compiler) is proven
    too: ic's first layer under --memory min on the M4F was not."""
    folder = request.getfixturevalue("models_dir" if source == "mlperf" else "tflm_models_dir")
    import_tflite(folder / name, tmp_path / "model.tar", memory=memory)
    built = cli("build", str(tmp_path / "model.tar"), "-b", board, "--cmsis-nn", str(cmsis_nn("v6.0.0")),
                "-o", str(tmp_path / "b"))
    assert built.returncode == 0, built.stderr
    pool = json.loads((tmp_path / "b" / "build.json").read_text())["models"][0]["workspace_pool"]
    assert pool["floor_bytes"] is not None and "not proven" not in built.stdout + built.stderr, pool["reason"]
