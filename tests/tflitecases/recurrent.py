"""SVDF as TensorFlow's converter writes keyword spotting's SVDF layers: int8 input and output, int8
feature weights, int16 time weights, a variable int16 state (zero point 0), RELU; the output's zero
point -128 as the converter's RELU gives it, or another."""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from tflitewriter import Draw, GraphBuilder, _features, register_cases

RELU = 1


def svdf_layer(graph: GraphBuilder, rng: np.random.Generator, x: int, name: str, *, units: int, rank: int,
               memory: int, out_zero_point: int = -128, time_dtype: str = "int16", activation: int = RELU,
               bias: bool = True, state_zero_point: int = 0) -> int:
    """An SVDF after `x` ([batch, depth]); returns its output. Its state `<name>/state` is variable."""
    batch, depth = graph.tensor(x).shape
    filters = units * rank
    input_scale = graph.tensor(x).scale
    feature_scale = float(rng.uniform(3e-3, 1e-2))
    features = graph.add_constant(f"{name}/feature", rng.integers(-127, 128, (filters, depth)).astype(np.int8),
                                  scale=feature_scale, zero_point=0)
    # the feature product of typical inputs spans a few thousand steps of the state
    state_scale = input_scale * feature_scale * 100 * 73 * math.sqrt(depth) / 4000
    limit = 127 if time_dtype == "int8" else 32767
    time_scale = float(rng.uniform(1e-3, 4e-3))
    times = graph.add_constant(f"{name}/time", rng.integers(-limit, limit + 1, (filters, memory)).astype(time_dtype),
                               scale=time_scale, zero_point=0)
    bias_index = -1
    if bias:  # in the state × time weights scale, as the converter writes it
        bias_index = graph.add_constant(f"{name}/bias", rng.integers(-20000, 20000, units).astype(np.int32),
                                        scale=state_scale * time_scale, zero_point=0)
    state = graph.add_tensor(f"{name}/state", time_dtype, (batch, memory * filters), scale=state_scale,
                             zero_point=state_zero_point)
    graph.variable_indices.add(state)
    typical = state_scale * time_scale * 4000 * limit / 2 * math.sqrt(memory * rank)
    y = graph.add_tensor(f"{name}/out", "int8", (batch, units), scale=typical / 100, zero_point=out_zero_point)
    graph.add_operator("SVDF", [x, features, times, bias_index, state], [y],
                       schema.SVDFOptionsT(rank=rank, fusedActivationFunction=activation))
    return y


def add_svdf(graph: GraphBuilder, p: Draw, x: int, name: str = "svdf") -> int:
    return svdf_layer(graph, p.rng, x, name, units=p.integer("units", 1, 12), rank=p.integer("rank", 1, 3),
                      memory=p.integer("memory", 1, 10), out_zero_point=p.choice("out_zero_point", (-128, -60, 0)),
                      bias=p.choice("bias", (True, True, False)))


register_cases({"SVDF": (_features, add_svdf, (1e-2, 1e-1), "int8")})


# --- UNIDIRECTIONAL_SEQUENCE_LSTM as the converter writes a Keras LSTM for int8 (the 8x8_16 integer LSTM) ----

TANH = 4
_GATE_SCALE = 2.0 ** -12  # the gates' Q3.12 without layer normalisation


