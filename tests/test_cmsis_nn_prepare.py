"""CMSIS-NN calls prepared at build time (canalysis/cmsis_nn_prepare.py): kernel sums computed into
flash, a depthwise convolution of one input channel replaced by a convolution. Each is held to what
the library itself computes: the host compiles the library's generic C for both sides."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import THIRD_PARTY_ENV, cli, required_folder
from mlfbuild.canalysis.callsites import cmsis_nn_call_sites
from mlfbuild.canalysis.cfront import parse_sources
from mlfbuild.canalysis.cmsis_nn_prepare import DSP_MIN_MULTIPLIER, kernel_sums, replace_call
from mlfbuild.canalysis.constants import operator_constants
from mlfbuild.project.cmsis_nn import needed_sources
from mlfbuild.project.cmsis_nn_scratch import REGION_HEADER, ScratchCall, ScratchPlan, prototype


def _tree_texts(tree: Path) -> tuple[dict[str, str], dict[str, str]]:
    headers = {p.relative_to(tree).as_posix(): p.read_text() for p in (tree / "Include").rglob("*.h")}
    sources = {p.relative_to(tree / "Source").as_posix(): p.read_text() for p in (tree / "Source").rglob("*.c")}
    return headers, sources


def _c_array(ctype: str, name: str, values) -> str:
    return f"static const {ctype} {name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};\n"


def _depthwise_case(index: int, rng: np.random.Generator) -> tuple[str, int, int]:
    """One TVM-shaped operator: a depthwise convolution of one input channel, its constants passed from
    a run function as TVM's main passes them. Returns (C, input bytes, output bytes)."""
    multiplier = int(rng.choice([1, 3, 8, 64]))
    kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 5))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    ph, pw = int(rng.integers(0, kh)), int(rng.integers(0, kw))
    ih, iw = int(rng.integers(kh * dh, 20)), int(rng.integers(kw * dw, 12))
    oh, ow = (ih + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (iw + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    low = int(rng.integers(-128, -60))
    weights = rng.integers(-127, 128, kh * kw * multiplier)
    bias = rng.integers(-4000, 4000, multiplier)
    multipliers = rng.integers(2**30, 2**31 - 1, multiplier)
    shifts = rng.integers(-9, 2, multiplier)
    code = (_c_array("int8_t", f"constant_f{index}", weights) + _c_array("int32_t", f"constant_b{index}", bias)
            + _c_array("int32_t", f"constant_m{index}", multipliers) + _c_array("int32_t", f"constant_s{index}", shifts))
    code += f"""
int32_t op{index}(int8_t* input_, int8_t* filter_, int32_t* multiplier_, int32_t* bias_, int32_t* shift_, int8_t* output_) {{
  cmsis_nn_context context= {{scratch,4096}};
  cmsis_nn_tile stride = {{{sw},{sh}}};
  cmsis_nn_tile padding = {{{pw},{ph}}};
  cmsis_nn_tile dilation = {{{dw},{dh}}};
  cmsis_nn_activation activation = {{{low},127}};
  cmsis_nn_dw_conv_params conv_params = {{{int(rng.integers(-127, 129))}, {int(rng.integers(-128, 128))}, {multiplier}, stride, padding, dilation, activation}};
  cmsis_nn_per_channel_quant_params quant_params = {{multiplier_, shift_}};
  cmsis_nn_dims input_dims = {{1,{ih},{iw},1}};
  cmsis_nn_dims filter_dims = {{1,{kh},{kw},{multiplier}}};
  cmsis_nn_dims bias_dims = {{1,1,1,{multiplier}}};
  cmsis_nn_dims output_dims = {{1,{oh},{ow},{multiplier}}};
  arm_cmsis_nn_status status = arm_depthwise_conv_wrapper_s8(&context, &conv_params, &quant_params, &input_dims, input_, &filter_dims, filter_, &bias_dims, bias_, &output_dims, output_);
  return status;
}}
int32_t run{index}(int8_t* input, int8_t* output) {{
  return op{index}(input, (int8_t*)constant_f{index}, (int32_t*)constant_m{index}, (int32_t*)constant_b{index}, (int32_t*)constant_s{index}, output);
}}
"""
    return code, ih * iw, oh * ow * multiplier


@pytest.mark.parametrize("version", ["v6.0.0", "v4.1.0"])
def test_a_one_channel_depthwise_convolution_replaced_by_a_convolution_is_bit_exact(cmsis_nn, tmp_path, version):
    """Random kernels, strides, paddings, dilations, multipliers and per-channel quantisation: the
    library's depthwise call as written and the convolution mlfbuild puts in its place (filter
    transposed at build time) give the same bytes."""
    tree = cmsis_nn(version)
    headers, texts = _tree_texts(tree)
    rng = np.random.default_rng(30)
    cases = [_depthwise_case(i, rng) for i in range(8)]
    source = "#include <arm_nnfunctions.h>\nstatic int8_t scratch[4096];\n" + "".join(c for c, _, _ in cases)
    include = (tree / "Include",)
    sites = cmsis_nn_call_sites({"ops.c": source}, include)
    constants = operator_constants(parse_sources({"ops.c": source}, include))
    declared = {"arm_convolve_wrapper_s8", "arm_convolve_wrapper_s8_get_buffer_size"}
    calls = []
    for rel, call in sites:
        replaced = replace_call(call, prototype(headers, call.kernel), constants, frozenset({"dsp", "mve"}), declared)
        assert replaced is not None and replaced.call.kernel == "arm_convolve_wrapper_s8", call.function
        assert replace_call(call, prototype(headers, call.kernel), constants, frozenset(), declared) is None
        on_dsp = replace_call(call, prototype(headers, call.kernel), constants, frozenset({"dsp"}), declared)
        multiplier = call.values["conv_params"]["ch_mult"]
        assert (on_dsp is not None) == (multiplier >= DSP_MIN_MULTIPLIER), (call.function, multiplier)
        calls.append(ScratchCall(call=replaced.call, source=rel, size_function=None, size_arguments=(),
                                 library_bytes=0, kernel_sums=None, original=call,
                                 declarations=replaced.declarations, preparations=(replaced.preparation,)))
    rewritten = ScratchPlan(calls=tuple(calls), kernel_sums=None).rewrite("ops.c", source)
    assert "arm_depthwise_conv_wrapper_s8(" not in rewritten

    (tmp_path / REGION_HEADER).write_text("")
    (tmp_path / "replaced.c").write_text(rewritten)
    renames = "".join(f"#define op{i} original_op{i}\n#define run{i} original_run{i}\n" for i in range(len(cases)))
    (tmp_path / "original.c").write_text(renames + source)
    main = "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n"
    for i in range(len(cases)):
        main += f"int32_t run{i}(int8_t*, int8_t*);\nint32_t original_run{i}(int8_t*, int8_t*);\n"
    main += "static int8_t in[4096], a[65536], b[65536];\nint main(void) {\n  srand(7);\n"
    for i, (_, inputs, outputs) in enumerate(cases):
        main += (f"  for (int s = 0; s < 3; s++) {{\n    for (int k = 0; k < {inputs}; k++) in[k] = (int8_t)(rand() & 0xff);\n"
                 f"    memset(a, 0x55, {outputs}); memset(b, 0x2a, {outputs});\n"
                 f"    if (original_run{i}(in, a) != 0 || run{i}(in, b) != 0) {{ printf(\"{i} failed\\n\"); return 1; }}\n"
                 f"    printf(\"{i} %s\\n\", memcmp(a, b, {outputs}) ? \"differs\" : \"same\");\n  }}\n")
    main += "  return 0;\n}\n"
    (tmp_path / "main.c").write_text(main)
    library = [str(tree / "Source" / rel) for rel in needed_sources(
        texts, headers, {"arm_depthwise_conv_wrapper_s8", "arm_convolve_wrapper_s8"})]
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-w", "-include", "stdint.h", f"-I{tree / 'Include'}", f"-I{tmp_path}",
                    str(tmp_path / "main.c"), str(tmp_path / "original.c"), str(tmp_path / "replaced.c"), *library,
                    "-o", str(tmp_path / "compare"), "-lm"], check=True)
    ran = subprocess.run([str(tmp_path / "compare")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout
    assert ran.stdout.split("\n").count("") == 1 and all(line.endswith("same") for line in ran.stdout.split("\n")[:-1])
    assert len(ran.stdout.splitlines()) == 3 * len(cases)


def test_kernel_sums_equal_the_librarys_and_constants_read_the_same_from_a_pool_or_an_array(fixtures_dir, cmsis_nn, tmp_path):
    """The same weights reach kws's first operator from TVM's USMP constant pool (a struct member at a
    carved offset) and, without USMP, from a const array: the bytes rebuilt from both trees agree. The
    v6 kernel sums of a constant filter equal what the library's arm_vector_sum_s8 computes from the
    same bytes (its generic C, compiled here)."""
    import tarfile

    tree = cmsis_nn("v6.0.0")
    read = {}
    for name in ("kws_aot_cmsisnn_m4", "kws_aot_cmsisnn_nousmp"):
        folder = tmp_path / name
        with tarfile.open(fixtures_dir / "tvm-0.18" / f"{name}.tar") as archive:
            archive.extractall(folder, filter="data")
        src = folder / "codegen" / "host" / "src"
        files = parse_sources({f"codegen/host/src/{p.name}": p.read_text() for p in sorted(src.glob("*.c"))},
                              (folder / "codegen" / "host" / "include", tree / "Include"))
        read[name] = operator_constants(files)
    pooled, arrays = read["kws_aot_cmsisnn_m4"], read["kws_aot_cmsisnn_nousmp"]
    filter_key = ("tvmgen_kws_cmsis_nn_main_0", "filter_")
    assert pooled[filter_key].symbol == "global_const_workspace" and arrays[filter_key].symbol == "constant_0"
    for operator in range(12):
        for key in [k for k in arrays if k[0] == f"tvmgen_kws_cmsis_nn_main_{operator}"]:
            size = min(len(arrays[key].data), len(pooled[key].data))
            assert size and pooled[key].data[:size] == arrays[key].data[:size], key

    headers, texts = _tree_texts(tree)
    folder = tmp_path / "kws_aot_cmsisnn_m4"
    rel = "codegen/host/src/kws_lib2.c"
    sites = cmsis_nn_call_sites({rel: (folder / rel).read_text()},
                                (folder / "codegen" / "host" / "include", tree / "Include"))
    fully_connected = next(call for _, call in sites if call.kernel == "arm_fully_connected_s8")
    prepared = kernel_sums(fully_connected, prototype(headers, fully_connected.kernel), pooled, "v6")
    sums = prepared.arrays[0].values
    weights = pooled[(fully_connected.function, "filter_")].data
    rows, cols = sums.size, len(weights) // sums.size
    (tmp_path / "sums.c").write_text(
        "#include <stdio.h>\n#include \"arm_nnfunctions.h\"\n"
        + _c_array("int8_t", "weights", np.frombuffer(weights[:rows * cols], np.int8))
        + f"int main(void) {{ static int32_t sums[{rows}];\n"
        f"  arm_vector_sum_s8(sums, {cols}, {rows}, weights, 1, NULL);\n"
        f"  for (int i = 0; i < {rows}; i++) printf(\"%ld\\n\", (long)sums[i]); return 0; }}\n")
    library = [str(tree / "Source" / r) for r in needed_sources(texts, headers, {"arm_vector_sum_s8"})]
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-w", "-include", "stdint.h", f"-I{tree / 'Include'}",
                    str(tmp_path / "sums.c"), *library, "-o", str(tmp_path / "sums")], check=True)
    library_sums = [int(v) for v in subprocess.run([str(tmp_path / "sums")], capture_output=True, text=True,
                                                   check=True).stdout.split()]
    assert library_sums == sums.tolist() and any(library_sums)


