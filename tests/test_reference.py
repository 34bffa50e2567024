"""References from the original model: the .tflite reader (fuzzed), LiteRT in its own process, the
MLF-vs-model signature check, the many-samples verdict and its rule, `mlfbuild reference`, float
inputs quantized with the model's parameters. Firmware runs here are host builds (cheap); the QEMU
runs (kws through TVM's C code, vww through CMSIS-NN) are the test_reference_qemu ones at the end."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from conftest import cli
from mlfwriter import negate_convolution_weights
from mlfbuild.errors import BuildError, InvalidInputError, RunError
from mlfbuild.reference import litert
from mlfbuild.reference.signature import mismatch
from mlfbuild.reference.tflite import parse_tflite, read_tflite
from mlfbuild.run.compare import TOP1, WITHIN, compare, is_classifier
from mlfbuild.run.samples import as_input_dtype, quantize, random_samples, sample_axis

KWS_AOT = "tvm-0.13/kws_aot_c_unpacked_usmp.tar"
MULTI = "tvm-0.13/multi_kws_ad_aot_c_usmp.tar"
KWS_MODEL = "kws_ref_model.tflite"
AD_MODEL = "ad01_int8.tflite"
VWW_CMSIS_NN = "tvm-0.18/vww_aot_cmsisnn_m4.tar"
VWW_MODEL = "vww_96_int8.tflite"

# --- the .tflite reader ------------------------------------------------------------------------------

# What mlcommons/tiny's models say (their README and LiteRT 2.3.0's get_input/output_details agree).
FACTS = {
    "kws_ref_model.tflite": (("input_1", "int8", (1, 49, 10, 1), 0.5847029089927673, 83),
                             ("Identity", "int8", (1, 12), 0.00390625, -128)),
    "ad01_int8.tflite": (("input_1", "int8", (1, 640), 0.3910152316093445, 89),
                         ("Identity", "int8", (1, 640), 0.36449846625328064, 96)),
    VWW_MODEL: (("input_1_int8", "int8", (1, 96, 96, 3), 0.003921568859368563, -128),
                           ("Identity_int8", "int8", (1, 2), 0.00390625, -128)),
    "pretrainedResnet_quant.tflite": (("input_1_int8", "int8", (1, 32, 32, 3), 1.0, -128),
                                      ("Identity_int8", "int8", (1, 10), 0.00390625, -128)),
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_reader_gives_names_shapes_and_quantization(models_dir, name):
    model = read_tflite(models_dir / name)
    for tensor, (tname, dtype, shape, scale, zero) in zip((model.inputs[0], model.outputs[0]), FACTS[name]):
        assert (tensor.name, tensor.dtype, tensor.shape, tensor.zero_point) == (tname, dtype, shape, zero)
        assert tensor.scale == pytest.approx(scale, rel=1e-7)


def test_reader_agrees_with_litert(models_dir):
    """The same facts as LiteRT's own loader reports, for every model (read in its own process)."""
    import subprocess
    import sys
    script = ("import json,sys\nfrom ai_edge_litert.interpreter import Interpreter\nout={}\n"
              "for p in sys.argv[1:]:\n i=Interpreter(model_path=p)\n"
              " out[p]=[[d['name'],list(map(int,d['shape'])),float(d['quantization'][0]),int(d['quantization'][1])]"
              " for d in i.get_input_details()+i.get_output_details()]\nprint(json.dumps(out))")
    paths = [str(models_dir / name) for name in sorted(FACTS)]
    seen = json.loads(subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True,
                                     check=True).stdout)
    for path in paths:
        model = read_tflite(Path(path))
        ours = [[t.name, list(t.shape), t.scale, t.zero_point] for t in model.inputs + model.outputs]
        assert ours == [[n, s, pytest.approx(sc, rel=1e-7), z] for n, s, sc, z in seen[path]]


