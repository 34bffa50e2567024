"""Layer kernels generated at import (`mlfbuild import --kernels generated`, the default): each equals
LiteRT's reference kernel on the host (the intrinsics' plain-C twins) and in QEMU on the Cortex-M4F
(the ACLE intrinsics); `--kernels cmsis-nn` keeps every CMSIS-NN call, and the choice is recorded in
the MLF and shown by size and run --profile."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import cli
from litert_oracle import run_seeded
from test_import_operators import check_against_litert
from tflitewriter import bundle_model, chain_model

from mlfbuild.importer import import_tflite
from mlfbuild.importer.kernels import generated_layers


def _pointwise(channels: int, out_channels: int, **more):
    return ("CONV_2D", {"kernel_h": 1, "kernel_w": 1, "stride_h": 1, "stride_w": 1, "dilation_h": 1,
                        "dilation_w": 1, "padding": "VALID", "channels": channels, "out_channels": out_channels,
                        **more})


# input and output channels multiples of 4, batches, extreme zero points, every fused activation
POINTWISE = [
    _pointwise(4, 4),
    _pointwise(8, 12, batch=2, activation="RELU6"),
    _pointwise(12, 8, input_zero_point=-128, output_zero_point=127, activation="NONE"),
    _pointwise(16, 4, input_zero_point=127, output_zero_point=-128, activation="RELU"),
    # a scale above 1/2 (a shift >= 0): requantised by mlf_requantize, not the inlined right shift
    _pointwise(8, 4, output_scale_ratio=0.002),
]


def _depthwise(channels: int, kernel=(3, 3), stride=(1, 1), padding="SAME", dilation=(1, 1), **more):
    return ("DEPTHWISE_CONV_2D", {"kernel_h": kernel[0], "kernel_w": kernel[1], "stride_h": stride[0],
                                  "stride_w": stride[1], "dilation_h": dilation[0], "dilation_w": dilation[1],
                                  "padding": padding, "channels": channels, "depth_multiplier": 1, "batch": 1,
                                  **more})


# batch 1, depth multiplier 1, channels multiples of 4: windows inside and across the padding
DEPTHWISE = [
    _depthwise(4, height=6, width=5),
    _depthwise(8, stride=(2, 2), height=9, width=9, activation="RELU6"),
    _depthwise(4, kernel=(3, 2), stride=(2, 1), dilation=(2, 2), height=9, width=7),
    _depthwise(12, kernel=(5, 5), padding="VALID", height=7, width=7, input_zero_point=-128, output_zero_point=127,
               activation="NONE"),
    _depthwise(8, padding="VALID", height=5, width=6, input_zero_point=127, output_zero_point=-128),
    _depthwise(4, output_scale_ratio=0.002, height=6, width=6),  # a shift >= 0: mlf_requantize
]


# convolutions over a window (batch 1): 3x3 across the padding, strides, dilations, 1x1 of stride 2
WINDOWED = [
    _pointwise(4, 4, kernel_h=3, kernel_w=3, padding="SAME", batch=1),
    _pointwise(8, 8, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, padding="SAME", batch=1, height=7, width=8),
    _pointwise(4, 8, kernel_h=2, kernel_w=3, dilation_h=2, dilation_w=1, padding="SAME", batch=1, height=6, width=5,
               input_zero_point=-128, output_zero_point=127, activation="NONE"),
    _pointwise(12, 4, kernel_h=3, kernel_w=3, padding="VALID", batch=1, height=5, width=5, activation="RELU6"),
    _pointwise(8, 4, stride_h=2, stride_w=2, batch=1, height=6, width=6, output_scale_ratio=0.002),
    # input channels short of a multiple of 4 (63 of 64 products the layer's) and a window too large for
    # the patch kernel: the last 3 of each tap's channels read bytewise
    _pointwise(63, 4, kernel_h=3, kernel_w=3, padding="VALID", batch=1, height=4, width=4),
]


# first layers of few input channels (the patch kernel): a spectrogram's one channel (kws, micro_speech's
# depthwise of one channel), an image's three, an odd window (a zero pair half), dilation, extreme zero
# points, a shift >= 0
PATCH = [
    _pointwise(1, 8, kernel_h=10, kernel_w=4, stride_h=2, stride_w=2, padding="SAME", batch=1, height=12, width=6),
    _pointwise(3, 8, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, padding="SAME", batch=1, height=9, width=8,
               activation="RELU6"),
    _pointwise(3, 4, batch=1, height=3, width=4, input_zero_point=-128, output_zero_point=127, activation="NONE"),
    _pointwise(2, 4, kernel_h=2, kernel_w=3, dilation_h=2, padding="VALID", batch=1, height=6, width=6,
               input_zero_point=127, output_zero_point=-128),
    _depthwise(1, kernel=(10, 8), stride=(2, 2), height=12, width=10, depth_multiplier=8),
    _depthwise(1, kernel=(3, 3), height=5, width=5, depth_multiplier=4, output_scale_ratio=0.002),
    _pointwise(3, 8, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, padding="SAME", batch=1, height=9, width=7),
    _pointwise(7, 4, kernel_h=2, kernel_w=2, padding="VALID", batch=1, height=4, width=5),
    _pointwise(5, 4, batch=1),
]


# fully connected, per-tensor weights: units and depth multiples of 4, batches, 3-D inputs, no bias
FULLY_CONNECTED = [
    ("FULLY_CONNECTED", {"input_shape": (1, 16), "units": 8}),
    ("FULLY_CONNECTED", {"input_shape": (2, 72), "units": 4, "bias": False, "activation": "RELU"}),
    ("FULLY_CONNECTED", {"input_shape": (1, 3, 8), "units": 12, "input_zero_point": -128, "output_zero_point": 127,
                         "activation": "NONE"}),
    ("FULLY_CONNECTED", {"input_shape": (1, 4), "units": 4, "input_zero_point": 127, "output_zero_point": -128}),
]


def _random_pointwise(rng: np.random.Generator, count: int) -> list:
    return [_pointwise(4 * int(rng.integers(1, 9)), 4 * int(rng.integers(1, 5))) for _ in range(count)]


def _lib2(mlf) -> str:
    with tarfile.open(mlf) as tar:
        name = next(n for n in tar.getnames() if n.endswith("_lib2.c"))
        return tar.extractfile(name).read().decode()


def _metadata(mlf) -> dict:
    with tarfile.open(mlf) as tar:
        name = next(n for n in tar.getnames() if n.endswith("metadata.json"))
        return json.loads(tar.extractfile(name).read())


def test_pointwise_layers_are_generated_and_others_keep_their_call(tmp_path):
    # batch 2, depthwise of 6, multipliers, windows mostly across the padding: CMSIS-NN
    kept = [_pointwise(4, 4, kernel_h=3, kernel_w=3, padding="SAME", batch=2), _depthwise(6),
            _depthwise(4, depth_multiplier=2), _depthwise(4, kernel=(5, 5), height=3, width=3)]
    kept += [("FULLY_CONNECTED", {"input_shape": (1, 6), "units": 4}), ("FULLY_CONNECTED/per_channel", {})]
    cases = POINTWISE + DEPTHWISE + WINDOWED + PATCH + FULLY_CONNECTED + kept
    model = bundle_model(np.random.default_rng(3), cases).write(tmp_path / "m.tflite")
    result = import_tflite(model, tmp_path / "m.tar")
    layers = len(POINTWISE) + len(DEPTHWISE) + len(WINDOWED) + len(PATCH)
    generated = layers + len(FULLY_CONNECTED)
    assert generated_layers(result.steps) == generated
    source = _lib2(tmp_path / "m.tar")
    # one layer of each kind scales above 1/2 (a shift >= 0): mlf_requantize, not the inlined right shift
    assert source.count("= mlf_requantize(") == 16 and source.count("= mlf_dsp_requantize(") == 4 * (layers - 4)
    assert "[2] << 16)" in source  # the 63-channel layer's last three, byte by byte
    assert source.count("static const int32_t filter_pairs[") == len(PATCH)  # paired at import
    # TFLite's one rounding (and the per-channel fully connected kernel's own)
    assert source.count("= mlf_requantize_once(") == 4 * len(FULLY_CONNECTED) + 1
    assert (source.count("(void)global_workspace_var;\n#if MLF_GENERATED_KERNELS") +
            source.count("(void)global_workspace_var;\n#if MLF_MVE_KERNELS")) == generated
    # the call stays for cores without DSP
    assert source.count("arm_convolve_wrapper_s8(") == len(POINTWISE) + len(WINDOWED) + len(PATCH) - 2 + 1
    assert source.count("arm_depthwise_conv_wrapper_s8(") == len(DEPTHWISE) + 2 + 3
    assert source.count("arm_fully_connected_s8(") == len(FULLY_CONNECTED) + 1
    (module,) = _metadata(tmp_path / "m.tar")["modules"].values()
    assert module["mlfbuild_import"]["kernels"] == "generated"


def test_kernels_cmsis_nn_gives_the_cmsis_nn_calls(tmp_path):
    model = bundle_model(np.random.default_rng(3), POINTWISE).write(tmp_path / "m.tflite")
    imported = cli("import", str(model), "-o", str(tmp_path / "c.tar"), "--kernels", "cmsis-nn")
    assert imported.returncode == 0, imported.stderr
    assert "generated" not in imported.stdout
    assert "MLF_GENERATED_KERNELS" not in _lib2(tmp_path / "c.tar")
    (module,) = _metadata(tmp_path / "c.tar")["modules"].values()
    assert module["mlfbuild_import"]["kernels"] == "cmsis-nn"
    assert "mlf_dsp_" not in _lib2(tmp_path / "c.tar")
    assert "cmsis-nn kernels" in cli("inspect", str(tmp_path / "c.tar")).stdout
    assert _lib2(tmp_path / "c.tar").count("arm_convolve_wrapper_s8(") == len(POINTWISE)
    generated = import_tflite(model, tmp_path / "g.tar")
    assert generated_layers(generated.steps) == len(POINTWISE)


def test_an_unknown_kernels_choice_is_refused(tmp_path):
    model = bundle_model(np.random.default_rng(3), POINTWISE[:1]).write(tmp_path / "m.tflite")
    refused = cli("import", str(model), "-o", str(tmp_path / "c.tar"), "--kernels", "fast")
    assert refused.returncode == 2 and "--kernels" in refused.stderr
    assert not (tmp_path / "c.tar").exists()


@pytest.mark.cross
def test_generated_layers_equal_litert_on_the_host(cmsis_nn, tmp_path):
    cases = POINTWISE + DEPTHWISE + WINDOWED + PATCH + FULLY_CONNECTED
    model = bundle_model(np.random.default_rng(41), cases).write(tmp_path / "pw.tflite")
    assert generated_layers(import_tflite(model, tmp_path / "pw.tar").steps) == len(cases)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


def test_generated_fully_connected_layers_round_as_the_rounding_asks(tmp_path):
    """--rounding tflite: TFLite's one rounding (mlf_requantize_once); cmsis-nn: CMSIS-NN's two
    (mlf_requantize, the arithmetic of arm_nn_requantize without CMSIS_NN_USE_SINGLE_ROUNDING)."""
    model = bundle_model(np.random.default_rng(45), FULLY_CONNECTED).write(tmp_path / "fc.tflite")
    for rounding, function in (("tflite", "mlf_requantize_once("), ("cmsis-nn", "mlf_requantize(")):
        import_tflite(model, tmp_path / f"{rounding}.tar", rounding=rounding)
        assert _lib2(tmp_path / f"{rounding}.tar").count(f"= {function}") == 4 * len(FULLY_CONNECTED)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_generated_ad_computes_what_cmsis_nn_computes_with_its_rounding(cmsis_nn, models_dir, tmp_path):
    """ad (ten fully connected layers) with --rounding cmsis-nn on the Cortex-M4F: the generated layers'
    outputs are off LiteRT's by exactly the LSBs CMSIS-NN's calls are, sample by sample."""
    compared = {}
    for kernels in ("generated", "cmsis-nn"):
        mlf = tmp_path / f"{kernels}.tar"
        imported = cli("import", str(models_dir / "ad01_int8.tflite"), "-o", str(mlf), "--rounding", "cmsis-nn",
                       "--kernels", kernels)
        assert imported.returncode == 0, imported.stderr
        run = cli("run", str(mlf), "-b", "mps2-an386", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / kernels),
                  "--samples", "4", "--json")
        assert run.returncode == 0, run.stderr
        compared[kernels] = [(o["rmse"], o["max_abs_error"], o["first_mismatches"])
                             for o in json.loads(run.stdout)["models"][0]["outputs"]]
    assert compared["cmsis-nn"][0][0] > 0  # CMSIS-NN's two roundings are not TFLite's one here
    assert compared["generated"] == compared["cmsis-nn"]


def _shows_the_kernels(build: Path, kernels: str) -> None:
    """build.json records the choice, and size shows it beside the memory plan."""
    record = json.loads((build / "build.json").read_text())
    assert record["models"][0]["imported_from"]["kernels"] == kernels
    size = json.loads(cli("size", "--json", str(build)).stdout)
    assert size["modules"][0]["workspace_pool"]["kernels"] == kernels


@pytest.mark.cross
def test_build_json_and_size_show_cmsis_nn_kernels(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(3), POINTWISE[:2]).write(tmp_path / "m.tflite")
    assert cli("import", str(model), "-o", str(tmp_path / "c.tar"), "--kernels", "cmsis-nn").returncode == 0
    built = cli("build", str(tmp_path / "c.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o",
                str(tmp_path / "b"))
    assert built.returncode == 0, built.stderr
    _shows_the_kernels(tmp_path / "b", "cmsis-nn")


@pytest.mark.qemu
@pytest.mark.cross
def test_generated_layers_equal_litert_on_the_cortex_m4f(cmsis_nn, tmp_path):
    """The ACLE intrinsics' path (SXTB16, SXTAB16, SMLAD, SMLABB/SMLATT, SSAT) on mps2-an386, a layer of
    each kind; the build proves the pool (no "not proven"), records the kernels, and run --profile's
    header names them."""
    cases = POINTWISE[1:2] + DEPTHWISE[1:2] + WINDOWED[5:6] + PATCH[1:2] + PATCH[4:5] + FULLY_CONNECTED[2:3]
    model = bundle_model(np.random.default_rng(43), cases).write(tmp_path / "m.tflite")
    built = cli("build", str(model), "-b", "mps2-an386", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "m4"))
    assert built.returncode == 0, built.stderr
    assert "not proven" not in built.stdout + built.stderr
    _shows_the_kernels(tmp_path / "m4", "generated")
    inputs, outputs = run_seeded(model, seed=5, samples=2)
    np.savez(tmp_path / "ref.npz", **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    run = cli("run", str(tmp_path / "m4"), "--reference", str(tmp_path / "ref.npz"), "--atol", "0", "--profile")
    assert run.returncode == 0, run.stderr
    assert "result: pass" in run.stdout and "generated kernels" in run.stdout


@pytest.mark.qemu
@pytest.mark.cross
def test_a_patch_kernel_reading_an_input_in_the_pool_is_proven_on_the_cortex_m4f(cmsis_nn, tmp_path):
    """Under --memory min the model's input is a tensor of the pool, so the analysis bounds every read
    of it: the patch kernel's taps across the padding (zeros) and inside the image (reads) are told
    apart by a test the analysis follows (ic's first layer on the M4F was 'not proven')."""
    # an image's first layer (3x3 across the padding), a wider layer after it holding the peak (so no
    # row band writes the first over its input)
    layers = [("CONV_2D", {"kernel_h": k, "kernel_w": k, "stride_h": 1, "stride_w": 1, "dilation_h": 1,
                           "dilation_w": 1, "padding": padding, "out_channels": out})
              for k, padding, out in ((3, "SAME", 8), (1, "VALID", 32))]
    model = chain_model(np.random.default_rng(45), layers, input_shape=(1, 6, 6, 3)).write(tmp_path / "m.tflite")
    mlf = import_tflite(model, tmp_path / "m.tar", memory="min").mlf
    built = cli("build", str(mlf), "-b", "mps2-an386", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "m4"))
    assert built.returncode == 0, built.stderr
    assert "not proven" not in built.stdout + built.stderr and "patch[" in _lib2(mlf)
    inputs, outputs = run_seeded(model, seed=5, samples=2)
    np.savez(tmp_path / "ref.npz", **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    run = cli("run", str(tmp_path / "m4"), "--reference", str(tmp_path / "ref.npz"), "--atol", "0")
    assert run.returncode == 0 and "result: pass" in run.stdout, run.stdout + run.stderr


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_many_generated_layers_equal_litert_on_the_host_and_the_cortex_m4f(cmsis_nn, tmp_path):
    cases = POINTWISE + DEPTHWISE + WINDOWED + PATCH + FULLY_CONNECTED + _random_pointwise(np.random.default_rng(12), 12)
    model = bundle_model(np.random.default_rng(44), cases).write(tmp_path / "many.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)
    check_against_litert(model, "mps2-an386", cmsis_nn("v6.0.0"), tmp_path / "m4", samples=4)


# depthwise layers for the MVE kernel (channels multiples of 8): borders, strides, dilations, extreme
# zero points, activations, a shift >= 0 (the left shift), VALID windows
MVE_DEPTHWISE = [
    _depthwise(8, height=6, width=5),
    _depthwise(16, stride=(2, 2), height=9, width=9, activation="RELU6"),
    _depthwise(8, kernel=(3, 2), stride=(2, 1), dilation=(2, 2), height=9, width=7),
    _depthwise(24, kernel=(5, 5), padding="VALID", height=7, width=7, input_zero_point=-128, output_zero_point=127,
               activation="NONE"),
    _depthwise(8, height=5, width=6, input_zero_point=127, output_zero_point=-128),
    _depthwise(8, output_scale_ratio=0.002, height=6, width=6),
]


def test_depthwise_layers_of_eight_channels_get_an_mve_kernel_ahead_of_the_dsp_one(tmp_path):
    cases = MVE_DEPTHWISE[:2] + [_depthwise(4, height=6, width=5), _depthwise(12, height=6, width=5)]
    model = bundle_model(np.random.default_rng(5), cases).write(tmp_path / "m.tflite")
    result = import_tflite(model, tmp_path / "m.tar")
    assert generated_layers(result.steps) == 4
    source = _lib2(tmp_path / "m.tar")
    assert source.count("(void)global_workspace_var;\n#if MLF_MVE_KERNELS") == 2
    assert source.count("(void)global_workspace_var;\n#if MLF_GENERATED_KERNELS") == 2
    assert source.count("#else\n#if MLF_GENERATED_KERNELS") == 2  # the DSP kernel and the call stay behind it
    assert source.count("vmullbq_int_s16(x, f)") == 2 * 2 * 9  # every tap unrolled, inside and on the border


@pytest.mark.qemu
@pytest.mark.cross
def test_mve_depthwise_layers_equal_litert_on_the_cortex_m55(cmsis_nn, tmp_path):
    """The MVE intrinsics' path, on mps3-an547; the build proves the pool (no "not proven" line)."""
    cases = MVE_DEPTHWISE[1:3] + MVE_DEPTHWISE[4:6]
    model = bundle_model(np.random.default_rng(46), cases).write(tmp_path / "dw.tflite")
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=2)
    (pool,) = [m["workspace_pool"] for m in json.loads((tmp_path / "m55" / "build.json").read_text())["models"]]
    assert "not proven" not in pool["reason"]


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_many_mve_depthwise_layers_equal_litert_on_the_cortex_m55(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(47), MVE_DEPTHWISE + DEPTHWISE).write(tmp_path / "dw.tflite")
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=4)


