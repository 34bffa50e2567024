"""A small writer of Model Library Format exports, for tests and for the bundled example.

It writes what TVM writes (tar layout, metadata v5/v7, interface header, C in the shape TVM's C
codegen emits) for a tiny hand-written int8 model whose reference output is computed here with the
same integer arithmetic, so the expected output is known exactly.

    python tests/mlfwriter.py examples/     # regenerate the bundled example
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mlfbuild.mlf.params import write_params  # noqa: E402
from mlfbuild.mlf.writer import tar_bytes  # noqa: E402

EXPORT_DATETIME = "2026-01-01 00:00:00Z"
_EMPTY_PARAMS = write_params({})


# --- tar container --------------------------------------------------------------------------------

def tar_tree(files: dict[str, bytes], dest: Path, *, compress: bool = False, prefix: str = "./") -> Path:
    """Write `files` (relative path → bytes) as TVM does (mlfbuild.mlf.writer)."""
    dest.write_bytes(tar_bytes(files, compress=compress, prefix=prefix))
    return dest


# --- the tiny model ------------------------------------------------------------------------------

class TinyModel:
    """input int8[1,16] → dense(8) + bias, >>6, relu-clip → dense(4) + bias, >>6, clip → int8[1,4]."""

    # Misbehaviours for run tests: the model's main loops forever, jumps to an invalid address, or
    # fails an assertion the way TVM's generated code reports one.
    BEHAVIOURS = {
        "ok": "",
        "fail": '  TVMAPISetLastError("Assert fail: tiny input check"); return -1;\n',
        "hang": "  for (volatile int32_t spin = 0; ; ++spin) { }\n",
        "crash": "  ((void (*)(void))(uintptr_t)0xFFFFFFF1u)();\n",
        # prints without end, so the console never goes quiet
        "chatty": "  { extern void mlfrt_putc(uint8_t c); for (;;) mlfrt_putc('.'); }\n",
        # prints 1 MiB of text, then computes the right answer
        "flood": "  { extern void mlfrt_putc(uint8_t c); for (int32_t i = 0; i < (1 << 20); ++i) mlfrt_putc('.'); }\n",
        # leaves early with its own exit status
        "exit7": "  { extern void mlfrt_exit(int code); mlfrt_exit(7); }\n",
        # Cortex-M only: points the vector table at zeros, then faults; the core cannot take the
        # HardFault and locks up (QEMU aborts with "Lockup: can't escalate ... to HardFault")
        "lockup": ("  { static uint32_t zeros[64] __attribute__((aligned(256)));\n"
                   "    *(volatile uint32_t*)0xE000ED08u = (uint32_t)(uintptr_t)zeros;  /* SCB->VTOR */\n"
                   "    __asm__ volatile (\"udf #0\"); }\n"),
        # host only: starts a child of its own, and both spin
        "fork_hang": "  { extern int fork(void); (void)fork(); for (volatile int32_t spin = 0; ; ++spin) { } }\n",
        # the assembler rejects an instruction (gcc itself is content)
        "bad_asm": '  __asm__ volatile ("no_such_instruction_here");\n',
        # a 256-byte table defined by assembly: no DWARF describes it
        "asm_table": ('  __asm__ (".pushsection .rodata.tiny_asm_table,\\"a\\"\\n.global tiny_asm_table\\n'
                      '.type tiny_asm_table, %object\\n.size tiny_asm_table, 256\\ntiny_asm_table: .space 256\\n'
                      '.popsection\\n");\n'
                      '  { extern const uint8_t tiny_asm_table[]; (void)*(volatile const uint8_t*)tiny_asm_table; }\n'),
    }

    def __init__(self, name: str = "tiny", seed: int = 7, behaviour: str = "ok"):
        rng = np.random.default_rng(seed)
        self.name = name
        self.behaviour = self.BEHAVIOURS[behaviour]
        self.w1 = rng.integers(-16, 16, size=(8, 16), dtype=np.int8)
        self.b1 = rng.integers(-512, 512, size=(8,), dtype=np.int32)
        self.w2 = rng.integers(-24, 24, size=(4, 8), dtype=np.int8)
        self.b2 = rng.integers(-512, 512, size=(4,), dtype=np.int32)
        self.input = rng.integers(-128, 128, size=(1, 16), dtype=np.int8)

    def reference(self, x: np.ndarray) -> np.ndarray:
        h = (x.astype(np.int32) @ self.w1.T.astype(np.int32) + self.b1) >> 6
        h = np.clip(h, 0, 127).astype(np.int8)
        y = (h.astype(np.int32) @ self.w2.T.astype(np.int32) + self.b2) >> 6
        return np.clip(y, -128, 127).astype(np.int8)

    # C in the shape of TVM 0.15+'s AOT + C interface + unpacked API + USMP output.
    def header(self) -> str:
        n, N = self.name, self.name.upper()
        return f"""#ifndef TVMGEN_{N}_H_
