"""The MLF reader against every real TVM export (manifest agreement) and against edge cases made
by the project's own MLF writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import cli, entry_id, manifest_entries
from mlfbuild.errors import InvalidInputError
from mlfbuild.mlf.reader import describe, read_mlf
from mlfwriter import TinyModel, tar_tree





@pytest.mark.parametrize("item", manifest_entries(), ids=entry_id)
def test_inspect_agrees_with_manifest(item, fixtures_dir, tmp_path):
    fixture_set, entry = item
    lib = read_mlf(fixtures_dir / fixture_set / entry["file"], tmp_path)
    assert lib.version == entry["mlf_metadata_version"]
    assert lib.style == entry["style"]
    names = entry["mod_name"] if isinstance(entry["mod_name"], list) else [entry["mod_name"]]
    assert sorted(m.name for m in lib.modules) == sorted(names)
    for module in lib.modules:
        assert module.executor == entry["executor"]
        if entry["executor"] == "aot":
            assert module.interface_api == entry["interface_api"]
            assert module.unpacked_api == entry["unpacked_api"]
        if entry.get("usmp") is not None:
            assert module.usmp == entry["usmp"]
        # One target, or (TVM 0.18's manifest) several printed as "[a, b]".
        canonical = entry["target_canonical"].strip().removeprefix("[").removesuffix("]").split(", ")
        assert [t.strip() for t in canonical] == [t.raw.strip() for t in module.targets]
        expected = next(m for m in entry["modules"] if m["mod_name"] == module.name)
        assert [(t.name, list(t.shape), t.dtype) for t in module.inputs] == \
            [(t["name"], t["shape"], t["dtype"]) for t in expected["inputs"]]
        assert [(list(t.shape), t.dtype) for t in module.outputs] == \
            [(t["shape"], t["dtype"]) for t in expected["outputs"]]
    if str(entry["target"]).startswith("llvm") and entry.get("known_issue"):
        # Real producer defect: the arm_cpu micro-kernels the objects call are not in the tar.
        assert all(any("micro-kernels" in d and "gemm_1x1x1_reset" in d for d in m.defects) for m in lib.modules)
    elif entry.get("known_issue"):
        assert lib.warnings and any("defines it" in w for w in lib.warnings)
        assert all(m.defects for m in lib.modules)
    else:
        assert not any(m.defects for m in lib.modules)


def test_inspect_json_is_stable_and_complete(fixtures_dir):
    tar = fixtures_dir / "tvm-0.13" / "multi_kws_ad_aot_c_usmp.tar"
    first, second = cli("inspect", "--json", str(tar)), cli("inspect", "--json", str(tar))
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert {m["name"] for m in data["modules"]} == {"kws", "ad"}
    assert data["runtime"]["path"] == "runtime" and data["runtime"]["version"] == "0.13.0"
    kws = next(m for m in data["modules"] if m["name"] == "kws")
    assert kws["memory"]["main"][0]["workspace_size_bytes"] > 0
    assert kws["inputs"][0]["size_bytes"] == 490


def test_inspect_reports_llvm_object_abi(fixtures_dir, tmp_path):
    lib = read_mlf(fixtures_dir / "tvm-0.13" / "op_matmul_llvm_cm4.tar", tmp_path)
    (module,) = lib.modules
    assert module.style == "operator" and module.entry_function == "matmul"
    assert {o.machine for o in module.objects} == {"EM_ARM"}
    assert {o.cpu for o in module.objects} == {"cortex-m4"}


def test_inspect_text_warns_about_the_v5_defect(fixtures_dir):
    result = cli("inspect", str(fixtures_dir / "tvm-0.8" / "mlp_aot_c_unpacked_nolinkparams.tar"))
    assert result.returncode == 0
    assert "tvmgen_mlp_run_model" in result.stderr and "link-params" in result.stderr


# --- edge cases written by the project's own MLF writer ------------------------------------------

def _write(tmp_path: Path, files: dict[str, bytes], name: str = "m.tar") -> Path:
    return tar_tree(files, tmp_path / name)


def test_tiny_v7_and_v5_read_the_same(tmp_path):
    model = TinyModel()
    v7 = read_mlf(_write(tmp_path, model.files(), "v7.tar"), tmp_path / "a")
    v5 = read_mlf(_write(tmp_path, model.v5_files(), "v5.tar"), tmp_path / "b")
    assert (v7.version, v5.version) == (7, 5)
    for lib in (v7, v5):
        (m,) = lib.modules
        assert (m.executor, m.interface_api, m.usmp) == ("aot", "c", True)
        assert [(t.name, t.shape, t.dtype) for t in m.inputs] == [("input", (1, 16), "int8")]
        assert [(t.shape, t.dtype) for t in m.outputs] == [((1, 4), "int8")]


@pytest.mark.parametrize("version", [1, 4, 6, 8, 99])
def test_unsupported_versions_are_refused(tmp_path, version):
    files = TinyModel().files()
    meta = json.loads(files["metadata.json"])
    meta["version"] = version
    files["metadata.json"] = json.dumps(meta).encode()
    result = cli("inspect", str(_write(tmp_path, files)))
    assert result.returncode == 3
    assert f"unsupported MLF version {version}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m.pop("version"), "'version'"),
    (lambda m: m.update(version="7"), "'version' must be an integer"),
    (lambda m: m.update(modules={}), "'modules' is empty"),
    (lambda m: m["modules"]["tiny"].update(executors=["vm"]), "executors"),
    (lambda m: m["modules"]["tiny"].update(target="c"), "target"),
    (lambda m: m["modules"]["tiny"]["memory"]["functions"].update(main="x"), "main"),
    (lambda m: m["modules"].update({"../evil": m["modules"]["tiny"]}), "not a C identifier"),
    (lambda m: m["modules"]["tiny"]["memory"]["functions"]["main"][0]["inputs"]["input"].update(dtype="bfloat16"),
     "unsupported dtype"),
    (lambda m: m["modules"]["tiny"]["memory"]["functions"]["main"][0]["inputs"]["input"].update(c_name="in;put"),
     "c_name: 'in;put' is not a C identifier"),
])
def test_broken_metadata_is_one_clear_line(tmp_path, mutate, message):
    files = TinyModel().files()
    meta = json.loads(files["metadata.json"])
    mutate(meta)
    files["metadata.json"] = json.dumps(meta).encode()
    result = cli("inspect", str(_write(tmp_path, files)))
    assert result.returncode == 3, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_missing_metadata_and_bad_json(tmp_path):
    files = TinyModel().files()
    del files["metadata.json"]
    assert "no metadata.json" in cli("inspect", str(_write(tmp_path, files, "a.tar"))).stderr
    files["metadata.json"] = b"{not json"
    result = cli("inspect", str(_write(tmp_path, files, "b.tar")))
    assert result.returncode == 3 and "not valid JSON" in result.stderr


def test_missing_graph_for_graph_executor(tmp_path):
    files = TinyModel().files()
    meta = json.loads(files["metadata.json"])
    meta["modules"]["tiny"]["executors"] = ["graph"]
    files["metadata.json"] = json.dumps(meta).encode()
    with pytest.raises(InvalidInputError, match="executor config"):
        read_mlf(_write(tmp_path, files), tmp_path / "w")


def test_hostile_archive_exits_3(tmp_path):
    evil = tmp_path / "evil.tar"
    import io
    import tarfile
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    result = cli("inspect", str(evil))
    assert result.returncode == 3 and "../escape.txt" in result.stderr
    assert not (tmp_path.parent / "escape.txt").exists()


def test_usage_error_exits_2():
    assert cli("inspect").returncode == 2
    assert cli("no-such-command").returncode == 2


# --- fuzzing the metadata parser ---------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)
_KEYS = ["version", "modules", "executors", "target", "memory", "functions", "main", "operator_functions",
         "inputs", "outputs", "style", "model_name", "dtype", "size", "device", "workspace_size_bytes"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_metadata_never_crashes(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fuzz")
    for rel, blob in TinyModel().files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    meta = json.loads((root / "metadata.json").read_text())
    # Replace random paths in the real metadata with random JSON values.
    for _ in range(data.draw(st.integers(1, 4))):
        node = meta
        path = data.draw(st.lists(st.sampled_from(_KEYS + ["tiny", "0"]), min_size=0, max_size=5))
        for key in path:
            if isinstance(node, dict) and key in node and isinstance(node[key], (dict, list)):
                node = node[key]
            elif isinstance(node, list) and node and isinstance(node[0], (dict, list)):
                node = node[0]
        if isinstance(node, dict):
            node[data.draw(st.sampled_from(_KEYS + ["tiny"]))] = data.draw(_json)
    (root / "metadata.json").write_text(json.dumps(meta))
    try:
        describe(root)
    except InvalidInputError:
        pass