@pytest.fixture(scope="module")
def kws_bytes(models_dir) -> bytes:
    return (models_dir / KWS_MODEL).read_bytes()


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, 20000), flips=st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 255)), max_size=6))
@example(cut=3000, flips=[])  # past the root table, short of the tensors: an offset outside the file
@example(cut=8, flips=[])
@example(cut=20000, flips=[(4, 0)])  # the file identifier damaged
def test_reader_never_fails_other_than_by_saying_so(kws_bytes, cut, flips):
    data = bytearray(kws_bytes[:cut] if cut < 20000 else kws_bytes)
    for at, value in flips:
        if at < len(data):
            data[at] = value
    try:
        model = parse_tflite(bytes(data), "fuzz.tflite")
    except InvalidInputError as exc:
        assert str(exc).startswith("fuzz.tflite: ") and "\n" not in str(exc)
    else:
        assert model.inputs and model.outputs


def test_quantization_per_tensor_for_the_model_header(models_dir):
    from mlfbuild.reference.signature import module_quantization
    from mlfbuild.reference.tflite import tensor_quantization
    assert tensor_quantization(models_dir / KWS_MODEL) == {"input_1": (pytest.approx(0.5847029, rel=1e-6), 83),
                                                           "Identity": (0.00390625, -128)}
    # by an MLF module's own names: TVM 0.8 calls the output "output"
    module = _model([_spec("input_1", (1, 49, 10, 1))], [_spec("output", (1, 12))])
    assert module_quantization(read_tflite(models_dir / KWS_MODEL), module)["output"] == (0.00390625, -128)
    with pytest.raises(ValueError, match="int8\\[1,640\\]"):
        module_quantization(read_tflite(models_dir / AD_MODEL), module)


# --- LiteRT in a child process ---------------------------------------------------------------------------

def test_litert_runs_every_sample(models_dir, fixtures_dir):
    reference = np.load(fixtures_dir / "tvm-0.13/ad.npz")
    inputs = np.stack([reference["input_1"], reference["input_1"]])
    (outputs,) = litert.run_model(models_dir / AD_MODEL, {"input_1": inputs})
    assert outputs.shape == (2, 1, 640)
    assert np.array_equal(outputs[0], reference["output_0"])  # TVM and LiteRT agree exactly on ad


def test_litert_takes_a_nameless_input_by_the_name_the_reader_gives_it(tmp_path):
    """TFLM's keyword_scrambled names no tensor: the reader calls its input tensor<index>, and so
    must the samples LiteRT is given."""
    from tflitewriter import GraphBuilder, pack_model, read_model

    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 4), scale=0.5, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, 4), scale=0.5, zero_point=0)
    graph.add_operator("RELU", [x], [y])
    graph.mark_output(y)
    nameless = read_model(graph.to_bytes())
    for tensor in nameless.subgraphs[0].tensors:
        tensor.name = None
    model = tmp_path / "nameless.tflite"
    model.write_bytes(pack_model(nameless))
    (name,) = [t.name for t in read_tflite(model).inputs]
    assert name == f"tensor{x}"
    (outputs,) = litert.run_model(model, {name: np.array([[[-3, -1, 0, 5]]], np.int8)}, kernels="reference")
    assert outputs.tolist() == [[[0, 0, 0, 5]]]


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_litert_crashing_is_one_line_exit_3(tmp_path, monkeypatch, models_dir):
    monkeypatch.setattr(litert.sys, "executable", _fake_python(tmp_path, "kill -SEGV $$"))
    with pytest.raises(InvalidInputError, match=r"LiteRT crashed on this model \(SIGSEGV\)"):
        litert.run_model(models_dir / KWS_MODEL, {"input_1": np.zeros((1, 1, 49, 10, 1), np.int8)})


def test_litert_hanging_is_stopped(tmp_path, monkeypatch, models_dir):
    monkeypatch.setattr(litert.sys, "executable", _fake_python(tmp_path, "exec sleep 60"))
    with pytest.raises(RunError, match="did not finish within 1 s"):
        litert.run_model(models_dir / KWS_MODEL, {"input_1": np.zeros((1, 1, 49, 10, 1), np.int8)}, timeout=1)


def _blocked_env(tmp_path: Path) -> dict:
    """An environment where `import ai_edge_litert` fails, as where the extra is not installed."""
    shim = tmp_path / "no-litert" / "ai_edge_litert"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named ai_edge_litert')\n")
    return {**os.environ, "PYTHONPATH": str(shim.parent)}


