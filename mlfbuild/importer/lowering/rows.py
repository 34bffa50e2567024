"""A convolution computed over a range of its output rows: the input rows their windows cover
(padding only at the image's edges) and one CMSIS-NN call on just those rows. What row bands (a
layer over its own dying input) and patches (the leading layers stripe by stripe) are made of; the
integer arithmetic of each output value is the whole layer's call's, so either is bit-exact."""

from __future__ import annotations

from dataclasses import dataclass

from .base import c_dims, status_check


@dataclass(frozen=True)
class ConvRows:
    """A CONV_2D or DEPTHWISE_CONV_2D lowered to one CMSIS-NN call, batch 1: its call as written (less
    its window rows and padding) and its geometry."""

    function: str  # the CMSIS-NN function
    lines: tuple[str, ...]  # stride, dilation, activation and params declarations (they name `padding`)
    filter_dims: tuple[int, ...]
    bias: bool
    in_hwc: tuple[int, int, int]
    out_hwc: tuple[int, int, int]
    kernel_h: int
    stride_h: int
    dilation_h: int
    pad_h: int
    pad_w: int

    @property
    def in_row(self) -> int:
        return self.in_hwc[1] * self.in_hwc[2]

    @property
    def out_row(self) -> int:
        return self.out_hwc[1] * self.out_hwc[2]

    def window(self, first: int, end: int) -> tuple[int, int, int] | None:
        """(first input row, input rows, padding rows above) that output rows [first, end) read,
        clipped to the input; None when they read no input row (CMSIS-NN takes no empty input)."""
        top = first * self.stride_h - self.pad_h
        bottom = (end - 1) * self.stride_h - self.pad_h + (self.kernel_h - 1) * self.dilation_h + 1
        low, high = max(top, 0), min(bottom, self.in_hwc[0])
        if high <= low:
            return None
        return low, high - low, low - top

    def operands(self, suffix: str = "") -> str:
        """The constant parameters every call function takes after its input and output, as the
        operator function names them (`filter_`, or `filter0_` with suffix "0")."""
        names = ("filter", "multiplier", "bias", "shift") if self.bias else ("filter", "multiplier", "shift")
        return ", ".join(f"{name}{suffix}_" for name in names)

    def call_function(self, name: str, in_rows: int, above: int, out_rows: int) -> list[str]:
        """A C function computing `out_rows` output rows from `in_rows` input rows below `above`
        rows of padding: one CMSIS-NN call, in the shape TVM writes operator functions in."""
        in_h, in_w, in_c = self.in_hwc
        _, out_w, out_c = self.out_hwc
        return [f"/* {out_rows} output row(s) from {in_rows} input row(s) below {above} row(s) of padding */",
                f"static int32_t {name}(int8_t* input_, int8_t* output_, int8_t* filter_, int32_t* multiplier_"
                f"{', int32_t* bias_' if self.bias else ''}, int32_t* shift_) {{",
                "  cmsis_nn_context context= {NULL,0};",
                f"  cmsis_nn_tile padding = {c_dims((self.pad_w, above))};", *self.lines,
                "  cmsis_nn_per_channel_quant_params quant_params = {multiplier_, shift_};",
                f"  cmsis_nn_dims input_dims = {c_dims((1, in_rows, in_w, in_c))};",
                f"  cmsis_nn_dims filter_dims = {c_dims(self.filter_dims)};",
                f"  cmsis_nn_dims bias_dims = {c_dims((1, 1, 1, out_c))};",
                f"  cmsis_nn_dims output_dims = {c_dims((1, out_rows, out_w, out_c))};",
                *status_check(f"{self.function}(&context, &conv_params, &quant_params, &input_dims, input_, "
                              f"&filter_dims, filter_, &bias_dims, {'bias_' if self.bias else 'NULL'}, "
                              "&output_dims, output_)"),
                "}", ""]
