"""Patch-based execution of a model's leading convolutions (MCUNetV2's idea, in stripes of whole rows).

Run layer by layer, a model's first layers hold its largest tensors: vww's first pointwise layer
writes 36,864 B while its 18,432-byte input is live. Run stripe by stripe, the chain of its leading
convolutions computes a band of rows of its last output at a time, each layer over just the rows the
next one's windows read (the overlap between stripes computed twice; padding only at the image's
edges), through two small buffers, so that of the chain's tensors only its input and its last output
ever exist whole. Stripes span whole rows, so every layer's input is contiguous and each is one
CMSIS-NN call (rows.ConvRows); the integer arithmetic of each output value is the whole layer's.

emit.py tries every chain length and stripe count whose recomputation stays under a bound
(`stage_candidates`), plans each with the rest of the model (row bands included), and keeps the
smallest pool. Before that, `fold_pads` folds each PAD into the VALID convolution that alone reads
it, so that the padded tensor never exists and a PAD no longer stops a chain.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .lowering import BAND_FUNCTION, Lowered, Operand
from .lowering.base import Bands
from .lowering.conv import _row_bands as row_bands  # the layer row by row over its dying input
from .lowering.rows import ConvRows
from .tflite import Graph, Tensor

STRIPE_COUNTS = (2, 3, 4, 6, 8, 12)
MAX_RECOMPUTE = 1.15  # the stage's multiply-accumulates over the layer-by-layer count, at most


@dataclasses.dataclass(frozen=True)
class Stage:
    first: int  # the calls [first, last] of the model's list run stripe by stripe
    last: int
    stripes: int


def stage_candidates(graph: Graph, calls: list[Lowered], io_names: dict[int, str]) -> list[Stage]:
    """Every chain of two or more convolutions from the model's first convolution (what comes before
    it, such as the TRANSPOSE of a PyTorch model's NCHW image, runs whole), each reading the one
    before it alone, in every stripe count that recomputes little enough."""
    chain = _leading_chain(graph, calls, io_names)
    found = []
    for last in range(1, len(chain)):
        layers = [calls[i].rows for i in chain[:last + 1]]
        for stripes in STRIPE_COUNTS:
            ranges = _stripe_ranges(layers, stripes)
            if ranges is not None and _recompute(layers, ranges) <= MAX_RECOMPUTE:
                found.append(Stage(chain[0], chain[last], stripes))
    return found


def _leading_chain(graph: Graph, calls: list[Lowered], io_names: dict[int, str]) -> list[int]:
    readers: dict[int, list[int]] = {}
    for index, step in enumerate(calls):
        read = [o.tensor for o in step.operands if o.tensor is not None]
        for tensor in read + ([step.alias_of] if step.alias_of is not None else []):
            readers.setdefault(tensor, []).append(index)
    chain: list[int] = []
    first = next((index for index, step in enumerate(calls) if step.rows is not None), len(calls))
    for index, step in enumerate(calls[first:], first):
        if step.rows is None:
            break
        if chain:
            previous = calls[chain[-1]].output
            if index != chain[-1] + 1 or step.operands[0].tensor != previous or previous in io_names \
                    or readers.get(previous, []) != [chain[-1], index]:
                break
        chain.append(index)
    return chain


def _stripe_ranges(layers: list[ConvRows], stripes: int) -> list[list[tuple[int, int]]] | None:
    """For each stripe, each layer's output rows [first, end) it computes (None: a layer's stripe
    would read no input row, or the stripes are thinner than a row)."""
    height = layers[-1].out_hwc[0]
    if stripes > height:
        return None
    found = []
    for t in range(stripes):
        first, end = t * height // stripes, (t + 1) * height // stripes
        per_layer = [(first, end)]
        for layer in reversed(layers[1:]):
            window = layer.window(first, end)
            if window is None:
                return None
            first, end = window[0], window[0] + window[1]
            per_layer.append((first, end))
        found.append(per_layer[::-1])
    return found


def _macs_per_row(layer: ConvRows) -> int:
    return layer.out_row * int(np.prod(layer.filter_dims)) // layer.out_hwc[2]


def _recompute(layers: list[ConvRows], ranges: list[list[tuple[int, int]]]) -> float:
    whole = sum(layer.out_hwc[0] * _macs_per_row(layer) for layer in layers)
    striped = sum((end - first) * _macs_per_row(layer) for stripe in ranges
                  for layer, (first, end) in zip(layers, stripe))
    return striped / whole


def apply_stage(graph: Graph, calls: list[Lowered], stage: Stage) -> tuple[Graph, list[Lowered]]:
    """The model with calls [stage.first, stage.last] made one call that runs them stripe by stripe
    through two buffers (new tensors of the graph, live during that call alone)."""
    steps = calls[stage.first:stage.last + 1]
    layers = [step.rows for step in steps]
    ranges = _stripe_ranges(layers, stage.stripes)
    sizes = [0, 0]
    for stripe in ranges:
        for position, (layer, (first, end)) in enumerate(zip(layers[:-1], stripe[:-1])):
            sizes[position % 2] = max(sizes[position % 2], (end - first) * layer.out_row)
    buffers = [Tensor(len(graph.tensors) + k, f"patch_buffer{k}", "int8", (max(size, 1),), None)
               for k, size in enumerate(sizes)]
    graph = dataclasses.replace(graph, tensors=graph.tensors + tuple(buffers))
    operands = [Operand("int8_t*", "input_", steps[0].operands[0].tensor)]
    for position, step in enumerate(steps):
        operands += [dataclasses.replace(o, param=f"{o.param.rstrip('_')}{position}_")
                     for o in step.operands if o.constant is not None]
    operands += [Operand("int8_t*", f"buffer{k}_", t.index) for k, t in enumerate(buffers)]
    operands.append(Operand("int8_t*", "output_", steps[-1].output))
    functions, body = _stripe_code(layers, ranges)
    names = ", ".join(f"{s.operator.index} ({s.operator.name})" for s in steps)
    # the call stands for the chain: the first operator's, writing the last one's output
    operator = dataclasses.replace(steps[0].operator, outputs=steps[-1].operator.outputs)
    # the same code runs over its dying input too: each stripe's output rows land where no later
    # stripe reads (Bands: the output starts `reserve` bytes before the input, top to bottom)
    bands = Bands(reserve=_reserve(layers, ranges), allow=0, functions=[], body=body, reverse_body=[])
    staged = Lowered(operator, steps[0].function, operands, body,
                     f"operators {names} run in {stage.stripes} stripes of rows (patch-based)", functions=functions,
                     bands=bands)
    return graph, calls[:stage.first] + [staged] + calls[stage.last + 1:]


def _reserve(layers: list[ConvRows], ranges: list[list[tuple[int, int]]]) -> int:
    """How many bytes before its input the stage's output must start for no stripe to write over input
    rows a later stripe reads (0 where it may start with the input): a stripe writes its output rows
    after its first layer has read its input rows, so only later stripes' rows matter."""
    first_layer, last_layer = layers[0], layers[-1]
    slack = min((first_layer.window(*ranges[t + 1][0])[0] * first_layer.in_row - ranges[t][-1][1] * last_layer.out_row
                 for t in range(len(ranges) - 1)), default=0)
    return max(0, -slack)