def test_v7_kernel_sums_wrap_as_int32():
    """v7 folds bias and offsets in: bias + input offset x (row sum + cols x filter offset), in int32
    arithmetic that wraps, as the C does."""
    from mlfbuild.canalysis.callsites import CmsisNnCall
    from mlfbuild.canalysis.constants import ConstantBytes

    cols, rows = 4, 2
    weights = np.array([[127, 127, 127, 127], [-128, 0, 1, 2]], dtype=np.int8)
    bias = np.array([2**31 - 10, -5], dtype=np.int32)
    call = CmsisNnCall(function="op", kernel="arm_fully_connected_s8",
                       arguments=("&context", "&fc_params", "&quant_params", "&input_dims", "input_", "&filter_dims",
                                  "filter_", "&bias_dims", "bias_", "&output_dims", "output_"),
                       context="", buffer="0", scratch_bytes=0, constants=(), call="",
                       parameters=("input_", "filter_", "bias_", "output_"),
                       values={"fc_params": {"input_offset": 128, "filter_offset": 3, "output_offset": 0},
                               "filter_dims": {"n": cols, "h": 1, "w": 1, "c": rows},
                               "output_dims": {"n": 1, "h": 1, "w": 1, "c": rows}})
    names = ["ctx", "fc_params", "quant_params", "input_dims", "input_data", "filter_dims", "filter_data",
             "bias_dims", "bias_data", "output_dims", "output_data"]
    constants = {("op", "filter_"): ConstantBytes("w", 0, weights.tobytes()),
                 ("op", "bias_"): ConstantBytes("b", 0, bias.tobytes())}
    sums = kernel_sums(call, names, constants, "v7").arrays[0].values
    expected = []
    for row in range(rows):
        value = int(bias[row]) + 128 * (int(weights[row].astype(np.int64).sum()) + cols * 3)
        expected.append((value + 2**31) % 2**32 - 2**31)
    assert sums.dtype == np.int32 and sums.tolist() == expected and expected[0] < 0  # the first wrapped