def test_without_litert_one_line_names_the_extra(tmp_path, monkeypatch, models_dir):
    monkeypatch.setenv("PYTHONPATH", _blocked_env(tmp_path)["PYTHONPATH"])
    with pytest.raises(BuildError, match=r"pip install 'mlfbuild\[reference\]'"):
        litert.run_model(models_dir / KWS_MODEL, {"input_1": np.zeros((1, 1, 49, 10, 1), np.int8)})


# --- the signature check ----------------------------------------------------------------------------

def _spec(name, shape, dtype="int8"):
    return {"name": name, "c_name": name, "dtype": dtype, "shape": list(shape)}


def _model(inputs, outputs, name="default"):
    return {"name": name, "inputs": inputs, "outputs": outputs}


def test_signature_names_what_differs(models_dir):
    kws = read_tflite(models_dir / KWS_MODEL)
    assert mismatch(kws, _model([_spec("input_1", (1, 49, 10, 1))], [_spec("Identity", (1, 12))])) is None
    # TVM 0.8 and the packed interface name outputs by position
    for positional in ("output", "output0", "output_0"):
        assert mismatch(kws, _model([_spec("input_1", (1, 49, 10, 1))], [_spec(positional, (1, 12))])) is None
    assert "input 'input_1' is int8[1,49,10,1] in the .tflite, int8[1,640] in model default" == \
        mismatch(kws, _model([_spec("input_1", (1, 640))], [_spec("Identity", (1, 12))]))
    assert "'Other'" in mismatch(kws, _model([_spec("input_1", (1, 49, 10, 1))], [_spec("Other", (1, 12))]))
    assert "float32" in mismatch(kws, _model([_spec("input_1", (1, 49, 10, 1))], [_spec("Identity", (1, 12), "float32")]))
    assert "has input 'x'" in mismatch(kws, _model([_spec("x", (1, 49, 10, 1))], [_spec("Identity", (1, 12))]))
    assert "model default has 2" in mismatch(kws, _model([_spec("input_1", (1, 49, 10, 1))],
                                                 [_spec("Identity", (1, 12)), _spec("b", (1,))]))


# --- samples, quantization, the verdict ---------------------------------------------------------------

def test_random_samples_depend_on_seed_name_and_count_only():
    a = random_samples("input_1", "int8", (1, 4), 5, seed=3)
    assert a.shape == (5, 1, 4) and a.dtype == np.int8
    assert np.array_equal(a, random_samples("input_1", "int8", (1, 4), 5, seed=3))
    assert not np.array_equal(a, random_samples("input_1", "int8", (1, 4), 5, seed=4))
    assert not np.array_equal(a, random_samples("other", "int8", (1, 4), 5, seed=3))


def test_sample_axis_forms():
    assert sample_axis(np.zeros((1, 49, 10, 1)), (1, 49, 10, 1), "f", "x").shape == (1, 1, 49, 10, 1)
    assert sample_axis(np.zeros(490), (1, 49, 10, 1), "f", "x").shape == (1, 1, 49, 10, 1)
    assert sample_axis(np.zeros((7, 1, 49, 10, 1)), (1, 49, 10, 1), "f", "x").shape == (7, 1, 49, 10, 1)
    assert sample_axis(np.zeros((7, 49, 10, 1)), (1, 49, 10, 1), "f", "x").shape == (7, 1, 49, 10, 1)
    with pytest.raises(InvalidInputError, match="leading sample axis"):
        sample_axis(np.zeros((7, 48)), (1, 49, 10, 1), "f", "x")


def test_float_inputs_are_quantized_with_the_models_parameters_or_refused():
    values = np.array([-1.0, 0.0, 0.29, 100.0])
    assert quantize(values, "int8", 0.5847029, 83).tolist() == [81, 83, 83, 127]
    assert as_input_dtype(values, "int8", (0.5, -128), "f", "x").tolist() == [-128, -128, -127, 72]
    with pytest.raises(InvalidInputError, match="give the model"):
        as_input_dtype(values, "int8", None, "in.npz", "x")


def test_classifier_shape():
    assert is_classifier((1, 12), 490) and is_classifier((1, 2), 27648) and is_classifier([10], 3072)
    assert not is_classifier((1, 640), 640) and not is_classifier((1, 1), 10) and not is_classifier((2, 3), 100)