def _stripe_code(layers: list[ConvRows], ranges: list[list[tuple[int, int]]]) -> tuple[list[str], list[str]]:
    """The call functions (one per layer and window shape) and the body: every stripe, layer by layer."""
    shapes: dict[tuple[int, int, int, int], str] = {}
    functions: list[str] = []
    body: list[str] = []
    for t, stripe in enumerate(ranges):
        body.append(f"  /* stripe {t}: output rows {stripe[-1][0]}..{stripe[-1][1] - 1} */")
        source, source_first = "input_", 0
        for position, (layer, (first, end)) in enumerate(zip(layers, stripe)):
            low, in_rows, above = layer.window(first, end)
            key = (position, in_rows, above, end - first)
            if key not in shapes:
                shapes[key] = f"{BAND_FUNCTION}_layer{position}_{len(shapes)}"
                functions += layer.call_function(shapes[key], in_rows, above, end - first)
            last = position == len(layers) - 1
            target = "output_" if last else f"buffer{position % 2}_"
            at = first * layer.out_row if last else 0
            constants = layer.operands(str(position))
            body.append(f"  if ({shapes[key]}({source} + {(low - source_first) * layer.in_row}, {target} + {at}, "
                        f"{constants}) != 0) return -1;")
            source, source_first = target, first
    return functions, body + ["  return 0;"]


