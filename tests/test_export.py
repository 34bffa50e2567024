"""mlfbuild export and build --app: the model in the user's own firmware.

One representative fixture per executor kind is exported once per session; one CMake project
(Debian's cmake, the export's toolchain file) builds examples/check-app for all of them, half from the
sources and half from the prebuilt libraries, and each image runs on mps2-an386 in QEMU against TVM's
reference: int8 models bit for bit (CMSIS-NN ones within one step: its kernels round differently from
TVM's reference), float ones within 1e-5 (check-app exits 0 only when every output matches).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from conftest import REPO, buildable, cli, entry_id, manifest_entries
from mlfbuild.export import MARKER, export
from mlfbuild.project import ProjectOptions

pytestmark = pytest.mark.cross

BOARD = "mps2-an386"
APP = REPO / "examples" / "check-app"
# fixture -> {module: reference}; one per executor kind (AOT C with and without USMP, AOT packed C
# and LLVM objects, graph and graph link-params, a multi-module MLF).
FIXTURES = {
    "kws_aot_c_unpacked_usmp": {"kws": "tvm-0.13/kws"},
    "kws_aot_c_unpacked_nousmp": {"default": "tvm-0.13/kws"},
    "kws_aot_packed": {"default": "tvm-0.13/kws"},
    "kws_graph_c": {"default": "tvm-0.13/kws"},
    "kws_graph_c_linkparams": {"kws": "tvm-0.13/kws"},
    "op_matmul_llvm_cm4": {"matmul": "tvm-0.13/op_matmul"},  # LLVM objects (the one that builds: an operator, float)
    "multi_kws_ad_aot_c_usmp": {"kws": "tvm-0.13/kws", "ad": "tvm-0.13/ad"},
    "kws_aot_cmsisnn_m4": {"kws": "tvm-0.18/kws"},  # calls CMSIS-NN (its DSP paths on the M4)
}
FIXTURE_SETS = {"kws_aot_cmsisnn_m4": "tvm-0.18"}  # the others: tvm-0.13
CMSIS_NN = {"kws_aot_cmsisnn_m4": "cmsis-nn-v6.0.0"}  # the tree export compiles in
ATOL = {"kws_aot_cmsisnn_m4": 1}  # CMSIS-NN's requantization differs from TVM's reference by one step
# How far CMSIS-NN's requantization may take a model's outputs from TVM's reference (fixtures/README.md:
# ad's ten fully connected layers, up to 2 LSB; the others 1).
CMSIS_NN_STEPS = {"ad": 2}
PREBUILT = {"kws_aot_c_unpacked_nousmp", "op_matmul_llvm_cm4", "kws_graph_c_linkparams"}
APP_BUILDS = ("kws_aot_c_unpacked_nousmp", "kws_graph_c", "op_matmul_llvm_cm4")  # also via build --app


def _mlf(fixtures: Path, name: str) -> Path:
    return fixtures / FIXTURE_SETS.get(name, "tvm-0.13") / f"{name}.tar"


def _qemu(elf: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["qemu-system-arm", "-M", BOARD, "-display", "none", "-monitor", "none", "-serial", "stdio",
                           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                          capture_output=True, text=True, timeout=timeout)


def _reference_h(description: Path, references: dict[str, str], fixtures: Path, out: Path, atol: int = 0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    pairs = [f"{mod}={fixtures / (ref + '.npz')}" for mod, ref in references.items()]
    subprocess.run([sys.executable, str(APP / "reference.py"), str(description), *pairs, "-o", str(out / "reference.h"),
                    *(["--atol", str(atol)] if atol else [])], check=True)
    return out


def _app_folder(reference_dir: Path, out: Path) -> Path:
    """check-app as a folder of its own (build --app): its sources and the generated reference.h."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("main.c", "check_model.inc"):
        shutil.copy(APP / name, out / name)
    shutil.copy(reference_dir / "reference.h", out / "reference.h")
    return out


