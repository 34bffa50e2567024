"""SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM (lowering/recurrent.py) in models written here as TensorFlow's
converter writes them (SVDF: keyword spotting's layers, int8 input and output, int8 feature weights,
int16 time weights and a variable int16 state, RELU; LSTM: the 8x8_16 integer LSTM of a Keras LSTM,
int8 weights and hidden state, int16 cell state, five intermediates), compared bit for bit with
LiteRT's reference kernels over several samples run one after another, so that the state carried
from one inference to the next is checked too; and what stays refused, in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflitecases  # noqa: F401 - registers the cases
from ai_edge_litert import schema_py_generated as schema
from conftest import cli
from test_import_operators import _assert_refused, check_against_litert
from tflitecases.recurrent import lstm_layer, svdf_layer
from tflitewriter import GraphBuilder, pack_model, read_model


def svdf_model(path: Path, seed: int, layers: list[dict], batch: int = 1, depth: int = 24) -> Path:
    rng = np.random.default_rng(seed)
    graph = GraphBuilder()
    x = graph.add_input("in", "int8", (batch, depth), scale=0.06, zero_point=-128)
    for k, layer in enumerate(layers):
        x = svdf_layer(graph, rng, x, f"svdf{k}", **layer)
    graph.mark_output(x)
    return graph.write(path)


# keyword_scrambled's shapes (rank 1, memory 8, 64 units) in small, then rank 2, batches, no bias
_LAYERS = [{"units": 16, "rank": 1, "memory": 8}, {"units": 8, "rank": 2, "memory": 5, "out_zero_point": -100},
           {"units": 6, "rank": 3, "memory": 1, "bias": False}]


@pytest.mark.cross
def test_svdf_chain_equals_litert_sample_after_sample(cmsis_nn, tmp_path):
    """Eight samples in one run: each SVDF's state after sample k is what sample k+1 reads."""
    model = svdf_model(tmp_path / "svdf.tflite", 1, _LAYERS)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=8)


@pytest.mark.cross
def test_svdf_batches_equal_litert(cmsis_nn, tmp_path):
    model = svdf_model(tmp_path / "svdf.tflite", 2, [{"units": 5, "rank": 2, "memory": 4},
                                                      {"units": 7, "rank": 1, "memory": 3}], batch=3, depth=10)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=5)


@pytest.mark.qemu
@pytest.mark.cross
def test_svdf_chain_on_the_m55_equals_litert(cmsis_nn, tmp_path):
    model = svdf_model(tmp_path / "svdf.tflite", 3, _LAYERS)
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=4)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(4, 10))
def test_svdf_seeds_equal_litert(seed, cmsis_nn, tmp_path):
    rng = np.random.default_rng(seed)
    layers = [{"units": int(rng.integers(1, 20)), "rank": int(rng.integers(1, 4)), "memory": int(rng.integers(1, 12)),
               "out_zero_point": int(rng.integers(-128, 0))} for _ in range(2)]
    model = svdf_model(tmp_path / "svdf.tflite", seed, layers, batch=int(rng.integers(1, 3)),
                       depth=int(rng.integers(1, 40)))
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.parametrize("layer, said", [
    ({"time_dtype": "int8"}, "only int16 ones are supported"),
    ({"activation": 0}, "fused activation NONE"),
    ({"state_zero_point": 3}, "has zero point 3"),
])
def test_svdf_outside_litert_integer_kernel_is_refused(layer, said, tmp_path):
    model = svdf_model(tmp_path / "svdf.tflite", 0, [dict({"units": 4, "rank": 1, "memory": 3}, **layer)])
    _assert_refused(model, said, tmp_path)


