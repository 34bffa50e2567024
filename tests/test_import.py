"""`mlfbuild import`: .tflite → MLF in TVM's layout, checked against LiteRT's reference kernels.

The oracle is LiteRT run with its reference op resolver (BUILTIN_REF): TFLite's semantics, not one of
its optimised kernels. The firmware's outputs must equal it bit for bit (the fully connected layers
of ad excepted, see test_ad_differs_only_by_the_requantisation_rounding).
"""

from __future__ import annotations

import json
import math
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import cli
from mlfbuild.errors import InvalidInputError
from mlfbuild.importer import import_tflite, quantization as q
from mlfbuild.importer.tflite import parse_model

MODELS = {"kws": "kws_ref_model.tflite", "vww": "vww_96_int8.tflite", "ic": "pretrainedResnet_quant.tflite",
          "ad": "ad01_int8.tflite"}


def litert_reference(model: Path, samples: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded int8 inputs and LiteRT's reference-kernel outputs, as a .npz `run --reference` reads."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    (inp,), outputs = interpreter.get_input_details(), interpreter.get_output_details()
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 128, size=(samples, *inp["shape"]), dtype=np.int8)
    ys: list[list[np.ndarray]] = [[] for _ in outputs]
    for x in xs:
        interpreter.set_tensor(inp["index"], x)
        interpreter.invoke()
        for i, out in enumerate(outputs):
            ys[i].append(interpreter.get_tensor(out["index"]).copy())
    return {inp["name"]: xs, **{f"output_{i}": np.stack(y) for i, y in enumerate(ys)}}


def save_reference(tmp_path: Path, model: Path, samples: int) -> Path:
    path = tmp_path / f"{model.stem}-ref.npz"
    np.savez(path, **litert_reference(model, samples))
    return path


# --- quantisation arithmetic -------------------------------------------------------------------------

@pytest.mark.parametrize("real", [0.5, 0.75, 1e-3, 0.9999999999, 2.5, 1.0 / 3, 1e-12, 3e9])
def test_quantize_multiplier_reconstructs_the_real_number(real):
    multiplier, shift = q.quantize_multiplier(real)
    if real < 2.0 ** -31:
        assert (multiplier, shift) == (0, 0)  # flushed to zero as TFLite does
        return
    assert 1 << 30 <= multiplier < 1 << 31
    assert math.isclose(multiplier * 2.0 ** (shift - 31), real, rel_tol=2 ** -30)


def test_multipliers_equal_those_tvm_computed_for_the_same_model(models_dir):
    """TVM 0.18 compiled kws_ref_model.tflite to the shared kws CMSIS-NN MLF: its generated code holds
    the fully connected multiplier {1278221461, -7} and the softmax's (1242899200, 24, -124)."""
    graph = parse_model((models_dir / MODELS["kws"]).read_bytes())
    fc = next(op for op in graph.operators if op.name == "FULLY_CONNECTED")
    x, w, _ = (graph.tensors[i] for i in fc.inputs)
    y = graph.tensors[fc.outputs[0]]
    assert q.fully_connected_multiplier(x.quantization.scale, w.quantization.scale, y.quantization.scale) == \
        (1278221461, -7)
    softmax = next(op for op in graph.operators if op.name == "SOFTMAX")
    assert q.softmax_parameters(softmax.options["beta"], graph.tensors[softmax.inputs[0]].quantization.scale) == \
        (1242899200, 24, -124)


def test_activation_ranges_follow_the_output_quantisation():
    assert q.activation_range("NONE", 0.1, 3) == (-128, 127)
    assert q.activation_range("RELU", 0.1, -128) == (-128, 127)
    assert q.activation_range("RELU", 0.1, -5) == (-5, 127)
    assert q.activation_range("RELU6", 0.05, -128) == (-128, -8)  # 6 / 0.05 = 120 steps above zero
    assert q.activation_range("RELU_N1_TO_1", 0.01, 0) == (-100, 100)