#define TVMGEN_{N}_H_
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

/*!
 * \\brief Input tensor input size (in bytes) for TVM module "{n}" 
 */
#define TVMGEN_{N}_INPUT_SIZE 16
/*!
 * \\brief Output tensor output size (in bytes) for TVM module "{n}" 
 */
#define TVMGEN_{N}_OUTPUT_SIZE 4
/*!
 * \\brief Input tensor pointers for TVM module "{n}" 
 */
struct tvmgen_{n}_inputs {{
  void* input;
}};

/*!
 * \\brief Output tensor pointers for TVM module "{n}" 
 */
struct tvmgen_{n}_outputs {{
  void* output;
}};

/*!
 * \\brief entrypoint function for TVM module "{n}"
 * \\param inputs Input tensors for the module 
 * \\param outputs Output tensors for the module 
 */
int32_t tvmgen_{n}_run(
  struct tvmgen_{n}_inputs* inputs,
  struct tvmgen_{n}_outputs* outputs
);
/*!
 * \\brief Workspace size for TVM module "{n}" 
 */
#define TVMGEN_{N}_WORKSPACE_SIZE 16

#ifdef __cplusplus
}}
#endif

#endif // TVMGEN_{N}_H_
"""

    def lib0(self) -> str:
        n = self.name
        return f"""#include "tvm/runtime/c_runtime_api.h"
#ifdef __cplusplus
extern "C" {{
#endif
#include <tvmgen_{n}.h>
static uint8_t global_workspace[16] __attribute__((section(".bss.noinit.tvm"), aligned(16)));
TVM_DLL int32_t tvmgen_{n}___tvm_main__(int8_t* input_buffer_var,int8_t* output_buffer_var,uint8_t* global_workspace_0_var);
int32_t tvmgen_{n}_run(struct tvmgen_{n}_inputs* inputs,struct tvmgen_{n}_outputs* outputs) {{return tvmgen_{n}___tvm_main__((int8_t*)inputs->input,(int8_t*)outputs->output,((uint8_t*)&global_workspace));
}}
#ifdef __cplusplus
}}
#endif
;"""

    @staticmethod
    def _array(ctype: str, name: str, values: np.ndarray) -> str:
        body = ", ".join(str(int(v)) for v in values.reshape(-1))
        return (f'static const {ctype} __attribute__((section(".rodata.tvm"), aligned(16))) '
                f"{name}[{values.size}] = {{\n    {body}\n}};\n")

    def lib1(self) -> str:
        n = self.name
        dense = """TVM_DLL int32_t tvmgen_{n}_fused_nn_dense_add_right_shift_clip{suffix}(int8_t* p0, int8_t* T_clip, uint8_t* global_workspace_{ws}_var) {{
  for (int32_t j = 0; j < {out}; ++j) {{
    int32_t acc = {bias}[j];
    for (int32_t k = 0; k < {inp}; ++k) {{
      acc = (acc + (((int32_t)p0[k]) * ((int32_t){weights}[((j * {inp}) + k)])));
    }}
    acc = (acc >> 6);
    T_clip[j] = ((int8_t)((acc) < ({hi}) ? ((acc) > ({lo}) ? (acc) : ({lo})) : ({hi})));
  }}
  return 0;
}}