def _convolution(channels: int, out_channels: int, kernel=(3, 3), stride=(1, 1), padding="SAME", **more):
    return _pointwise(channels, out_channels, kernel_h=kernel[0], kernel_w=kernel[1], stride_h=stride[0],
                      stride_w=stride[1], padding=padding, batch=1, **more)


# convolutions for the MVE kernel (input channels a multiple of 16, a window row of at most 4 vectors):
# borders, an odd width (a row's last pixel alone), strides, a dilation, 1x1 of stride 2, extreme zero
# points, activations, a shift >= 0 (the left shift), VALID windows, a 2-channel output
MVE_CONVOLUTION = [
    _convolution(16, 6, height=6, width=7),
    _convolution(16, 8, stride=(2, 2), height=9, width=8, activation="RELU6"),
    _convolution(32, 4, kernel=(1, 1), stride=(2, 2), height=6, width=5),
    _convolution(16, 2, kernel=(3, 2), dilation_h=2, dilation_w=2, height=7, width=6, input_zero_point=-128,
                 output_zero_point=127, activation="NONE"),
    _convolution(16, 4, padding="VALID", height=5, width=6, input_zero_point=127, output_zero_point=-128),
    _convolution(16, 4, height=4, width=4, output_scale_ratio=0.0001),
    _convolution(64, 4, kernel=(1, 1), stride=(2, 1), height=3, width=4),
    _convolution(32, 4, height=5, width=5, activation="RELU"),
]


