"""The test-side .tflite writer (tests/tflitewriter.py) and oracle (tests/litert_oracle.py): every
factory's model loads and runs under LiteRT's reference kernels with the declared outputs, keeps the
converter's quantization rules, and reads back through mlfbuild's own .tflite reader; the oracle
really runs the reference kernels. Many seeds per factory under LiteRT: `-m exhaustive`."""

from __future__ import annotations

import numpy as np
import pytest

import tflite_damage as td
import tflitewriter as tw
from litert_oracle import run_reference, run_seeded, seeded_inputs
from mlfbuild.errors import InvalidInputError
from mlfbuild.reference import litert
from mlfbuild.reference.tflite import parse_tflite, read_tflite

SAMPLES = 3


def _written(tmp_path, graph: tw.GraphBuilder, name: str = "model"):
    return graph.write(tmp_path / f"{name}.tflite")


def _check_outputs(graph: tw.GraphBuilder, outputs: list[np.ndarray]) -> None:
    assert len(outputs) == len(graph.outputs)
    for declared, values in zip(graph.outputs, outputs):
        assert values.shape == (SAMPLES, *declared.shape) and values.dtype == np.dtype(declared.dtype)


def _cases(op: str, seeds) -> list:
    return [pytest.param(op, seed, id=f"{op}-{seed}") for seed in seeds]


# --- under LiteRT's reference kernels -----------------------------------------------------------------

@pytest.mark.parametrize("op", sorted(tw.FACTORIES))
def test_factory_model_runs_with_declared_outputs(tmp_path, op):
    graph = tw.FACTORIES[op](np.random.default_rng(sorted(tw.FACTORIES).index(op)))
    _, outputs = run_seeded(_written(tmp_path, graph), seed=1, samples=SAMPLES)
    _check_outputs(graph, outputs)
    # the output follows the input: different samples give different outputs
    assert any(not np.array_equal(out[0], out[i]) for out in outputs for i in range(1, SAMPLES))


@pytest.mark.parametrize("ops", [tw.KWS_CHAIN, tw.RESIDUAL_CHAIN], ids=["kws", "residual"])
def test_chain_model_runs_with_declared_outputs(tmp_path, ops):
    graph = tw.chain_model(np.random.default_rng(3), ops)
    _, outputs = run_seeded(_written(tmp_path, graph), seed=2, samples=SAMPLES)
    _check_outputs(graph, outputs)


@pytest.mark.exhaustive
@pytest.mark.parametrize("op,seed", [case for op in sorted(tw.FACTORIES) for case in _cases(op, range(40))])
def test_factory_models_run_for_many_seeds(tmp_path, op, seed):
    graph = tw.FACTORIES[op](np.random.default_rng(seed))
    _, outputs = run_seeded(_written(tmp_path, graph), seed=seed, samples=SAMPLES)
    _check_outputs(graph, outputs)


@pytest.mark.exhaustive
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("ops", [tw.KWS_CHAIN, tw.RESIDUAL_CHAIN], ids=["kws", "residual"])
def test_chain_models_run_for_many_seeds(tmp_path, ops, seed):
    graph = tw.chain_model(np.random.default_rng(seed), ops)
    _, outputs = run_seeded(_written(tmp_path, graph), seed=seed, samples=SAMPLES)
    _check_outputs(graph, outputs)


def test_data_movement_is_what_the_writer_declared(tmp_path):
    """Operators whose result numpy states exactly: the written options and constants are the ones
    meant (a wrong perm, padding or axis would show here)."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, size=(2, 3, 4, 5)).astype(np.int8)
    cases = {
        "transpose": (tw.transpose_model(rng, input_shape=(2, 3, 4, 5), perm=(2, 0, 3, 1)),
                      lambda a: a.transpose(2, 0, 3, 1)),
        "reshape": (tw.reshape_model(rng, input_shape=(2, 3, 4, 5), new_shape=(6, 20)), lambda a: a.reshape(6, 20)),
        "squeeze": (tw.squeeze_model(rng, input_shape=(2, 1, 4, 1), squeeze_dims=[3]), lambda a: a[..., 0]),
        "pad": (tw.pad_model(rng, input_shape=(2, 3, 4, 5), input_zero_point=-7,
                             paddings=[[0, 0], [1, 2], [0, 1], [2, 0]]),
                lambda a: np.pad(a, [(0, 0), (1, 2), (0, 1), (2, 0)], constant_values=-7)),
        "max_pool": (tw.max_pool2d_model(rng, input_shape=(2, 3, 4, 5), padding="VALID", kernel_h=3, kernel_w=2,
                                         stride_h=1, stride_w=2, activation="NONE"),
                     lambda a: a.reshape(2, 3, 2, 2, 5).max(axis=(1, 3))[:, None]),
    }
    for name, (graph, expected) in cases.items():
        sample = x if name != "squeeze" else x[:, :1, :, :1]
        (out,) = run_reference(_written(tmp_path, graph, name), {"input": sample[None]})
        np.testing.assert_array_equal(out[0], expected(sample), err_msg=name)


def test_concatenation_joins_its_inputs_in_order(tmp_path):
    graph = tw.concatenation_model(np.random.default_rng(0), input_shape=(2, 3), axis=1, operands=3)
    path = _written(tmp_path, graph)
    inputs = seeded_inputs(path, seed=4, samples=1)
    (out,) = run_reference(path, inputs)
    np.testing.assert_array_equal(out[0], np.concatenate([inputs[t.name][0] for t in graph.inputs], axis=1))


def test_the_oracle_runs_the_reference_kernels(tmp_path):
    """For an int8 MEAN LiteRT's optimized kernels round differently from its reference kernels (seen
    on LiteRT 2.3.0): the oracle gives the reference's answer, computed here in this process."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    path = _written(tmp_path, tw.mean_model(np.random.default_rng(0)))
    inputs = seeded_inputs(path, seed=0, samples=1)
    reference = run_reference(path, inputs)[0][0]
    optimized = litert.run_model(path, inputs, kernels="optimized")[0][0]
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]][0])
    interpreter.invoke()
    np.testing.assert_array_equal(reference, interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))
    assert not np.array_equal(reference, optimized)
    with pytest.raises(ValueError, match="kernels"):
        litert.run_model(path, inputs, kernels="fast")


