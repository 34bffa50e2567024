"""The C runtime in crt/: warning-free on every compiler we target, compatible with real TVM output,
numbered as TVM numbers its ABI, and working firmware on QEMU boards and on the host.

Tools: gcc, arm-none-eabi-gcc, qemu-system-arm. A missing tool skips its tests, except when the
environment says CI=true: then it fails them. The MLF fixtures come from the `fixtures_dir` fixture
of tests/conftest.py ($MLFBUILD_FIXTURES or ../shared/fixtures).
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2
import pytest

from mlfbuild.boards import Board, load_board
from mlfbuild.project.runtime import crt_defines, crt_sources
from mlfbuild.resources import data_dir
from conftest import REPO

CRT = data_dir("crt")
SMOKE_SRC = REPO / "tests" / "c" / "crt_smoke.c"
IN_CI = os.environ.get("CI", "").lower() == "true"

WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wstrict-prototypes"]
ARM_CPUS = {
    "m4f": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
    "m3": ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"],
    "m33": ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"],
    "m55": ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"],
    "m7": ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
    "m0": ["-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"],
}
PORTABLE_SOURCES = ["backend.c", "mlfrt_common.c", "func_registry.c"]
CORTEXM_SOURCES = ["startup_cortexm.c", "platform_cortexm.c", "newlib_syscalls.c"]
UART_DRIVERS = ["MLFRT_UART_CMSDK", "MLFRT_UART_PL011", "MLFRT_UART_STM32", "MLFRT_UART_STM32F7", "MLFRT_UART_NRF"]
SMOKE_BOARDS = ["mps2-an386", "mps2-an385", "mps2-an500", "mps2-an505", "mps3-an547", "netduinoplus2", "microbit",
                "lm3s6965evb"]


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if IN_CI:
            pytest.fail(f"{tool} is not installed (required when CI=true)")
        pytest.skip(f"{tool} is not installed")
    return path


def compile_ok(cmd: list[str], cwd: Path | None = None) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=120)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout}{result.stderr}"


# ------------------------------------------------------------------------------------------------
# (a) every crt/ C file compiles warning-free


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_crt_compiles_warning_free_on_host(tmp_path, opt):
    gcc = need("gcc")
    for src in PORTABLE_SOURCES + ["platform_host.c"]:
        compile_ok([gcc, "-std=c11", opt, *WARNINGS, "-I", str(CRT / "include"), "-c", str(CRT / "src" / src),
                    "-o", str(tmp_path / (src + ".o"))])


@pytest.mark.parametrize("std", ["c99", "c11", "gnu99", "c17"])
def test_mlfrt_h_compiles_in_an_application_of_any_c_dialect(tmp_path, std):
    """An application's `-std=c99 -Wpedantic` stopped at mlfrt_exit's C11 `_Noreturn`."""
    gcc = need("gcc")
    app = tmp_path / "app.c"
    app.write_text('#include "mlfrt.h"\nint main(void) { mlfrt_exit(0); }\n')
    compile_ok([gcc, f"-std={std}", "-Wpedantic", *WARNINGS, "-I", str(CRT / "include"), "-c", str(app),
                "-o", str(tmp_path / "app.o")])


@pytest.mark.cross
@pytest.mark.parametrize("cpu", sorted(ARM_CPUS))
def test_crt_compiles_warning_free_on_arm(tmp_path, cpu):
    gcc = need("arm-none-eabi-gcc")
    base = [gcc, *ARM_CPUS[cpu], "-std=c11", "-O2", "-ffunction-sections", "-fdata-sections", *WARNINGS,
            "-I", str(CRT / "include"), "-DMLFRT_UART_BASE=0x40004000u"]
    jobs = []
    for src in PORTABLE_SOURCES + ["startup_cortexm.c", "newlib_syscalls.c"]:
        jobs.append(base + ["-DMLFRT_UART_CMSDK=1", "-c", str(CRT / "src" / src)])
    for driver in UART_DRIVERS:
        for semihosting in ("0", "1"):
            extra = [f"-D{driver}=1", f"-DMLFRT_SEMIHOSTING={semihosting}"]
            if driver == "MLFRT_UART_STM32F7" and semihosting == "1":
                extra.append("-DMLFRT_UART_LPUART=1")
            if semihosting == "0":
                extra += ["-DMLFRT_BOARD_INIT_WRITES=0x40023830u,0u,0x1u,0x40023840u,0u,0x20000u",
                          "-DMLFRT_STACK_PAINT=0", "-O0"]
            jobs.append(base + extra + ["-c", str(CRT / "src" / "platform_cortexm.c")])
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda j: compile_ok(j[1] + ["-o", str(tmp_path / f"{j[0]}.o")]), enumerate(jobs)))


@pytest.mark.cross
def test_cortexm_files_refuse_a_missing_uart_choice(tmp_path):
    gcc = need("arm-none-eabi-gcc")
    result = subprocess.run([gcc, *ARM_CPUS["m4f"], "-std=c11", "-I", str(CRT / "include"), "-c",
                             str(CRT / "src" / "platform_cortexm.c"), "-o", str(tmp_path / "x.o")],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "define exactly one of MLFRT_UART_CMSDK" in result.stderr


def test_headers_compile_as_cplusplus(tmp_path):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed (optional check)")
    src = tmp_path / "all.cc"
    src.write_text("".join(f"#include <{h}>\n" for h in (
        "dlpack/dlpack.h", "tvm/runtime/c_runtime_api.h", "tvm/runtime/c_backend_api.h",
        "tvm/runtime/crt/error_codes.h", "tvm/runtime/crt/func_registry.h", "tvm/runtime/crt/module.h",
        "tvm/runtime/metadata_types.h", "mlfrt.h")) + "int main() { return 0; }\n")
    compile_ok([gxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(CRT / "include"), "-fsyntax-only",
                str(src)])


# ------------------------------------------------------------------------------------------------
# (b) real TVM output compiles against our headers

FIXTURES = [
    "tvm-0.13/kws_graph_c", "tvm-0.13/kws_aot_packed", "tvm-0.13/cnn_aot_packed_usmp",
    "tvm-0.13/kws_aot_c_unpacked_nousmp", "tvm-0.13/kws_aot_c_unpacked_usmp", "tvm-0.13/mlp_graph_c",
    "tvm-0.13/multi_kws_ad_aot_c_usmp", "tvm-0.13/op_vector_add_c", "tvm-0.13/cnn_graph_c_cm4_linkparams",
    "tvm-0.8/kws_graph_c", "tvm-0.8/kws_aot_packed", "tvm-0.8/kws_aot_c_unpacked", "tvm-0.8/cnn_graph_c",
    "tvm-0.8/mlp_aot_c_unpacked", "tvm-0.8/mlp_graph_c_linkparams", "tvm-0.8/op_vector_add_c",
]
# Generated code has unused variables/parameters and (USMP) pointer-type mismatches; what must
# not happen is a missing declaration or type in our headers.
GENERATED_FLAGS = ["-std=gnu11", "-O0", "-w", "-Werror=implicit-function-declaration", "-Werror=implicit-int",
                   "-Wno-incompatible-pointer-types"]


def _extract(fixtures: Path, fixture: str, into: Path) -> Path:
    tar_path = fixtures / f"{fixture}.tar"
    if not tar_path.is_file():
        pytest.fail(f"fixture {tar_path} is missing")
    dest = into / fixture.replace("/", "_")
    dest.mkdir(parents=True)
    with tarfile.open(tar_path) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and "/codegen/host/" in "/" + m.name.lstrip("./")]
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12+/3.11.4+
            tar.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover
            tar.extractall(dest, members=members)
    return dest


@pytest.mark.cross
@pytest.mark.parametrize("fixture", FIXTURES)
def test_generated_code_compiles_against_our_headers(tmp_path, fixtures_dir, fixture):
    compilers = [[need("gcc")]]
    if shutil.which("arm-none-eabi-gcc") or IN_CI:
        compilers.append([need("arm-none-eabi-gcc"), *ARM_CPUS["m4f"]])
    root = _extract(fixtures_dir, fixture, tmp_path)
    sources = sorted((root / "codegen" / "host" / "src").glob("*.c"))
    assert sources, f"{fixture} has no C sources"
    jobs = [cc + GENERATED_FLAGS + ["-I", str(CRT / "include"), "-I", str(root / "codegen" / "host" / "include"),
                                    "-c", str(src), "-o", str(tmp_path / f"{i}_{src.stem}.o")]
            for i, cc in enumerate(compilers) for src in sources]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(compile_ok, jobs))


HARNESS = r"""
#include <stdio.h>
#include "mlfrt.h"
#include <tvmgen_default.h>
static __attribute__((aligned(16))) uint8_t workspace[TVMGEN_DEFAULT_WORKSPACE_SIZE];
static int8_t input[TVMGEN_DEFAULT_INPUT_1_SIZE], output[TVMGEN_DEFAULT_IDENTITY_SIZE];
int main(void) {
  mlfrt_init();
  if (fread(input, 1, sizeof input, stdin) != sizeof input) return 9;
  mlfrt_workspace_init(workspace, sizeof workspace);
  struct tvmgen_default_inputs in = {input};
  struct tvmgen_default_outputs out = {output};
  int rc = tvmgen_default_run(&in, &out);
  printf("rc=%d peak=%zu size=%d used=%zu\n", rc, mlfrt_workspace_peak(), TVMGEN_DEFAULT_WORKSPACE_SIZE,
         mlfrt_workspace_used());
  for (size_t i = 0; i < sizeof output; i++) printf("%d ", output[i]);
  printf("\n");
  return rc;
}
"""


def test_usmp_off_model_runs_on_host_with_our_workspace_allocator(tmp_path, fixtures_dir):
    """kws, AOT C interface without USMP: every intermediate comes from TVMBackendAllocWorkspace.
    A buffer of exactly TVMGEN_DEFAULT_WORKSPACE_SIZE must do, and the output must be bit-exact."""
    np = pytest.importorskip("numpy")
    gcc = need("gcc")
    root = _extract(fixtures_dir, "tvm-0.13/kws_aot_c_unpacked_nousmp", tmp_path)
    (tmp_path / "harness.c").write_text(HARNESS)
    exe = tmp_path / "kws"
    compile_ok([gcc, "-O1", "-w", "-I", str(CRT / "include"), "-I", str(root / "codegen/host/include"),
                *map(str, sorted((root / "codegen/host/src").glob("*.c"))),
                *(str(CRT / "src" / s) for s in ("backend.c", "mlfrt_common.c", "platform_host.c")),
                str(tmp_path / "harness.c"), "-lm", "-o", str(exe)])
    reference = np.load(fixtures_dir / "tvm-0.13" / "kws.npz")
    result = subprocess.run([str(exe)], input=reference["input_1"].astype(np.int8).tobytes(),
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    status, values = result.stdout.decode().splitlines()
    match = re.fullmatch(r"rc=0 peak=(\d+) size=(\d+) used=0", status)
    assert match, status
    assert 0 < int(match.group(1)) <= int(match.group(2))
    assert [int(v) for v in values.split()] == reference["output_0"].ravel().tolist()


# ------------------------------------------------------------------------------------------------
# (c) the TVM ABI: the same numbering as TVM, and every shape of generated code compiles cleanly

# tvm_crt_error_t — include/tvm/runtime/crt/error_codes.h, TVM v0.9.0 (the file is identical up to
# v0.18.0). TVM v0.8.0 has the same values under the executor names of TVM_08_ERROR_NAMES, and its
# kTvmErrorSystemErrorMask is 1 << 15 instead of the sign bit.
TVM_ERROR_CODES = {
    "kTvmErrorCategoryFunctionRegistry": 1, "kTvmErrorCategoryFraming": 2, "kTvmErrorCategoryWriteStream": 3,
    "kTvmErrorCategorySession": 4, "kTvmErrorCategoryPlatform": 5, "kTvmErrorCategoryGenerated": 6,
    "kTvmErrorCategoryExecutor": 7, "kTvmErrorCategoryFunctionCall": 8, "kTvmErrorCategoryTimeEvaluator": 9,
    "kTvmErrorNoError": 0,
    "kTvmErrorFunctionNameNotFound": 0x100, "kTvmErrorFunctionIndexInvalid": 0x101,
    "kTvmErrorFunctionRegistryFull": 0x102, "kTvmErrorFunctionAlreadyDefined": 0x103,
    "kTvmErrorBufferTooSmall": 0x104,
    "kTvmErrorFramingInvalidState": 0x200, "kTvmErrorFramingShortPacket": 0x201,
    "kTvmErrorFramingInvalidEscape": 0x202, "kTvmErrorFramingPayloadOverflow": 0x203,
    "kTvmErrorFramingPayloadIncomplete": 0x204,
    "kTvmErrorWriteStreamShortWrite": 0x300, "kTvmErrorWriteStreamLongWrite": 0x301,
    "kTvmErrorSessionInvalidState": 0x400, "kTvmErrorSessionReceiveBufferBusy": 0x401,
    "kTvmErrorSessionReceiveBufferShortWrite": 0x402,
    "kTvmErrorPlatformCheckFailure": 0x500, "kTvmErrorPlatformMemoryManagerInitialized": 0x501,
    "kTvmErrorPlatformShutdown": 0x502, "kTvmErrorPlatformNoMemory": 0x503, "kTvmErrorPlatformTimerBadState": 0x504,
    "kTvmErrorPlatformStackAllocBadFree": 0x505,
    "kTvmErrorGeneratedInvalidStorageId": 0x600,
    "kTvmErrorExecutorModuleAlreadyCreated": 0x700, "kTvmErrorExecutorModuleBadContext": 0x701,
    "kTvmErrorExecutorModuleNoSuchInput": 0x702,
    "kTvmErrorFunctionCallNumArguments": 0x800, "kTvmErrorFunctionCallWrongArgType": 0x801,
    "kTvmErrorFunctionCallNotImplemented": 0x802, "kTvmErrorFunctionCallInvalidArg": 0x803,
    "kTvmErrorTimeEvaluatorBadHandle": 0x900,
    "kTvmErrorSystemErrorMask": -(2**31),
    "TVM_CRT_ERROR_CATEGORY_Pos": 8, "TVM_CRT_ERROR_CATEGORY_Msk": 0xFF00, "TVM_CRT_ERROR_CODE_Pos": 0,
    "TVM_CRT_ERROR_CODE_Msk": 0xFF,
}
# include/tvm/runtime/crt/error_codes.h, TVM v0.8.0: the names TVM 0.9 replaced.
TVM_08_ERROR_NAMES = {
    "kTvmErrorCategoryGraphExecutor": 7, "kTvmErrorGraphModuleAlreadyCreated": 0x700,
    "kTvmErrorGraphModuleBadContext": 0x701, "kTvmErrorGraphModuleNoSuchInput": 0x702,
}
# TVMArgTypeCode — include/tvm/runtime/c_runtime_api.h, TVM v0.18.0. TVM v0.8.0-v0.17.0 have the
# same codes 0..14 and ranges, no kTVMArgBool, and kTVMExtBegin = 15.
TVM_ARG_TYPE_CODES = {
    "kTVMArgInt": 0, "kTVMArgFloat": 2, "kTVMOpaqueHandle": 3, "kTVMNullptr": 4, "kTVMDataType": 5,
    "kDLDevice": 6, "kTVMDLTensorHandle": 7, "kTVMObjectHandle": 8, "kTVMModuleHandle": 9,
    "kTVMPackedFuncHandle": 10, "kTVMStr": 11, "kTVMBytes": 12, "kTVMNDArrayHandle": 13,
    "kTVMObjectRValueRefArg": 14, "kTVMArgBool": 15, "kTVMExtBegin": 16, "kTVMNNVMFirst": 16, "kTVMNNVMLast": 20,
    "kTVMExtReserveEnd": 64, "kTVMExtEnd": 128,
}
# TVMDeviceExtType — include/tvm/runtime/c_runtime_api.h, TVM v0.11.0 (unchanged to v0.18.0; TVM
# v0.8.0-v0.10.0 numbered these 5, 6, 11, 13). DLDeviceType, DLDataTypeCode — include/dlpack/dlpack.h
# of DLPack v0.7, the 3rdparty/dlpack TVM v0.11.0-v0.18.0 bundle (DLPack v0.5 in TVM v0.8.0-v0.10.0
# has the same values for the kinds it knows).
TVM_DEVICE_CODES = {
    "kDLAOCL": 32, "kDLSDAccel": 33, "kOpenGL": 34, "kDLMicroDev": 35, "TVMDeviceExtType_End": 36,
    "kDLCPU": 1, "kDLCUDA": 2, "kDLCUDAHost": 3, "kDLOpenCL": 4, "kDLVulkan": 7, "kDLMetal": 8, "kDLVPI": 9,
    "kDLROCM": 10, "kDLROCMHost": 11, "kDLExtDev": 12, "kDLCUDAManaged": 13, "kDLOneAPI": 14, "kDLWebGPU": 15,
    "kDLHexagon": 16,
    "kDLInt": 0, "kDLUInt": 1, "kDLFloat": 2, "kDLOpaqueHandle": 3, "kDLBfloat": 4, "kDLComplex": 5,
}
ABI_SNIPPETS = REPO / "tests" / "c" / "tvm_abi"
# One file per shape of TVM-generated code (each says which in its first comment).
GENERATED_SHAPES = sorted(p.name for p in ABI_SNIPPETS.glob("*.c") if p.name != "registry_layouts.c")
NEEDS_DSP = {"micro_kernel_acle.c"}  # <arm_acle.h> DSP intrinsics: Cortex-M4/M7 only


def _numbering_program() -> str:
    checks = []
    for table in (TVM_ERROR_CODES, TVM_08_ERROR_NAMES, TVM_ARG_TYPE_CODES, TVM_DEVICE_CODES):
        for name, value in table.items():
            literal = "(-2147483647 - 1)" if value == -(2**31) else str(value)
            checks.append(f'_Static_assert(({name}) == {literal}, "{name} must be {value}");')
    return ("#include <tvm/runtime/c_runtime_api.h>\n#include <tvm/runtime/crt/error_codes.h>\n"
            '_Static_assert(sizeof(tvm_crt_error_t) == sizeof(int), "tvm_crt_error_t is an int");\n'
            + "\n".join(checks) + "\nint abi_numbering_checked;\n")


def test_numbering_is_tvms_on_host(tmp_path):
    src = tmp_path / "numbering.c"
    src.write_text(_numbering_program())
    compile_ok([need("gcc"), "-std=c11", *WARNINGS, "-I", str(CRT / "include"), "-c", str(src),
                "-o", str(tmp_path / "numbering.o")])


@pytest.mark.cross
@pytest.mark.parametrize("cpu", ["m4f", "m7", "m3"])
def test_numbering_is_tvms_on_arm(tmp_path, cpu):
    """Also where enums are short (arm-none-eabi-gcc's default): the mask still needs a full int."""
    src = tmp_path / "numbering.c"
    src.write_text(_numbering_program())
    compile_ok([need("arm-none-eabi-gcc"), *ARM_CPUS[cpu], "-std=c11", *WARNINGS,
                "-I", str(CRT / "include"), "-c", str(src), "-o", str(tmp_path / "numbering.o")])


def _compile_shape(compiler: list[str], snippet: str, out: Path, opt: str) -> None:
    compile_ok([*compiler, "-std=c11", opt, *WARNINGS, "-I", str(CRT / "include"), "-I", str(ABI_SNIPPETS),
                "-c", str(ABI_SNIPPETS / snippet), "-o", str(out)])


@pytest.mark.parametrize("snippet", [s for s in GENERATED_SHAPES if s not in NEEDS_DSP])
def test_generated_code_shapes_compile_warning_free_on_host(tmp_path, snippet):
    for opt in ("-O0", "-O2"):
        _compile_shape([need("gcc")], snippet, tmp_path / f"{opt}.o", opt)


@pytest.mark.cross
@pytest.mark.parametrize("snippet", GENERATED_SHAPES)
def test_generated_code_shapes_compile_warning_free_on_arm(tmp_path, snippet):
    gcc = need("arm-none-eabi-gcc")
    cpus = ["m4f", "m7"] + ([] if snippet in NEEDS_DSP else ["m3", "m33", "m55"])
    for cpu in cpus:
        for opt in ("-O0", "-O2"):
            _compile_shape([gcc, *ARM_CPUS[cpu]], snippet,
                           tmp_path / f"{cpu}{opt}.o", opt)


def test_generated_code_shapes_cover_every_abi_use():
    """Each ABI item generated code can reference appears in at least one shape."""
    text = "\n".join((ABI_SNIPPETS / s).read_text() for s in GENERATED_SHAPES)
    for use in ("#define TVM_EXPORTS", '#include "tvm/runtime/c_runtime_api.h"', '#include "tvm/runtime/c_backend_api.h"',
                "#include <tvm/runtime/crt/module.h>", "#include <tvm/runtime/crt/error_codes.h>",
                "#include <tvm/runtime/metadata_types.h>", "#include <dlpack/dlpack.h>", "#include <arm_acle.h>",
                "TVM_DLL", "TVM_WEAK", "TVM_ATTRIBUTE_UNUSED", "__tvm_module_ctx", "TVMValue", "DLTensor",
                "(DLDeviceType)1", "bool ", "TVMAPISetLastError", "TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace",
                "TVMBackendGetFuncFromEnv", "TVMFuncCall", "TVMBackendPackedCFunc", "TVMFuncRegistry", "TVMModule",
                "TVMSystemLibEntryPoint", "struct TVMMetadata", "struct TVMTensorInfo", "struct TVMConstantInfo",
                "kTVMOpaqueHandle", "kTVMArgBool", "kTvmErrorFunctionCallInvalidArg", "kTvmErrorGraphModuleNoSuchInput",
                "kTvmErrorSystemErrorMask", '.rodata.tvm', '.bss.noinit.tvm', "__sxtb16", "__smlad", "__ssub8", "__sel",
                "__ssat", "__builtin_arm_smlabb", "__builtin_arm_smlatt", "__smlabb", "__smlabt", "__smlatb",
                "__smlatt", "__smladx", "__asm__("):
        assert use in text, use


def test_function_registry_reads_tvm_08_and_09_layouts(tmp_path):
    gcc = need("gcc")
    exe = tmp_path / "registry_layouts"
    compile_ok([gcc, "-std=c11", "-O2", *WARNINGS, "-I", str(CRT / "include"), str(ABI_SNIPPETS / "registry_layouts.c"),
                str(CRT / "src" / "func_registry.c"), "-o", str(exe)])
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout == "ok\n", result.stdout + result.stderr


# ------------------------------------------------------------------------------------------------
# (d) smoke firmware on QEMU boards and on the host


def render_linker_script(board: Board, path: Path) -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    path.write_text(env.get_template("linker.ld.j2").render(board=board, stack_bytes=None, heap_bytes=None))
    return path


def build_smoke(board: Board, out: Path, extra_defines: tuple[str, ...] = ()) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    exe = out / ("smoke" if board.is_host else "smoke.elf")
    cc = need("gcc") if board.is_host else need("arm-none-eabi-gcc")
    cmd = [cc, *board.cflags, "-std=c11", "-O2", "-g", "-ffunction-sections", "-fdata-sections", *WARNINGS,
           "-I", str(CRT / "include"), *crt_defines(board), *extra_defines, f'-DSMOKE_BOARD="{board.name}"',
           *(str(CRT / src) for src in crt_sources(board)), str(SMOKE_SRC)]
    if not board.is_host:
        cmd += ["-T", str(render_linker_script(board, out / "linker.ld")), "-nostartfiles", "--specs=nano.specs",
                "-Wl,--gc-sections", f"-Wl,-Map={out / 'smoke.map'}"]
    compile_ok(cmd + ["-o", str(exe)])
    return exe


def qemu_command(board: Board, elf: Path, icount: bool = False) -> list[str]:
    """Without `icount`, SysTick runs on host time; with it, on instructions (as `mlfbuild run` runs)."""
    return [need("qemu-system-arm"), "-M", board.qemu.machine, "-display", "none", "-monitor", "none",
            "-serial", "stdio", "-semihosting-config", "enable=on,target=native", *board.qemu.extra_args,
            *(["-icount", "shift=0"] if icount else []), "-kernel", str(elf)]


def run_interactive(cmd: list[str], reply: bytes, timeout: float = 20.0,
                    stop_at: bytes | None = None) -> tuple[int | None, str, str]:
    """Run cmd; once it has printed a line "ready", send `reply`. Returns (exit status, stdout, stderr),
    stdout with CR removed. With stop_at, the process is killed once that text appears (status None).
    The process gets its own session and the whole group is killed on a timeout."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
        out = bytearray()
        sent = False
        deadline = time.monotonic() + timeout
        status: int | None = None
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise subprocess.TimeoutExpired(cmd, timeout)
                    if not sel.select(remaining):
                        continue
                    chunk = os.read(proc.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    out += chunk
                    if not sent and re.search(rb"(^|\n)ready\r?\n", out):
                        proc.stdin.write(reply)
                        proc.stdin.flush()
                        sent = True
                    if stop_at is not None and stop_at in out:
                        break
            if stop_at is None or stop_at not in out:
                status = proc.wait(timeout=max(0.5, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\noutput so far:\n{out.decode(errors='replace')}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            err.seek(0)
            stderr = err.read().decode(errors="replace")
    return status, out.decode(errors="replace").replace("\r", ""), stderr


def check_normal_run(board: Board, status: int | None, out: str, stderr: str) -> None:
    context = f"\n--- stdout\n{out}\n--- stderr\n{stderr}"
    assert "FAIL:" not in out, context
    assert f"crt_smoke: hello from {board.name}\n" in out, context
    assert "workspace ok peak=512\n" in out, context
    timer = re.search(r"timer ok ticks=(\d+) hz=(\d+)\n", out)
    assert timer, context
    hz = 1_000_000_000 if board.is_host else board.timer.systick_hz
    assert int(timer.group(2)) == hz
    assert int(timer.group(1)) >= hz // 1000 * 3, context  # the self-test waited >= 3 ms
    assert "format 4294967295 18446744073709551615 0xdeadbeef\n" in out, context
    stack = re.search(r"stack peak=(\d+) size=(\d+)\n", out)
    assert stack, context
    if board.is_host:
        assert stack.groups() == ("0", "0")
    else:
        assert int(stack.group(2)) == board.memory.stack_bytes
        assert 0 < int(stack.group(1)) < int(stack.group(2)), context
    assert "echo: hello mlfrt 123\n" in out, context
    assert status == 42, context


def check_fault_run(board: Board, status: int | None, out: str, stderr: str) -> None:
    context = f"\n--- stdout\n{out}\n--- stderr\n{stderr}"
    assert "faulting\n" in out and "still alive" not in out, context
    if board.is_host:
        assert re.search(r"\*\*\* FAULT signal=11 addr=0x0*100\n", out), context
    elif board.cpu.core == "cortex-m0":
        # ARMv6-M has no fault status registers: a HardFault (exception 3) at the bad PC is all there is
        assert re.search(r"\*\*\* FAULT pc=0x00000100 cfsr=0x00000000 hfsr=0x00000000 .* exc=3\n", out), context
    else:
        # a branch to an even address: UsageFault INVSTATE (CFSR bit 17), escalated (HFSR.FORCED)
        assert re.search(r"\*\*\* FAULT pc=0x00000100 cfsr=0x00020000 hfsr=0x40000000 .* exc=3\n", out), context
    assert status == 3, context


@pytest.fixture(scope="module")
def smoke_builds(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = build_smoke(load_board(name), tmp_path_factory.mktemp(name))
        return cache[name]

    return get


@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("name", SMOKE_BOARDS)
def test_smoke_firmware_on_qemu(smoke_builds, name):
    """Also under -icount, as `mlfbuild run` runs: the timer's register reads then fall at exact
    instruction positions, and the self-test's tight loop meets SysTick's step to 0 between two of
    them within a few periods; the 0 a re-read sees right after it is the new period's first tick
    (taken for the old period's last, it counts a whole period too many and the next reading goes back)."""
    board = load_board(name)
    elf = smoke_builds(name)
    check_normal_run(board, *run_interactive(qemu_command(board, elf), b"hello mlfrt 123\n"))
    check_normal_run(board, *run_interactive(qemu_command(board, elf, icount=True), b"hello mlfrt 123\n"))
    check_fault_run(board, *run_interactive(qemu_command(board, elf), b"fault\n"))


def test_smoke_program_on_host(smoke_builds):
    board = load_board("host")
    exe = smoke_builds("host")
    check_normal_run(board, *run_interactive([str(exe)], b"hello mlfrt 123\n"))
    check_fault_run(board, *run_interactive([str(exe)], b"fault\n"))


@pytest.mark.qemu
@pytest.mark.cross
def test_exit_marker_without_semihosting(tmp_path):
    """A real-board build (MLFRT_SEMIHOSTING=0) prints [[exit N]] and sleeps instead of exiting."""
    board = load_board("netduinoplus2")
    elf = build_smoke(board, tmp_path, extra_defines=("-UMLFRT_SEMIHOSTING", "-DMLFRT_SEMIHOSTING=0"))
    cmd = [c for c in qemu_command(board, elf) if c not in ("-semihosting-config", "enable=on,target=native")]
    status, out, stderr = run_interactive(cmd, b"no semihosting\n", timeout=20, stop_at=b"[[exit 42]]")
    assert status is None and "echo: no semihosting\n[[exit 42]]" in out, out + stderr
    status, out, stderr = run_interactive(cmd, b"fault\n", timeout=20, stop_at=b"[[exit 3]]")
    assert "*** FAULT pc=0x00000100" in out and "[[exit 3]]" in out, out + stderr


@pytest.mark.cross
def test_ram_overflow_is_reported_by_the_linker(tmp_path):
    """The stack is a real section: a stack that does not fit fails the link with ld's own message."""
    gcc = need("arm-none-eabi-gcc")
    board = load_board("lm3s6965evb")  # 64 KiB RAM
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             undefined=jinja2.StrictUndefined)
    script = tmp_path / "linker.ld"
    script.write_text(env.get_template("linker.ld.j2").render(board=board, stack_bytes=0x10000, heap_bytes=0))
    result = subprocess.run([gcc, *board.cflags, "-std=c11", "-O2", "-ffunction-sections", "-fdata-sections",
                             "-I", str(CRT / "include"), *crt_defines(board),
                             *(str(CRT / src) for src in crt_sources(board)), str(SMOKE_SRC), "-T", str(script),
                             "-nostartfiles", "--specs=nano.specs", "-Wl,--gc-sections", "-o", str(tmp_path / "x.elf")],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert re.search(r"region `RAM' overflowed by \d+ bytes", result.stderr), result.stderr