# first layers of fewer channels (a window row of at most 16 bytes): an image's three, a spectrogram's
# one, an odd width, extreme zero points, rows of one byte
MVE_FEW_CHANNELS = [
    _convolution(3, 8, stride=(2, 2), height=9, width=8, activation="RELU6"),
    _convolution(1, 4, kernel=(10, 4), stride=(2, 2), height=12, width=6),
    _convolution(3, 2, height=5, width=5, input_zero_point=-128, output_zero_point=127, activation="NONE"),
    # window rows one byte apart: predicated stores gcc must keep (MLF_MVE_KEEP_STORES)
    _convolution(1, 2, kernel=(2, 1), stride=(1, 2), height=9, width=8),
]


def test_convolutions_over_16_channel_taps_get_an_mve_kernel(tmp_path):
    """The MVE kernel for input channels a multiple of 16 and even output channels; CMSIS-NN's call
    (and the DSP kernel) for 1x1 of stride 1, other input channels, odd outputs."""
    kept = [_pointwise(16, 4), _convolution(8, 4, height=4, width=4), _convolution(16, 3, height=4, width=4)]
    model = bundle_model(np.random.default_rng(7), MVE_CONVOLUTION + kept).write(tmp_path / "m.tflite")
    import_tflite(model, tmp_path / "m.tar")
    source = _lib2(tmp_path / "m.tar")
    assert source.count("(void)global_workspace_var;\n#if MLF_MVE_KERNELS") == len(MVE_CONVOLUTION)
    assert source.count("static const int32_t folded_bias[") == len(MVE_CONVOLUTION)
    assert source.count("arm_convolve_wrapper_s8(") == len(MVE_CONVOLUTION) + len(kept)  # the call stays
    layers = source.split("(void)global_workspace_var;\n#if MLF_MVE_KERNELS")[1:]
    # a 3x3 window read in place, three rows of three taps, 4 rows of 7 pixels of 16 channels apart
    assert "MLF_MVE_WINDOW_2X2(a00, a01, a10, a11, in, in + 16, f, f + 144, 3, 3, 64);" in layers[0]
    # a dilated window (3x2, dilation 2): a row of two taps 16 bytes apart for each of its rows
    dilated = "MLF_MVE_WINDOW_2X2(a00, a01, a10, a11, in + ky * 192, in + ky * 192 + 16, f + ky * 32, f + ky * 32 + 96"
    assert f"{dilated}, 2, 1, 16);" in layers[3]
    # a 1x1 window of two vectors, read at constant offsets
    assert layers[2].split("} else {")[0].count("vmladavaq_s8(a00, x0, w0)") == 2
    # windows across the padding copied to the stack once for all channels
    assert all("int8_t windows[" in layer and "vstrbq_s8(windows + " in layer for layer in layers)
    assert source.count("(mlf_mve_requantize(sums") == 2  # the left shift: its layer's two paths
    assert source.count("mlf_mve_store_first(") == 3 * 2 + 2  # the odd widths' last pixel (and the helpers)