"""
        return (
            "// tvm target: c -keys=cpu \n#define TVM_EXPORTS\n"
            '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
            "#include <math.h>\n#include <stdbool.h>\n"
            '#ifdef __cplusplus\nextern "C" {\n#endif\n'
            + self._array("int8_t", "fused_constant", self.w1)
            + self._array("int32_t", "fused_constant_1", self.b1)
            + self._array("int8_t", "fused_constant_2", self.w2)
            + self._array("int32_t", "fused_constant_3", self.b2)
            + dense.format(n=n, suffix="", ws=1, out=8, inp=16, bias="fused_constant_1",
                           weights="fused_constant", lo=0, hi=127)
            + dense.format(n=n, suffix="_1", ws=2, out=4, inp=8, bias="fused_constant_3",
                           weights="fused_constant_2", lo=-128, hi=127)
            + f"""TVM_DLL int32_t tvmgen_{n}___tvm_main__(int8_t* input_buffer_var, int8_t* output_buffer_var, uint8_t* global_workspace_0_var) {{
{self.behaviour}  void* sid_1_let = (&(global_workspace_0_var[0]));
  if (tvmgen_{n}_fused_nn_dense_add_right_shift_clip(input_buffer_var, sid_1_let, global_workspace_0_var) != 0 ) return -1;
  if (tvmgen_{n}_fused_nn_dense_add_right_shift_clip_1(sid_1_let, output_buffer_var, global_workspace_0_var) != 0 ) return -1;
  return 0;
}}

#ifdef __cplusplus
}}
#endif
;"""
        )

    def relay(self) -> str:
        return ("def @main(%input: Tensor[(1, 16), int8], output_tensor_names=[\"output\"]) -> Tensor[(1, 4), int8] {\n"
                "  %0 = nn.dense(%input, meta[relay.Constant][0], units=8, out_dtype=\"int32\");\n"
                "  /* ... */\n}\n")

    def module_metadata(self, *, per_tensor_io: bool = True) -> dict:
        main = {"constants_size_bytes": int(self.w1.nbytes + self.b1.nbytes + self.w2.nbytes + self.b2.nbytes),
                "device": 1, "io_size_bytes": 20, "workspace_size_bytes": 16}
        if per_tensor_io:
            main["inputs"] = {"input": {"dtype": "int8", "size": 16}}
            main["outputs"] = {"output": {"dtype": "int8", "size": 4}}
        ops = [f"tvmgen_{self.name}_fused_nn_dense_add_right_shift_clip",
               f"tvmgen_{self.name}_fused_nn_dense_add_right_shift_clip_1"]
        return {
            "executors": ["aot"], "export_datetime": EXPORT_DATETIME,
            "memory": {"functions": {
                "main": [main],
                "operator_functions": [{"function_name": f, "workspace": [{"device": 1, "workspace_size_bytes": 0}]}
                                       for f in ops]}},
            "model_name": self.name, "style": "full-model", "target": ["c -keys=cpu "],
        }

    def files(self) -> dict[str, bytes]:
        """The MLF v7 tree of this model, as TVM 0.13+ would lay it out (minus the bundled CRT)."""
        n = self.name
        metadata = {"modules": {n: self.module_metadata()}, "version": 7}
        return {
            "codegen/host/include/" f"tvmgen_{n}.h": self.header().encode(),
            f"codegen/host/src/{n}_lib0.c": self.lib0().encode(),
            f"codegen/host/src/{n}_lib1.c": self.lib1().encode(),
            "metadata.json": json.dumps(metadata, indent=2, sort_keys=True).encode(),
            f"parameters/{n}.params": _EMPTY_PARAMS,
            f"src/{n}.relay": self.relay().encode(),
        }

    def files_with_operators(self, source: str, declarations: str, calls: str) -> dict[str, bytes]:
        """The MLF tree with extra operator functions: `source` defines them beside the model's
        operators (lib0), `declarations` declares them to the model's main (lib1), which runs `calls`
        before its own work."""
        self.behaviour = calls
        files = self.files()
        lib0, lib1 = (f"codegen/host/src/{self.name}_lib{n}.c" for n in (0, 1))
        files[lib0] += source.encode()
        files[lib1] = files[lib1].replace(b"#include <stdbool.h>\n", f"#include <stdbool.h>\n{declarations}".encode())
        return files

    def v5_files(self) -> dict[str, bytes]:
        """The same model in TVM 0.8's flat metadata v5 layout."""
        files = self.files()
        meta = self.module_metadata(per_tensor_io=False)
        meta["target"] = {"1": "c -keys=cpu -executor=aot -interface-api=c -link-params=1 -runtime=c -unpacked-api=1"}
        meta["version"] = 5
        files["metadata.json"] = json.dumps(meta, indent=2, sort_keys=True).encode()
        files["src/relay.txt"] = files.pop(f"src/{self.name}.relay")
        return files