def test_top1_rule_counts_near_ties_and_needs_ninety_percent():
    expected = np.full((10, 4), -128, np.int8)
    expected[:, 2] = 100
    actual = expected.copy()
    actual[0, 2], actual[0, 1] = -128, 127  # a sample whose class moved: disagrees
    result = compare("y", actual, expected, model_derived=True, classifier=True)
    assert (result.rule, result.top1_agreement, result.ok) == (TOP1, 9, True)
    actual[1, 2], actual[1, 3] = -128, 127
    result = compare("y", actual, expected, model_derived=True, classifier=True)
    assert (result.top1_agreement, result.ok) == (8, False)
    assert result.failure() == "top-1 agrees on 8 of 10 samples (needs 9)"
    tie = expected.copy()
    tie[:, 1] = 95  # the reference scores class 1 within 8 LSB of its top: choosing it is a near-tie
    chosen = tie.copy()
    chosen[:, 1], chosen[:, 2] = 110, 90
    assert compare("y", chosen, tie, model_derived=True, classifier=True).top1_agreement == 10


def test_other_outputs_within_eight_lsb_and_files_exact():
    expected = np.zeros((3, 640), np.int8)
    near = expected + 8
    assert compare("y", near, expected, model_derived=True).ok
    assert compare("y", near, expected, model_derived=True).rule == WITHIN
    assert not compare("y", near + 1, expected, model_derived=True).ok
    assert not compare("y", near, expected).ok  # a tensor file: bit for bit


# --- firmware against the original model (host builds) ---------------------------------------------------

def _run_json(*args: str, env=None) -> tuple[int, dict | None, str]:
    done = cli("run", *args, "--json", env=env, timeout=600)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def test_kws_against_its_tflite_over_100_samples(build_firmware, fixtures_dir, models_dir):
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    code, result, err = _run_json(str(build), "--reference", str(models_dir / KWS_MODEL), "--samples", "100")
    assert code == 0, err
    (model,) = result["models"]
    (output,) = model["outputs"]
    assert model["samples"] == 100 and model["model_derived"] and len(model["ticks"]) == 100
    assert model["quantization"]["input_1"] == {"scale": pytest.approx(0.5847029, rel=1e-6), "zero_point": 83}
    assert output["rule"] == "top-1" and output["samples"] == 100 and output["top1_agreement"] >= 90
    assert 0 < output["exact_samples"] < 100 and output["max_abs_error"] > 0  # not bit-exact, and said so
    # The difference is the MLF's (TVM's lowering), not the firmware's: that link is exact.
    chain = model["chain"]
    assert chain["firmware_vs_mlf"][0]["exact_samples"] == 100 and chain["firmware_vs_mlf"][0]["rule"] == "exact"
    assert chain["mlf_vs_model"][0]["max_abs_error"] == output["max_abs_error"]
    assert chain["verdict"].startswith("the firmware computes exactly what the MLF computes, and the MLF meets")


def test_damaged_weights_fail_against_the_tflite(build_firmware, fixtures_dir, models_dir, tmp_path):
    damaged = negate_convolution_weights(fixtures_dir / KWS_AOT, tmp_path / "damaged.tar")
    build = build_firmware(damaged, "host")
    code, result, err = _run_json(str(build), "--reference", str(models_dir / KWS_MODEL), "--samples", "50")
    assert code == 7
    assert result["models"][0]["outputs"][0]["top1_agreement"] < 45
    # An MLF whose lowering differs from its .tflite: the firmware is exact against its MLF, and the
    # message says which link broke.
    chain = result["models"][0]["chain"]
    assert chain["firmware_vs_mlf"][0]["ok"] and not chain["mlf_vs_model"][0]["ok"]
    assert chain["verdict"] == ("the firmware computes exactly what the MLF computes; the MLF differs from "
                                f"{models_dir / KWS_MODEL} (the model's conversion by TVM)")
    assert "the firmware computes exactly what the MLF computes; the MLF differs from" in err


