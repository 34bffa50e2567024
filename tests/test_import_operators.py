"""Every operator `mlfbuild import` compiles, over its parameter space, against LiteRT's reference
kernels: bit for bit, on the host and on the Cortex-M cores (M3 generic C, M4F DSP, M55 MVE).

Many random one-operator cases go side by side into one model (tflitewriter.bundle_model), so one
import, one build and one run check them all. CI runs one seed on the host and on the M55; the
exhaustive run draws more seeds on every core with both CMSIS-NN versions. A seed that ever failed
stays in REGRESSION_SEEDS.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases of every operator family with tflitewriter
from conftest import cli
from litert_oracle import run_seeded
from mlfbuild.errors import InvalidInputError
from mlfbuild.importer import import_tflite
from mlfbuild.importer.lowering import SUPPORTED_OPERATORS, UnsupportedModelError
from tflitewriter import CASE_SHAPES, KWS_CHAIN, GraphBuilder, add_model, bundle_model, chain_model, pack_model
from tflite_damage import all_variants, random_damage

# Every case kind ("OPERATOR" or "OPERATOR/kind") of a supported operator.
_IMPORTABLE = sorted(name for name in CASE_SHAPES if name.split("/")[0] in SUPPORTED_OPERATORS)
REGRESSION_SEEDS: list[int] = []
# Supported operators the cases reach another way: ROUND and CEIL (LiteRT's reference resolver has
# neither: test_import_ops_indexing holds them to its builtin kernels), ELU likewise
# (test_import_ops_unary's test_int8_elu_equals_litert_s_table).
_COVERED_ELSEWHERE = {"ROUND", "CEIL", "ELU"}


def test_every_supported_operator_has_random_cases():
    cased = {name.split("/")[0] for name in CASE_SHAPES}
    assert set(SUPPORTED_OPERATORS) - _COVERED_ELSEWHERE <= cased


def operator_cases(per_operator: int) -> list:
    return [(op, {}) for op in _IMPORTABLE for _ in range(per_operator)]


def check_against_litert(model: Path, board: str, tree: Path, out: Path, samples: int = 4, seed: int = 5) -> dict:
    """Build `model` for `board`, run it on seeded inputs, compare with LiteRT's reference kernels exactly."""
    inputs, outputs = run_seeded(model, seed=seed, samples=samples)
    reference = out.with_suffix(".npz")
    np.savez(reference, **inputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
    run = cli("run", str(model), "-b", board, "--cmsis-nn", str(tree), "-o", str(out), "--reference", str(reference),
              "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    compared = [o for m in result["models"] for o in m["outputs"]]
    assert result["status"] == "pass" and len(compared) == len(outputs)
    assert all(o["max_abs_error"] == 0 for o in compared)
    return result


def check_bundles(rng: np.random.Generator, cases: list, board: str, tree: Path, out: Path, samples: int = 4,
                  seed: int = 5, max_inputs: int = 200, max_cases: int | None = None) -> None:
    """`cases` in as few bundles as the console firmware serves (at most 256 inputs or outputs per
    model; fewer cases per bundle with `max_cases`), each built, run and compared with LiteRT."""
    start, part = 0, 0
    while start < len(cases):
        end = start + 1
        while end < len(cases) and (max_cases is None or end - start < max_cases):
            trial = bundle_model(np.random.default_rng(0), cases[start:end + 1])
            if max(len(trial.input_indices), len(trial.output_indices)) > max_inputs:
                break
            end += 1
        model = bundle_model(rng, cases[start:end]).write(out.parent / f"{out.name}-ops{part}.tflite")
        check_against_litert(model, board, tree, out.parent / f"{out.name}{part}", samples=samples, seed=seed)
        start, part = end, part + 1


@pytest.mark.cross
def test_every_operator_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """One case of every kind (more seeds under exhaustive), and two depthwise layers of one input channel."""
    cases = operator_cases(1) + [("DEPTHWISE_CONV_2D", {"channels": 1}) for _ in range(2)]
    check_bundles(np.random.default_rng(0), cases, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


def _core_dependent(kind: str, folder: Path) -> bool:
    """Whether a case of `kind`, as drawn by seed 0, is lowered to a CMSIS-NN call (its code differs per
    core) or computes in floating point at run time (the M55's FPU, not the host's)."""
    model = bundle_model(np.random.default_rng(0), [kind]).write(folder / f"{kind.replace('/', '_')}.tflite")
    steps = import_tflite(model, model.with_suffix(".tar")).steps
    return any(step.function.startswith("arm_") or any("float" in line or "double" in line for line in step.body)
               for step in steps)


@pytest.mark.qemu
@pytest.mark.cross
def test_every_core_dependent_operator_on_the_m55_equals_litert(cmsis_nn, tmp_path):
    """The M55 runs CMSIS-NN's MVE code and its own FPU, unlike the host: the kinds lowered to a CMSIS-NN
    call or to floating point run there in CI (our integer kernels are portable C, checked on the host;
    every kind runs on every core under exhaustive)."""
    kinds = [kind for kind in _IMPORTABLE if _core_dependent(kind, tmp_path)]
    assert "CONV_2D" in kinds and "FULLY_CONNECTED" in kinds and "ABS" not in kinds
    check_bundles(np.random.default_rng(1), [(kind, {}) for kind in kinds], "mps3-an547", cmsis_nn("v6.0.0"),
                  tmp_path / "m55", samples=2)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "microbit", "mps2-an385", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("version", ["v4.1.0", "v6.0.0"])
@pytest.mark.parametrize("seed", list(range(10, 16)) + REGRESSION_SEEDS)
def test_every_operator_over_many_seeds(board, version, seed, cmsis_nn, tmp_path):
    """The micro:bit's 16 KiB of RAM holds the cases a few at a time: smaller bundles there."""
    check_bundles(np.random.default_rng(seed), operator_cases(3), board, cmsis_nn(version), tmp_path / board,
                  seed=seed, max_cases=8 if board == "microbit" else None)


@pytest.mark.cross
def test_a_kws_like_chain_equals_litert(cmsis_nn, tmp_path):
    """Operators feeding each other through the planned pool, RESHAPE sharing its input's bytes."""
    model = chain_model(np.random.default_rng(3), KWS_CHAIN).write(tmp_path / "chain.tflite")
    result = import_tflite(model, tmp_path / "chain.tar")
    assert any(step.alias_of is not None for step in result.steps)
    assert result.pool_bytes == result.floor_bytes
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


RESIDUAL = ("QUANTIZE", ("CONV_2D", {"padding": "SAME", "stride_h": 1, "stride_w": 1}),
            ("ADD", {"broadcast": False, "constant_operand": False}), "RELU", "MAX_POOL_2D",
            ("MEAN", {"axes": [1, 2], "keep_dims": False}), "FULLY_CONNECTED", "DEQUANTIZE")


@pytest.mark.cross
def test_a_residual_chain_behind_a_float_interface_works_in_place_and_equals_litert(cmsis_nn, tmp_path):
    """ADD writes over the convolution's output and RELU over ADD's (TFLite's in-place element-wise
    operators): one buffer for the three, and the outputs still LiteRT's."""
    model = chain_model(np.random.default_rng(1), RESIDUAL).write(tmp_path / "residual.tflite")
    result = import_tflite(model, tmp_path / "residual.tar")
    storage = {s.output: result.layout.storage.get(s.output, s.output) for s in result.steps}
    add, relu = (next(s for s in result.steps if s.operator.name == name) for name in ("ADD", "RELU"))
    assert storage[add.output] == storage[relu.output] == result.layout.storage.get(add.operands[0].tensor,
                                                                                    add.operands[0].tensor)
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


def test_one_input_channel_depthwise_is_lowered_as_tflm_calls_it(tmp_path):
    """The depthwise call TFLM makes; the build makes it a convolution on MVE cores only
    (canalysis/cmsis_nn_prepare.py, tests/test_cmsis_nn_prepare.py)."""
    model = bundle_model(np.random.default_rng(2), [("DEPTHWISE_CONV_2D", {"channels": 1, "depth_multiplier": 5})])
    result = import_tflite(model.write(tmp_path / "dw.tflite"), tmp_path / "dw.tar")
    assert [s.function for s in result.steps] == ["arm_depthwise_conv_wrapper_s8"]


# --- refusals: one line naming the operator and its index, exit 3, nothing written ------------------

@pytest.mark.parametrize("factory, overrides, said", [
    (None, {"op": "HASHTABLE_LOOKUP"}, "operator 0 (HASHTABLE_LOOKUP) is not supported"),
    (None, {"dtype": "float32"}, "float32; only int8 activations"),
])
def test_unsupported_models_are_refused_naming_what(factory, overrides, said, tmp_path):
    graph = factory(np.random.default_rng(0), **overrides) if factory else _one_operator(**overrides)
    _assert_refused(graph.write(tmp_path / "m.tflite"), said, tmp_path)


def _assert_refused(model: Path, said: str, tmp_path: Path) -> None:
    """`import` exits 3 with one line saying `said`, and writes nothing."""
    out = tmp_path / "out"
    out.mkdir(parents=True)
    run = cli("import", str(model), "-o", str(out / "m.tar"))
    assert run.returncode == 3, run.stderr
    assert said in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert list(out.iterdir()) == []


def test_every_builtin_operator_code_is_named_as_tflite_names_it():
    from ai_edge_litert import schema_py_generated as schema
    from mlfbuild.importer.tflite import OPERATOR_NAMES

    codes = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    assert OPERATOR_NAMES == codes


def test_builtin_options_are_read_at_the_schema_s_field_ids():
    """Each option of tflite.OPTIONS is the schema's field of that name, at its vtable slot, under its
    union type (the generated accessors read field id k at vtable offset 4 + 2k)."""
    import inspect
    import re

    from ai_edge_litert import schema_py_generated as schema
    from mlfbuild.importer.tflite import OPTIONS

    renamed = {"activation": "FusedActivationFunction", "dilation_w": "DilationWFactor",
               "dilation_h": "DilationHFactor", "filter_w": "FilterWidth", "filter_h": "FilterHeight"}
    union = {value: name for name, value in vars(schema.BuiltinOptions).items() if not name.startswith("_")}
    for operator, (code, fields) in OPTIONS.items():
        table = getattr(schema, union[code])
        for name, field_id, _, _ in fields:
            wanted = renamed.get(name, name).replace("_", "").lower()
            accessor = next(a for a in vars(table) if a.lower() == wanted)
            source = inspect.getsource(getattr(table, accessor))
            assert re.search(rf"Offset\({4 + 2 * field_id}\)", source), (operator, name)


def test_an_operator_not_compiled_is_named_before_any_check_of_the_graph(tmp_path):
    """An LSTM-like operator reading state no operator writes, or a custom operator: the refusal names
    the operator (TFLite's name, or the custom name), not the graph's shape."""
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 8), scale=0.05, zero_point=0)
    state = graph.add_tensor("state", "int8", (1, 8), scale=0.05, zero_point=0)
    y = graph.add_tensor("y", "int8", (1, 8), scale=0.05, zero_point=0)
    graph.add_operator("SEGMENT_SUM", [x, state], [y])
    graph.mark_output(y)
    _assert_refused(graph.write(tmp_path / "unwritten.tflite"), "operator 0 (SEGMENT_SUM) is not supported",
                    tmp_path / "a")
    model = graph.to_model()
    model.operatorCodes[0].builtinCode = model.operatorCodes[0].deprecatedBuiltinCode = 32  # CUSTOM
    model.operatorCodes[0].customCode = "ethos-u"
    path = tmp_path / "custom.tflite"
    path.write_bytes(pack_model(model))
    _assert_refused(path, "operator 0 (CUSTOM 'ethos-u') is not supported", tmp_path / "b")


def _one_operator(op: str = "RELU", dtype: str = "int8") -> GraphBuilder:
    graph = GraphBuilder()
    quantization = {"scale": 0.05, "zero_point": 0} if dtype == "int8" else {}
    x = graph.add_input("x", dtype, (1, 8), **quantization)
    y = graph.add_tensor("y", dtype, (1, 8), **quantization)
    graph.add_operator(op, [x], [y])
    graph.mark_output(y)
    return graph


def test_a_second_subgraph_is_refused(tmp_path):
    graph = bundle_model(np.random.default_rng(0), ["RELU"])
    model = graph.to_model()
    model.subgraphs.append(model.subgraphs[0])
    path = tmp_path / "two.tflite"
    path.write_bytes(pack_model(model))
    with pytest.raises(UnsupportedModelError, match="2 subgraphs"):
        import_tflite(path, tmp_path / "two.tar")


# --- fuzzing the importer with damaged and hostile files --------------------------------------------

def _small_model(tmp_path: Path) -> bytes:
    return chain_model(np.random.default_rng(9), KWS_CHAIN).to_bytes()


def test_every_damaged_or_hostile_variant_is_refused_or_imported(tmp_path):
    """Each variant of tflite_damage either imports into a readable MLF or is one InvalidInputError."""
    data = _small_model(tmp_path)
    for index, (description, variant) in enumerate(all_variants(data).items()):
        path = tmp_path / f"v{index}.tflite"
        path.write_bytes(variant)
        try:
            import_tflite(path, tmp_path / f"v{index}.tar")
        except InvalidInputError as exc:
            assert "\n" not in str(exc), description
        except Exception as exc:  # noqa: BLE001 - the test is that nothing else escapes
            pytest.fail(f"{description}: {type(exc).__name__}: {exc}")


@pytest.mark.deadline(120)
def test_random_damage_never_escapes_as_anything_but_invalid_input(tmp_path):
    data = _small_model(tmp_path)
    variants = all_variants(data)
    rng = np.random.default_rng(2026)
    for index in range(150):
        description, variant = random_damage(variants, rng)
        path = tmp_path / "r.tflite"
        path.write_bytes(variant)
        try:
            import_tflite(path, tmp_path / "r.tar")
        except InvalidInputError:
            pass
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"case {index} ({description}): {type(exc).__name__}: {exc}")