@pytest.mark.qemu
def test_ad_on_the_m55_runs_its_fully_connected_layers_with_kernel_sums_from_flash(fixtures_dir, cmsis_nn,
                                                                                   build_firmware):
    """ad's ten fully connected layers on MVE (CMSIS-NN v6): their kernel sums are const arrays, so the
    firmware has no arm_vector_sum_s8 at all; outputs within 2 LSB of TVM's reference and bit-exact to
    the generic C of the same MLF on the host."""
    out = build_firmware(fixtures_dir / "tvm-0.18" / "ad_aot_cmsisnn.tar", "mps3-an547", cmsis_nn=cmsis_nn("v6.0.0"))
    scratch = json.loads((out / "build.json").read_text())["cmsis_nn"]["scratch"]
    assert [c["kernel_sums"] for c in scratch["calls"]] == ["build time"] * 10 and scratch["kernel_sums"] is None
    assert b"arm_vector_sum_s8" not in (out / "firmware.elf").read_bytes()
    done = cli("run", str(out), "--reference", "host", "--samples", "4")
    assert done.returncode == 0 and "4/4 exact, max |diff| 0 LSB" in done.stdout, done.stdout + done.stderr
    done = cli("run", str(out), "--reference", str(fixtures_dir / "tvm-0.18" / "ad.npz"), "--atol", "2", "--profile")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "profile of ad:" in done.stdout
    first = scratch["prepared"][0]["function"]
    # calls, instructions, estimated cycles (M55), share, function
    profiled = re.search(rf"^ +1 +([\d,]+) +[\d,]+ +[\d.]+% +{first}$", done.stdout, re.M)
    sized = cli("size", str(out))
    assert "CMSIS-NN calls prepared at build time (10)" in sized.stdout, sized.stdout
    shown = re.search(rf"^  {first}: arm_fully_connected_s8 kernel sums in flash\n      why: .*CMSIS-NN v6 contract.*\n"
                      rf"      flash \+(\d+) B .*; ([\d,]+) instructions per inference now", sized.stdout, re.M)
    assert profiled and shown and shown.group(2) == profiled.group(1), sized.stdout
    sums_bytes = next(c["library_bytes"] for c in scratch["calls"] if c["function"] == first)  # 4 B per output
    assert int(shown.group(1)) == sums_bytes