def test_multi_module_firmware_checks_each_model_against_its_own(build_firmware, fixtures_dir, models_dir,
                                                                 tmp_path):
    build = build_firmware(fixtures_dir / MULTI, "host")
    code, result, err = _run_json(str(build), "--reference", str(models_dir / KWS_MODEL),
                                  "--reference", f"ad={models_dir / AD_MODEL}", "--samples", "30",
                                  "--junit", str(tmp_path / "run.xml"))
    assert code == 0, err
    by_name = {m["name"]: m for m in result["models"]}
    assert by_name["kws"]["reference"].endswith(KWS_MODEL) and by_name["ad"]["reference"].endswith(AD_MODEL)
    ad = by_name["ad"]["outputs"][0]
    assert (ad["rule"], ad["exact_samples"], ad["top1_agreement"]) == ("within tolerance", 30, None)
    junit = (tmp_path / "run.xml").read_text()
    assert 'name="samples" value="30"' in junit and 'name="top1_agreement"' in junit


def test_reference_file_gives_the_same_verdict_without_litert(build_firmware, fixtures_dir, models_dir, tmp_path):
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    written = cli("reference", str(models_dir / KWS_MODEL), "--samples", "40", "--seed", "5",
                  "-o", str(tmp_path / "ref.npz"))
    assert written.returncode == 0, written.stderr
    blocked = _blocked_env(tmp_path)
    _, direct, _ = _run_json(str(build), "--reference", str(models_dir / KWS_MODEL), "--samples", "40", "--seed", "5")
    code, offline, err = _run_json(str(build), "--reference", str(tmp_path / "ref.npz"), env=blocked)
    assert code == 0, err
    assert offline["models"][0]["outputs"] == direct["models"][0]["outputs"]
    assert offline["models"][0]["model_derived"] and offline["models"][0]["quantization"]
    # and there, the .tflite itself cannot be used: one line naming the extra
    refused = cli("run", str(build), "--reference", str(models_dir / KWS_MODEL), env=blocked)
    assert refused.returncode == 4 and "mlfbuild[reference]" in refused.stderr and "Traceback" not in refused.stderr


def test_the_report_says_what_a_reference_holds(tmp_path, models_dir):
    """A file `mlfbuild reference` wrote is named as the original model's outputs, not as a LiteRT run
    (none happens); the model name it carries is any file's to set, so it is shown as one bounded line."""
    from mlfbuild.run.references import resolve

    kws = _model([_spec("input_1", (1, 49, 10, 1))], [_spec("Identity", (1, 12))], name="kws")
    tensors = {"input_1": np.zeros((1, 49, 10, 1), np.int8), "output_0": np.zeros((1, 12), np.int8)}
    np.savez(tmp_path / "tvm.npz", **tensors)
    np.savez(tmp_path / "lite.npz", **tensors, __source__=np.array(KWS_MODEL))
    np.savez(tmp_path / "odd.npz", **tensors, __source__=np.array("a\nb" + "x" * 500))
    kinds = {name: resolve([str(tmp_path / name)], [kws])["kws"].kind for name in ("tvm.npz", "lite.npz", "odd.npz")}
    kinds["model"] = resolve([str(models_dir / KWS_MODEL)], [kws])["kws"].kind
    assert kinds["tvm.npz"] == "a tensor file"
    assert kinds["lite.npz"] == f"outputs of the original model {KWS_MODEL} by LiteRT, written by `mlfbuild reference`"
    assert "a?bxxx" in kinds["odd.npz"] and len(kinds["odd.npz"]) < 200
    assert kinds["model"] == "the original model, run with LiteRT"


def test_float_inputs_are_quantized_for_a_quantized_model(build_firmware, fixtures_dir, models_dir, tmp_path):
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    floats = np.random.default_rng(1).standard_normal((4, 1, 49, 10, 1)).astype(np.float32) * 20
    np.savez(tmp_path / "in.npz", input_1=floats)
    refused = cli("run", str(build), "--input", str(tmp_path / "in.npz"))
    assert refused.returncode == 3 and refused.stderr.count("\n") == 1 and "give the model" in refused.stderr
    done = cli("run", str(build), "--input", str(tmp_path / "in.npz"), "--reference", str(models_dir / KWS_MODEL),
               "--dequantize")
    assert done.returncode == 0, done.stderr
    assert "match over 4 samples" in done.stdout and "(last sample, dequantized): [0" in done.stdout
    code, result, _ = _run_json(str(build), "--input", str(tmp_path / "in.npz"), "--reference",
                                str(models_dir / KWS_MODEL), "--dequantize")
    values = result["models"][0]["dequantized"]["Identity"]
    assert code == 0 and len(values) == 12 and sum(values) == pytest.approx(1.0, abs=0.05)  # softmax probabilities


