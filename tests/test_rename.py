"""--module OLD=NEW: a module renamed on build and export (TVM's `default` makes two models unlinkable)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import cli
from mlfbuild.errors import UsageError
from mlfbuild.mlf.reader import describe
from mlfbuild.mlf.rename import parse_renames, plan_renames, rename_c, rename_modules
from mlfbuild.mlf.objfile import inspect_object

_C = '''#include "tvmgen_default.h"
#include <stdint.h>
/* tvmgen_default_run is TVM's */ // TVMGEN_DEFAULT_INPUT_SIZE too
#ifndef TVMGEN_DEFAULT_H_
#define TVMGEN_DEFAULT_H_
static const char* said = "tvmgen_default_run failed";
static const char c = 't';
static const char _tvm_func_registry[] = "\\002\\000tvmgen_default_run\\000tvmgen_default_big_f\\000";
int32_t tvmgen_default_run(struct tvmgen_default_inputs* in) {
  return tvmgen_default_big_run(in) + xtvmgen_default_y + tvmgen_defaults_z + TVMGEN_DEFAULT_INPUT_SIZE + 0x1e5;
}
#endif
'''


def test_c_names_are_renamed_by_token_and_text_is_not():
    out = rename_c(_C, "default", "kws", others=("default", "default_big"))
    assert '#include "tvmgen_kws.h"' in out and "#include <stdint.h>" in out
    assert "/* tvmgen_default_run is TVM's */ // TVMGEN_DEFAULT_INPUT_SIZE too" in out  # comments untouched
    assert '"tvmgen_default_run failed"' in out  # an ordinary string is text
    assert "#ifndef TVMGEN_KWS_H_" in out and "TVMGEN_KWS_INPUT_SIZE + 0x1e5" in out
    assert "int32_t tvmgen_kws_run(struct tvmgen_kws_inputs* in)" in out
    # the registry names the functions (its strings are symbol names); another module keeps its own
    assert "\\000tvmgen_kws_run\\000tvmgen_default_big_f\\000" in out
    assert "tvmgen_default_big_run(in)" in out
    assert "xtvmgen_default_y" in out and "tvmgen_defaults_z" in out


def test_bad_rename_items_are_refused():
    for item in ("default", "default=", "=kws", "default=k-ws", "default=$(x)"):
        with pytest.raises(UsageError, match="OLD=NEW"):
            parse_renames([item])
    with pytest.raises(UsageError, match="no module named 'kws'"):
        plan_renames([["default"]], [("kws", "x")])
    with pytest.raises(UsageError, match="already has a module named 'ad'"):
        plan_renames([["kws", "ad"]], [("kws", "ad")])
    # a new name equal to another module's but for case shares its include guard and macros
    with pytest.raises(UsageError, match="'AD' and the module 'ad' differ only in case"):
        plan_renames([["kws", "ad"]], [("kws", "AD")])
    with pytest.raises(UsageError, match="'Ad' and the module 'ad' differ only in case"):
        plan_renames([["kws"], ["ad"]], [("kws", "Ad")])
    with pytest.raises(UsageError, match="another MLF has a module named 'ad' too"):
        plan_renames([["kws"], ["ad"]], [("kws", "ad")])
    # the names after renaming count: ad renamed frees its name for kws
    assert plan_renames([["ad"], ["kws"]], [("ad", "x"), ("kws", "ad")]) == [[("ad", "x")], [("kws", "ad")]]
    # each OLD=NEW takes the next module of that name, in the order the MLFs come
    assert plan_renames([["default"], ["x"], ["default"]], [("default", "a"), ("default", "b")]) == \
        [[("default", "a")], [], [("default", "b")]]


def _unpacked(fixtures_dir: Path, name: str, dest: Path) -> Path:
    with tarfile.open(fixtures_dir / f"{name}.tar") as tar:
        tar.extractall(dest, filter="data")
    return dest


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_a_renamed_copy_reads_as_the_new_module_and_the_source_is_untouched(fixtures_dir, tmp_path):
    source = _unpacked(fixtures_dir, "tvm-0.13/kws_aot_c_unpacked_nousmp", tmp_path / "src")
    before = _tree_hash(source)
    renamed = rename_modules(source, tmp_path / "renamed", [("default", "kws")])
    assert _tree_hash(source) == before
    module = describe(renamed).modules[0]
    assert module.name == "kws" and module.header == "codegen/host/include/tvmgen_kws.h"
    assert module.sources == ("codegen/host/src/kws_lib0.c", "codegen/host/src/kws_lib1.c")
    assert module.entry_function == "tvmgen_kws_run"
    code = "\n".join((renamed / rel).read_text() for rel in (*module.sources, module.header))
    code = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", "", code, flags=re.S)  # names only
    assert not re.search(r"tvmgen_default|TVMGEN_DEFAULT", code)
    assert "TVMGEN_KWS_INPUT_1_SIZE" in code and "tvmgen_kws_fused_" in code


@pytest.mark.cross
def test_llvm_objects_are_renamed_with_objcopy(fixtures_dir, tmp_path):
    from mlfbuild.toolchain import symbol_renamer

    source = _unpacked(fixtures_dir, "tvm-0.18/kws_graph_llvm_cm4_linkparams", tmp_path / "src")
    renamed = rename_modules(source, tmp_path / "renamed", [("default", "kws")],
                             symbol_renamer("arm-none-eabi-objcopy", "arm-none-eabi-"))
    module = describe(renamed).modules[0]
    assert [o.path for o in module.objects] == ["codegen/host/lib/kws_lib0.o", "codegen/host/lib/kws_lib1.o"]
    symbols = set().union(*(inspect_object(renamed / o.path, o.path).symbols for o in module.objects))
    assert not any(s.startswith("tvmgen_default") for s in symbols)
    called = {node.func_name for node in module.graph.nodes if node.func_name not in (None, "__nop")}
    assert called and called <= symbols  # the graph calls the renamed functions


def test_two_default_modules_export_once_renamed(fixtures_dir, tmp_path):
    kws, mlp = (fixtures_dir / "tvm-0.13" / f"{n}.tar" for n in ("kws_aot_c_unpacked_nousmp", "mlp_graph_c"))
    clash = cli("export", str(kws), str(mlp), "--board", "host", "-o", str(tmp_path / "clash"))
    assert clash.returncode == 3 and "--module default=NEW" in clash.stderr
    assert not (tmp_path / "clash").exists()
    done = cli("export", str(kws), str(mlp), "--board", "host", "-o", str(tmp_path / "both"),
               "--module", "default=kws", "--module", "default=mlp", "--name", "pair")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "both" / "include" / "mlf_kws.h").is_file() and (tmp_path / "both" / "include" / "mlf_mlp.h").is_file()
    defined = subprocess.run(["nm", "--defined-only", "-g", str(tmp_path / "both" / "prebuilt" / "libmlf_pair.a")],
                             capture_output=True, text=True, check=True).stdout
    names = re.findall(r" [A-Z] (\S+)$", defined, re.M)
    assert any(n.startswith("tvmgen_kws_") for n in names) and any(n.startswith("tvmgen_mlp_") for n in names)
    assert not any(n.startswith("tvmgen_default") for n in names)
    assert len(names) == len(set(names))  # nothing defined twice: the two link into one image
    unknown = cli("export", str(kws), "--board", "host", "-o", str(tmp_path / "x"), "--module", "kws=a")
    assert unknown.returncode == 2 and "no module named 'kws'" in unknown.stderr


def test_a_renamed_build_computes_what_the_model_does(fixtures_dir, tmp_path):
    """A graph-executor MLF (function names in the graph, the registry and the code) renamed and run."""
    out = tmp_path / "b"
    done = cli("run", str(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar"), "--board", "host", "-o", str(out),
               "--module", "default=kws", "--reference", str(fixtures_dir / "tvm-0.13" / "kws.npz"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kws:" in done.stdout and "result: pass" in done.stdout
    assert (out / "mlf" / "executor-config" / "graph" / "kws.graph").is_file()
    import json
    record = json.loads((out / "build.json").read_text())
    assert record["mlf"]["modules_renamed"] == {"default": "kws"} and record["models"][0]["name"] == "kws"


def _two_module_mlf(names: tuple[str, str], dest: Path) -> Path:
    """One MLF of two tiny modules (as TVM writes a multi-module export: one metadata, one tree)."""
    import json

    from mlfwriter import TinyModel, tar_tree

    files: dict[str, bytes] = {}
    modules = {}
    for seed, name in enumerate(names):
        model_files = TinyModel(name, seed=seed).files()
        modules.update(json.loads(model_files.pop("metadata.json"))["modules"])
        files.update(model_files)
    files["metadata.json"] = json.dumps({"modules": modules, "version": 7}).encode()
    return tar_tree(files, dest)


def _refused_before_compiling(done, out: Path, code: int, said: str) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (out / "build.log").exists() and not (out / "firmware.elf").exists()


def test_a_rename_to_a_case_twin_of_another_module_is_refused_before_compiling(tmp_path):
    """kws=AD beside ad: both headers would be guarded by TVMGEN_AD_H_ (gcc then failed, exit 4)."""
    mlf = _two_module_mlf(("kws", "ad"), tmp_path / "pair.tar")
    out = tmp_path / "b"
    done = cli("build", str(mlf), "-b", "host", "-o", str(out), "--module", "kws=AD")
    _refused_before_compiling(done, out, 2, "--module kws=AD: 'AD' and the module 'ad' differ only in case")
    apart = [tar_of(("kws",), tmp_path / "kws.tar"), tar_of(("ad",), tmp_path / "ad.tar")]
    done = cli("export", *map(str, apart), "-b", "host", "-o", str(tmp_path / "e"), "--module", "kws=AD")
    assert done.returncode == 2 and "'AD' and the module 'ad' differ only in case" in done.stderr, done.stderr
    assert not (tmp_path / "e").exists()


def test_the_fixture_of_two_models_refuses_a_case_twin_rename(fixtures_dir, tmp_path):
    out = tmp_path / "b"
    done = cli("build", str(fixtures_dir / "tvm-0.13" / "multi_kws_ad_aot_c_usmp.tar"), "-b", "host", "-o", str(out),
               "--module", "kws=AD")
    _refused_before_compiling(done, out, 2, "--module kws=AD: 'AD' and the module 'ad' differ only in case")


def test_one_mlf_whose_modules_differ_only_in_case_is_refused_before_compiling(tmp_path):
    out = tmp_path / "b"
    done = cli("build", str(_two_module_mlf(("tiny", "TINY"), tmp_path / "twins.tar")), "-b", "host", "-o", str(out))
    _refused_before_compiling(done, out, 3, "modules 'tiny' and 'TINY' differ only in case")


def tar_of(names: tuple[str, ...], dest: Path) -> Path:
    from mlfwriter import TinyModel, tar_tree

    return tar_tree(TinyModel(names[0]).files(), dest) if len(names) == 1 else _two_module_mlf(names, dest)