def test_seeded_inputs_repeat_and_cover_their_range(tmp_path):
    path = _written(tmp_path, tw.relu_model(np.random.default_rng(0), input_shape=(64, 16)))
    first, again = seeded_inputs(path, seed=9, samples=2), seeded_inputs(path, seed=9, samples=2)
    np.testing.assert_array_equal(first["input"], again["input"])
    assert first["input"].dtype == np.int8 and first["input"].min() == -128 and first["input"].max() == 127
    assert not np.array_equal(first["input"], seeded_inputs(path, seed=10, samples=2)["input"])


# --- what is written, without LiteRT ------------------------------------------------------------------

@pytest.mark.parametrize("op,seed", [case for op in sorted(tw.FACTORIES) for case in _cases(op, range(4))])
def test_mlfbuild_reader_reads_the_declared_inputs_and_outputs(tmp_path, op, seed):
    graph = tw.FACTORIES[op](np.random.default_rng(seed))
    model = read_tflite(_written(tmp_path, graph))
    for read, declared in [*zip(model.inputs, graph.inputs), *zip(model.outputs, graph.outputs)]:
        assert (read.name, read.dtype, read.shape) == (declared.name, declared.dtype, declared.shape)
        if declared.quantization is None:
            assert read.scale is None
        else:
            assert read.scale == pytest.approx(declared.scale, rel=1e-7)
            assert read.zero_point == declared.zero_point
    assert len(model.inputs) == len(graph.inputs) and len(model.outputs) == len(graph.outputs)


def _quantization(tensor) -> tuple[np.ndarray, np.ndarray, int]:
    q = tensor.quantization
    return np.asarray(q.scale, np.float64), np.asarray(q.zeroPoint), q.quantizedDimension


# The output keeps its (first) input's scale and zero point.
_SAME_QUANTIZATION = {"AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE", "SQUEEZE", "PAD", "TRANSPOSE", "CONCATENATION"}


@pytest.mark.parametrize("op,seed", [case for op in sorted(tw.FACTORIES) for case in _cases(op, range(6))])
def test_factories_keep_the_converters_quantization_rules(op, seed):
    """Read back with the schema's own reader: the rules the module docstring promises."""
    model = tw.read_model(tw.FACTORIES[op](np.random.default_rng(seed)).to_bytes())
    graph, (operator,) = model.subgraphs[0], model.subgraphs[0].operators
    code = model.operatorCodes[operator.opcodeIndex]
    assert code.builtinCode == tw.builtin_code(op) and code.version == (
        2 if op == "QUANTIZE" and graph.tensors[operator.inputs[0]].type == tw.DTYPES["int8"] else tw.INT8_VERSIONS[op])
    tensors = [graph.tensors[i] if i >= 0 else None for i in operator.inputs]
    output = graph.tensors[operator.outputs[0]]
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        source, weights, bias = tensors
        in_scale = _quantization(source)[0][0]
        scales, zeros, dimension = _quantization(weights)
        channel_dim = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}[op]
        channels = weights.shape[channel_dim]
        assert len(scales) == (1 if op == "FULLY_CONNECTED" else channels) and not zeros.any()
        assert dimension == channel_dim and weights.type == tw.DTYPES["int8"]
        if bias is not None:
            bias_scales, bias_zeros, _ = _quantization(bias)
            assert bias.type == tw.DTYPES["int32"] and not bias_zeros.any() and list(bias.shape) == [channels]
            np.testing.assert_allclose(bias_scales, in_scale * scales, rtol=1e-6)
        if op == "DEPTHWISE_CONV_2D":
            assert channels == source.shape[3] * operator.builtinOptions.depthMultiplier
        if op == "FULLY_CONNECTED":
            assert operator.builtinOptions.keepNumDims is False
    if op in ("SOFTMAX", "LOGISTIC"):
        assert _quantization(output)[0].tolist() == [1 / 256] and _quantization(output)[1].tolist() == [-128]
    if op in _SAME_QUANTIZATION:
        assert all(_quantization(t)[0].tolist() == _quantization(output)[0].tolist()
                   and _quantization(t)[1].tolist() == _quantization(output)[1].tolist()
                   for t in tensors if t is not None and t.buffer == 0)
    assert graph.tensors[0].buffer == 0 and model.buffers[0].data is None  # buffer 0: the empty sentinel


