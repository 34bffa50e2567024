"""Models made by TensorFlow's own TFLite converter (tests/converter_models/, made by
scripts/make_converter_models.py; docs/converter-models.md): every one is either imported and then
computes exactly what LiteRT's reference kernels compute, or refused in one line naming the operator.

REFUSED lists the models refused today and the operator each refusal must name. A model listed there
that imports fails the test (take it off the list: its operator has landed), and so does a model
not listed that is refused. The importable models are checked side by side in one model (their
graphs merged into one subgraph), so CI builds once; the exhaustive run checks each file as it is,
on more samples.
"""

from __future__ import annotations

import json
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from conftest import cli
from test_import_operators import check_against_litert

CORPUS = Path(__file__).resolve().parent / "converter_models"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
MODELS = [m for m in MANIFEST["models"] if m["file"]]

# model file → the operator its refusal names (TFLite's name), and why, today.
REFUSED = {
    "activation_elu.tflite": "ELU",  # float32 (DEQUANTIZE, ELU, QUANTIZE): no LiteRT kernel computes its expm1
    "dense_3d_dynamic_batch.tflite": "REDUCE_PROD",  # a None batch: Dense on 3-D computes its rows' count (TFLM
                                                     # does not run REDUCE_PROD)
}
# Imported, but LiteRT's reference kernels cannot run them: checked against their host twin, the run
# saying what it could not check (as for TFLM's person_detect).
LITERT_CANNOT_RUN = {
    "upsampling_nearest.tflite": "TILE",  # the converter writes TILE version 3; LiteRT's reference resolver has 1-2
}
IMPORTABLE = [m["file"] for m in MODELS if m["file"] not in REFUSED and m["file"] not in LITERT_CANNOT_RUN]


def test_the_manifest_tells_the_files_as_they_are():
    """Every .tflite is in the manifest and every manifest file exists, with the operators and the
    interface types the manifest records (read here with LiteRT's schema, not the converter's)."""
    assert sorted(p.name for p in CORPUS.glob("*.tflite")) == sorted(m["file"] for m in MODELS)
    assert set(REFUSED) <= {m["file"] for m in MODELS}
    names = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    types = {value: name.lower() for name, value in vars(schema.TensorType).items() if not name.startswith("_")}
    for entry in MODELS:
        model = schema.ModelT.InitFromPackedBuf(bytearray((CORPUS / entry["file"]).read_bytes()), 0)
        codes = [names[max(c.builtinCode, c.deprecatedBuiltinCode)] for c in model.operatorCodes]
        used = list(dict.fromkeys(codes[op.opcodeIndex] for graph in model.subgraphs for op in graph.operators))
        graph = model.subgraphs[0]
        assert used == entry["operators"], entry["file"]
        assert [types[graph.tensors[i].type] for i in graph.inputs] == entry["input_types"], entry["file"]
        assert [types[graph.tensors[i].type] for i in graph.outputs] == entry["output_types"], entry["file"]
        assert {entry["interface"]} == set(entry["input_types"]) | set(entry["output_types"]), entry["file"]
    for entry in MANIFEST["models"]:
        assert entry["file"] or entry["conversion_error"], entry["name"]


@pytest.mark.parametrize("file", [m["file"] for m in MODELS])
def test_each_model_is_imported_or_refused_naming_its_operator(file, tmp_path):
    out = tmp_path / "m.tar"
    run = cli("import", str(CORPUS / file), "-o", str(out))
    if file in REFUSED:
        assert run.returncode != 0, f"{file} now imports: take it off REFUSED (and it is checked against LiteRT)"
        assert run.returncode == 3, run.stderr
        assert run.stderr.count("\n") == 1, run.stderr
        assert f"({REFUSED[file]})" in run.stderr, run.stderr
        assert not out.exists()
    else:
        assert run.returncode == 0, f"{file} is refused (list it in REFUSED if that is expected): {run.stderr}"
        assert out.is_file()


# --- the importable models against LiteRT -------------------------------------------------------------

