"""`--runtime tvm`: the same models built with TVM's own standalone CRT (the runtime/ an AOT MLF
bundles, or --crt-dir) run bit-exact in QEMU and on the host; graph MLFs run on TVM's own graph
executor; a missing or unusable CRT is one clear build error (exit 4)."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from mlfbuild import cli
from mlfbuild.build import build
from mlfbuild.errors import BuildError
from mlfbuild.project import ProjectOptions
from mlfbuild.run import run_build

AOT = ["kws_aot_c_unpacked_usmp.tar", "kws_aot_c_unpacked_nousmp.tar", "kws_aot_packed.tar"]


@pytest.fixture(scope="session")
def tvm_crt_dir(fixtures_dir, tmp_path_factory) -> Path:
    """TVM 0.13's standalone CRT: the runtime/ folder (and metadata.json) of an AOT fixture."""
    root = tmp_path_factory.mktemp("aot_mlf")
    with tarfile.open(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar") as tar:
        members = [m for m in tar.getmembers() if (m.isfile() or m.isdir())
                   and m.name.lstrip("./").startswith(("runtime/", "metadata.json"))]
        tar.extractall(root, members=members, filter="data")
    return root / "runtime"


def _build(fixtures_dir: Path, name: str, board: str, out: Path, **options):
    return build(fixtures_dir / "tvm-0.13" / name, board, out,
                 options=ProjectOptions(werror=True, runtime="tvm", **options), jobs=4)


def _assert_matches(result, dtype_kind: str) -> None:
    assert result.status == "pass"
    for model in result.models:
        for comparison in model.comparisons:
            limit = 0 if dtype_kind == "int" else 1e-5  # int8: bit-exact
            assert comparison.max_abs_error <= limit


@pytest.mark.qemu
@pytest.mark.parametrize("name", AOT)
def test_aot_with_tvm_crt_is_bit_exact(name, fixtures_dir, tmp_path):
    built = _build(fixtures_dir, name, "mps2-an386", tmp_path / "b")
    project = built.project.path
    # TVM's CRT replaced our backend; our board layer stays.
    assert (project / "tvm_crt/standalone_crt/src/runtime/crt/common/crt_backend_api.c").is_file()
    assert not (project / "crt/src/backend.c").exists() and not (project / "crt/include/tvm").exists()
    assert (project / "crt/src/platform_cortexm.c").is_file()
    assert "#define MLF_TVM_PAGE_ALLOCATOR 0" in (project / "tvm_crt/include/crt_config.h").read_text()
    assert any("TVM standalone CRT 0.13.0 from the MLF's runtime/" in note for note in built.record["notes"])
    assert built.record["runtime"] == "tvm"
    result = run_build(tmp_path / "b", references=[str(fixtures_dir / "tvm-0.13" / "kws.npz")], repeat=3, timeout=60)
    _assert_matches(result, "int")
    model = result.models[0]
    # Under -icount a tick is 40 instructions (25 MHz), counted from a restarted SysTick: inferences
    # that run the same instructions read the same ticks. The first one may run a few more (it raises
    # the workspace pool's high-water mark), fewer than a tick's worth: it reads the same count or,
    # where a tick boundary falls between the two ends, one more.
    assert model.ticks[1] == model.ticks[2] > 1000
    assert 0 <= model.ticks[0] - model.ticks[1] <= 1
    if name != "kws_aot_c_unpacked_usmp.tar":  # TVMBackendAllocWorkspace -> TVM's stack allocator
        assert 0 < model.workspace_peak <= built.record["workspace_bytes"]


@pytest.mark.qemu
@pytest.mark.parametrize("name, reference, kind", [("kws_graph_c.tar", "kws.npz", "int"),
                                                   ("mlp_graph_c.tar", "mlp.npz", "float")])
def test_graph_runs_on_tvms_graph_executor(name, reference, kind, fixtures_dir, tvm_crt_dir, tmp_path):
    built = _build(fixtures_dir, name, "mps2-an386", tmp_path / "b", crt_dir=tvm_crt_dir)
    code = (built.project.path / "src/model_default.c").read_text()
    assert "TVMGraphExecutor_Create" in code and "TVMGraphExecutor_LoadParams" in code
    assert (built.project.path / "tvm_crt/standalone_crt/src/runtime/crt/graph_executor/graph_executor.c").is_file()
    assert any("TVM standalone CRT 0.13.0 from" in note for note in built.record["notes"])
    pool = built.record["workspace_bytes"]
    result = run_build(tmp_path / "b", references=[f"default={fixtures_dir / 'tvm-0.13' / reference}"],
                       repeat=3, timeout=60)
    _assert_matches(result, kind)
    model = result.models[0]
    # The first run also creates the executor (JSON parse, LoadParams); the peak is the page pool
    # the runs needed, which the build's estimate covers.
    assert model.ticks[0] > model.ticks[1] > 0
    assert 0 < model.workspace_peak <= pool


@pytest.mark.qemu
@pytest.mark.parametrize("name, options", [("kws_aot_c_unpacked_nousmp.tar", {}), ("kws_graph_c.tar", {"crt": True})])
def test_tvm_crt_on_the_host(name, options, fixtures_dir, tvm_crt_dir, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    built = _build(fixtures_dir, name, "host", tmp_path / "b", **({"crt_dir": tvm_crt_dir} if options else {}))
    reference = fixtures_dir / "tvm-0.13" / "kws.npz"
    result = run_build(built.outdir, references=[f"{built.record['models'][0]['name']}={reference}"], timeout=60)
    _assert_matches(result, "int")


@pytest.mark.cross
def test_graph_without_crt_dir_is_a_build_error(fixtures_dir, tmp_path):
    with pytest.raises(BuildError, match=r"carries no TVM runtime; give --crt-dir"):
        _build(fixtures_dir, "kws_graph_c.tar", "mps2-an386", tmp_path / "b")
    rc = cli.main(["build", str(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar"), "--runtime", "tvm",
                   "-o", str(tmp_path / "c")])
    assert rc == 4


@pytest.mark.cross
def test_crt_dir_that_is_not_a_crt_is_a_build_error(fixtures_dir, tmp_path, capsys):
    rc = cli.main(["build", str(fixtures_dir / "tvm-0.13" / "kws_aot_packed.tar"), "--runtime", "tvm",
                   "--crt-dir", str(tmp_path), "-o", str(tmp_path / "c")])
    assert rc == 4
    message = capsys.readouterr().err.strip().splitlines()
    assert len(message) == 1 and "not a TVM standalone CRT" in message[0]


@pytest.mark.cross
@pytest.mark.parametrize("name", ["mlp_graph_c.tar", "kws_graph_c.tar"])  # counts 4 ("\\004") and 9 ("\\t")
def test_tvm08_graph_with_a_tvm013_crt_is_refused(name, fixtures_dir, tvm_crt_dir, tmp_path):
    """TVM 0.8 counts the registry's functions in one byte, 0.9+ in two: TVM's executor would call the
    wrong kernels, so the mix stops before compiling."""
    with pytest.raises(BuildError, match=r"counts functions in 1 byte.*reads 2 byte"):
        build(fixtures_dir / "tvm-0.8" / name, "mps2-an386", tmp_path / "b",
              options=ProjectOptions(runtime="tvm", crt_dir=tvm_crt_dir))


def test_builtin_graph_lowering_is_unchanged(fixtures_dir, tvm_crt_dir, tmp_path):
    """--runtime builtin keeps the build-time lowered graph (no JSON on the device, weights in place)."""
    from mlfbuild.mlf.reader import read_mlf
    from mlfbuild.project.lowering import lowering_for
    from mlfbuild.project.lowering.graph import GraphExecutor
    from mlfbuild.project.lowering.graph_tvm import GraphTvmExecutor

    lib = read_mlf(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar", tmp_path)
    assert isinstance(lowering_for(lib.modules[0]), GraphExecutor)
    assert isinstance(lowering_for(lib.modules[0], "tvm"), GraphTvmExecutor)