# --- the four MLPerf Tiny models ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_mlperf_tiny_model_imports_into_an_mlf_tvm_would_recognise(name, models_dir, tmp_path):
    out = tmp_path / f"{name}.tar"
    result = import_tflite(models_dir / MODELS[name], out, name)
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        meta = json.load(tar.extractfile("./metadata.json"))
    assert {f"./codegen/host/include/tvmgen_{name}.h", f"./codegen/host/src/{name}_lib0.c",
            "./metadata.json", "./src/model.tflite"} <= names
    module = meta["modules"][name]
    assert meta["version"] == 7 and module["executors"] == ["aot"]
    assert module["mlfbuild_import"]["sha256"] == result.sha256
    # the memory summary is the plan of this very code, and the plan is at the liveness floor
    assert module["memory"]["functions"]["main"][0]["workspace_size_bytes"] == result.pool_bytes == result.floor_bytes
    inspected = cli("inspect", str(out), "--json")
    assert inspected.returncode == 0, inspected.stderr
    assert json.loads(inspected.stdout)["modules"][0]["name"] == name


def test_the_layers_are_lowered_as_tflite_states_them(models_dir, tmp_path):
    """kws's layers as TFLite states them; a depthwise with one input channel (none here but the
    generated cases) stays TFLM's depthwise call — see test_import_operators."""
    result = import_tflite(models_dir / MODELS["kws"], tmp_path / "kws.tar", "kws")
    calls = [s.function for s in result.steps]
    assert calls[0] == "arm_convolve_wrapper_s8"  # TFLite's CONV_2D 10x4 with one input channel
    assert calls.count("arm_depthwise_conv_wrapper_s8") == 4
    assert result.steps[-3].alias_of is not None  # RESHAPE: no code, the same bytes


@pytest.mark.cross
@pytest.mark.parametrize("name", ["kws", "ic", pytest.param("vww", marks=pytest.mark.exhaustive),
                                  pytest.param("ad", marks=pytest.mark.exhaustive)])