def test_import_json_names_its_schema_and_reports_a_refusal_as_json(tmp_path):
    graph = _one_operator(op="HASHTABLE_LOOKUP")
    model = graph.write(tmp_path / "m.tflite")
    run = cli("import", str(model), "-o", str(tmp_path / "m.tar"), "--json")
    document = json.loads(run.stdout)
    assert run.returncode == 3 and run.stderr.count("\n") == 1
    assert document["schema"] == "mlfbuild-import/1" and document["status"] == "refused"
    assert document["operator"] == {"index": 0, "name": "HASHTABLE_LOOKUP"} and document["exit_code"] == 3
    ok = cli("import", str(bundle_model(np.random.default_rng(0), ["RELU"]).write(tmp_path / "r.tflite")),
             "-o", str(tmp_path / "r.tar"), "--json")
    document = json.loads(ok.stdout)
    assert ok.returncode == 0 and document["schema"] == "mlfbuild-import/1" and document["status"] == "imported"
    assert [o["operator"] for o in document["operators"]] == ["RELU"]


@pytest.mark.cross
def test_a_reshape_of_an_in_place_output_reads_the_bytes_written(cmsis_nn, tmp_path):
    """RELU writes over the convolution's output (in place); RESHAPE views RELU's output and the fully
    connected layer reads the view: the view must follow RELU's bytes, not get a buffer nothing writes."""
    chain = (("CONV_2D", {"padding": "SAME", "stride_h": 1, "stride_w": 1}), "RELU", "RESHAPE", "FULLY_CONNECTED")
    model = chain_model(np.random.default_rng(11), chain).write(tmp_path / "relu_reshape.tflite")
    result = import_tflite(model, tmp_path / "relu_reshape.tar")
    conv, relu, reshape = result.steps[:3]
    storage = result.layout.storage
    assert storage[reshape.output] == storage[relu.output] == storage[conv.output]
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host")


