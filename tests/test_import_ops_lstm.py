"""UNIDIRECTIONAL_SEQUENCE_LSTM's variants (lowering/recurrent.py): peepholes, layer normalisation and
a projection, with and without CIFG, batch- and time-major, in models written here with the
writer's LSTM (tflitecases/recurrent.py), compared bit for bit with LiteRT's reference kernels over
samples run one after another (the states carried from one to the next); what stays refused, in one
line; and TFLM's own LSTM examples and the converter's fused LSTM on the Cortex-M4F (exhaustive)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflitecases  # noqa: F401 - registers the cases
from test_converter_models import CORPUS
from test_import_operators import _assert_refused, check_against_litert
from tflitecases.recurrent import lstm_layer
from tflitewriter import GraphBuilder, bundle_model, pack_model, read_model

VARIANTS = "UNIDIRECTIONAL_SEQUENCE_LSTM/variants"


def lstm_variants_model(path: Path, seed: int, layers: list[tuple[tuple[int, ...], dict]]) -> Path:
    """One LSTM per entry (input shape, lstm_layer options), side by side, each its own input and output."""
    rng = np.random.default_rng(seed)
    graph = GraphBuilder()
    for k, (shape, options) in enumerate(layers):
        x = graph.add_input(f"in{k}", "int8", shape, scale=0.04, zero_point=-9)
        graph.mark_output(lstm_layer(graph, rng, x, f"lstm{k}", **options))
    return graph.write(path)


# The cases TFLite's integer LSTM allows: layer normalisation over a power-of-two count of cells and
# another (LiteRT divides 2^20 by the count), a projection to fewer and to more outputs than cells,
# with and without its bias and clip, peepholes (with a projection to the cells' count), CIFG with
# each, time-major, hidden zero points the projection folds back. Three LSTMs hold every feature
# (the build's proof of the pool follows some 10^6 expressions per LSTM: a few keep CI fast); the
# others run under exhaustive.
_LAYERS = [
    ((2, 3, 5), {"cells": 5, "layer_norm": True, "peephole": True, "cifg": True, "cell_clip": 0.4}),
    ((3, 2, 4), {"cells": 8, "projection": 3, "projection_bias": False, "time_major": True, "hidden_zero_point": 6,
                 "proj_clip": 0.3, "state_zero_point": -5}),
    ((2, 3, 6), {"cells": 8, "peephole": True, "projection": 8, "layer_norm": True, "hidden_zero_point": -3}),
]
_MORE_LAYERS = [
    ((1, 4, 6), {"cells": 8, "layer_norm": True}),
    ((1, 4, 6), {"cells": 4, "projection": 7, "hidden_zero_point": 2}),
    ((1, 5, 3), {"cells": 6, "peephole": True, "cell_exponent": -14}),
    ((1, 3, 7), {"cells": 4, "peephole": True, "cifg": True, "layer_norm": True, "cell_exponent": -10}),
]


@pytest.mark.cross
def test_lstm_variants_equal_litert_sample_after_sample(cmsis_nn, tmp_path):
    """Five samples in one run: layer norm, projection and peepholes, each state carried on."""
    model = lstm_variants_model(tmp_path / "lstm.tflite", 1, _LAYERS)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=5)


@pytest.mark.exhaustive
@pytest.mark.cross
def test_more_lstm_variants_equal_litert(cmsis_nn, tmp_path):
    model = lstm_variants_model(tmp_path / "lstm.tflite", 2, _MORE_LAYERS)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=5)


def _refused(tmp_path: Path, layer: dict, said: str, shape=(1, 3, 4), dtype: str = "int8") -> None:
    rng = np.random.default_rng(2)
    graph = GraphBuilder()
    x = graph.add_input("in", dtype, shape, scale=0.04, zero_point=0)
    graph.mark_output(lstm_layer(graph, rng, x, "lstm", **layer))
    _assert_refused(graph.write(tmp_path / "lstm.tflite"), said, tmp_path)


def test_peepholes_with_a_projection_to_another_size_are_refused(tmp_path):
    """LiteRT's integer kernel walks the cell state by the output size there: not TFLite's LSTM."""
    _refused(tmp_path, {"cells": 6, "peephole": True, "projection": 4}, "peepholes with a projection")


def _changed(tmp_path: Path, layer: dict, change) -> Path:
    """A one-LSTM model with `change(subgraph, operator)` applied to its file."""
    rng = np.random.default_rng(3)
    graph = GraphBuilder()
    x = graph.add_input("in", "int8", (1, 3, 4), scale=0.04, zero_point=0)
    graph.mark_output(lstm_layer(graph, rng, x, "lstm", **layer))
    model = read_model(graph.write(tmp_path / "lstm.tflite").read_bytes())
    change(model.subgraphs[0], model.subgraphs[0].operators[0])
    changed = tmp_path / "changed.tflite"
    changed.write_bytes(pack_model(model))
    return changed


def _scale_of(tensor: str, scale: float):
    def change(subgraph, operator):
        for t in subgraph.tensors:
            if (t.name.decode() if isinstance(t.name, bytes) else t.name) == tensor:
                t.quantization.scale = np.array([scale], np.float32)
    return change


def _without_input(position: int):
    def change(subgraph, operator):
        operator.inputs[position] = -1
    return change


@pytest.mark.parametrize("layer, change, said", [
    ({"layer_norm": True}, _scale_of("lstm/norm_forget", 1e6), "layer-norm scale 1e+06"),
    ({"layer_norm": True}, _scale_of("lstm/norm_cell", 2.2e5), "overflows int32"),
    ({"layer_norm": True}, _scale_of("lstm/intermediate_2", 0.0), "intermediate 2"),
    ({"peephole": True}, _without_input(9), "peephole weights for some gates only"),
    ({}, _without_input(1), "an input gate with recurrent weights or a bias but no input weights"),
])
def test_lstm_parameters_outside_litert_are_refused(layer, change, said, tmp_path):
    """Scales whose arithmetic overflows LiteRT's int32, and operands LiteRT's prepare rejects."""
    _assert_refused(_changed(tmp_path, dict({"cells": 4}, **layer), change), said, tmp_path)


def test_a_16_bit_lstm_is_refused(tmp_path):
    """TFLM runs a 16x8 LSTM, LiteRT has no 16-bit integer LSTM to hold it to."""
    _refused(tmp_path, {"cells": 4}, "16-bit activations", dtype="int16")


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(2, 8))
def test_drawn_lstm_variants_equal_litert(seed, cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(seed), [VARIANTS] * 3).write(tmp_path / "lstm.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=4)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_lstm_variants_on_cortex_m_equal_litert(board, cmsis_nn, tmp_path):
    model = lstm_variants_model(tmp_path / "lstm.tflite", 1, _LAYERS)
    check_against_litert(model, board, cmsis_nn("v6.0.0"), tmp_path / board, samples=3)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("name, samples", [("trained_lstm_int8.tflite", 3), ("micro_speech_lstm.tflite", 2)])
def test_tflm_lstm_examples_on_the_m4f_equal_litert(name, samples, tflm_models_dir, cmsis_nn, tmp_path):
    """TFLM's LSTM examples (the host and the M55 are in test_tflm_models)."""
    check_against_litert(tflm_models_dir / name, "mps2-an386", cmsis_nn("v6.0.0"), tmp_path / "m4f", samples=samples)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
def test_converter_fused_lstm_on_the_m4f_equals_litert(cmsis_nn, tmp_path):
    check_against_litert(CORPUS / "lstm_fused.tflite", "mps2-an386", cmsis_nn("v6.0.0"), tmp_path / "m4f", samples=4)