def test_host_firmware_equals_litert_reference_kernels_bit_for_bit(name, models_dir, cmsis_nn, tmp_path):
    """All four, ad and ic included: their fully connected layers round once, as TFLite's do (CI: kws
    for the convolutions, ic for the residual ADDs and its last fully connected layer, whose
    double-rounded outputs differ on 2 of 100 samples; the exhaustive run adds vww and ad)."""
    model = models_dir / MODELS[name]
    reference = save_reference(tmp_path, model, samples=20)
    run = cli("run", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--reference", str(reference), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass"
    assert all(o["max_abs_error"] == 0 for o in result["models"][0]["outputs"])
    sources = json.loads((tmp_path / "b" / "build.json").read_text())["cmsis_nn"]["sources"]
    assert "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8_single_rounding.c" in sources
    # without --reference, the run is checked against the model the MLF carries, bit for bit
    again = cli("run", str(tmp_path / "b"), "--samples", "2", "--json")
    assert again.returncode == 0, again.stderr
    checked = json.loads(again.stdout)["models"][0]
    assert checked["reference"].endswith("src/model.tflite") and checked["model_derived"] is False


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("name", sorted(MODELS))
def test_host_firmware_equals_litert_over_100_samples(name, models_dir, cmsis_nn, tmp_path):
    model = models_dir / MODELS[name]
    reference = save_reference(tmp_path, model, samples=100)
    run = cli("run", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--reference", str(reference), "--atol", "0")
    assert run.returncode == 0, run.stderr


@pytest.mark.cross
def test_cmsis_nn_rounding_is_the_library_default_and_within_an_lsb_per_layer(models_dir, cmsis_nn, tmp_path):
    """--rounding cmsis-nn: CMSIS-NN's own rounding everywhere (what TFLM with CMSIS-NN computes).
    ad's ten fully connected layers then differ from TFLite by at most 3 LSB (measured: docs/import.md),
    and the run holds it to the model with the tolerance, not bit for bit."""
    mlf = tmp_path / "ad.tar"
    assert cli("import", str(models_dir / MODELS["ad"]), "-o", str(mlf), "--rounding", "cmsis-nn").returncode == 0
    reference = save_reference(tmp_path, models_dir / MODELS["ad"], samples=20)
    exact = cli("run", str(mlf), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
                "--reference", str(reference), "--atol", "0")
    assert exact.returncode == 7  # not bit-exact: the point of the default
    near = cli("run", str(tmp_path / "b"), "--reference", str(reference), "--atol", "3")
    assert near.returncode == 0, near.stderr
    sources = json.loads((tmp_path / "b" / "build.json").read_text())["cmsis_nn"]["sources"]
    assert "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c" in sources


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_kws_on_the_m4f_matches_litert_and_its_host_twin(models_dir, cmsis_nn, tmp_path):
    model = models_dir / MODELS["kws"]
    reference = save_reference(tmp_path, model, samples=3)
    run = cli("run", str(model), "-b", "mps2-an386", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o",
              str(tmp_path / "b"), "--reference", str(reference), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass"
    # without --reference, the run is checked against the model the MLF carries
    again = cli("run", str(tmp_path / "b"), "--samples", "2", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["models"][0]["reference"].endswith("src/model.tflite")


# --- refusals ----------------------------------------------------------------------------------------

def test_a_file_that_is_not_tflite_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "model.tflite"
    bad.write_bytes(b"\x00" * 64)
    out = tmp_path / "out"
    out.mkdir()
    run = cli("import", str(bad), "-o", str(out / "m.tar"))
    assert run.returncode == 3
    assert run.stderr.count("\n") == 1 and "not a TFLite model" in run.stderr
    assert list(out.iterdir()) == []


def test_a_damaged_model_is_refused_and_nothing_is_written(models_dir, tmp_path):
    data = bytearray((models_dir / MODELS["kws"]).read_bytes())
    data[8:12] = b"\xff\xff\xff\x7f"  # a table offset far past the end
    damaged = tmp_path / "damaged.tflite"
    damaged.write_bytes(bytes(data[: len(data) // 2]))
    out = tmp_path / "out"
    out.mkdir()
    run = cli("import", str(damaged), "-o", str(out / "m.tar"))
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1
    assert list(out.iterdir()) == []


def test_truncation_at_every_length_is_refused_cleanly(models_dir):
    """Every prefix of a real model: InvalidInputError or a graph, never another exception."""
    data = (models_dir / MODELS["ad"]).read_bytes()
    for length in list(range(0, 512, 7)) + list(range(512, len(data), len(data) // 97)):
        try:
            parse_model(data[:length])
        except InvalidInputError:
            pass


def test_an_unknown_module_name_is_refused(models_dir, tmp_path):
    run = cli("import", str(models_dir / MODELS["ad"]), "-o", str(tmp_path / "m.tar"), "--name", "9lives")
    assert run.returncode == 2 and "C identifier" in run.stderr
    assert not (tmp_path / "m.tar").exists()


# --- the imported MLF in the user's own firmware ----------------------------------------------------

@pytest.mark.qemu
@pytest.mark.cross
def test_an_imported_model_exports_and_runs_in_a_cmake_application(models_dir, cmsis_nn, tmp_path):
    """examples/check-app, built with CMake from the export of kws_ref_model.tflite (imported on the
    way), runs on the M4F and gives LiteRT's reference outputs bit for bit — as for a TVM MLF."""
    import subprocess

    from conftest import REPO

    app = REPO / "examples" / "check-app"
    folder = tmp_path / "export"
    done = cli("export", str(models_dir / MODELS["kws"]), "-b", "mps2-an386", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
               "-o", str(folder), "--name", "kws")
    assert done.returncode == 0, done.stderr
    reference = tmp_path / "kws.npz"
    arrays = litert_reference(models_dir / MODELS["kws"], samples=1)
    np.savez(reference, **{k: v[0] for k, v in arrays.items()})
    refs = tmp_path / "refs"
    refs.mkdir()
    subprocess.run([sys.executable, str(app / "reference.py"), str(folder / "mlfbuild-export.json"),
                    f"kws_ref_model={reference}", "-o", str(refs / "reference.h")], check=True)
    build = tmp_path / "build"
    for step in (["-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={folder}/cmake/arm-none-eabi.cmake",
                  f"-DMLF_EXPORTS={folder}", "-DMLF_BOARD_TARGET=mlfbuild::board_mps2_an386",
                  f"-DREFERENCE_DIR={refs}", "-DCMAKE_BUILD_TYPE=Release"], ["--build", str(build), "-j2"]):
        configured = subprocess.run(["cmake", *step], capture_output=True, text=True)
        assert configured.returncode == 0, configured.stdout + configured.stderr
    ran = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-display", "none", "-monitor", "none", "-serial",
                          "stdio", "-semihosting-config", "enable=on,target=native", "-kernel",
                          str(build / "check-app.elf")], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "kws_ref_model: status 0, 0 element(s) differ" in ran.stdout


def _model_litert_refuses(tmp_path: Path) -> Path:
    """A convolution whose bias says it is quantized along dimension 3 of its one dimension, as TFLM's
    person_detect does: mlfbuild imports it (the bias scale is not used), LiteRT refuses to load it."""
    from tflitewriter import bundle_model, pack_model

    model = bundle_model(np.random.default_rng(3), [("CONV_2D", {"channels": 2})]).to_model()
    bias = next(t for t in model.subgraphs[0].tensors if t.name.endswith("bias"))
    bias.quantization.quantizedDimension = 3
    path = tmp_path / "odd_bias.tflite"
    path.write_bytes(pack_model(model))
    return path


@pytest.mark.cross
def test_a_model_litert_cannot_run_is_run_against_its_host_twin_and_says_so(cmsis_nn, tmp_path):
    model = _model_litert_refuses(tmp_path)
    run = cli("run", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "build"),
              "--json")
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "LiteRT cannot run" in line]
    assert len(said) == 2 and all("host twin" in line for line in said)  # before building, and with the verdict
    result = json.loads(run.stdout)
    assert result["models"][0]["reference"] == "host" and result["status"] == "pass"


def test_a_reference_litert_cannot_run_is_refused_before_building(tmp_path):
    model = _model_litert_refuses(tmp_path)
    run = cli("run", str(model), "-b", "host", "-o", str(tmp_path / "build"), "--reference", str(model))
    assert run.returncode == 3 and "LiteRT cannot run" in run.stderr and "--reference host" in run.stderr
    assert run.stderr.count("\n") == 1 and not (tmp_path / "build").exists()


@pytest.mark.cross
def test_a_pool_kept_as_laid_out_names_the_importer_not_tvm(cmsis_nn, tmp_path):
    from tflitewriter import bundle_model

    model = bundle_model(np.random.default_rng(0), ["RELU", "CONV_2D"]).write(tmp_path / "m.tflite")
    built = cli("build", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"))
    assert built.returncode == 0, built.stderr
    said = [line for line in (built.stdout + built.stderr).splitlines() if "USMP workspace pool" in line]
    assert said and all("TVM" not in line for line in said), said
    assert any("mlfbuild's importer" in line or "re-planned" in line for line in said), said
    # and the size report, in each of its forms, names no TVM for the pool's layout
    for form in ((), ("--markdown",), ("--html", str(tmp_path / "size.html"))):
        sized = cli("size", str(tmp_path / "b"), *form)
        assert sized.returncode == 0, sized.stderr
        text = sized.stdout + (tmp_path / "size.html").read_text() if form[:1] == ("--html",) else sized.stdout
        pool = [line for line in text.splitlines() if "global_workspace" in line or "workspace pool" in line]
        assert pool and not any("TVM" in line for line in pool), pool


# --- input and output names --------------------------------------------------------------------------

def _model_of_names(tmp_path: Path, inputs: list[str], output: str) -> Path:
    """output = ((in0 - in1) - in2) ...: each input counts differently, so a swapped pairing of names and
    buffers cannot go unseen; of mlfbuild's own kernels, so no CMSIS-NN tree is needed."""
    from ai_edge_litert import schema_py_generated as schema
    from tflitewriter import GraphBuilder

    graph = GraphBuilder()
    x = [graph.add_input(name, "int8", (1, 8), scale=0.1 * (i + 1), zero_point=i) for i, name in enumerate(inputs)]
    y = x[0]
    for i, other in enumerate(x[1:]):
        last = i == len(x) - 2
        y_next = graph.add_tensor(output if last else f"partial{i}", "int8", (1, 8), scale=0.25 + 0.05 * i,
                                  zero_point=-3)
        graph.add_operator("SUB", [y, other], [y_next], schema.SubOptionsT())
        y = y_next
    graph.mark_output(y)
    return graph.write(tmp_path / "names.tflite")


def test_io_names_become_distinct_c_identifiers_deterministically():
    from mlfbuild.importer.emit import unique_c_identifiers

    assert unique_c_identifiers(["a-b", "a_b", "a.b", "0in"]) == ["a_b_1", "a_b", "a_b_2", "t_0in"]
    # a name already an identifier keeps its own, even after a name that sanitises to it
    assert unique_c_identifiers(["x y", "x_y", "x_y_1"]) == ["x_y_2", "x_y", "x_y_1"]
    # names equal but for case (the header's SIZE macros are upper case), C/C++ keywords, empty names
    assert unique_c_identifiers(["in", "IN", "int", "class", "", "9"]) == ["in", "IN_1", "int_", "class_", "t_", "t_9"]
    assert unique_c_identifiers(["same", "same"]) == ["same", "same_1"]


def test_imported_names_keep_the_models_own_and_are_unique_c_fields(tmp_path):
    model = _model_of_names(tmp_path, ["a-b", "a_b", "a.b"], "0in")
    out = tmp_path / "names.tar"
    assert cli("import", str(model), "-o", str(out)).returncode == 0
    with tarfile.open(out) as tar:
        header = tar.extractfile("./codegen/host/include/tvmgen_names.h").read().decode()
    assert "void* a_b_1;" in header and "void* a_b;" in header and "void* a_b_2;" in header
    assert "void* t_0in;" in header and "TVMGEN_NAMES_T_0IN_SIZE 8" in header
    inspected = cli("inspect", str(out), "--json")
    assert inspected.returncode == 0, inspected.stderr
    module = json.loads(inspected.stdout)["modules"][0]
    assert [(t["name"], t["c_name"]) for t in module["inputs"] + module["outputs"]] == \
        [("a-b", "a_b_1"), ("a_b", "a_b"), ("a.b", "a_b_2"), ("0in", "t_0in")]
    text = cli("inspect", str(out)).stdout
    assert "input  a-b (C: a_b_1)" in text and "output 0in (C: t_0in)" in text


def test_a_model_whose_names_clash_in_c_builds_and_equals_litert(tmp_path):
    """`a-b`, `a_b`, `a.b` all sanitise to a_b and `0in` starts with a digit: the firmware compiles, and
    each name reaches its own buffer (the reference pairs them by the model's names)."""
    pytest.importorskip("ai_edge_litert")
    model = _model_of_names(tmp_path, ["a-b", "a_b", "a.b"], "0in")
    run = cli("run", str(model), "-b", "host", "-o", str(tmp_path / "build"), "--samples", "4", "--reference",
              str(model), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass"
    outputs = result["models"][0]["outputs"]
    assert [o["name"] for o in outputs] == ["0in"] and outputs[0]["max_abs_error"] == 0
