"""Build-time preparation of CMSIS-NN calls: the work a call would repeat on constants at every
inference, done once here with its result in flash, and calls replaced by a faster one of the same
arithmetic. Decided from each call's parameters as the syntax tree states them (callsites.py) and
the bytes of its constant operands (constants.py); the same for TVM's code and any code written in
TVM's shape.

- Kernel sums: on MVE, CMSIS-NN 6 and 7's arm_fully_connected_s8 reads per-row sums of its filter
  from its context buffer (arm_vector_sum_s8 computes them, by the contract of the tree's declaration:
  v6 the plain row sums, v7 bias + input offset x (row sum + cols x filter offset)). With the filter
  (and for v7 the bias and offsets) constant, they are computed here, exactly as the C does in
  int32 with wrap-around, into a const array the call's context points at.
- A depthwise convolution of one input channel (channel multiplier M) is a convolution with M
  filters of one channel: arm_convolve_wrapper_s8 on the filter transposed from [1,H,W,M] to
  [M,H,W,1], with the same quantisation, offsets, stride, padding, dilation and activation. Every
  output is the same sum of the same products, requantised by the same per-channel parameters, so the
  result is bit-exact. It is done where the convolution is the faster call, as measured
  (benchmarks/one_channel_depthwise.py, docs/benchmarks.md): on MVE cores always (v7's depthwise
  wrapper transposes the filter at every call); on DSP cores from a channel multiplier of 16 — the
  convolution's im2col costs per output pixel what the depthwise kernel's taps cost per channel, so
  below that the depthwise call wins (micro_speech's 10x8 layer, multiplier 8, on the Cortex-M4F:
  2,344,441 instructions as the depthwise call, 2,997,892 as the convolution; kws's 10x4, multiplier
  64: 2,570,194 against 1,475,382); never on cores with neither. TFLM makes the depthwise call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .callsites import CmsisNnCall
from .constants import ConstantBytes

KERNEL_SUM_USERS = ("arm_fully_connected_s8",)
_DEPTHWISE = ("arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_s8")
_CONVOLUTION = "arm_convolve_wrapper_s8"
DSP_MIN_MULTIPLIER = 16  # on DSP cores, the convolution wins from this channel multiplier (measured: see above)


def convolution_is_faster(features: frozenset[str], multiplier: int) -> bool:
    """Whether a one-channel depthwise convolution of this channel multiplier runs faster as a
    convolution on a core with these CMSIS-NN paths (measured: see the module's docstring)."""
    return "mve" in features or ("dsp" in features and multiplier >= DSP_MIN_MULTIPLIER)


@dataclass(frozen=True)
class ConstArray:
    """A const array the build adds to the model's code (flash)."""

    name: str
    ctype: str  # int8_t, int32_t
    values: np.ndarray = dataclasses.field(compare=False, hash=False)

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def declaration(self) -> str:
        rows = [", ".join(str(int(v)) for v in self.values[i:i + 16]) for i in range(0, self.values.size, 16)]
        body = ",\n  ".join(rows)
        return (f"static const {self.ctype} {self.name}[{self.values.size}] __attribute__((aligned(16))) = {{\n"
                f"  {body}\n}};\n")


@dataclass(frozen=True)
class Preparation:
    """One call's build-time preparation: what, why, the arrays it adds."""

    function: str  # the operator function
    kind: str  # kernel_sums | replacement
    kernel: str  # the call as TVM wrote it
    replacement: str | None  # the kernel called instead (replacement)
    reason: str
    arrays: tuple[ConstArray, ...]

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "kind": self.kind, "kernel": self.kernel,
                "replacement": self.replacement, "reason": self.reason,
                "flash_bytes": sum(a.nbytes for a in self.arrays), "arrays": [a.name for a in self.arrays]}

    def describe(self) -> str:
        if self.kind == "replacement":
            return f"{self.function}: {self.kernel} -> {self.replacement} ({self.reason})"
        return f"{self.function}: {self.kernel} kernel sums precomputed into flash ({self.reason})"


@dataclass(frozen=True)
class Replaced:
    """A call replaced: the call as it now reads, the new local declarations it needs before it."""

    call: CmsisNnCall
    declarations: tuple[str, ...]
    preparation: Preparation


def arguments_by_name(call: CmsisNnCall, names: list[str]) -> dict[str, str]:
    return dict(zip(names, call.arguments))


def _pointed(argument: str, call: CmsisNnCall) -> dict[str, Any] | None:
    """The constant struct an argument `&name` points at."""
    text = argument.strip()
    if text.startswith("&") and text[1:].strip() in call.values:
        return call.values[text[1:].strip()]
    return None


def _operand(argument: str, call: CmsisNnCall, constants: dict[tuple[str, str], ConstantBytes]) -> ConstantBytes | None:
    """The constant bytes an argument (one of the operator's parameters, as TVM passes them) points at."""
    name = argument.strip()
    if name not in call.parameters:
        return None
    return constants.get((call.function, name))