def fold_pads(graph: Graph, calls: list[Lowered], io_names: dict[int, str]) -> list[Lowered]:
    """Each PAD of an image's rows and columns (with its zero point: PAD, not PADV2) whose only reader
    is the next call, a VALID convolution, folded into that convolution: padding at the image's edges
    is what CMSIS-NN's calls compute (the padded positions add nothing, as the zero point does), so
    the padded tensor never exists. The convolution keeps its row bands and can start a stripe stage."""
    readers: dict[int, list[int]] = {}
    for index, step in enumerate(calls):
        for tensor in [o.tensor for o in step.operands if o.tensor is not None] + [step.alias_of]:
            if tensor is not None:
                readers.setdefault(tensor, []).append(index)
    folded: list[Lowered] = []
    skip = False
    for index, step in enumerate(calls):
        if skip:
            skip = False
            continue
        conv = calls[index + 1] if index + 1 < len(calls) else None
        pads = _image_pads(graph, step)
        if (pads is None or conv is None or conv.rows is None or conv.rows.pad_h or conv.rows.pad_w
                or conv.operands[0].tensor != step.output or step.output in io_names
                or readers.get(step.output) != [index, index + 1]):
            folded.append(step)
            continue
        folded.append(_folded(graph, step, conv, pads))
        skip = True
    return folded


def _image_pads(graph: Graph, step: Lowered) -> tuple[int, int] | None:
    """(top, left) of a PAD of rows and columns of one int8 image; None for any other call."""
    op = step.operator
    if op.name != "PAD" or step.alias_of is not None or len(op.inputs) < 2:
        return None
    x, paddings = graph.tensors[op.inputs[0]], graph.tensors[op.inputs[1]]
    if x.dtype != "int8" or len(x.shape) != 4 or x.shape[0] != 1 or not paddings.is_constant:
        return None
    pads = np.asarray(paddings.data).astype(np.int64).reshape(-1, 2)
    if pads.shape != (4, 2) or pads[0].any() or pads[3].any() or (pads < 0).any():
        return None
    return int(pads[1][0]), int(pads[2][0])


def _folded(graph: Graph, pad: Lowered, conv: Lowered, pads: tuple[int, int]) -> Lowered:
    source = pad.operator.inputs[0]
    height, width, channels = graph.tensors[source].shape[1:]
    rows = dataclasses.replace(conv.rows, in_hwc=(height, width, channels), pad_h=pads[0], pad_w=pads[1])
    whole = f"{BAND_FUNCTION}_whole"
    body = [f"  if ({whole}(input_, output_, {rows.operands()}) != 0) return -1;", "  return 0;"]
    operands = [dataclasses.replace(conv.operands[0], tensor=source), *conv.operands[1:]]
    operator = dataclasses.replace(conv.operator, inputs=(source, *conv.operator.inputs[1:]))
    note = f"operator {pad.operator.index} (PAD) folded in: the convolution pads at the image's edges"
    return Lowered(operator, conv.function, operands, body, note,
                   functions=rows.call_function(whole, height, pads[0], rows.out_hwc[0]),
                   bands=row_bands(rows), rows=rows)
