"""Random cases of SOFTMAX's 16-bit kinds (mlfbuild/importer/lowering/softmax.py) and of the int16 →
int32 QUANTIZE that follows an int8 → int16 softmax in TFLM's keyword_scrambled: outputs quantized
as TFLite's kernels require (int8 → int16: 1/65536 and zero point -32768; int16: 1/32768 and 0)."""

from __future__ import annotations

from ai_edge_litert import schema_py_generated as schema
from tflitewriter import Draw, GraphBuilder, _features, _output, register_cases

_LOGITS = (1e-2, 1e-1)  # int16 inputs get these / 256: logits within about ±13


def _softmax(graph: GraphBuilder, p: Draw, x: int, name: str, quantization: dict) -> int:
    y = _output(graph, name, p("output_dtype", lambda: "int16"), graph.tensor(x).shape, quantization)
    beta = p("beta", lambda: 1.0 if p.rng.random() < 0.5 else float(p.rng.uniform(0.3, 3.0)))
    graph.add_operator("SOFTMAX", [x], [y], schema.SoftmaxOptionsT(beta=beta))
    return y


def add_softmax_int8_int16(graph: GraphBuilder, p: Draw, x: int, name: str = "softmax") -> int:
    return _softmax(graph, p, x, name, {"scale": p("output_scale", lambda: 1 / 65536),
                                        "zero_point": p("output_zero_point", lambda: -32768)})


def add_softmax_int16(graph: GraphBuilder, p: Draw, x: int, name: str = "softmax") -> int:
    return _softmax(graph, p, x, name, {"scale": p("output_scale", lambda: 1 / 32768),
                                        "zero_point": p("output_zero_point", lambda: 0)})


def add_quantize_int32(graph: GraphBuilder, p: Draw, x: int, name: str = "quantize") -> int:
    """int16 → int32 at a scale near the input's, a small zero point."""
    source = graph.tensor(x)
    quantization = {"scale": p("output_scale", lambda: source.scale * p.log_uniform("output_scale_ratio", 1 / 8, 8.0)),
                    "zero_point": p.integer("output_zero_point", -1000, 1000)}
    y = _output(graph, name, "int32", source.shape, quantization)
    graph.add_operator("QUANTIZE", [x], [y], schema.QuantizeOptionsT())
    return y


register_cases({
    "SOFTMAX/int8_int16": (_features, add_softmax_int8_int16, _LOGITS, "int8"),
    "SOFTMAX/int16": (_features, add_softmax_int16, _LOGITS, "int16"),
    "QUANTIZE/int16_to_int32": (_features, add_quantize_int32, _LOGITS, "int16"),
})