@pytest.fixture(scope="session")
def exports(fixtures_dir, third_party_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    return {name: export([_mlf(fixtures_dir, name)], BOARD, root / name, name=name,
                         options=_options(third_party_dir, name)).folder for name in FIXTURES}


def _options(third_party_dir: Path, name: str) -> ProjectOptions:
    return ProjectOptions(cmsis_nn=third_party_dir / CMSIS_NN[name]) if name in CMSIS_NN else ProjectOptions()


@pytest.fixture(scope="session")
def cmake_apps(exports, fixtures_dir, tmp_path_factory):
    """check-app for every export, with one CMake configure and build per set of CPU flags (what is
    linked into one image shares them: op_matmul's LLVM objects make its export softfp); {fixture: elf}."""
    root = tmp_path_factory.mktemp("cmake")
    groups: dict[tuple, list[str]] = {}
    for name, folder in exports.items():
        groups.setdefault(tuple(json.loads((folder / MARKER).read_text())["cpu_flags"]), []).append(name)
    apps = {}
    for index, names in enumerate(groups.values()):
        project = root / str(index)
        lines = ["cmake_minimum_required(VERSION 3.19)", "project(checks C)"]
        for name in names:
            folder = exports[name]
            package = json.loads((folder / MARKER).read_text())["cmake"]["package"]
            refs = _reference_h(folder / MARKER, FIXTURES[name], fixtures_dir, root / "refs" / name, ATOL.get(name, 0))
            if name in PREBUILT:
                lines.append(f'set({package.upper()}_PREBUILT ON CACHE BOOL "" FORCE)')
            lines += [f'add_subdirectory("{folder}" "{package}")',
                      f'add_executable({name} "{APP / "main.c"}")',
                      f'set_target_properties({name} PROPERTIES SUFFIX ".elf")',
                      f'target_include_directories({name} PRIVATE "{APP}" "{refs}")',
                      f"target_compile_options({name} PRIVATE -Wall -Wextra -Werror)",
                      f"target_link_libraries({name} PRIVATE mlf::{name} mlfbuild::board_mps2_an386)"]
            apps[name] = project / "build" / f"{name}.elf"
        project.mkdir()
        (project / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
        toolchain = exports[names[0]] / "cmake" / "arm-none-eabi.cmake"
        subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build"),
                        f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", str(project / "build"), "-j2"], check=True, capture_output=True)
    return apps


@pytest.mark.qemu
@pytest.mark.parametrize("name", list(FIXTURES))
def test_cmake_app_matches_the_reference(cmake_apps, name):
    done = _qemu(cmake_apps[name])
    assert done.returncode == 0, done.stdout + done.stderr
    for module in FIXTURES[name]:
        assert f"{module}: status 0, 0 element(s) differ" in done.stdout
    assert "check-app: all outputs match" in done.stdout


@pytest.mark.qemu
def test_a_wrong_reference_fails_the_app(exports, fixtures_dir, tmp_path):
    """The check can fail: one expected byte changed, the same app exits 1 under build --app."""
    refs = _reference_h(exports["kws_aot_c_unpacked_usmp"] / MARKER, {"kws": "tvm-0.13/kws"}, fixtures_dir, tmp_path / "refs")
    text = (refs / "reference.h").read_text()
    head, _, tail = text.partition("kws_expected0[12] __attribute__((aligned(16))) = {\n  0x")
    (refs / "reference.h").write_text(head + "kws_expected0[12] __attribute__((aligned(16))) = {\n  0x"
                                      + f"{(int(tail[:2], 16) + 1) % 256:02x}" + tail[2:])
    app = _app_folder(refs, tmp_path / "app")
    mlf = fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"
    assert cli("build", str(mlf), "-b", BOARD, "-o", str(tmp_path / "b"), "--app", str(app)).returncode == 0
    done = cli("run", str(tmp_path / "b"))
    assert done.returncode == 7, done.stdout + done.stderr
    assert "kws: status 0, 1 element(s) differ" in done.stdout
    assert "the application exited with status 1" in done.stderr


@pytest.mark.qemu
@pytest.mark.parametrize("name", APP_BUILDS)
def test_build_app_gives_the_same_outputs(exports, cmake_apps, fixtures_dir, tmp_path, name):
    refs = _reference_h(exports[name] / MARKER, FIXTURES[name], fixtures_dir, tmp_path / "refs")
    app = _app_folder(refs, tmp_path / "app")
    built = cli("build", str(_mlf(fixtures_dir, name)), "-b", BOARD, "-o", str(tmp_path / "b"),
                "--app", str(app))
    assert built.returncode == 0, built.stderr
    record = json.loads((tmp_path / "b" / "build.json").read_text())
    assert set(record["app"]["files"]) == {"app/main.c", "app/check_model.inc", "app/reference.h"}
    done = cli("run", str(tmp_path / "b"), "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "result: pass — the application exited with status 0" in done.stdout
    assert done.stdout.splitlines()[:len(FIXTURES[name]) + 1] == _qemu(cmake_apps[name]).stdout.splitlines()
    size = json.loads(cli("size", str(tmp_path / "b"), "--json").stdout)
    assert any(item["category"] == "app" and item["file"] == "app/main.c" for item in size["symbols"])


def _model_symbols(elf: Path, modules) -> dict[str, int]:
    """Sizes of the model's own symbols: TVM's code and pools, mlfbuild's arena, weights and executor, and the
    CMSIS-NN functions and scratch region."""
    with open(elf, "rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab").iter_symbols()
        return {s.name: s["st_size"] for s in symbols if s["st_size"] and (
            s.name.startswith(("tvmgen_", "arm_"))
            or s.name in ("global_workspace", "global_const_workspace", "mlf_cmsis_nn_scratch")
            or any(re.fullmatch(rf"mlf_{m}_(arena|param\d+|tensors|codes|shape\d+|args|e\d+|e\d+_shape)", s.name)
                   for m in modules))}


@pytest.mark.qemu  # cmake_apps, made by whichever test asks first, probes kws_aot_cmsisnn_m4's sizes in QEMU
@pytest.mark.parametrize("name", ["kws_aot_c_unpacked_usmp", "kws_graph_c", "kws_aot_c_unpacked_nousmp",
                                  "kws_aot_cmsisnn_m4"])
def test_exported_model_is_the_firmware_model(cmake_apps, build_firmware, fixtures_dir, third_party_dir, name):
    """The same code, weights and planned arena as in `build`'s firmware: nothing copied, nothing re-planned
    (CMSIS-NN: the same library functions and the same pool with its scratch regions)."""
    cmsis = {"cmsis_nn": third_party_dir / CMSIS_NN[name]} if name in CMSIS_NN else {}
    firmware = build_firmware(_mlf(fixtures_dir, name), BOARD, **cmsis) / "firmware.elf"
    exported = _model_symbols(cmake_apps[name], FIXTURES[name])
    assert exported and exported == _model_symbols(firmware, FIXTURES[name])
    if cmsis:
        assert any(symbol.startswith("arm_") for symbol in exported)


@pytest.mark.qemu  # the CMSIS-NN size probe runs on the core in QEMU
def test_cmsis_nn_export_carries_the_library_as_the_build_compiles_it(exports, build_firmware, fixtures_dir,
                                                                      third_party_dir):
    folder = exports["kws_aot_cmsisnn_m4"]
    description = json.loads((folder / MARKER).read_text())
    built = build_firmware(_mlf(fixtures_dir, "kws_aot_cmsisnn_m4"), BOARD,
                           cmsis_nn=third_party_dir / CMSIS_NN["kws_aot_cmsisnn_m4"])
    record = json.loads((built / "build.json").read_text())["cmsis_nn"]
    cmsis = description["cmsis_nn"]
    assert {k: cmsis[k] for k in record} == record  # same tree, paths, flags, sources and scratch plan
    assert cmsis["features"] == ["dsp"] and cmsis["flags"] == ["-U__ARM_FEATURE_MVE"]
    assert "lib/cmsis-nn/Include" in description["include_dirs"]
    targets = (folder / "mlf_kws_aot_cmsisnn_m4-targets.cmake").read_text()
    make = (folder / "mlf.mk").read_text()
    for source in cmsis["files"]:
        assert (folder / source).is_file() and f'"${{_mlf_dir}}/{source}"' in targets and f"$(MLF_DIR)/{source}" in make
    assert "-U__ARM_FEATURE_MVE;-Wno-error" in targets and "MLF_KWS_AOT_CMSISNN_M4_CMSIS_NN_FLAGS := -U__ARM_FEATURE_MVE" in make
    assert "CMSIS-NN" in (folder / "README.md").read_text()
    members = subprocess.run(["arm-none-eabi-ar", "t", str(folder / description["libraries"]["mlf_kws_aot_cmsisnn_m4"])],
                             capture_output=True, text=True, check=True).stdout.split()
    assert {Path(f).stem + ".o" for f in cmsis["files"]} <= set(members)
    header = (folder / "include" / "mlf_kws.h").read_text()
    model = description["models"][0]
    assert f"#define MLF_KWS_USMP_POOL_BYTES {model['usmp_pool_bytes']}" in header
    assert f"#define MLF_KWS_CMSIS_NN_SCRATCH_BYTES {model['cmsis_nn_scratch_bytes']}" in header


def test_export_description(exports):
    description = json.loads((exports["multi_kws_ad_aot_c_usmp"] / MARKER).read_text())
    assert description["schema"] == "mlfbuild-export/1" and description["board"] == BOARD
    assert description["cmake"]["model_target"] == "mlf::multi_kws_ad_aot_c_usmp"
    assert {m["name"]: m["run"] for m in description["models"]} == {"kws": "tvmgen_kws_run", "ad": "tvmgen_ad_run"}
    for model in description["models"]:
        assert (exports["multi_kws_ad_aot_c_usmp"] / model["header"]).is_file()
        assert (exports["multi_kws_ad_aot_c_usmp"] / model["interface_header"]).is_file()
    for library in description["libraries"].values():
        assert (exports["multi_kws_ad_aot_c_usmp"] / library).stat().st_size > 0


@pytest.mark.qemu
def test_two_models_exported_separately_in_one_app_with_an_arena_placed_by_the_app(
        exports, fixtures_dir, tmp_path):
    """kws (AOT C, USMP) and mlp (AOT C, its own workspace pool) from two exports, one runtime, through
    the example's own CMakeLists.txt; the app defines mlp's arena in a section of its own."""
    mlp = export([fixtures_dir / "tvm-0.13" / "mlp_aot_c_unpacked_nousmp.tar"], BOARD, tmp_path / "mlp").folder
    kws = exports["kws_aot_c_unpacked_usmp"]
    refs = tmp_path / "refs"
    _reference_h(kws / MARKER, {"kws": "tvm-0.13/kws"}, fixtures_dir, refs / "k")
    _reference_h(mlp / MARKER, {"mlp": "tvm-0.13/mlp"}, fixtures_dir, refs / "m")
    blocks = [(refs / d / "reference.h").read_text().split("#define REFERENCE_MODELS")[0].split("#define REFERENCE_H_")[1]
              for d in ("k", "m")]
    (refs / "reference.h").write_text("#ifndef REFERENCE_H_\n#define REFERENCE_H_\n" + "".join(blocks)
                                      + "#define REFERENCE_MODELS(X) X(kws) X(mlp)\n#endif\n")
    (tmp_path / "arena.c").write_text('#include "mlf_mlp.h"\n'
                                      "uint8_t mlf_mlp_arena[MLF_MLP_ARENA_BYTES]\n"
                                      '    __attribute__((aligned(MLF_MLP_ARENA_ALIGN), section(".bss.app_sram2")));\n')
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(APP), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={kws}/cmake/arm-none-eabi.cmake",
                    f"-DMLF_EXPORTS={kws};{mlp}", "-DMLF_BOARD_TARGET=mlfbuild::board_mps2_an386",
                    f"-DREFERENCE_DIR={refs}", f"-DAPP_SOURCES={tmp_path / 'arena.c'}", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True)
    done = _qemu(build / "check-app.elf")
    assert done.returncode == 0, done.stdout
    assert "kws: status 0, 0 element(s) differ" in done.stdout and "mlp: status 0, 0 element(s) differ" in done.stdout
    link_map = (build / "check-app.map").read_text()
    placed = re.search(r"^ \.bss\.app_sram2\s*\n?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+) .*arena\.c", link_map, re.M)
    assert placed, "the map shows no .bss.app_sram2 input section from arena.c"
    with open(build / "check-app.elf", "rb") as stream:
        symbols = [s for s in ELFFile(stream).get_section_by_name(".symtab").iter_symbols() if s.name == "mlf_mlp_arena"]
    assert len(symbols) == 1 and symbols[0]["st_value"] == int(placed.group(1), 16)  # the app's, not the library's


def test_headers_compile_in_cpp(exports, tmp_path):
    """mlf_<mod>.h (and the tvmgen_<mod>.h it includes, TVM's or ours) in a C++ application."""
    chosen = {"kws_aot_c_unpacked_usmp": "kws", "kws_graph_c": "default", "multi_kws_ad_aot_c_usmp": "ad"}
    source = tmp_path / "app.cpp"
    source.write_text("".join(f'#include "mlf_{m}.h"\n' for m in chosen.values()) + """
static uint8_t in[MLF_KWS_INPUT_0_BYTES], out[MLF_KWS_OUTPUT_0_BYTES];
static const int32_t shape[] = MLF_KWS_INPUT_0_SHAPE;
int run() {
  tvmgen_kws_inputs inputs{};
  inputs.MLF_KWS_INPUT_0_C_NAME = in;
  tvmgen_kws_outputs outputs{};
  outputs.MLF_KWS_OUTPUT_0_C_NAME = out;
  static_assert(MLF_DEFAULT_ARENA_BYTES > 0 && MLF_AD_NUM_INPUTS == 1, "planned at compile time");
  return tvmgen_kws_run(&inputs, &outputs) + shape[0] + tvmgen_default_run(nullptr, nullptr);
}
""")
    includes = [f"-I{exports[f] / d}" for f in chosen for d in ("include", "model/codegen/host/include")]
    done = subprocess.run(["arm-none-eabi-g++", "-Wall", "-Wextra", "-Werror", "-std=c++17", "-c", str(source),
                           "-o", str(tmp_path / "app.o"), *includes], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# A C++ application of kws (TVM 0.18, AOT C with USMP: TVM's own tvmgen_kws.h), written against the
# documented headers only; its static constructor must have run before main(). Exit 0 only when the
# model's output equals TVM's reference byte for byte.
_CPP_MAIN = """#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kws_data.h"
#include "mlf_kws.h"
#include "mlfrt.h"

static_assert(MLF_KWS_NUM_INPUTS == 1 && MLF_KWS_NUM_OUTPUTS == 1, "kws: one input, one output");
static_assert(sizeof kws_input == MLF_KWS_INPUT_0_BYTES && sizeof kws_expected == MLF_KWS_OUTPUT_0_BYTES, "sizes");

namespace {
class Classifier {
 public:
  Classifier() : constructed_(true) {}
  bool constructed() const { return constructed_; }
  int32_t run(std::array<int8_t, MLF_KWS_OUTPUT_0_BYTES>& scores) {
    alignas(MLF_KWS_IO_ALIGN) static int8_t input[MLF_KWS_INPUT_0_BYTES];
    std::memcpy(input, kws_input, sizeof input);
    tvmgen_kws_inputs inputs{};
    inputs.MLF_KWS_INPUT_0_C_NAME = input;
    tvmgen_kws_outputs outputs{};
    outputs.MLF_KWS_OUTPUT_0_C_NAME = scores.data();
    return tvmgen_kws_run(&inputs, &outputs);
  }

 private:
  bool constructed_ = false;
};
Classifier classifier;
}  // namespace

int main() {
  mlfrt_init();
  alignas(MLF_KWS_IO_ALIGN) static std::array<int8_t, MLF_KWS_OUTPUT_0_BYTES> scores;
  int32_t status = classifier.run(scores);
  unsigned wrong = 0;
  for (std::size_t i = 0; i < scores.size(); i++) wrong += scores[i] != kws_expected[i];
  std::printf("kws from C++: status %ld, %u element(s) differ, constructor %s\\n", static_cast<long>(status), wrong,
              classifier.constructed() ? "ran" : "did not run");
  return status == 0 && wrong == 0 && classifier.constructed() ? 0 : 1;
}
"""


def _cpp_app(fixtures_dir: Path, out: Path) -> Path:
    """_CPP_MAIN as main.cpp, and kws_data.h: the reference input and expected output as C arrays."""
    import numpy as np

    reference = np.load(fixtures_dir / "tvm-0.18" / "kws.npz")
    arrays = {"kws_input": reference["input_1"], "kws_expected": reference["output_0"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "kws_data.h").write_text("#include <stdint.h>\n" + "".join(
        f"static const int8_t {name}[{data.size}] = {{{', '.join(str(int(v)) for v in data.astype(np.int8).ravel())}}};\n"
        for name, data in arrays.items()))
    (out / "main.cpp").write_text(_CPP_MAIN)
    return out


@pytest.mark.parametrize("board", [pytest.param(BOARD, marks=pytest.mark.qemu), "host"])
def test_a_cpp_application_with_build_app(fixtures_dir, tmp_path, board):
    """main.cpp compiled by the board's g++ (no exceptions, no RTTI) and linked with libstdc++; on the host
    the application is named by mlfbuild.toml's `app`. Its exit status is run's verdict, its bytes are the app's."""
    app = _cpp_app(fixtures_dir, tmp_path / "cppapp")
    mlf = fixtures_dir / "tvm-0.18" / "kws_aot_c_unpacked_usmp.tar"
    if board == "host":
        (tmp_path / "mlfbuild.toml").write_text('app = "cppapp"\n')
        built = cli("build", str(mlf), "-b", board, "-o", "b", cwd=tmp_path)
    else:
        built = cli("build", str(mlf), "-b", board, "-o", str(tmp_path / "b"), "--app", str(app))
    assert built.returncode == 0, built.stderr
    assert "CXX  app/main.cpp" in built.stdout + built.stderr
    makefile = (tmp_path / "b" / "project" / "Makefile").read_text()
    assert re.search(r"^CXX +:= " + re.escape("g++" if board == "host" else "arm-none-eabi-g++") + "$", makefile, re.M)
    assert "-fno-exceptions -fno-rtti" in makefile
    record = json.loads((tmp_path / "b" / "build.json").read_text())
    assert set(record["app"]["files"]) == {"app/main.cpp", "app/kws_data.h"}
    done = cli("run", str(tmp_path / "b"), "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kws from C++: status 0, 0 element(s) differ, constructor ran" in done.stdout
    assert "result: pass — the application exited with status 0" in done.stdout
    size = json.loads(cli("size", str(tmp_path / "b"), "--json").stdout)
    assert {"main", "_ZN12_GLOBAL__N_110classifierE"} <= {
        item["name"] for item in size["symbols"] if item["category"] == "app" and item["file"] == "app/main.cpp"}


@pytest.mark.qemu
def test_a_cpp_application_with_cmake_from_an_export(fixtures_dir, tmp_path):
    """The same main.cpp with CMake (C and CXX, the export's toolchain file) on the prebuilt libraries."""
    folder = export([fixtures_dir / "tvm-0.18" / "kws_aot_c_unpacked_usmp.tar"], BOARD, tmp_path / "e").folder
    app = _cpp_app(fixtures_dir, tmp_path / "app")
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(cppapp C CXX)\n"
        'set(MLF_KWS_PREBUILT ON CACHE BOOL "" FORCE)\n'
        f'add_subdirectory("{folder}" kws)\n'
        "add_executable(cppapp main.cpp)\nset_target_properties(cppapp PROPERTIES SUFFIX \".elf\")\n"
        "target_compile_options(cppapp PRIVATE -std=c++17 -fno-exceptions -fno-rtti -Wall -Wextra -Werror)\n"
        "target_link_libraries(cppapp PRIVATE mlf::kws mlfbuild::board_mps2_an386)\n")
    build = tmp_path / "build"
    for step in (["-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={folder}/cmake/arm-none-eabi.cmake",
                  "-DCMAKE_BUILD_TYPE=Release"], ["--build", str(build), "-j2"]):
        done = subprocess.run(["cmake", *step], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    done = _qemu(build / "cppapp.elf")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kws from C++: status 0, 0 element(s) differ, constructor ran" in done.stdout


def test_host_export_of_two_mlfs_runs_natively_with_find_package_and_make(fixtures_dir, tmp_path):
    """Two MLFs exported together for the host, found by find_package (the config file) and,
    separately, built by make through mlf.mk: check-app runs natively and both models match."""
    mlfs = [fixtures_dir / "tvm-0.13" / f"{name}.tar" for name in ("kws_graph_c_linkparams", "mlp_aot_c_unpacked_nousmp")]
    folder = export(mlfs, "host", tmp_path / "export", name="models").folder
    refs = _reference_h(folder / MARKER, {"kws": "tvm-0.13/kws", "mlp": "tvm-0.13/mlp"}, fixtures_dir, tmp_path / "refs")
    subprocess.run(["cmake", "-S", str(APP), "-B", str(tmp_path / "build"), f"-DMLF_EXPORTS={folder}",
                    "-DMLF_FIND_PACKAGE=ON", "-DMLF_BOARD_TARGET=mlfbuild::board_host", f"-DREFERENCE_DIR={refs}"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(tmp_path / "build"), "-j2"], check=True, capture_output=True)
    for app in (tmp_path / "build" / "check-app.elf", _make_app(folder, refs, tmp_path)):
        done = subprocess.run([str(app)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout
        assert "kws: status 0, 0 element(s) differ" in done.stdout and "mlp: status 0, 0 element(s) differ" in done.stdout


def _make_app(folder: Path, refs: Path, tmp_path: Path) -> Path:
    (tmp_path / "Makefile").write_text(
        f"MLF_DIR := {folder}\ninclude $(MLF_DIR)/mlf.mk\n"
        f"app: {APP}/main.c $(MLF_MODELS_SOURCES) $(MLFBUILD_RUNTIME_SOURCES) $(MLFBUILD_BOARD_SOURCES)\n"
        f"\tgcc -Os -I{APP} -I{refs} $(MLF_MODELS_CFLAGS) $(MLFBUILD_BOARD_CFLAGS) $^ $(MLFBUILD_BOARD_LDFLAGS) -lm -o $@\n")
    subprocess.run(["make", "-C", str(tmp_path), "app"], check=True, capture_output=True)
    return tmp_path / "app"


def test_quantization_from_the_original_model(fixtures_dir, models_dir, tmp_path):
    done = cli("export", str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"), "-b", BOARD,
               "-o", str(tmp_path / "e"), "--model", str(models_dir / "kws_ref_model.tflite"))
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "e" / "include" / "mlf_kws.h").read_text()
    assert "#define MLF_KWS_INPUT_0_SCALE 0.5847029089927673f" in header
    assert "#define MLF_KWS_INPUT_0_ZERO_POINT 83" in header and "#define MLF_KWS_OUTPUT_0_ZERO_POINT -128" in header
    wrong = cli("export", str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"), "-b", BOARD,
                "-o", str(tmp_path / "e"), "--model", str(models_dir / "ad01_int8.tflite"))
    assert wrong.returncode == 3 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr


def _header_quantization(folder: Path, module: str, inputs: int, outputs: int, work: Path) -> list[tuple]:
    """(scale, zero point) of each input then output as a C program sees mlf_<module>.h's macros."""
    macro = module.upper()
    lines = [f'printf("%.9g %d\\n", (double)MLF_{macro}_{kind}_{i}_SCALE, MLF_{macro}_{kind}_{i}_ZERO_POINT);'
             for kind, count in (("INPUT", inputs), ("OUTPUT", outputs)) for i in range(count)]
    source = work / "quantization.c"
    source.write_text(f'#include <stdio.h>\n#include "mlf_{module}.h"\nint main(void) {{\n' + "\n".join(lines) +
                      "\nreturn 0;\n}\n")
    program = work / "quantization"
    includes = [f"-I{folder / d}" for d in ("include", "model/codegen/host/include", "crt/include")]
    subprocess.run(["gcc", "-std=c11", "-Werror", *includes, str(source), "-o", str(program)], check=True)
    printed = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split()
    return [(np.float32(float(scale)), int(zero)) for scale, zero in zip(printed[::2], printed[1::2])]


@pytest.mark.qemu  # CMSIS-NN's buffer sizes are probed on the board's core
@pytest.mark.cross
def test_an_imported_model_exports_the_quantization_it_carries(cmsis_nn, tmp_path):
    """An MLF made by `mlfbuild import` carries its .tflite: export gives its inputs' and outputs'
    scale and zero point in mlf_<mod>.h with no --model, as from a .tflite given directly."""
    from tflitewriter import bundle_model
    from mlfbuild.reference.tflite import read_tflite

    model = bundle_model(np.random.default_rng(7), ["CONV_2D", "FULLY_CONNECTED"]).write(tmp_path / "small.tflite")
    tflite = read_tflite(model)
    expected = [(np.float32(t.scale), t.zero_point) for t in tflite.inputs + tflite.outputs]
    assert len(expected) == 4 and all(t.quantized for t in tflite.inputs + tflite.outputs)
    assert cli("import", str(model), "-o", str(tmp_path / "small.tar")).returncode == 0
    for source in (tmp_path / "small.tar", model):
        folder = tmp_path / f"export-{source.suffix[1:]}"
        done = cli("export", str(source), "-b", BOARD, "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(folder))
        assert done.returncode == 0, done.stderr
        assert _header_quantization(folder, "small", 2, 2, tmp_path) == expected


@pytest.mark.cross
def test_build_with_an_app_gives_it_the_quantization_an_imported_model_carries(cmsis_nn, tmp_path):
    """The headers a `build --app` application includes are the export's: the scale and zero point of
    the io tensors of an imported MLF, with no --model."""
    from tflitewriter import bundle_model
    from mlfbuild.reference.tflite import read_tflite

    model = bundle_model(np.random.default_rng(7), ["FULLY_CONNECTED"]).write(tmp_path / "small.tflite")
    tflite = read_tflite(model)
    assert cli("import", str(model), "-o", str(tmp_path / "small.tar")).returncode == 0
    app = tmp_path / "app"
    app.mkdir()
    prints = [f'printf("%.9g %d\\n", (double)MLF_SMALL_{kind}_0_SCALE, MLF_SMALL_{kind}_0_ZERO_POINT);'
              for kind in ("INPUT", "OUTPUT")]
    (app / "main.c").write_text('#include <stdio.h>\n#include "mlf_small.h"\nint main(void) {\n' + "\n".join(prints)
                                + "\nreturn 0;\n}\n")
    built = cli("build", str(tmp_path / "small.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
                "-o", str(tmp_path / "b"), "--app", str(app))
    assert built.returncode == 0, built.stderr
    done = cli("run", str(tmp_path / "b"), "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [line.split() for line in done.stdout.splitlines() if len(line.split()) == 2][:2]
    assert [(np.float32(float(scale)), int(zero)) for scale, zero in printed] == \
        [(np.float32(t.scale), t.zero_point) for t in tflite.inputs + tflite.outputs]


def test_an_imported_mlf_whose_model_was_swapped_is_refused(cmsis_nn, tmp_path):
    import tarfile

    from tflitewriter import bundle_model

    model = bundle_model(np.random.default_rng(7), ["CONV_2D"]).write(tmp_path / "small.tflite")
    other = bundle_model(np.random.default_rng(8), ["FULLY_CONNECTED"]).write(tmp_path / "other.tflite")
    assert cli("import", str(model), "-o", str(tmp_path / "small.tar")).returncode == 0
    swapped = tmp_path / "swapped.tar"
    with tarfile.open(tmp_path / "small.tar") as original, tarfile.open(swapped, "w") as out:
        for member in original.getmembers():
            data = original.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("src/model.tflite"):
                data = other.read_bytes()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    done = cli("export", str(swapped), "-b", BOARD, "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "e"))
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "module small: the model its MLF carries (src/model.tflite) describes another graph" in done.stderr
    assert not (tmp_path / "e").exists()


def test_export_refuses_a_folder_that_is_not_an_export(fixtures_dir, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    done = cli("export", str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"), "-b", BOARD,
               "-o", str(tmp_path / "mine"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "is not an mlfbuild export" in done.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    # An export that failed half-way (here: no such MLF) into a folder it did not create is still ours
    # to write over (one it created is removed: test_an_export_leaves_no_lock_no_working_folders_and_no_stub).
    (tmp_path / "e").mkdir()
    failed = cli("export", str(tmp_path / "missing.tar"), "-b", BOARD, "-o", str(tmp_path / "e"))
    assert failed.returncode == 3 and json.loads((tmp_path / "e" / MARKER).read_text())["complete"] is False
    again = cli("export", str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"), "-b", BOARD, "-o", str(tmp_path / "e"))
    assert again.returncode == 0 and json.loads((tmp_path / "e" / MARKER).read_text())["complete"] is True


def test_export_json_and_re_export(fixtures_dir, tmp_path):
    mlf = fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar"
    first = cli("export", str(mlf), "-b", BOARD, "-o", str(tmp_path / "e"), "--json")
    assert first.returncode == 0, first.stderr
    described = json.loads(first.stdout)
    assert described["models"][0]["arena"] == {"symbol": None, "bytes": 0, "align": 16}
    assert cli("export", str(mlf), "-b", BOARD, "-o", str(tmp_path / "e")).returncode == 0  # over its own export


def test_unknown_board_and_bad_apps(fixtures_dir, tmp_path):
    mlf = str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar")
    unknown = cli("export", mlf, "-b", "no-such-board", "-o", str(tmp_path / "e"))
    assert unknown.returncode == 3 and len(unknown.stderr.strip().splitlines()) == 1
    assert "no-such-board" in unknown.stderr and not (tmp_path / "e").exists()
    missing = cli("build", mlf, "-b", BOARD, "-o", str(tmp_path / "b0"), "--app", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and _one_error_line(missing.stderr) and "nowhere: no such folder" in missing.stderr
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README").write_text("no sources here")
    empty = cli("build", mlf, "-b", BOARD, "-o", str(tmp_path / "b1"), "--app", str(tmp_path / "empty"))
    assert empty.returncode == 2 and "no C or C++ sources" in empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "main.c").write_text("int main(void) { return undeclared_thing; }\n")
    broken = cli("build", mlf, "-b", BOARD, "-o", str(tmp_path / "b2"), "--app", str(tmp_path / "broken"))
    assert broken.returncode == 4, broken.stderr
    assert "app/main.c" in broken.stderr and "undeclared_thing" in broken.stderr and "build.log" in broken.stderr
    assert _one_error_line(broken.stderr)


def _one_error_line(stderr: str) -> bool:
    """The build's progress lines, then one line of error, last."""
    errors = [line for line in stderr.strip().splitlines() if "error" in line]
    return len(errors) == 1 and stderr.strip().splitlines()[-1] == errors[0]


def test_bad_cpp_apps(fixtures_dir, tmp_path):
    """C++ is compiled without exceptions: a `throw` is the compiler's first error, in the app's file;
    two sources that would share one object file are refused before anything compiles."""
    mlf = str(fixtures_dir / "tvm-0.18" / "op_vector_add_c.tar")
    (tmp_path / "throws").mkdir()
    (tmp_path / "throws" / "main.cpp").write_text("int main() { throw 1; }\n")
    throws = cli("build", mlf, "-b", "host", "-o", str(tmp_path / "b1"), "--app", str(tmp_path / "throws"))
    assert throws.returncode == 4 and _one_error_line(throws.stderr), throws.stderr
    assert f"(in {tmp_path / 'b1' / 'project' / 'app' / 'main.cpp'})" in throws.stderr
    assert "exception handling disabled" in throws.stderr and "build.log" in throws.stderr
    (tmp_path / "twins" / "lib").mkdir(parents=True)
    for name in ("main.cpp", "lib/util.c", "lib/util.cc"):
        (tmp_path / "twins" / name).write_text("int main() { return 0; }\n" if name == "main.cpp" else "\n")
    twins = cli("build", mlf, "-b", "host", "-o", str(tmp_path / "b2"), "--app", str(tmp_path / "twins"))
    assert twins.returncode == 2 and len(twins.stderr.strip().splitlines()) == 1, twins.stderr
    assert "lib/util.c and lib/util.cc would compile to one object file" in twins.stderr


# -- every shared fixture (opt-in: `pytest -m exhaustive`, about four minutes on two cores) -------------

def _exportable(item) -> bool:
    """Fixtures that build on the export's board today: the buildable ones, and CMSIS-NN ones (with the
    library) unless the manifest knows them defective."""
    entry = item[1]
    return "target" not in entry or (not entry.get("known_issue") and
                                    (buildable(entry, BOARD) or bool(entry.get("cmsisnn"))))


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.parametrize("item", [i for i in manifest_entries() if _exportable(i)], ids=entry_id)
def test_every_fixture_exported_runs_check_app_against_its_reference(item, fixtures_dir, third_party_dir, tmp_path):
    """Each fixture exported alone, check-app built from its prebuilt libraries with the example's own
    CMakeLists.txt and the export's toolchain file, run on the board: every output as TVM's reference
    (bit for bit; CMSIS-NN within the steps fixtures/README.md gives: CMSIS_NN_STEPS)."""
    fixture_set, entry = item
    mlf = fixtures_dir / fixture_set / entry["file"]
    cmsis = entry.get("cmsisnn")
    options = ProjectOptions(cmsis_nn=third_party_dir / "cmsis-nn-v6.0.0") if cmsis else ProjectOptions()
    folder = export([mlf], BOARD, tmp_path / "export", name="model", options=options).folder
    references = {m["mod_name"]: f"{fixture_set}/{Path(m['reference_npz']).stem}" for m in entry["modules"]}
    refs = _reference_h(folder / MARKER, references, fixtures_dir, tmp_path / "refs",
                        atol=max(CMSIS_NN_STEPS.get(m, 1) for m in references) if cmsis else 0)
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(APP), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={folder}/cmake/arm-none-eabi.cmake",
                    f"-DMLF_EXPORTS={folder}", "-DMODEL_PREBUILT=ON", "-DMLF_BOARD_TARGET=mlfbuild::board_mps2_an386",
                    f"-DREFERENCE_DIR={refs}", "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True)
    done = _qemu(build / "check-app.elf", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for module in references:
        assert f"{module}: status 0, 0 element(s) differ" in done.stdout


@pytest.mark.parametrize("name", ["$(shell touch INJECTED).c", "two words.c", "line\nbreak.c", "a:b.c", "-flag.c"])
def test_an_app_file_name_make_would_run_or_split_is_refused_up_front(fixtures_dir, tmp_path, name):
    """A source named `$(shell touch X).c` reached the generated Makefile as written and make ran the
    command; names make cannot take safely are refused before anything is built (exit 2, one line)."""
    mlf = str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar")
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.c").write_text("int main(void) { return 0; }\n")
    (app / name).write_text("int helper(void) { return 1; }\n")
    done = cli("build", mlf, "-b", "host", "-o", str(tmp_path / "b"), "--app", str(app), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot be handed to make safely" in done.stderr
    assert not (tmp_path / "INJECTED").exists() and not (app / "INJECTED").exists()
    assert not (tmp_path / "b" / "firmware.elf").exists()


def test_app_files_are_read_with_a_bound(fixtures_dir, tmp_path, monkeypatch):
    """A 3 GiB header in the application was read whole (MemoryError); now one line, exit 3, and the
    previous build stays."""
    mlf = str(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar")
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.c").write_text('#include "huge.h"\nint main(void) { return 0; }\n')
    with (app / "huge.h").open("wb") as sparse:
        sparse.truncate(3 << 30)  # sparse: no disk used
    done = cli("build", mlf, "-b", "host", "-o", str(tmp_path / "b"), "--app", str(app), timeout=60)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "huge.h" in done.stderr and "over the limit" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "b" / "firmware.elf").exists()

    from mlfbuild import project
    from mlfbuild.errors import InvalidInputError

    (app / "huge.h").unlink()
    for index in range(3):
        (app / f"part{index}.h").write_text("/* */\n")
    monkeypatch.setattr(project, "MAX_APP_FILES", 3)
    with pytest.raises(InvalidInputError, match="more than 3 C/C.. sources and headers"):
        project.copy_user_app(app, project.Writer(tmp_path / "w"))
    monkeypatch.setattr(project, "MAX_APP_FILES", 10)
    monkeypatch.setattr(project, "MAX_APP_BYTES", 60)
    with pytest.raises(InvalidInputError, match="over 60 bytes together"):
        project.copy_user_app(app, project.Writer(tmp_path / "w"))


@pytest.mark.cross
def test_export_into_a_relative_folder_as_the_readme_writes_it(tmp_path):
    """`mlfbuild export kws.tar -b mps2-an386 -o kws-export`, run where the MLF is: the compiler runs
    inside the folder and was handed paths relative to the user's folder (exit 4, cc1: No such file)."""
    (tmp_path / "tiny.tar").write_bytes((REPO / "examples" / "tiny_aot.tar").read_bytes())
    done = cli("export", "tiny.tar", "-b", "mps2-an386", "-o", "tiny-export", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    description = json.loads((tmp_path / "tiny-export" / "mlfbuild-export.json").read_text())
    assert description["folder"] == "tiny-export"
    archive = next((tmp_path / "tiny-export" / "prebuilt").glob("libmlf_*.a")).read_bytes()
    assert str(tmp_path).encode() not in archive  # the objects name their sources relative to the folder
    # A make user compiles the model as the prebuilt libraries were: the export's -O level and C dialect.
    flags = next(line for line in (tmp_path / "tiny-export" / "mlf.mk").read_text().splitlines()
                 if line.startswith("MLF_TINY_CFLAGS :="))
    assert " -Os -std=gnu11 " in flags


@pytest.mark.qemu
def test_an_app_that_prints_before_mlfrt_init_runs_and_exits(fixtures_dir, tmp_path):
    """An application written against TVM's C interface alone never calls mlfrt_init(): the board
    support readies its console before main, so its printf is seen and it exits (it hung forever)."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.c").write_text('#include <stdio.h>\n#include "tvmgen_kws.h"\n'
                                'int main(void) { printf("before any init\\n"); return 0; }\n')
    mlf = fixtures_dir / "tvm-0.18" / "kws_aot_c_unpacked_usmp.tar"
    built = cli("build", str(mlf), "-b", BOARD, "-o", str(tmp_path / "b"), "--app", str(app))
    assert built.returncode == 0, built.stderr
    done = cli("run", str(tmp_path / "b"), "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "before any init" in done.stdout and "exited with status 0" in done.stdout


@pytest.mark.cross
def test_an_export_owns_exactly_the_files_it_wrote(tmp_path):
    """Re-exporting replaced the export's own files and deleted every other file under src/ and include/
    (the user's among them); a project root holding a copied mlfbuild-export.json lost its src/main.c.
    Now an export removes only what the previous one recorded writing."""
    mlf = str(REPO / "examples" / "tiny_aot.tar")
    folder = tmp_path / "e"
    assert cli("export", mlf, "-b", "mps2-an386", "-o", str(folder)).returncode == 0
    first = json.loads((folder / "mlfbuild-export.json").read_text())["files"]
    assert "prebuilt/libmlf_tiny.a" in first and all((folder / f).is_file() for f in first)
    mine = {"src/mine.c": "int mine;\n", "include/mine.h": "#define MINE 1\n", "notes.txt": "mine\n"}
    for relative, text in mine.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    again = cli("export", mlf, "-b", "mps2-an386", "-o", str(folder), "--name", "renamed")
    assert again.returncode == 0, again.stderr
    assert all((folder / relative).read_text() == text for relative, text in mine.items())
    assert not (folder / "prebuilt" / "libmlf_tiny.a").exists()  # the previous export's, not written again
    assert (folder / "prebuilt" / "libmlf_renamed.a").is_file()

    project = tmp_path / "project"  # an export's contents copied into a project with its own main.c
    project.mkdir()
    for relative in first:
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_bytes((folder / relative).read_bytes() if (folder / relative).exists() else b"")
    marker = json.loads((folder / "mlfbuild-export.json").read_text())
    del marker["files"]  # a marker without the record of what it wrote owns nothing
    (project / "mlfbuild-export.json").write_text(json.dumps(marker))
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    assert cli("export", mlf, "-b", "mps2-an386", "-o", str(project)).returncode == 0
    assert (project / "src" / "main.c").read_text() == "int main(void) { return 0; }\n"


def test_module_names_that_differ_only_in_case_are_refused(tmp_path):
    """`tiny` and `TINY` exported together shared one include guard and every MLF_TINY_* macro."""
    from mlfwriter import TinyModel, tar_tree

    lower = tar_tree(TinyModel("tiny").files(), tmp_path / "lower.tar")
    upper = tar_tree(TinyModel("TINY").files(), tmp_path / "upper.tar")
    done = cli("export", str(lower), str(upper), "-b", "host", "-o", str(tmp_path / "e"))
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "modules 'tiny' and 'TINY' differ only in case" in done.stderr


def _mk_variables(folder: Path) -> dict[str, str]:
    variables = {}
    for line in (folder / "mlf.mk").read_text().splitlines():
        if ":=" in line or "?=" in line:
            key, _, value = line.partition("=")
            variables[key.rstrip(":? ")] = value.replace("$(MLF_DIR)", str(folder)).strip()
    return variables


def _link_without_gc_sections(folders: list[Path], app: Path, out: Path) -> subprocess.CompletedProcess:
    """The app linked the plainest way: the first export's board support, every export's prebuilt
    libraries in the order given, no --gc-sections."""
    first = _mk_variables(folders[0])
    package = json.loads((folders[0] / MARKER).read_text())["cmake"]["package"].upper()
    cpu = first[f"{package}_CPU_FLAGS"].split()
    board_flags = first["MLFBUILD_BOARD_CFLAGS"].replace(f"$({package}_CPU_FLAGS)", "").split()
    includes, libraries = [], []
    for folder in folders:
        variables, name = _mk_variables(folder), json.loads((folder / MARKER).read_text())["cmake"]["package"].upper()
        includes += variables[f"{name}_INCLUDES"].split()
        libraries += variables[f"{name}_LIBRARIES"].split()
    command = ["arm-none-eabi-gcc", *cpu, *board_flags, "-Os", "-std=gnu11", *includes, str(app),
               *first["MLFBUILD_BOARD_SOURCES"].split(), f"-T{folders[0] / 'board' / 'linker.ld'}",
               "-nostartfiles", "--specs=nano.specs", *libraries, "-o", str(out)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _linked(folders: list[Path], app: Path, out: Path) -> Path:
    done = _link_without_gc_sections(folders, app, out)
    assert done.returncode == 0, done.stderr
    return out


def _ram_and_arenas(elf: Path, symbol: str) -> tuple[int, list[str]]:
    with elf.open("rb") as stream:
        image = ELFFile(stream)
        ram = sum(s["sh_size"] for s in image.iter_sections() if s.name in (".bss", ".data"))
        sections = [image.get_section(s["st_shndx"]).name for s in image.get_section_by_name(".symtab").iter_symbols()
                    if s.name == symbol]
    return ram, sections


def test_an_app_s_arena_replaces_the_library_s_without_gc_sections(fixtures_dir, tmp_path):
    """An application that supplies the arena kept the library's too unless it linked with --gc-sections
    (+ the whole arena of RAM): the library's arena is an object of its own, never pulled in then."""
    folder = export([fixtures_dir / "tvm-0.13" / "kws_graph_c.tar"], BOARD, tmp_path / "e").folder
    arena_bytes = json.loads((folder / MARKER).read_text())["models"][0]["arena"]["bytes"]
    assert arena_bytes > 10_000
    run = ('#include "mlf_default.h"\n#include "tvmgen_default.h"\n'
           "static int8_t input[MLF_DEFAULT_INPUT_0_BYTES], output[MLF_DEFAULT_OUTPUT_0_BYTES];\n"
           "int main(void) {\n"
           "  struct tvmgen_default_inputs in = {.MLF_DEFAULT_INPUT_0_C_NAME = input};\n"
           "  struct tvmgen_default_outputs out = {.MLF_DEFAULT_OUTPUT_0_C_NAME = output};\n"
           "  return (int)tvmgen_default_run(&in, &out);\n}\n")
    plain, supplied = tmp_path / "plain.c", tmp_path / "supplied.c"
    plain.write_text(run)
    supplied.write_text(run + "uint8_t mlf_default_arena[MLF_DEFAULT_ARENA_BYTES]\n"
                              "  __attribute__((aligned(MLF_DEFAULT_ARENA_ALIGN), section(\".bss.app_arena\")));\n")
    ram_plain, arenas_plain = _ram_and_arenas(_linked([folder], plain, tmp_path / "plain.elf"), "mlf_default_arena")
    ram_supplied, arenas_supplied = _ram_and_arenas(_linked([folder], supplied, tmp_path / "supplied.elf"),
                                                    "mlf_default_arena")
    assert arenas_plain == [".bss"] and arenas_supplied == [".bss"]   # one symbol each (the map puts .bss* in .bss)
    assert abs(ram_supplied - ram_plain) < 64, (ram_plain, ram_supplied)  # one arena, not two


def _symbol_size(elf: Path, name: str) -> list[int]:
    with elf.open("rb") as stream:
        return [s["st_size"] for s in ELFFile(stream).get_section_by_name(".symtab").iter_symbols() if s.name == name]


@pytest.mark.qemu  # the CMSIS-NN size probe runs on the core in QEMU
def test_two_exports_that_call_cmsis_nn_share_one_library_and_the_largest_scratch_region(
        fixtures_dir, third_party_dir, tmp_path):
    """Linked into one image, the first export's scratch region served both, however small (docs said
    "at most one such export", and nothing enforced it). Now the region is the largest any model asks
    for, in either link order, and exports built against different CMSIS-NN trees do not link."""
    def exported(name: str, tree: str, out: str, renames: tuple[str, ...] = ()) -> Path:
        return export([fixtures_dir / "tvm-0.18" / f"{name}.tar"], "mps3-an547", tmp_path / out,
                      options=ProjectOptions(cmsis_nn=third_party_dir / tree), renames=list(renames)).folder

    kws = exported("kws_aot_cmsisnn_nousmp", "cmsis-nn-v6.0.0", "kws")
    ad = exported("ad_aot_cmsisnn", "cmsis-nn-v6.0.0", "ad")
    # kws's convolutions need a scratch buffer on the M55; ad's fully connected layers none (their MVE
    # kernel sums are computed at build time, in flash): the region must be kws's whichever comes first
    sizes = {json.loads((f / MARKER).read_text())["models"][0]["cmsis_nn_scratch_bytes"] for f in (kws, ad)}
    assert len(sizes) == 2 and max(sizes) > 0
    app = tmp_path / "main.c"
    app.write_text('#include "tvmgen_kws.h"\n#include "tvmgen_ad.h"\n'
                   "int main(void) { return (int)tvmgen_kws_run(0, 0) + (int)tvmgen_ad_run(0, 0); }\n")
    for order in ([kws, ad], [ad, kws]):
        elf = _linked(order, app, tmp_path / f"{order[0].name}-first.elf")
        assert _symbol_size(elf, "mlf_cmsis_nn_scratch") == [max(sizes)], order[0].name

    kws_v4 = exported("kws_aot_cmsisnn_nousmp", "cmsis-nn-v4.1.0", "kws-v4", ("kws=kws_v4",))
    mixed = tmp_path / "mixed.c"
    mixed.write_text('#include "tvmgen_kws.h"\n#include "tvmgen_kws_v4.h"\n'
                     "int main(void) { return (int)tvmgen_kws_run(0, 0) + (int)tvmgen_kws_v4_run(0, 0); }\n")
    refused = _link_without_gc_sections([kws_v4, kws], mixed, tmp_path / "mixed.elf")
    assert refused.returncode != 0
    assert "multiple definition of `mlf_cmsis_nn_one_library_per_image_all_models_must_use_the_same_tree_and_paths'" \
        in refused.stderr


@pytest.mark.cross
def test_an_export_leaves_no_lock_no_working_folders_and_no_stub(tmp_path):
    """A finished export held .mlfbuild.lock; a killed one's .unpack-*/.objects-* stayed through the next
    export; a failed export into a new folder left the folder with a stub marker."""
    mlf = str(REPO / "examples" / "tiny_aot.tar")
    folder = tmp_path / "e"
    assert cli("export", mlf, "-b", BOARD, "-o", str(folder)).returncode == 0
    assert not (folder / ".mlfbuild.lock").exists()
    for leftover in (".unpack-k1ll3d", ".objects-k1ll3d"):   # what a killed export leaves
        (folder / leftover / "0").mkdir(parents=True)
        (folder / leftover / "0" / "x.o").write_bytes(b"\0")
    assert cli("export", mlf, "-b", BOARD, "-o", str(folder)).returncode == 0
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]

    (tmp_path / "broken.tar").write_bytes(b"not a tar")
    new = tmp_path / "new" / "deeper" / "e"
    failed = cli("export", str(tmp_path / "broken.tar"), "-b", BOARD, "-o", str(new))
    assert failed.returncode == 3, failed.stderr
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()   # a folder the user made is kept, empty as it was
    assert cli("export", str(tmp_path / "broken.tar"), "-b", BOARD, "-o", str(tmp_path / "empty")).returncode == 3
    assert (tmp_path / "empty").is_dir()


@pytest.mark.cross
def test_the_board_target_links_with_a_linker_script_of_the_users(tmp_path):
    """-DMLFBUILD_LINKER_SCRIPT: the board support with the user's memory map, no link options rewritten."""
    folder = tmp_path / "export"
    assert cli("export", str(REPO / "examples" / "tiny_aot.tar"), "-b", BOARD, "-o", str(folder)).returncode == 0
    script = tmp_path / "app.ld"
    script.write_text((folder / "board" / "linker.ld").read_text() + "\napp_linker_script_marker = 0x1234;\n")
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.c").write_text('#include "tvmgen_tiny.h"\nint main(void) { return 0; }\n')
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(app C)\n"
        f'add_subdirectory("{folder}" export)\nadd_executable(app.elf main.c)\n'
        "target_link_libraries(app.elf PRIVATE mlf::tiny mlfbuild::board_mps2_an386)\n")
    build = tmp_path / "build"
    for step in (["-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={folder}/cmake/arm-none-eabi.cmake",
                  f"-DMLFBUILD_LINKER_SCRIPT={script}"], ["--build", str(build), "-j2"]):
        done = subprocess.run(["cmake", *step], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    with (build / "app.elf").open("rb") as stream:
        symbols = ELFFile(stream).get_section_by_name(".symtab")
        assert [s["st_value"] for s in symbols.iter_symbols() if s.name == "app_linker_script_marker"] == [0x1234]


def _stack_measuring_app(description: dict, module: str) -> str:
    """An application that paints the stack below its own stack pointer, runs the model once with
    interrupts masked (an exception frame is not the model's) and finds the lowest word written."""
    model = next(m for m in description["models"] if m["name"] == module)
    macro = re.sub(r"\W", "_", module).upper()
    buffers, fields = [], {"inputs": [], "outputs": []}
    for kind, tensors in (("INPUT", model["inputs"]), ("OUTPUT", model["outputs"])):
        for index in range(len(tensors)):
            buffer = f"{kind.lower()}{index}"
            buffers.append(f"static uint8_t {buffer}[MLF_{macro}_{kind}_{index}_BYTES] "
                           f"__attribute__((aligned(MLF_{macro}_IO_ALIGN)));")
            fields[kind.lower() + "s"].append(f".MLF_{macro}_{kind}_{index}_C_NAME = (void *){buffer}")
    return "\n".join([
        "#include <stdint.h>", "#include <stdio.h>", f'#include "mlf_{module}.h"',
        "extern uint32_t _sstack[];  /* the board script's stack bottom */", *buffers,
        "__attribute__((noinline)) static int32_t measured_run(uint32_t *depth) {",
        f"  struct tvmgen_{module}_inputs inputs = {{ {', '.join(fields['inputs'])} }};",
        f"  struct tvmgen_{module}_outputs outputs = {{ {', '.join(fields['outputs'])} }};",
        "  uint32_t sp;",
        '  __asm__ volatile("cpsid i\\n mov %0, sp" : "=r"(sp) :: "memory");',
        "  for (volatile uint32_t *w = _sstack; (uint32_t)w < sp; ++w) *w = 0xC0FFEE55u;",
        f"  int32_t status = tvmgen_{module}_run(&inputs, &outputs);",
        "  volatile uint32_t *w = _sstack;",
        "  while ((uint32_t)w < sp && *w == 0xC0FFEE55u) ++w;",
        '  __asm__ volatile("cpsie i" ::: "memory");',
        "  *depth = sp - (uint32_t)w;",
        "  return status;",
        "}",
        "int main(void) {",
        "  uint32_t depth = 0;",
        "  int32_t status = measured_run(&depth);",
        f'  printf("status %ld measured %lu bound %lu\\n", (long)status, (unsigned long)depth, '
        f"(unsigned long)MLF_{macro}_STACK_BYTES);",
        f"  return status != 0 || depth == 0 || depth > MLF_{macro}_STACK_BYTES;",
        "}", ""])


@pytest.mark.qemu
@pytest.mark.parametrize("name", ["kws_aot_c_unpacked_usmp", "kws_graph_c", "op_matmul_llvm_cm4",
                                  "multi_kws_ad_aot_c_usmp", "kws_aot_cmsisnn_m4"])
def test_the_model_s_stack_figure_bounds_what_its_run_uses_in_qemu(exports, name, tmp_path):
    """mlf_<mod>.h's MLF_<MOD>_STACK_BYTES, checked against the running code: an application linked with
    the prebuilt library measures how far below its call the run function writes (the static bound
    may be larger, never smaller)."""
    folder = exports[name]
    description = json.loads((folder / MARKER).read_text())
    package = description["cmake"]["package"]
    for model in description["models"]:
        module = model["name"]
        assert model["stack"]["bytes"] and model["stack"]["path"][0] == f"tvmgen_{module}_run"
        header = (folder / "include" / f"mlf_{module}.h").read_text()
        assert f"#define MLF_{module.upper()}_STACK_BYTES {model['stack']['bytes']}\n" in header
        app = tmp_path / module
        app.mkdir()
        (app / "main.c").write_text(_stack_measuring_app(description, module))
        (app / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.19)\nproject(app C)\n"
            f'set({package.upper()}_PREBUILT ON CACHE BOOL "" FORCE)\n'
            f'add_subdirectory("{folder}" export)\nadd_executable(app.elf main.c)\n'
            f"target_link_libraries(app.elf PRIVATE mlf::{name} mlfbuild::board_mps2_an386)\n")
        build = app / "build"
        for step in (["-S", str(app), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={folder}/cmake/arm-none-eabi.cmake"],
                     ["--build", str(build), "-j2"]):
            done = subprocess.run(["cmake", *step], capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        ran = _qemu(build / "app.elf")
        measured = re.search(r"status 0 measured (\d+) bound (\d+)", ran.stdout)
        assert ran.returncode == 0 and measured, ran.stdout + ran.stderr
        assert 0 < int(measured[1]) <= int(measured[2]) == model["stack"]["bytes"]


@pytest.mark.cross
def test_without_a_stack_bound_the_header_says_why_and_defines_no_figure(tmp_path, monkeypatch):
    """A run function with no static bound (here: the image's disassembly unreadable) gets no macro an
    application could trust, and the reason; the export itself succeeds."""
    import mlfbuild.export as export_module

    def no_disassembly(elf, build_dir, objdump, entries):
        raise RuntimeError(f"{objdump} could not disassemble {elf}: simulated")

    monkeypatch.setattr(export_module, "call_depths", no_disassembly)
    folder = export([REPO / "examples" / "tiny_aot.tar"], BOARD, tmp_path / "export").folder
    header = (folder / "include" / "mlf_tiny.h").read_text()
    assert "MLF_TINY_STACK_BYTES" in header and "#define MLF_TINY_STACK_BYTES" not in header
    assert "No static bound for tvmgen_tiny_run's stack" in header and "simulated" in header
    stack = json.loads((folder / MARKER).read_text())["models"][0]["stack"]
    assert stack["bytes"] is None and "simulated" in stack["unbounded"][0]


def test_a_host_export_has_no_stack_figure(tmp_path):
    folder = export([REPO / "examples" / "tiny_aot.tar"], "host", tmp_path / "export").folder
    header = (folder / "include" / "mlf_tiny.h").read_text()
    assert "#define MLF_TINY_STACK_BYTES" not in header and "computed by `mlfbuild export` for Cortex-M boards" in header
    assert json.loads((folder / MARKER).read_text())["models"][0]["stack"] is None


# Rules as earlier versions of docs/export.md gave them (and TVM's own section names): a script written
# from them placed 0 B once the constants were in .rodata.tvm.<mod>.
_OLD_RULES = ("  .model_const : { *(.rodata.tvm) } > FLASH :text\n",
              "  .model_pool (NOLOAD) : { *(.bss.noinit.tvm*) } > RAM AT> RAM :bss\n")
_NEW_RULES = ("  .tiny_const : { tiny_lib*(.rodata.tvm) */tiny_lib*(.rodata.tvm) } > FLASH :text\n"
              "  .model_const : { *(.rodata.tvm) } > FLASH :text\n",
              "  .tiny_pool (NOLOAD) : { *(.bss.noinit.tvm.tiny) } > RAM AT> RAM :bss\n"
              "  .model_pool (NOLOAD) : { *(.bss.noinit.tvm*) } > RAM AT> RAM :bss\n")


def _placed(folder: Path, rules: tuple[str, str], tmp_path: Path) -> dict[str, set[str]]:
    """The export's example linked (prebuilt library) with the board's script plus `rules` before its
    .rodata and .bss; for each output section, the model's pool and constant symbols it holds."""
    base = (folder / "board" / "linker.ld").read_text()
    script = base.replace("  .rodata (READONLY) :", rules[0] + "  .rodata (READONLY) :", 1)
    script = script.replace("  .bss (NOLOAD) :", rules[1] + "  .bss (NOLOAD) :", 1)
    tmp_path.mkdir()
    (tmp_path / "user.ld").write_text(script)
    variables = _mk_variables(folder)
    app = tmp_path / "main.c"
    app.write_text('#include "mlf_tiny.h"\n#include "tvmgen_tiny.h"\n'
                   "static int8_t input[MLF_TINY_INPUT_0_BYTES], output[MLF_TINY_OUTPUT_0_BYTES];\n"
                   "int main(void) {\n"
                   "  struct tvmgen_tiny_inputs in = {.MLF_TINY_INPUT_0_C_NAME = input};\n"
                   "  struct tvmgen_tiny_outputs out = {.MLF_TINY_OUTPUT_0_C_NAME = output};\n"
                   "  return (int)tvmgen_tiny_run(&in, &out);\n}\n")
    elf = tmp_path / "app.elf"
    command = ["arm-none-eabi-gcc", *variables["MLF_TINY_CPU_FLAGS"].split(),
               *variables["MLFBUILD_BOARD_CFLAGS"].replace("$(MLF_TINY_CPU_FLAGS)", "").split(), "-Os",
               *variables["MLF_TINY_INCLUDES"].split(), str(app), *variables["MLFBUILD_BOARD_SOURCES"].split(),
               f"-T{tmp_path / 'user.ld'}", "-nostartfiles", "--specs=nano.specs", "-Wl,--gc-sections",
               *variables["MLF_TINY_LIBRARIES"].split(), "-o", str(elf)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    placed: dict[str, set[str]] = {}
    with elf.open("rb") as stream:
        image = ELFFile(stream)
        for symbol in image.get_section_by_name(".symtab").iter_symbols():
            if symbol.name == "global_workspace" or symbol.name.startswith("fused_constant"):
                section = image.get_section(symbol["st_shndx"])
                assert symbol["st_size"] > 0 and section["sh_size"] >= symbol["st_size"]
                placed.setdefault(section.name, set()).add(symbol.name)
    return placed


@pytest.mark.cross
def test_linker_scripts_of_earlier_docs_still_place_the_models_sections(tmp_path):
    """`*(.rodata.tvm)` matches only that name: once the constants were in .rodata.tvm.<mod>, a script
    written from the docs put them with every other .rodata (its .model_const was 0 B)."""
    folder = tmp_path / "e"
    assert cli("export", str(REPO / "examples" / "tiny_aot.tar"), "-b", BOARD, "-o", str(folder)).returncode == 0
    constants = {f"fused_constant{suffix}" for suffix in ("", "_1", "_2", "_3")}
    old = _placed(folder, _OLD_RULES, tmp_path / "old")
    assert old == {".model_const": constants, ".model_pool": {"global_workspace"}}
    new = _placed(folder, _NEW_RULES, tmp_path / "new")  # one model's constants and pool apart
    assert new == {".tiny_const": constants, ".tiny_pool": {"global_workspace"}}


@pytest.mark.cross
def test_a_host_export_of_a_cmsis_nn_model_compiles(cmsis_nn, tmp_path):
    """The host's CMSIS-NN flags include a header first (-include stdint.h): two arguments, as the
    export's own compiler runs and CMake take them, not one with a space."""
    import tflitecases  # noqa: F401
    from tflitewriter import KWS_CHAIN, chain_model

    model = chain_model(np.random.default_rng(2), KWS_CHAIN).write(tmp_path / "k.tflite")
    done = cli("export", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    cmake = (tmp_path / "out" / "cmake").rglob("*.cmake") if (tmp_path / "out" / "cmake").is_dir() else []
    assert not any('"-include stdint.h' in path.read_text() for path in cmake)