# --- CMSIS-NN code, as TVM's cmsis-nn codegen writes it ------------------------------------------

def cmsis_nn_source(name: str, scratch_bytes: list[int]) -> str:
    """`<name>_lib2.c`: one arm_fully_connected_s8 call per entry of `scratch_bytes`, each with its
    context ({NULL,0} for 0, else a slice of the workspace), and TVM's inverted status check."""
    functions = []
    for index, size in enumerate(scratch_bytes):
        buffer = "NULL"
        lines = []
        if size:
            buffer = f"context_buffer_{index}_let"
            lines.append(f"  void* {buffer} = (&(global_workspace_{index}_var[0]));")
        functions.append("\n".join([
            '#ifdef __cplusplus\nextern "C"\n#endif',
            f"TVM_DLL int32_t tvmgen_{name}_cmsis_nn_main_{index}(int8_t* input_, int8_t* filter_, int32_t* bias_, "
            f"int8_t* output_, uint8_t* global_workspace_{index}_var) {{",
            *lines,
            f"  cmsis_nn_context context= {{{buffer},{size}}};",
            "  cmsis_nn_activation activation = {-128,127};",
            "  cmsis_nn_fc_params fc_params = {128, 0, -128, activation};",
            "  cmsis_nn_per_tensor_quant_params quant_params = {1073741824, -6};",
            "  cmsis_nn_dims input_dims = {1,1,1,16};",
            "  cmsis_nn_dims filter_dims = {16,1,1,4};",
            "  cmsis_nn_dims bias_dims = {1,1,1,4};",
            "  cmsis_nn_dims output_dims = {1,4};",
            "  arm_cmsis_nn_status status = arm_fully_connected_s8(&context, &fc_params, &quant_params, &input_dims, "
            "input_, &filter_dims, filter_, &bias_dims, bias_, &output_dims, output_);",
            "  switch (!status) {",
            "  case ARM_CMSIS_NN_SUCCESS: break;",
            "  case ARM_CMSIS_NN_ARG_ERROR: return -1;",
            "  case ARM_CMSIS_NN_NO_IMPL_ERROR: return -1;",
            "  }",
            "  return 0;",
            "}",
        ]))
    head = ("// tvm target: cmsis-nn \n#define TVM_EXPORTS\n#include \"tvm/runtime/c_runtime_api.h\"\n"
            "#include <stdio.h>\n#include <stdlib.h>\n#include <dlpack/dlpack.h>\n#include <arm_nnfunctions.h>\n"
            "#include <arm_nn_types.h>\n#include <arm_nn_math_types.h>\n")
    return head + "\n\n".join(functions) + "\n"


def with_cmsis_nn(model: TinyModel, targets: list[str], scratch_bytes: list[int]) -> dict[str, bytes]:
    """The tiny model's MLF plus CMSIS-NN code (its main does not call it: enough to render projects)."""
    files = model.files()
    metadata = json.loads(files["metadata.json"])
    metadata["modules"][model.name]["target"] = targets
    files["metadata.json"] = json.dumps(metadata, indent=2, sort_keys=True).encode()
    files[f"codegen/host/src/{model.name}_lib2.c"] = cmsis_nn_source(model.name, scratch_bytes).encode()
    return files