@pytest.mark.deadline(60)  # the test's writer takes most of it under a loaded suite
def test_a_chain_of_16000_element_wise_operators_imports_in_seconds(tmp_path):
    """The in-place planning is one pass: 16,000 RELUs (under the 16,384-operator limit) share one buffer
    (a plan that recomputed every lifetime per call took minutes: the deadline fails it)."""
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 8), scale=0.05, zero_point=0)
    for index in range(16_000):
        y = graph.add_tensor(f"t{index}", "int8", (1, 8), scale=0.05, zero_point=0)
        graph.add_operator("RELU", [x], [y])
        x = y
    graph.mark_output(x)
    model = graph.write(tmp_path / "relus.tflite")
    result = import_tflite(model, tmp_path / "relus.tar")
    assert len(result.steps) == 16_000 and result.pool_bytes <= 16


def test_the_coverage_lists_are_consistent():
    """Every TFLM operator is a schema name; nothing is both compiled and listed as refused."""
    from mlfbuild.importer.coverage import REFUSED, TFLM_OPERATORS
    from mlfbuild.importer.tflite import OPERATOR_NAMES

    assert set(TFLM_OPERATORS) <= set(OPERATOR_NAMES.values())
    assert set(REFUSED) <= set(TFLM_OPERATORS) and not set(REFUSED) & set(SUPPORTED_OPERATORS)