def merged_model(files: list[str], path: Path) -> Path:
    """One .tflite whose single subgraph holds every model's graph side by side: the inputs and the
    outputs of all, in order, tensor names prefixed with the model's index; buffers, tensors and
    operator codes renumbered, nothing else changed (signatures and metadata left out)."""
    merged = schema.ModelT()
    merged.version, merged.description = 3, "converter models, side by side"
    merged.operatorCodes, merged.buffers = [], [schema.BufferT()]
    graph = schema.SubGraphT()
    graph.tensors, graph.operators, graph.inputs, graph.outputs, graph.name = [], [], [], [], "main"
    for number, file in enumerate(files):
        model = schema.ModelT.InitFromPackedBuf(bytearray((CORPUS / file).read_bytes()), 0)
        assert len(model.subgraphs) == 1, file
        (source,) = model.subgraphs
        buffers, codes, tensors = len(merged.buffers), len(merged.operatorCodes), len(graph.tensors)
        merged.buffers += model.buffers
        merged.operatorCodes += model.operatorCodes
        for tensor in source.tensors:
            tensor.buffer += buffers
            tensor.name = f"m{number}_".encode() + tensor.name
            graph.tensors.append(tensor)

        def renumber(indices, offset=tensors):
            return None if indices is None else [int(i) + offset if i >= 0 else int(i) for i in indices]
        for op in source.operators:
            op.opcodeIndex += codes
            op.inputs, op.outputs = renumber(op.inputs), renumber(op.outputs)
            op.intermediates = renumber(op.intermediates)
            graph.operators.append(op)
        graph.inputs += renumber(source.inputs)
        graph.outputs += renumber(source.outputs)
    merged.subgraphs = [graph]
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(merged.Pack(builder), file_identifier=b"TFL3")
    path.write_bytes(bytes(builder.Output()))
    return path


def _names_of_failures(files: list[str], tree: Path, tmp_path: Path, samples: int) -> list[str]:
    """Which of `files` do not match LiteRT when checked one by one (after the merged model failed)."""
    failed = []
    for file in files:
        try:
            check_against_litert(CORPUS / file, "host", tree, tmp_path / Path(file).stem, samples=samples)
        except AssertionError as exc:
            failed.append(f"{file}: {str(exc).splitlines()[0][:300]}")
    return failed


@pytest.mark.cross
def test_the_importable_models_equal_litert_on_the_host(cmsis_nn, tmp_path):
    """All of them in one build; when they differ, each is checked alone to name the culprits."""
    tree = cmsis_nn("v6.0.0")
    model = merged_model(IMPORTABLE, tmp_path / "converter_models.tflite")
    try:
        result = check_against_litert(model, "host", tree, tmp_path / "host", samples=4, seed=11)
    except AssertionError:
        culprits = _names_of_failures(IMPORTABLE, tree, tmp_path, samples=4)
        pytest.fail(f"differ from LiteRT: {culprits or 'none alone (only merged)'}")
    outputs = sum(len(m["output_types"]) for m in MODELS if m["file"] in IMPORTABLE)
    assert sum(len(m["outputs"]) for m in result["models"]) == outputs


@pytest.mark.cross
@pytest.mark.parametrize("file, operator", sorted(LITERT_CANNOT_RUN.items()))
def test_a_model_litert_cannot_run_is_run_against_its_host_twin(file, operator, cmsis_nn, tmp_path):
    run = cli("run", str(CORPUS / file), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "2", "--json")
    assert run.returncode == 0, run.stderr
    assert "LiteRT cannot run" in run.stderr and operator in run.stderr and "host twin" in run.stderr
    assert json.loads(run.stdout)["models"][0]["reference"] == "host"


@pytest.mark.cross
def test_one_converter_file_as_it_is_equals_litert(cmsis_nn, tmp_path):
    """The merge changes nothing that matters: one unmerged file, with its signature and metadata,
    goes through `mlfbuild run` as a user's would (the float-interface one: QUANTIZE and DEQUANTIZE)."""
    check_against_litert(CORPUS / "small_cnn_float_dense_per_tensor.tflite", "host", cmsis_nn("v6.0.0"),
                         tmp_path / "host", samples=2)


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("file", IMPORTABLE)
def test_each_importable_model_equals_litert_over_many_samples(file, cmsis_nn, tmp_path):
    check_against_litert(CORPUS / file, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=64, seed=23)


def test_the_merged_model_is_what_litert_computes_for_each_model(tmp_path):
    """The merge itself: LiteRT gives the merged model's outputs exactly as it gives each model's."""
    from litert_oracle import run_reference, seeded_inputs

    files = IMPORTABLE[:4]
    model = merged_model(files, tmp_path / "merged.tflite")
    inputs = seeded_inputs(model, seed=3, samples=2)
    merged = run_reference(model, inputs)
    alone = []
    for number, file in enumerate(files):
        prefix = f"m{number}_"
        mine = {name[len(prefix):]: value for name, value in inputs.items() if name.startswith(prefix)}
        alone += run_reference(CORPUS / file, mine)
    assert len(merged) == len(alone)
    for a, b in zip(merged, alone):
        np.testing.assert_array_equal(a, b)