def test_first_layers_of_few_channels_get_an_mve_kernel_over_padded_windows(tmp_path):
    """Every window copied (a row of taps a predicated load and store), the filters padded to whole
    vectors in flash; rows of more than 16 bytes and dilated rows keep CMSIS-NN's call."""
    kept = [_convolution(8, 4, height=4, width=4), _convolution(3, 4, dilation_h=1, dilation_w=2, height=6, width=6)]
    model = bundle_model(np.random.default_rng(8), MVE_FEW_CHANNELS + kept).write(tmp_path / "m.tflite")
    assert _mve_convolutions(import_tflite(model, tmp_path / "m.tar").steps) == len(MVE_FEW_CHANNELS)
    layers = _lib2(tmp_path / "m.tar").split("(void)global_workspace_var;\n#if MLF_MVE_KERNELS")[1:]
    assert "static const int8_t padded_filters[256] = {" in layers[0]  # 8 channels of 27 values, padded to 32
    assert "mlf_mve_store_bytes(windows + ky * 9, 9, mlf_mve_load_bytes(at, 9));" in layers[0]
    assert "vstrbq_s8(windows + 16, vdupq_n_s8(0));" in layers[0]  # the padding of both windows zeroed once
    assert "MLF_MVE_WINDOW_2X2(a00, a01, a10, a11, windows, windows + 48, f, f + 48, 1, 3, 0);" in layers[1]