def test_extreme_quantization_on_any_operator_is_imported_or_refused_in_one_line(tmp_path):
    """Every registered case with the scales of its tensors pushed to extremes (tiny, huge, zero) and
    per-channel scale lists cut short: an MLF or one InvalidInputError, never another exception."""
    rng = np.random.default_rng(41)
    extremes = (1e-40, 1e-30, 3e38, 0.0, 1.0)
    for name in _IMPORTABLE:
        model = bundle_model(rng, [name]).to_model()
        for tensor in model.subgraphs[0].tensors:
            q = tensor.quantization
            if q is None or q.scale is None or rng.random() < 0.3:
                continue
            q.scale = (np.full(len(q.scale), extremes[int(rng.integers(len(extremes)))], np.float32)
                       if rng.random() < 0.7 else np.asarray(q.scale[:1], np.float32))
            if q.zeroPoint is not None:
                q.zeroPoint = np.asarray(q.zeroPoint[:len(q.scale)], np.int64)
        path = tmp_path / f"{name.replace('/', '_')}.tflite"
        path.write_bytes(pack_model(model))
        try:
            import_tflite(path, tmp_path / "m.tar")
        except InvalidInputError as exc:
            assert "\n" not in str(exc), name
        except Exception as exc:  # noqa: BLE001 - the test is that nothing else escapes
            pytest.fail(f"{name}: {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("scales, dimension, said", [
    ((0.01, 0.02), 0, "tensor 1 'w' has 2 scales for the 4 channels of its dimension 0"),
    ((0.01, 0.02, 0.03), 3, "tensor 1 'w' has 3 scales for the 2 channels of its dimension 3")])
