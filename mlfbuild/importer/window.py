"""The geometry of a convolution's window over its input: what the generated kernels (DSP and MVE)
unroll where a window lies inside the input and check tap by tap elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

from .lowering.base import tensor_at, window_padding


def batch_one_layer(graph, op):
    """(input, filter, output) of a convolution whose tensors are 4-D with a batch of one (what every
    generated kernel takes), else None."""
    x, w, y = tensor_at(graph, op, 0), tensor_at(graph, op, 1), tensor_at(graph, op, 0, output=True)
    if len(x.shape) != 4 or len(y.shape) != 4 or len(w.shape) != 4 or x.shape[0] != 1:
        return None
    return x, w, y


def layer_window(op, x, w, y) -> "Window":
    """The geometry of a convolution's window over its NHWC input (batch 1), as the model states it."""
    (_, in_h, in_w, in_c), (_, out_h, out_w, _), (_, k_h, k_w, _) = x.shape, y.shape, w.shape
    o = op.options
    stride, dilation = (o["stride_h"], o["stride_w"]), (o["dilation_h"], o["dilation_w"])
    padding = (window_padding(op, in_h, k_h, stride[0], dilation[0], out_h),
               window_padding(op, in_w, k_w, stride[1], dilation[1], out_w))
    return Window((in_h, in_w, in_c), (out_h, out_w), (k_h, k_w), stride, dilation, padding)


@dataclass(frozen=True)
class Window:
    in_hwc: tuple[int, int, int]
    out_hw: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]  # before the first row and column

    def inside(self, axis: int) -> tuple[int, int]:
        """The first and last output row (axis 0) or column (1) whose window lies inside the input."""
        size, out = self.in_hwc[axis], self.out_hw[axis]
        stride, pad, reach = self.stride[axis], self.padding[axis], (self.kernel[axis] - 1) * self.dilation[axis]
        first = -(-pad // stride)
        last = (size - 1 - reach + pad) // stride if size - 1 - reach + pad >= 0 else -1
        return first, min(last, out - 1)

    def inside_pixels(self) -> int:
        """Output pixels whose window lies inside the input (the unrolled taps; the others check each tap).
        Measured (vww, Cortex-M4F, -Os, against CMSIS-NN v7): with 4 of 9 and 16 of 36 inside the
        generated layer took 0.75× CMSIS-NN's estimated cycles, with 1 of 9 (3x3 pixels, 256 channels)
        1.04×: it is generated where at least a third of its pixels are inside."""
        (row_lo, row_hi), (col_lo, col_hi) = self.inside(0), self.inside(1)
        return max(row_hi - row_lo + 1, 0) * max(col_hi - col_lo + 1, 0)