def _mve_convolutions(steps) -> int:
    return sum(1 for step in steps if step.function == "arm_convolve_wrapper_s8" and "#if MLF_MVE_KERNELS" in step.body)


@pytest.mark.qemu
@pytest.mark.cross
def test_mve_convolutions_equal_litert_on_the_cortex_m55(cmsis_nn, tmp_path):
    """VMLADAVA, the scatter store and the predicated store on mps3-an547; the pool proven."""
    cases = MVE_CONVOLUTION[:4] + MVE_CONVOLUTION[7:] + MVE_FEW_CHANNELS[1:]
    model = bundle_model(np.random.default_rng(48), cases).write(tmp_path / "conv.tflite")
    assert _mve_convolutions(import_tflite(model, tmp_path / "conv.tar").steps) == len(cases)
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=2)
    (pool,) = [m["workspace_pool"] for m in json.loads((tmp_path / "m55" / "build.json").read_text())["models"]]
    assert "not proven" not in pool["reason"] and "beyond" not in pool["reason"]


def _random_mve_convolutions(rng: np.random.Generator, count: int) -> list:
    cases = []
    for _ in range(count):
        kernel = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)) if kernel != (1, 1) else 2)
        dilation = int(rng.integers(1, 3)) if kernel != (1, 1) else 1
        cases.append(_convolution(int(rng.choice([1, 2, 3, 16, 32, 48])), 2 * int(rng.integers(1, 5)), kernel=kernel,
                                  stride=stride, padding=str(rng.choice(["SAME", "VALID"])), dilation_h=dilation,
                                  dilation_w=dilation, height=int(rng.integers(5, 10)), width=int(rng.integers(5, 10))))
    return cases


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_many_mve_convolutions_equal_litert_on_the_cortex_m55(cmsis_nn, tmp_path):
    cases = MVE_CONVOLUTION + MVE_FEW_CHANNELS + _random_mve_convolutions(np.random.default_rng(49), 12)
    model = bundle_model(np.random.default_rng(50), cases).write(tmp_path / "conv.tflite")
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=4)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("model, convolutions", [("pretrainedResnet_quant.tflite", 9), ("kws_ref_model.tflite", 1),
                                                 ("vww_96_int8.tflite", 1)])