def test_per_channel_scales_that_do_not_match_the_channels_are_refused_naming_the_tensor(
        tmp_path, scales, dimension, said):
    """A filter of 4 output channels with 2 scales (or 3 scales along a dimension of 2): LiteRT refuses
    to load it; the import was refused only by the IndexError it raised, or took the scales it found."""
    from ai_edge_litert import schema_py_generated as schema

    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 4, 4, 2), scale=0.05, zero_point=0)
    w = graph.add_constant("w", np.ones((4, 1, 1, 2), np.int8), scale=scales, zero_point=[0] * len(scales),
                           quantized_dimension=dimension)
    y = graph.add_tensor("y", "int8", (1, 4, 4, 4), scale=0.1, zero_point=0)
    graph.add_operator("CONV_2D", [x, w, -1], [y], schema.Conv2DOptionsT(strideH=1, strideW=1))
    graph.mark_output(y)
    done = cli("import", str(graph.write(tmp_path / "m.tflite")), "-o", str(tmp_path / "m.tar"))
    assert done.returncode == 3 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "m.tar").exists()


@pytest.mark.parametrize("op, input_scale, output_scale, said", [
    ("CONV_2D", 0.05, 1e-40, "tensor int8[1,4,4,2] 'y' has scale 9.99994610111476e-41, outside 1e-15..1e15"),
    ("FULLY_CONNECTED", 3e38, 0.1, "tensor int8[1,4,4,2] 'x' has scale 3.0000000054977558e+38, outside 1e-15..1e15")])
