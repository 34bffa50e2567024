"""QUANTIZE between integer types beyond int8/int16 (mlfbuild/importer/lowering/unary.py's
_requantize_pair), each reached from the case's input by another QUANTIZE: int16 → int32 (scale down
to 1/30000 of the input's: int32 values up to about 1e9) → int8 or int16; int8 → uint8 (sometimes the
same scale and the zero point moved by 128, TFLite's flipped-bit path) → int8."""

from __future__ import annotations

from ai_edge_litert import schema_py_generated as schema
from tflitewriter import Draw, GraphBuilder, _any_rank, _output, register_cases


def _quantize(graph: GraphBuilder, x: int, name: str, dtype: str, scale: float, zero_point: int) -> int:
    y = _output(graph, name, dtype, graph.tensor(x).shape, {"scale": scale, "zero_point": zero_point})
    graph.add_operator("QUANTIZE", [x], [y], schema.QuantizeOptionsT())
    return y


def _from_int32(output_dtype: str):
    def add(graph: GraphBuilder, p: Draw, x: int, name: str = "quantize") -> int:
        source = graph.tensor(x)
        wide_scale = source.scale / p.log_uniform("int32_steps_per_input_step", 1.0, 30000.0)
        wide = _quantize(graph, x, f"{name}/int32", "int32", wide_scale, 0)
        if output_dtype == "int8":
            scale, zero_point = source.scale * p.log_uniform("output_scale_ratio", 150, 600), p.integer("zero_point", -20, 20)
        else:
            scale, zero_point = source.scale * p.log_uniform("output_scale_ratio", 0.5, 4), 0
        return _quantize(graph, wide, name, output_dtype, scale, zero_point)
    return add


def add_through_uint8(graph: GraphBuilder, p: Draw, x: int, name: str = "quantize") -> int:
    source = graph.tensor(x)
    if p.choice("flip", (False, True)):  # same scale, zero point + 128: TFLite flips the top bit
        unsigned = _quantize(graph, x, f"{name}/uint8", "uint8", source.scale, source.zero_point + 128)
    else:
        unsigned = _quantize(graph, x, f"{name}/uint8", "uint8", source.scale * p.log_uniform("uint8_ratio", 0.5, 2),
                             p.integer("uint8_zero_point", 0, 255))
    return _quantize(graph, unsigned, name, "int8", source.scale * p.log_uniform("output_scale_ratio", 0.5, 2),
                     p.integer("output_zero_point", -128, 127))


_SCALES = (1e-2, 1e-1)
register_cases({
    "QUANTIZE/int32_to_int8": (_any_rank, _from_int32("int8"), _SCALES, "int16"),
    "QUANTIZE/int32_to_int16": (_any_rank, _from_int32("int16"), _SCALES, "int16"),
    "QUANTIZE/uint8": (_any_rank, add_through_uint8, _SCALES, "int8"),
})