def requantize(values: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """CMSIS-NN's arm_nn_requantize (its default double rounding): a doubling high multiply rounded
    at bit 31, then a right shift rounding half away from zero (TFLite's reference arithmetic)."""
    scaled = values.astype(np.int64) * (1 << max(shift, 0))
    high = (scaled * multiplier + (1 << 30)) >> 31
    exponent = max(-shift, 0)
    mask = (1 << exponent) - 1
    result = high >> exponent
    threshold = (mask >> 1) + (result < 0)
    return result + ((high & mask) > threshold)


class ResidualModel(TinyModel):
    """The residual pattern of MLPerf Tiny's ic, in TVM's USMP + CMSIS-NN shape: input int8[1,64] →
    shift (sid_1) → negate-halve (sid_2) → triple-clip (sid_4) → arm_elementwise_add_s8(sid_1, sid_4)
    (sid_3) → minus one → int8[1,64]. The skip connection sid_1 lives across two operators until the
    add; TVM's pool gives every tensor its own 64 B (256 B), the liveness floor is 192 B."""

    SIZE = 64
    # arm_elementwise_add_s8's quantisation, as TVM passes a TFLite ADD's: input offsets (minus the
    # zero points), multipliers and shifts, the left shift, output offset, multiplier, shift, clamp
    ADD = {"input_1_offset": 3, "input_1_mult": 1623821475, "input_1_shift": -1,
           "input_2_offset": -7, "input_2_mult": 1073741824, "input_2_shift": 0, "left_shift": 20,
           "out_offset": -5, "out_mult": 1992157696, "out_shift": -19, "out_activation_min": -128,
           "out_activation_max": 127}

    def __init__(self, name: str = "residual", seed: int = 11):
        super().__init__(name, seed)
        self.input = np.random.default_rng(seed).integers(-128, 128, size=(1, self.SIZE), dtype=np.int8)

    def reference(self, x: np.ndarray) -> np.ndarray:
        skip = np.clip(x.astype(np.int32) + 5, -128, 127)
        branch = -(skip >> 1)
        branch = np.clip(branch * 3, -128, 127)
        q = self.ADD
        left = requantize((skip + q["input_1_offset"]) << q["left_shift"], q["input_1_mult"], q["input_1_shift"])
        right = requantize((branch + q["input_2_offset"]) << q["left_shift"], q["input_2_mult"], q["input_2_shift"])
        added = requantize(left + right, q["out_mult"], q["out_shift"]) + q["out_offset"]
        added = np.clip(added, q["out_activation_min"], q["out_activation_max"])
        return np.clip(added - 1, -128, 127).astype(np.int8)

    def header(self) -> str:
        return (super().header().replace("INPUT_SIZE 16", f"INPUT_SIZE {self.SIZE}")
                .replace("OUTPUT_SIZE 4", f"OUTPUT_SIZE {self.SIZE}").replace("WORKSPACE_SIZE 16", "WORKSPACE_SIZE 256"))

    def lib0(self) -> str:
        return super().lib0().replace("global_workspace[16]", "global_workspace[256]")

    def lib1(self) -> str:
        n = self.name
        elementwise = """TVM_DLL int32_t tvmgen_{n}_{op}(int8_t* p0, int8_t* T_out, uint8_t* global_workspace_{ws}_var) {{
  for (int32_t i = 0; i < 64; ++i) {{
    int32_t v = {expr};
    T_out[i] = ((int8_t)((v) < (127) ? ((v) > (-128) ? (v) : (-128)) : (127)));
  }}
  return 0;
}}

"""
        ops = [("fused_add_clip", "(((int32_t)p0[i]) + 5)"), ("fused_right_shift_negative", "(0 - (((int32_t)p0[i]) >> 1))"),
               ("fused_multiply_clip", "(((int32_t)p0[i]) * 3)"), ("fused_subtract_clip", "(((int32_t)p0[i]) - 1)")]
        return (
            "// tvm target: c -keys=cpu \n#define TVM_EXPORTS\n"
            '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
            "#include <math.h>\n#include <stdbool.h>\n"
            '#ifdef __cplusplus\nextern "C" {\n#endif\n'
            f"TVM_DLL int32_t tvmgen_{n}_cmsis_nn_main_0(int8_t* input_0_, int8_t* input_1_, int8_t* output_, "
            "uint8_t* global_workspace_5_var);\n"
            + "".join(elementwise.format(n=n, op=op, ws=index + 1, expr=expr) for index, (op, expr) in enumerate(ops))
            + f"""TVM_DLL int32_t tvmgen_{n}___tvm_main__(int8_t* input_buffer_var, int8_t* output_buffer_var, uint8_t* global_workspace_0_var) {{
  void* sid_1_let = (&(global_workspace_0_var[0]));
  void* sid_2_let = (&(global_workspace_0_var[64]));
  void* sid_4_let = (&(global_workspace_0_var[128]));
  void* sid_3_let = (&(global_workspace_0_var[192]));
  if (tvmgen_{n}_fused_add_clip(input_buffer_var, sid_1_let, global_workspace_0_var) != 0 ) return -1;
  if (tvmgen_{n}_fused_right_shift_negative(sid_1_let, sid_2_let, global_workspace_0_var) != 0 ) return -1;
  if (tvmgen_{n}_fused_multiply_clip(sid_2_let, sid_4_let, global_workspace_0_var) != 0 ) return -1;
  if (tvmgen_{n}_cmsis_nn_main_0(sid_1_let, sid_4_let, sid_3_let, global_workspace_0_var) != 0 ) return -1;
  if (tvmgen_{n}_fused_subtract_clip(sid_3_let, output_buffer_var, global_workspace_0_var) != 0 ) return -1;
  return 0;
}}

#ifdef __cplusplus
}}
#endif
;"""
        )

    def lib2(self) -> str:
        """The add as TVM's CMSIS-NN code generator writes it: literal quantisation, block size, and
        its inverted status check."""
        q = self.ADD
        arguments = ", ".join(str(q[k]) for k in ("input_1_offset", "input_1_mult", "input_1_shift", "input_2_offset",
                                                   "input_2_mult", "input_2_shift", "left_shift"))
        out = ", ".join(str(q[k]) for k in ("out_offset", "out_mult", "out_shift", "out_activation_min",
                                            "out_activation_max"))
        return ("// tvm target: cmsis-nn \n#define TVM_EXPORTS\n#include \"tvm/runtime/c_runtime_api.h\"\n"
                "#include <stdio.h>\n#include <stdlib.h>\n#include <dlpack/dlpack.h>\n#include <arm_nnfunctions.h>\n"
                "#include <arm_nn_types.h>\n#include <arm_nn_math_types.h>\n"
                '#ifdef __cplusplus\nextern "C"\n#endif\n'
                f"TVM_DLL int32_t tvmgen_{self.name}_cmsis_nn_main_0(int8_t* input_0_, int8_t* input_1_, int8_t* output_, "
                "uint8_t* global_workspace_5_var) {\n"
                f"  arm_cmsis_nn_status status = arm_elementwise_add_s8(input_0_, input_1_, {arguments}, output_, {out}, "
                f"{self.SIZE});\n"
                "  switch (!status) {\n  case ARM_CMSIS_NN_SUCCESS: break;\n  case ARM_CMSIS_NN_ARG_ERROR: return -1;\n"
                "  case ARM_CMSIS_NN_NO_IMPL_ERROR: return -1;\n  }\n  return 0;\n}\n")

    def relay(self) -> str:
        return (f"def @main(%input: Tensor[(1, {self.SIZE}), int8], output_tensor_names=[\"output\"]) -> "
                f"Tensor[(1, {self.SIZE}), int8] {{\n  /* ... */\n}}\n")

    def module_metadata(self, *, per_tensor_io: bool = True) -> dict:
        meta = super().module_metadata(per_tensor_io=per_tensor_io)
        main = meta["memory"]["functions"]["main"][0]
        main.update({"constants_size_bytes": 0, "io_size_bytes": 2 * self.SIZE, "workspace_size_bytes": 256})
        if per_tensor_io:
            main["inputs"] = {"input": {"dtype": "int8", "size": self.SIZE}}
            main["outputs"] = {"output": {"dtype": "int8", "size": self.SIZE}}
        ops = ["fused_add_clip", "fused_right_shift_negative", "fused_multiply_clip", "fused_subtract_clip"]
        meta["memory"]["functions"]["operator_functions"] = [
            {"function_name": f"tvmgen_{self.name}_{op}", "workspace": [{"device": 1, "workspace_size_bytes": 0}]}
            for op in ops]
        meta["target"] = ["c -keys=cpu ", "cmsis-nn"]
        return meta

    def files(self) -> dict[str, bytes]:
        files = super().files()
        files[f"codegen/host/src/{self.name}_lib2.c"] = self.lib2().encode()
        return files


class ReshapeModel(TinyModel):
    """TinyModel behind a RESHAPE lowered as TVM lowers ad's: a nest of loops moving the 16 input bytes
    into the pool one by one. `index` says where each byte goes: "identity" (TVM's shape: T[i] = p0[i]),
    "transpose" (T[4c+r] = p0[4r+c], a 4x4 transpose) or "offset" (T[i] = p0[(i+1) % 16], a rotation)."""

    INDICES = {"identity": ("cse_var_1", "cse_var_1"),
               "transpose": ("((ax1_inner * 4) + ax1_outer)", "cse_var_1"),
               "offset": ("cse_var_1", "((cse_var_1 + 1) % 16)")}

    def __init__(self, name: str = "reshape", index: str = "identity", seed: int = 7):
        super().__init__(name, seed)
        self.index = index

    def reference(self, x: np.ndarray) -> np.ndarray:
        flat = x.reshape(-1)
        moved = {"identity": flat, "transpose": flat.reshape(4, 4).T.reshape(-1),
                 "offset": np.roll(flat, -1)}[self.index]
        return super().reference(moved.reshape(1, 16))

    def header(self) -> str:
        return super().header().replace("WORKSPACE_SIZE 16", "WORKSPACE_SIZE 32")

    def lib0(self) -> str:
        return super().lib0().replace("global_workspace[16]", "global_workspace[32]")

    def lib1(self) -> str:
        n = self.name
        written, read = self.INDICES[self.index]
        reshape = (f"TVM_DLL int32_t tvmgen_{n}_fused_reshape(int8_t* p0, int8_t* T_reshape, uint8_t* global_workspace_3_var) {{\n"
                   "  for (int32_t ax1_outer = 0; ax1_outer < 4; ++ax1_outer) {\n"
                   "    for (int32_t ax1_inner = 0; ax1_inner < 4; ++ax1_inner) {\n"
                   "      int32_t cse_var_1 = ((ax1_outer * 4) + ax1_inner);\n"
                   f"      T_reshape[{written}] = p0[{read}];\n"
                   "    }\n  }\n  return 0;\n}\n\n")
        text = super().lib1()
        main = f"TVM_DLL int32_t tvmgen_{n}___tvm_main__("
        text = text.replace(main, reshape + main)
        text = text.replace("void* sid_1_let = (&(global_workspace_0_var[0]));",
                            "void* sid_1_let = (&(global_workspace_0_var[0]));\n"
                            "  void* sid_2_let = (&(global_workspace_0_var[16]));\n"
                            f"  if (tvmgen_{n}_fused_reshape(input_buffer_var, sid_2_let, global_workspace_0_var) != 0 ) return -1;")
        return text.replace(f"tvmgen_{n}_fused_nn_dense_add_right_shift_clip(input_buffer_var,",
                            f"tvmgen_{n}_fused_nn_dense_add_right_shift_clip(sid_2_let,")

    def module_metadata(self, *, per_tensor_io: bool = True) -> dict:
        meta = super().module_metadata(per_tensor_io=per_tensor_io)
        meta["memory"]["functions"]["main"][0]["workspace_size_bytes"] = 32
        meta["memory"]["functions"]["operator_functions"].insert(
            0, {"function_name": f"tvmgen_{self.name}_fused_reshape", "workspace": [{"device": 1, "workspace_size_bytes": 0}]})
        return meta


def negate_convolution_weights(mlf: Path, out: Path) -> Path:
    """A copy of a real kws MLF with every weight of one convolution (fused_constant_8) negated: the same
    graph computing something else (one weight alone may not change the outputs)."""
    with tarfile.open(mlf) as source, tarfile.open(out, "w") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if data is not None and member.name.endswith("_lib0.c"):
                text = data.decode()
                start = text.index(".fused_constant_8_let = {")
                end = text.index("}", start)
                block = text[start:end].replace("+0x", "#").replace("-0x", "+0x").replace("#", "-0x")
                data = (text[:start] + block + text[end:]).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


def write_example(folder: Path) -> tuple[Path, Path]:
    """The bundled default: examples/tiny_aot.tar and its reference examples/tiny_aot.npz."""
    model = TinyModel()
    folder.mkdir(parents=True, exist_ok=True)
    tar = tar_tree(model.files(), folder / "tiny_aot.tar")
    npz = folder / "tiny_aot.npz"
    np.savez(npz, input=model.input, output_0=model.reference(model.input))
    return tar, npz


if __name__ == "__main__":
    for path in write_example(Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "examples")):
        print(path)