def test_reference_from_float_inputs_keeps_them_quantized(models_dir, tmp_path):
    floats = np.random.default_rng(2).standard_normal((3, 49, 10, 1)).astype(np.float32) * 10
    np.savez(tmp_path / "in.npz", input_1=floats)
    done = cli("reference", str(models_dir / KWS_MODEL), "--input", str(tmp_path / "in.npz"), "-o", str(tmp_path / "r.npz"))
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "r.npz") as written:
        assert written["input_1"].dtype == np.int8 and written["input_1"].shape == (3, 1, 49, 10, 1)
        assert np.array_equal(written["input_1"], quantize(floats.reshape(3, 1, 49, 10, 1), "int8", 0.5847029089927673, 83))
        assert written["output_0"].shape == (3, 1, 12)
        assert written["__quantization__/output_0"].tolist() == [0.00390625, -128]
    np.savez(tmp_path / "wrong.npz", other=floats)
    wrong = cli("reference", str(models_dir / KWS_MODEL), "--input", str(tmp_path / "wrong.npz"), "-o", str(tmp_path / "w.npz"))
    assert wrong.returncode == 3 and "no tensor for the model's input 'input_1'" in wrong.stderr
    assert not (tmp_path / "w.npz").exists()


def test_too_many_samples_are_refused_before_any_is_made(models_dir, tmp_path):
    done = cli("reference", str(models_dir / VWW_MODEL), "--samples", "100000", "-o", str(tmp_path / "r.npz"))
    assert done.returncode == 2 and "more than 256 MiB" in done.stderr and not (tmp_path / "r.npz").exists()


@pytest.mark.parametrize("case", ["other model", "damaged", "not a model"])
def test_a_wrong_tflite_is_one_line_exit_3(build_firmware, fixtures_dir, models_dir, tmp_path, case):
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    path = tmp_path / "model.tflite"
    if case == "other model":
        path = models_dir / AD_MODEL
    elif case == "damaged":
        path.write_bytes((models_dir / KWS_MODEL).read_bytes()[:3000])
    else:
        path.write_bytes(b"\0" * 64)
    done = cli("run", str(build), "--reference", str(path))
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert {"other model": "not the model this firmware was built from: input 'input_1' is int8[1,640]",
            "damaged": "not a readable TFLite model", "not a model": "not a TFLite model"}[case] in done.stderr


def test_models_past_the_reader_still_cannot_take_mlfbuild_down(build_firmware, fixtures_dir, models_dir, tmp_path):
    """Damage where the bounded reader does not look (operators, weights) reaches LiteRT: whatever it
    does there ends as a verdict or one line, never a crash or a hang of mlfbuild."""
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    original = (models_dir / KWS_MODEL).read_bytes()
    rng = np.random.default_rng(7)
    for trial in range(6):
        data = bytearray(original)
        for at in rng.integers(8, len(data), size=64):
            data[at] = int(rng.integers(0, 256))
        path = tmp_path / f"bad{trial}.tflite"
        path.write_bytes(bytes(data))
        done = cli("run", str(build), "--reference", str(path), "--samples", "3", timeout=300)
        assert done.returncode in (0, 3, 7), done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") <= 1


def test_inspect_shows_quantization_given_the_model(fixtures_dir, models_dir):
    done = cli("inspect", str(fixtures_dir / MULTI), "--model", f"kws={models_dir / KWS_MODEL}",
               "--model", f"ad={models_dir / AD_MODEL}", "--json")
    assert done.returncode == 0, done.stderr
    modules = {m["name"]: m for m in json.loads(done.stdout)["modules"]}
    assert modules["kws"]["inputs"][0]["quantization"] == {"scale": pytest.approx(0.5847029, rel=1e-6),
                                                           "zero_point": 83}
    assert modules["ad"]["outputs"][0]["quantization"]["zero_point"] == 96
    text = cli("inspect", str(fixtures_dir / MULTI), "--model", f"kws={models_dir / KWS_MODEL}").stdout
    assert "scale 0.00390625 zero point -128" in text
    wrong = cli("inspect", str(fixtures_dir / MULTI), "--model", f"kws={models_dir / AD_MODEL}")
    assert wrong.returncode == 3 and "not the model" in wrong.stderr