def lstm_layer(graph: GraphBuilder, rng: np.random.Generator, x: int, name: str, *, cells: int, cifg: bool = False,
               time_major: bool = False, cell_exponent: int = -11, cell_clip: float = 10.0,
               state_zero_point: int = 0, hidden_zero_point: int | None = None, peephole: bool = False,
               layer_norm: bool = False, projection: int = 0, projection_bias: bool = True,
               proj_clip: float = 0.0) -> int:
    """An LSTM after `x` ([batch, time, depth] or [batch, depth]); returns its output. Its output and
    cell states `<name>/h` and `<name>/c` are variable; five intermediates carry the gates' and the
    hidden state's quantization, as the converter writes them. Options: peepholes (int16 diagonal
    weights), layer normalisation (int16 coefficients; the gates' intermediates then carry the scale
    of their sums), a projection of the hidden state to `projection` outputs."""
    source = graph.tensor(x)
    depth, input_scale = source.shape[-1], source.scale
    batch = source.shape[1] if time_major and len(source.shape) == 3 else source.shape[0]
    outputs = projection or cells
    # a state scale a typical tanh output of the hidden state (|h| < 1) spans in int8
    state_scale = float(rng.uniform(0.005, 0.009))
    hidden_scale = float(rng.uniform(0.005, 0.009)) if projection else state_scale
    gates = [g for g in ("input", "forget", "cell", "output") if not (cifg and g == "input")]
    weights = {}
    for kind, fan_in, scale_in in (("in", depth, input_scale), ("state", outputs, state_scale)):
        for gate in gates:
            # pre-activations of a few units in Q3.12: weight scale × input scale × 127 × √fan_in ≈ 2
            scale = float(rng.uniform(0.5, 2.0)) / (127 * 100 * scale_in * math.sqrt(fan_in))
            weights[kind, gate] = graph.add_constant(f"{name}/{kind}_{gate}", rng.integers(
                -127, 128, (cells, fan_in)).astype(np.int8), scale=scale, zero_point=0)
    norms = {}
    if layer_norm:  # coefficients near 1 in steps of the scale; the bias is added in those steps / 1024
        for gate in gates:
            scale = float(rng.uniform(0.5, 2.0)) / 16384
            norms[gate] = graph.add_constant(f"{name}/norm_{gate}", rng.integers(
                8000, 32767, cells).astype(np.int16), scale=scale, zero_point=0)
    biases = {}
    for gate in gates:
        if layer_norm:
            scale = graph.tensor(norms[gate]).scale / 1024
            values = rng.normal(0.0, 0.5 / scale, cells)
        else:
            scale = input_scale * graph.tensor(weights["in", "forget"]).scale
            values = rng.integers(-3000, 3000, cells)
        biases[gate] = graph.add_constant(f"{name}/bias_{gate}", np.clip(values, -2 ** 31, 2 ** 31 - 1).astype(np.int32),
                                          scale=scale, zero_point=0)
    peepholes = {}
    if peephole:  # a real weight up to ~1 on the cell's value
        for gate in [g for g in gates if g != "cell"]:
            peepholes[gate] = graph.add_constant(f"{name}/peephole_{gate}", rng.integers(
                -32767, 32768, cells).astype(np.int16), scale=float(rng.uniform(0.5, 2.0)) / 32767, zero_point=0)
    projection_weights = projection_bias_index = -1
    if projection:
        # projected values of tens of steps from hidden values of tens of steps
        scale = float(rng.uniform(0.5, 2.0)) * state_scale / (127 * hidden_scale * math.sqrt(cells))
        projection_weights = graph.add_constant(f"{name}/projection", rng.integers(
            -127, 128, (outputs, cells)).astype(np.int8), scale=scale, zero_point=0)
        if projection_bias:
            projection_bias_index = graph.add_constant(
                f"{name}/projection_bias", rng.integers(-2000, 2000, outputs).astype(np.int32),
                scale=scale * hidden_scale, zero_point=0)
    hidden = graph.add_tensor(f"{name}/h", "int8", (batch, outputs), scale=state_scale, zero_point=state_zero_point)
    cell = graph.add_tensor(f"{name}/c", "int16", (batch, cells), scale=2.0 ** cell_exponent, zero_point=0)
    graph.variable_indices.update((hidden, cell))
    intermediates = [graph.add_tensor(f"{name}/intermediate_{k}", "int16", (0,),
                                      scale=float(rng.uniform(1e-4, 4e-4)) if layer_norm else _GATE_SCALE,
                                      zero_point=0) for k in range(4)]
    intermediates.append(graph.add_tensor(
        f"{name}/hidden", "int8", (0,), scale=hidden_scale,
        zero_point=state_zero_point if hidden_zero_point is None else hidden_zero_point))
    y = graph.add_tensor(f"{name}/out", "int8", (*source.shape[:-1], outputs), scale=state_scale,
                         zero_point=state_zero_point)
    gate = lambda kind, g: weights.get((kind, g), -1)
    inputs = [x, *(gate("in", g) for g in ("input", "forget", "cell", "output")),
              *(gate("state", g) for g in ("input", "forget", "cell", "output")),
              *(peepholes.get(g, -1) for g in ("input", "forget", "output")),
              *(biases.get(g, -1) for g in ("input", "forget", "cell", "output")), projection_weights,
              projection_bias_index, hidden, cell, *(norms.get(g, -1) for g in ("input", "forget", "cell", "output"))]
    graph.add_operator("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], schema.UnidirectionalSequenceLSTMOptionsT(
        fusedActivationFunction=TANH, cellClip=cell_clip, projClip=proj_clip, timeMajor=time_major),
        intermediates=intermediates)
    return y


def _sequence(p: Draw) -> tuple[int, ...]:
    return (p.integer("batch", 1, 2), p.integer("time", 1, 4), p.integer("depth", 1, 12))


def add_lstm(graph: GraphBuilder, p: Draw, x: int, name: str = "lstm") -> int:
    state_zero_point = p.choice("state_zero_point", (0, 0, -3, 5))
    return lstm_layer(graph, p.rng, x, name, cells=p.integer("cells", 1, 10), cifg=p.choice("cifg", (False, False, True)),
                      time_major=p.choice("time_major", (False, False, True)),
                      cell_exponent=p.integer("cell_exponent", -15, -9),
                      cell_clip=p.choice("cell_clip", (10.0, 10.0, 0.0, 0.4)), state_zero_point=state_zero_point,
                      hidden_zero_point=p.choice("hidden_zero_point", (None, None, None, 2)))


def add_lstm_variant(graph: GraphBuilder, p: Draw, x: int, name: str = "lstm") -> int:
    """Peepholes, layer normalisation and a projection, each drawn (LiteRT's integer layer norm divides
    2^20 by the count of cells, exactly for a power of two: both kinds are drawn)."""
    cells = p.choice("cells", (1, 3, 4, 8, 12, 16))
    layer_norm = p.choice("layer_norm", (True, False))
    projection = p.choice("projection", (0, 0, 3, 6, cells))
    peephole = p.choice("peephole", (True, False)) and projection in (0, cells)
    return lstm_layer(graph, p.rng, x, name, cells=cells, cifg=p.choice("cifg", (False, False, True)),
                      time_major=p.choice("time_major", (False, True)),
                      cell_exponent=p.integer("cell_exponent", -15, -9),
                      cell_clip=p.choice("cell_clip", (10.0, 0.0, 0.4)),
                      state_zero_point=p.choice("state_zero_point", (0, -3, 5)),
                      hidden_zero_point=p.choice("hidden_zero_point", (None, 0, 2, -7)), peephole=peephole,
                      layer_norm=layer_norm, projection=projection,
                      projection_bias=p.choice("projection_bias", (True, False)),
                      proj_clip=p.choice("proj_clip", (0.0, 0.0, 0.3)))


register_cases({"UNIDIRECTIONAL_SEQUENCE_LSTM": (_sequence, add_lstm, (1e-2, 1e-1), "int8"),
                "UNIDIRECTIONAL_SEQUENCE_LSTM/variants": (_sequence, add_lstm_variant, (1e-2, 1e-1), "int8")})