def replace_call(call: CmsisNnCall, names: list[str], constants: dict[tuple[str, str], ConstantBytes],
                 features: frozenset[str], declared: set[str]) -> Replaced | None:
    """A faster call for the same arithmetic, when there is one (None: TVM's call stays)."""
    if call.kernel not in _DEPTHWISE or len(names) != len(call.arguments) or not features or \
            not {_CONVOLUTION, f"{_CONVOLUTION}_get_buffer_size"} <= declared:
        return None
    args = arguments_by_name(call, names)
    params = _pointed(args.get("dw_conv_params", ""), call)
    dims = {key: _pointed(args.get(key, ""), call) for key in ("input_dims", "filter_dims", "output_dims")}
    filter_bytes = _operand(args.get("filter_data", ""), call, constants)
    if params is None or None in dims.values() or filter_bytes is None:
        return None
    source, kernel, out = dims["input_dims"], dims["filter_dims"], dims["output_dims"]
    multiplier = params["ch_mult"]
    if source["c"] != 1 or kernel["n"] != 1 or kernel["c"] != multiplier or out["c"] != multiplier or \
            not convolution_is_faster(features, multiplier):
        return None
    height, width = kernel["h"], kernel["w"]
    weights = filter_bytes.array("int8", height * width * multiplier)
    if weights is None:
        return None
    transposed = ConstArray(f"mlf_{call.function}_filter", "int8_t",
                            weights.reshape(height, width, multiplier).transpose(2, 0, 1).reshape(-1).copy())
    conv_params = f"mlf_{call.function}_conv_params"
    filter_dims = f"mlf_{call.function}_filter_dims"
    tile = lambda t: f"{{{t['w']}, {t['h']}}}"  # noqa: E731  (cmsis_nn_tile is {w, h})
    declarations = (
        f"cmsis_nn_conv_params {conv_params} = {{{params['input_offset']}, {params['output_offset']}, "
        f"{tile(params['stride'])}, {tile(params['padding'])}, {tile(params['dilation'])}, "
        f"{{{params['activation']['min']}, {params['activation']['max']}}}}};",
        f"cmsis_nn_dims {filter_dims} = {{{multiplier}, {height}, {width}, 1}};")
    new_args = dict(args)
    new_args["dw_conv_params"] = f"&{conv_params}"
    new_args["filter_dims"] = f"&{filter_dims}"
    new_args["filter_data"] = f"(const int8_t *){transposed.name}"
    arguments = tuple(new_args[name] for name in names)
    status = f"arm_cmsis_nn_status status = {_CONVOLUTION}({', '.join(arguments)});"
    reason = (f"one input channel, channel multiplier {multiplier}, {height}x{width} kernel: the same arithmetic "
              f"as a convolution, which CMSIS-NN runs with SIMD; filter transposed at build time")
    preparation = Preparation(call.function, "replacement", call.kernel, _CONVOLUTION, reason, (transposed,))
    values = dict(call.values)
    values[conv_params] = {k: v for k, v in params.items() if k != "ch_mult"}
    values[filter_dims] = {"n": multiplier, "h": height, "w": width, "c": 1}
    replaced = dataclasses.replace(call, kernel=_CONVOLUTION, arguments=arguments, call=status,
                                   constants=call.constants + declarations, values=values)
    return Replaced(replaced, declarations, preparation)


def kernel_sums(call: CmsisNnCall, names: list[str], constants: dict[tuple[str, str], ConstantBytes],
                contract: str) -> Preparation | None:
    """The call's kernel sums computed now (None: an operand is not a constant of the code)."""
    if call.kernel not in KERNEL_SUM_USERS or len(names) != len(call.arguments):
        return None
    args = arguments_by_name(call, names)
    fc_params = _pointed(args.get("fc_params", ""), call)
    filter_dims, output_dims = _pointed(args.get("filter_dims", ""), call), _pointed(args.get("output_dims", ""), call)
    weights = _operand(args.get("filter_data", ""), call, constants)
    if None in (fc_params, filter_dims, output_dims, weights):
        return None
    cols, rows = filter_dims["n"], output_dims["c"]
    matrix = weights.array("int8", cols * rows)
    if matrix is None:
        return None
    row_sums = matrix.reshape(rows, cols).astype(np.int64).sum(axis=1)
    if contract == "v6":
        sums = row_sums  # arm_vector_sum_s8(buf, cols, rows, filter, 1, NULL)
        reason = "row sums of the constant filter (CMSIS-NN v6 contract)"
    elif contract == "v7":
        bias = _bias(args.get("bias_data", ""), call, constants, rows)
        if bias is None:
            return None
        sums = bias + fc_params["input_offset"] * (row_sums + cols * fc_params["filter_offset"])
        reason = "bias + input offset x (row sum + cols x filter offset) of the constant operands (CMSIS-NN v7 contract)"
    else:
        return None
    wrapped = ((sums + 2**31) % 2**32 - 2**31).astype(np.int32)  # int32 arithmetic wraps as the C's does
    array = ConstArray(f"mlf_{call.function}_kernel_sums", "int32_t", wrapped)
    return Preparation(call.function, "kernel_sums", call.kernel, None, reason, (array,))


def _bias(argument: str, call: CmsisNnCall, constants, rows: int) -> np.ndarray | None:
    if argument.strip() in ("NULL", "0", "((void *) 0)", "(void *) 0"):
        return np.zeros(rows, dtype=np.int64)
    data = _operand(argument, call, constants)
    values = data.array("int32", rows) if data is not None else None
    return None if values is None else values.astype(np.int64)