def test_overrides_reach_the_written_options():
    graph = tw.conv2d_model(np.random.default_rng(0), input_shape=(1, 9, 7, 2), out_channels=5, padding="VALID",
                            kernel_h=3, kernel_w=2, stride_h=2, stride_w=1, dilation_h=2, dilation_w=3,
                            activation="RELU6")
    (operator,) = tw.read_model(graph.to_bytes()).subgraphs[0].operators
    options = operator.builtinOptions
    assert (options.padding, options.strideH, options.strideW, options.dilationHFactor, options.dilationWFactor,
            options.fusedActivationFunction) == (tw.padding_code("VALID"), 2, 1, 2, 3, tw.activation_code("RELU6"))
    # VALID: (9 - (3-1)*2 - 1) // 2 + 1 = 3 rows, (7 - (2-1)*3 - 1) // 1 + 1 = 4 columns
    assert graph.outputs[0].shape == (1, 3, 4, 5)
    with pytest.raises(TypeError, match="kernel_size"):
        tw.conv2d_model(np.random.default_rng(0), kernel_size=3)


def test_same_seed_same_bytes():
    for factory in tw.FACTORIES.values():
        assert factory(np.random.default_rng(11)).to_bytes() == factory(np.random.default_rng(11)).to_bytes()
    assert tw.chain_model(np.random.default_rng(1)).to_bytes() != tw.chain_model(np.random.default_rng(2)).to_bytes()


def test_operator_codes_past_126_use_the_placeholder():
    """builtin codes above 126 do not fit the deprecated int8 field (schema.fbs): it says 127."""
    graph = tw.GraphBuilder()
    x = graph.add_input("input", "float32", (4,))
    y = graph.add_tensor("output", "float32", (4,))
    graph.add_operator("GELU", [x], [y])
    graph.mark_output(y)
    (code,) = tw.read_model(graph.to_bytes()).operatorCodes
    assert code.builtinCode == tw.builtin_code("GELU") > 127 and code.deprecatedBuiltinCode == 127
    assert parse_tflite(graph.to_bytes(), "gelu.tflite").inputs[0].shape == (4,)


# --- damaged and hostile models (tests/tflite_damage.py) --------------------------------------------------

_DAMAGE_MODELS = {"conv2d": lambda: tw.conv2d_model(np.random.default_rng(0)),
                  "kws_chain": lambda: tw.chain_model(np.random.default_rng(1)),
                  "quantize": lambda: tw.quantize_model(np.random.default_rng(2))}


@pytest.mark.parametrize("model", sorted(_DAMAGE_MODELS))
def test_damage_finds_the_places_it_damages(model):
    graph = _DAMAGE_MODELS[model]()
    data = graph.to_bytes()
    at = td.locate(data)
    word = lambda offset: int.from_bytes(data[offset:offset + 4], "little")  # noqa: E731
    assert (word(at.subgraphs_length), word(at.tensors_length), word(at.inputs_length), word(at.outputs_length),
            word(at.operators_length), word(at.name_length)) == (
        1, len(graph.tensors), len(graph.inputs), len(graph.outputs), len(graph.operators), len(graph.tensors[0].name))
    assert word(at.inputs_length + 4) == graph.input_indices[0]
    assert data[at.name_length + 4:at.name_length + 4 + word(at.name_length)] == graph.tensors[0].name.encode()
    variants = td.all_variants(data)
    assert all(damaged != data for damaged in variants.values())
    assert td.REACHES_IO_READER <= set(variants)


@pytest.mark.deadline(60)
@pytest.mark.parametrize("model", sorted(_DAMAGE_MODELS))
def test_io_reader_refuses_damaged_models_in_one_line(tmp_path, model):
    data = _DAMAGE_MODELS[model]().to_bytes()
    variants = td.all_variants(data)
    for name, damaged in variants.items():
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(damaged)
        try:
            read = read_tflite(path)
        except InvalidInputError as exc:
            assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc), name
        else:
            assert name not in td.REACHES_IO_READER, f"{name} was read: {read}"


@pytest.mark.deadline(60)
def test_io_reader_survives_random_damage():
    data = tw.chain_model(np.random.default_rng(4), tw.RESIDUAL_CHAIN).to_bytes()
    variants, rng = td.all_variants(data), np.random.default_rng(0)
    for _ in range(300):
        what, damaged = td.random_damage(variants, rng)
        try:
            parse_tflite(damaged, "fuzz.tflite")
        except InvalidInputError as exc:
            assert str(exc).startswith("fuzz.tflite: ") and "\n" not in str(exc), what