def test_an_extreme_scale_on_any_operator_is_refused_naming_the_tensor(tmp_path, op, input_scale, output_scale, said):
    """A convolution with a fused RELU6 into an output of scale 1e-40 was refused only by the bare
    FloatingPointError it raised; a fully connected layer of input scale 3e38 imported and computed
    what LiteRT does not (its requantisation saturates there)."""
    from ai_edge_litert import schema_py_generated as schema

    relu6 = schema.ActivationFunctionType.RELU6
    graph = GraphBuilder()
    x = graph.add_input("x", "int8", (1, 4, 4, 2), scale=input_scale, zero_point=0)
    if op == "CONV_2D":
        w = graph.add_constant("w", np.ones((2, 1, 1, 2), np.int8), scale=[0.01, 0.02], zero_point=[0, 0])
        y = graph.add_tensor("y", "int8", (1, 4, 4, 2), scale=output_scale, zero_point=0)
        options = schema.Conv2DOptionsT(strideH=1, strideW=1, fusedActivationFunction=relu6)
    else:
        w = graph.add_constant("w", np.ones((4, 32), np.int8), scale=0.01, zero_point=0)
        y = graph.add_tensor("y", "int8", (1, 4), scale=output_scale, zero_point=0)
        options = schema.FullyConnectedOptionsT(fusedActivationFunction=relu6)
    graph.add_operator(op, [x, w, -1], [y], options)
    graph.mark_output(y)
    done = cli("import", str(graph.write(tmp_path / "m.tflite")), "-o", str(tmp_path / "m.tar"))
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert f"operator 0 ({op})" in done.stderr and said in done.stderr, done.stderr


def test_the_operator_table_of_the_docs_is_the_code_s():
    """docs/import.md's table, between its markers, is what `python -m mlfbuild.importer.lowering`
    prints (regenerate it with that command)."""
    from mlfbuild.importer.coverage import markdown_table
    from mlfbuild.importer.lowering import rules

    docs = (Path(__file__).resolve().parents[1] / "docs" / "import.md").read_text()
    start = docs.index("<!-- operator table: generated")
    table = docs[docs.index("\n", start) + 1:docs.index("<!-- end of operator table -->")]
    assert table == markdown_table(rules())


def test_a_model_of_more_inputs_than_the_console_addresses_is_refused_by_the_build(tmp_path):
    graph = GraphBuilder()
    for index in range(257):
        x = graph.add_input(f"x{index}", "int8", (1, 2), scale=0.05, zero_point=0)
        y = graph.add_tensor(f"y{index}", "int8", (1, 2), scale=0.05, zero_point=0)
        graph.add_operator("RELU", [x], [y])
        graph.mark_output(y)
    model = graph.write(tmp_path / "wide.tflite")
    run = cli("build", str(model), "-b", "host", "-o", str(tmp_path / "b"))
    assert run.returncode == 3 and "256" in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_no_two_c_helpers_define_one_function():
    """Every helper's functions are written once into a model that names them: two families defining
    the same C function would not compile side by side (a bundle of every operator is one model)."""
    import re

    from mlfbuild.importer.lowering import C_HELPERS

    defined: dict[str, str] = {}
    for key, code in C_HELPERS.items():
        for name in re.findall(r"^static inline [\w\s*]+?\b(\w+)\(", code, re.M):
            assert name not in defined, f"{name} is defined by {key} and {defined[name]}"
            defined[name] = key