# --- the same from a jobs file and mlfbuild.toml ------------------------------------------------------

def test_jobs_file_and_project_file_take_a_tflite_and_samples(tmp_path, build_firmware, fixtures_dir, models_dir):
    import shutil

    from mlfbuild.matrix.jobs import cross, entries_from_file
    from mlfbuild.matrix.stage import _run_stage
    from mlfbuild.projectfile import load_project_file

    (tmp_path / "jobs.json").write_text(json.dumps([{"mlf": str(fixtures_dir / KWS_AOT), "samples": 20,
                                                     "references": [f"kws={models_dir / KWS_MODEL}"]}]))
    (job,) = cross(entries_from_file(tmp_path / "jobs.json"), ["host"])
    assert job.samples == 20 and job.references[0].endswith(KWS_MODEL)
    (tmp_path / "bad.json").write_text(json.dumps([{"mlf": "x.tar", "samples": 0}]))
    with pytest.raises(InvalidInputError, match="samples 0"):
        entries_from_file(tmp_path / "bad.json")
    folder = tmp_path / "job"
    shutil.copytree(build_firmware(fixtures_dir / KWS_AOT, "host"), folder)
    ran = _run_stage(folder, {"references": list(job.references), "atol": None, "rtol": None, "timeout": 60,
                              "samples": job.samples})
    assert ran["status"] == "pass", ran
    assert json.loads((folder / "run.json").read_text())["models"][0]["samples"] == 20

    (tmp_path / "mlfbuild.toml").write_text(f'samples = 12\nreferences = ["{models_dir / KWS_MODEL}"]\n')
    assert load_project_file(tmp_path / "mlfbuild.toml").samples == 12
    (tmp_path / "mlfbuild.toml").write_text('samples = "many"\n')
    with pytest.raises(InvalidInputError, match="samples: must be a whole number"):
        load_project_file(tmp_path / "mlfbuild.toml")


# --- on the emulator -------------------------------------------------------------------------------------

@pytest.mark.qemu
@pytest.mark.cross
def test_reference_qemu_kws_100_samples_in_one_session(build_firmware, fixtures_dir, models_dir):
    """The done-when command on one kws fixture (the graph executor of TVM 0.18; every other kws
    fixture is run the same way by hand, docs/references.md): 100 samples, one emulator session."""
    build = build_firmware(fixtures_dir / "tvm-0.18/kws_graph_c.tar", "mps2-an386")
    done = cli("run", str(build), "-b", "mps2-an386", "--reference", str(models_dir / KWS_MODEL),
               "--samples", "100", timeout=900)
    assert done.returncode == 0, done.stderr
    assert "Identity: match over 100 samples" in done.stdout or "output0: match over 100 samples" in done.stdout
    assert re.search(r"max \|diff\| \d+ LSB, top-1 agrees (9\d|100)/100", done.stdout), done.stdout


# Samples of vww run here: each sends a 27,648-byte input through the emulated UART (measured on a
# loaded 2-core machine: 3 s for one sample, 10 s for five), so a few; 100 were run by hand
# (docs/references.md).
VWW_SAMPLES = 5