def test_generated_mlperf_models_equal_litert_on_the_cortex_m55_over_100_samples(model, convolutions, cmsis_nn,
                                                                                 models_dir, tmp_path):
    """ic (its nine convolutions on the MVE convolution kernel), kws and vww (their first layers) on
    mps3-an547, bit for bit with LiteRT."""
    mlf = tmp_path / "m.tar"
    assert _mve_convolutions(import_tflite(models_dir / model, mlf).steps) == convolutions
    built = cli("build", str(mlf), "-b", "mps3-an547", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "m55"))
    assert built.returncode == 0, built.stderr
    assert "not proven" not in built.stdout + built.stderr
    run = cli("run", str(tmp_path / "m55"), "--samples", "100", "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    assert all(o["max_abs_error"] == 0 for o in json.loads(run.stdout)["models"][0]["outputs"])


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_generated_ic_computes_what_cmsis_nn_computes_with_its_rounding_on_the_cortex_m55(cmsis_nn, models_dir,
                                                                                          tmp_path):
    """--rounding cmsis-nn on mps3-an547: the MVE convolutions' outputs are off LiteRT's by exactly what
    CMSIS-NN's calls give (its convolutions round as TFLite's do; the last fully connected layer twice)."""
    compared = {}
    for kernels in ("generated", "cmsis-nn"):
        mlf = tmp_path / f"{kernels}.tar"
        imported = cli("import", str(models_dir / "pretrainedResnet_quant.tflite"), "-o", str(mlf), "--rounding",
                       "cmsis-nn", "--kernels", kernels)
        assert imported.returncode == 0, imported.stderr
        run = cli("run", str(mlf), "-b", "mps3-an547", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o",
                  str(tmp_path / kernels), "--samples", "10", "--atol", "1", "--json")
        assert run.returncode == 0, run.stderr
        compared[kernels] = [(o["rmse"], o["max_abs_error"], o["first_mismatches"])
                             for o in json.loads(run.stdout)["models"][0]["outputs"]]
    assert compared["generated"] == compared["cmsis-nn"]