def keyword_scrambled_svdf_stack(source: Path, path: Path) -> Path:
    """TFLM's keyword_scrambled cut after its last SVDF (before the int16 softmax): its int16 input,
    QUANTIZE, the SVDF layers with int16 states and the fully connected layers between them."""
    model = read_model(source.read_bytes())
    subgraph = model.subgraphs[0]
    svdf = {i for i, code in enumerate(model.operatorCodes)
            if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.SVDF}
    keep = max(i for i, o in enumerate(subgraph.operators) if o.opcodeIndex in svdf) + 1
    assert keep > 5
    subgraph.outputs = np.array(subgraph.operators[keep - 1].outputs, np.int32)
    subgraph.operators = subgraph.operators[:keep]
    for index, tensor in enumerate(subgraph.tensors):  # the file's tensors are nameless; LiteRT's oracle needs names
        tensor.name = tensor.name or f"tensor{index}"
    path.write_bytes(pack_model(model))
    return path


@pytest.mark.exhaustive
@pytest.mark.cross
def test_keyword_scrambled_svdf_stack_equals_litert(tflm_models_dir, cmsis_nn, tmp_path):
    model = keyword_scrambled_svdf_stack(tflm_models_dir / "keyword_scrambled.tflite", tmp_path / "ks.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=12)


@pytest.mark.exhaustive
def test_keyword_scrambled_8bit_svdf_is_refused(tflm_models_dir, tmp_path):
    """TFLM's 8-bit SVDF (int8 time weights and state) is not LiteRT's: its reference reads them as int16."""
    _assert_refused(tflm_models_dir / "keyword_scrambled_8bit.tflite", "only int16 ones are supported", tmp_path)


@pytest.mark.parametrize("scale", [1e-40, 1e-30, 3e38, 0.0, 1.0, 1e12])
@pytest.mark.parametrize("tensor", ["svdf0/feature", "svdf0/time", "svdf0/state", "svdf0/out"])
def test_svdf_extreme_scales_are_imported_or_refused_in_one_line(tensor, scale, tmp_path):
    model = read_model(svdf_model(tmp_path / "svdf.tflite", 0, [{"units": 4, "rank": 1, "memory": 3}]).read_bytes())
    for t in model.subgraphs[0].tensors:
        if (t.name.decode() if isinstance(t.name, bytes) else t.name) == tensor:
            t.quantization.scale = np.array([scale], np.float32)
    path = tmp_path / "extreme.tflite"
    path.write_bytes(pack_model(model))
    run = cli("import", str(path), "-o", str(tmp_path / "m.tar"))
    assert run.returncode in (0, 3), run.stderr
    assert run.returncode == 0 or run.stderr.count("\n") == 1, run.stderr


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("version", ["v4.1.0", "v6.0.0"])
def test_svdf_chain_with_each_cmsis_nn_equals_litert(board, version, cmsis_nn, tmp_path):
    """Built with either tree, on DSP and MVE cores."""
    model = svdf_model(tmp_path / "svdf.tflite", 11, _LAYERS + [{"units": 4, "rank": 1, "memory": 2}], batch=2)
    check_against_litert(model, board, cmsis_nn(version), tmp_path / board, samples=4)


def lstm_model(path: Path, seed: int, layers: list[dict], shape: tuple[int, ...] = (1, 6, 10),
               input_zero_point: int = -20) -> Path:
    rng = np.random.default_rng(seed)
    graph = GraphBuilder()
    x = graph.add_input("in", "int8", shape, scale=0.05, zero_point=input_zero_point)
    for k, layer in enumerate(layers):
        x = lstm_layer(graph, rng, x, f"lstm{k}", **dict({"cells": 8}, **layer))
    graph.mark_output(x)
    return graph.write(path)


# Stacked as Keras stacks return_sequences LSTMs: the second reads the first's hidden states.
_LSTM_CASES = {
    "converter's": [{"cells": 12}, {"cells": 6, "state_zero_point": -4}],
    "coupled input and forget gates": [{"cifg": True}, {"cifg": True, "cells": 3, "cell_clip": 0.0}],
    "time major": [{"time_major": True, "cells": 5}],
    "cell scales at both ends": [{"cell_exponent": -15, "cell_clip": 0.3}, {"cell_exponent": -9}],
    "hidden zero point not the state's": [{"state_zero_point": 7, "hidden_zero_point": -2}],
}


@pytest.mark.cross
@pytest.mark.parametrize("k, name", [(k, name) if name in ("converter's", "coupled input and forget gates",
                                                              "cell scales at both ends")
                                     else pytest.param(k, name, marks=pytest.mark.exhaustive)
                                     for k, name in enumerate(_LSTM_CASES)])
def test_lstm_stacks_equal_litert_sample_after_sample(k, name, cmsis_nn, tmp_path):
    """Six samples in one run: the states after sample k (the int8 one starting at its zero point, as
    LiteRT resets it) are what sample k+1 reads."""
    model = lstm_model(tmp_path / "lstm.tflite", k, _LSTM_CASES[name], shape=(2, 5, 10) if k == 2 else (1, 6, 10))
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


def test_a_2d_lstm_input_is_refused(tmp_path):
    """LiteRT's prepare reads a third input dimension whatever the rank: no oracle for a 2-D input."""
    _assert_refused(lstm_model(tmp_path / "lstm.tflite", 9, [{"cells": 7}], shape=(3, 11)), "must be 3-D", tmp_path)


@pytest.mark.qemu
@pytest.mark.cross
def test_lstm_stack_on_the_m55_equals_litert(cmsis_nn, tmp_path):
    model = lstm_model(tmp_path / "lstm.tflite", 0, _LSTM_CASES["converter's"])
    check_against_litert(model, "mps3-an547", cmsis_nn("v6.0.0"), tmp_path / "m55", samples=3)


def _lstm_with(tmp_path: Path, change) -> Path:
    """A one-LSTM model with `change(subgraph, operator)` applied to its file."""
    model = read_model(lstm_model(tmp_path / "lstm.tflite", 0, [{}]).read_bytes())
    subgraph = model.subgraphs[0]
    change(subgraph, subgraph.operators[0])
    path = tmp_path / "changed.tflite"
    path.write_bytes(pack_model(model))
    return path


def _set_input(position: int, tensor_name: str):
    def change(subgraph, operator):
        names = [(t.name.decode() if isinstance(t.name, bytes) else t.name) for t in subgraph.tensors]
        operator.inputs[position] = names.index(tensor_name)
    return change


def _scale_of(tensor_name: str, scale: float):
    def change(subgraph, operator):
        for t in subgraph.tensors:
            if (t.name.decode() if isinstance(t.name, bytes) else t.name) == tensor_name:
                t.quantization.scale = np.array([scale], np.float32)
    return change


@pytest.mark.parametrize("change, said", [
    (_set_input(17, "lstm0/bias_forget"), "a projection bias without projection weights"),
    (lambda subgraph, operator: setattr(operator, "intermediates", operator.intermediates[:4]),
     "4 intermediate tensors"),
    (_scale_of("lstm0/c", 3e-4), "is not a power of two"),
    (_scale_of("lstm0/c", 2.0 ** -7), "2^-7"),
    (lambda subgraph, operator: setattr(operator.builtinOptions, "fusedActivationFunction", 1), "RELU"),
])
def test_lstm_outside_litert_integer_kernel_is_refused(change, said, tmp_path):
    _assert_refused(_lstm_with(tmp_path, change), said, tmp_path)


@pytest.mark.parametrize("scale", [1e-40, 3e38, 0.0, 1.0, 1e12])
@pytest.mark.parametrize("tensor", ["lstm0/in_forget", "lstm0/state_cell", "lstm0/h", "lstm0/hidden", "in"])
def test_lstm_extreme_scales_are_imported_or_refused_in_one_line(tensor, scale, tmp_path):
    run = cli("import", str(_lstm_with(tmp_path, _scale_of(tensor, scale))), "-o", str(tmp_path / "m.tar"))
    assert run.returncode in (0, 3), run.stderr
    assert run.returncode == 0 or run.stderr.count("\n") == 1, run.stderr