@pytest.mark.qemu
@pytest.mark.cross
def test_reference_qemu_vww_through_cmsis_nn_passes_the_rule(build_firmware, fixtures_dir, models_dir, cmsis_nn):
    """The rule on a second classifier: TVM 0.18's vww through CMSIS-NN v6.0.0 (the same build
    test_cmsis_nn.py runs, shared in the session) against the original MobileNet .tflite."""
    build = build_firmware(fixtures_dir / VWW_CMSIS_NN, "mps2-an386", cmsis_nn=cmsis_nn("v6.0.0"))
    code, result, err = _run_json(str(build), "-b", "mps2-an386", "--reference", str(models_dir / VWW_MODEL),
                                  "--samples", str(VWW_SAMPLES))
    assert code == 0, err
    (model,) = result["models"]
    (output,) = model["outputs"]
    assert model["model_derived"] and model["samples"] == VWW_SAMPLES
    assert model["quantization"]["Identity_int8"] == {"scale": 0.00390625, "zero_point": -128}
    assert (output["name"], output["rule"], output["samples"]) == ("Identity_int8", "top-1", VWW_SAMPLES)
    # CMSIS-NN computes vww with TFLite's arithmetic: over 100 samples every top-1 agreed and no value
    # was more than 1 LSB from LiteRT's, so a few samples must all agree, within that LSB
    assert output["top1_agreement"] == VWW_SAMPLES
    assert output["max_abs_error"] <= 1


def _with_scale(models_dir: Path, dest: Path, role: str, scale: float) -> Path:
    """kws_ref_model.tflite with its graph input's or output's scale set to `scale`."""
    from tflitewriter import pack_model, read_model

    model = read_model((models_dir / KWS_MODEL).read_bytes())
    graph = model.subgraphs[0]
    index = (graph.inputs if role == "input" else graph.outputs)[0]
    graph.tensors[index].quantization.scale = np.array([scale], dtype=np.float32)
    dest.write_bytes(pack_model(model))
    return dest


@pytest.mark.parametrize("role, name", [("input", "input_1"), ("output", "Identity")])
def test_a_reference_model_of_scale_zero_is_refused_in_one_line(build_firmware, fixtures_dir, models_dir, tmp_path,
                                                                role, name):
    """Scale 0 makes every real value 0 (LiteRT then computed garbage, or crashed): refused, exit 3,
    before anything runs, naming the tensor."""
    build = build_firmware(fixtures_dir / KWS_AOT, "host")
    model = _with_scale(models_dir, tmp_path / "zero.tflite", role, 0.0)
    said = f"graph {role} '{name}' (int8[{'1,49,10,1' if role == 'input' else '1,12'}]) has scale 0"
    done = cli("run", str(build), "--reference", str(model), "--samples", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    assert said in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    made = cli("reference", str(model), "-o", str(tmp_path / "r.npz"))
    assert made.returncode == 3 and said in made.stderr and not (tmp_path / "r.npz").exists()


def test_scale_zero_on_a_float_tensor_is_tflites_mark_of_no_quantization(models_dir, tmp_path):
    from tflitewriter import pack_model, read_model

    model = read_model((models_dir / KWS_MODEL).read_bytes())
    tensor = model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]]
    tensor.type = 0  # float32, with the quantization table TFLite writes for a tensor not quantized
    tensor.quantization.scale = np.array([0.0], dtype=np.float32)
    tensor.quantization.zeroPoint = np.array([0], dtype=np.int64)
    read = parse_tflite(pack_model(model))
    assert read.inputs[0].dtype == "float32" and not read.inputs[0].quantized


def _sub_model(in_scale: float, out_scale: float):
    from ai_edge_litert import schema_py_generated as schema
    from tflitewriter import GraphBuilder

    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 8), scale=in_scale, zero_point=0)
    w = graph.add_input("w", "int8", (1, 8), scale=0.1, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, 8), scale=out_scale, zero_point=0)
    graph.add_operator("SUB", [x, w], [y], schema.SubOptionsT())
    graph.mark_output(y)
    return graph


def test_an_output_of_scale_zero_that_litert_runs_is_refused_too(tmp_path):
    """LiteRT runs SUB into an output of scale 0, and its outputs then passed the comparison."""
    pytest.importorskip("ai_edge_litert")
    good = _sub_model(0.1, 0.2).write(tmp_path / "good.tflite")
    zero = _sub_model(0.1, 0.0).write(tmp_path / "zero.tflite")
    build = tmp_path / "b"
    assert cli("build", str(good), "-b", "host", "-o", str(build)).returncode == 0
    done = cli("run", str(build), "--reference", str(zero), "--samples", "2")
    assert done.returncode == 3 and "graph output 'y' (int8[1,8]) has scale 0" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
