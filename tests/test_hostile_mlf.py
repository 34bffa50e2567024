"""Hostile MLFs: names that try to escape into C, impossible sizes, unknown dtypes, huge graphs, and
generated code that waits on the build's stdin. Every input is made here: the project's MLF writer,
or a copy of a real TVM fixture with one thing changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from mlfbuild.boards import load_board, load_board_file
from mlfbuild.build import build
from mlfbuild.cli import main
from mlfbuild.errors import BoardError, GraphError, InvalidInputError, MetadataError, OverBudgetError
from mlfbuild.mlf.graph import read_graph
from mlfbuild.mlf.limits import DEFAULT_MAX_GRAPH_NODES
from mlfbuild.mlf.reader import describe
from mlfbuild.project import ProjectOptions, render_project
from mlfwriter import TinyModel, tar_tree
from conftest import REPO

BOARD = (REPO / "boards" / "mps2-an386.toml").read_text()
MLP_GRAPH = ("tvm-0.13", "mlp_graph_c.tar")
KWS_NOUSMP = ("tvm-0.13", "kws_aot_c_unpacked_nousmp.tar")


def _folder(files: dict[str, bytes], root: Path) -> Path:
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    return root


def _unpacked(fixtures_dir: Path, fixture: tuple[str, str], root: Path) -> Path:
    with tarfile.open(fixtures_dir.joinpath(*fixture)) as tar:
        tar.extractall(root, filter="data")
    return root


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _mlp_graph(root: Path) -> Path:
    return root / "executor-config" / "graph" / "default.graph"


def _render(root: Path, board: str, **options):
    return render_project(describe(root), load_board(board), root.parent / "project", ProjectOptions(**options))


def _inspect(target: Path, capsys) -> tuple[int, str]:
    code = main(["inspect", str(target)])
    return code, capsys.readouterr().err


def _renamed_input_model(name: str) -> dict[str, bytes]:
    """The tiny model whose input is called `name` in the metadata (TVM sanitises it to in_put in C)."""
    model = TinyModel()
    files = model.files()
    files["codegen/host/include/tvmgen_tiny.h"] = model.header().replace("void* input;", "void* in_put;").encode()
    files["codegen/host/src/tiny_lib0.c"] = model.lib0().replace("inputs->input", "inputs->in_put").encode()
    meta = json.loads(files["metadata.json"])
    main_memory = meta["modules"]["tiny"]["memory"]["functions"]["main"][0]
    main_memory["inputs"] = {name: {"dtype": "int8", "size": 16}}
    files["metadata.json"] = json.dumps(meta).encode()
    return files


# --- names --------------------------------------------------------------------------------------

def test_a_tensor_name_with_a_quote_is_a_c_string_of_its_own_bytes(tmp_path):
    mlf = tar_tree(_renamed_input_model('in"put'), tmp_path / "quote.tar")
    out = build(mlf, "host", tmp_path / "out", jobs=2)
    assert out.library.modules[0].inputs[0].name == 'in"put'
    assert b'in"put\x00' in (tmp_path / "out" / "firmware.elf").read_bytes()


def test_a_tensor_name_with_a_control_character_is_refused(tmp_path):
    root = _folder(_renamed_input_model("in\nput"), tmp_path / "mlf")
    with pytest.raises(MetadataError, match="control or unprintable"):
        describe(root)


def test_a_graph_node_name_cannot_close_its_comment(fixtures_dir, tmp_path):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")

    def rename(graph):
        kernel = next(n for n in graph["nodes"] if n["op"] == "tvm_op")
        kernel["name"] = "x */ int PWNED = 1; /* y"
    _edit_json(_mlp_graph(root), rename)
    build(root, "host", tmp_path / "out", jobs=2)
    code = (tmp_path / "out" / "project" / "src" / "model_default.c").read_text()
    assert "/* x *\\/ int PWNED = 1; /\\* y */" in code
    assert b"PWNED" not in (tmp_path / "out" / "firmware.elf").read_bytes()


def test_a_graph_function_name_must_be_a_c_identifier(fixtures_dir, tmp_path, capsys):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")

    def rename(graph):
        next(n for n in graph["nodes"] if n["op"] == "tvm_op")["attrs"]["func_name"] = "f(); int x"
    _edit_json(_mlp_graph(root), rename)
    code, err = _inspect(root, capsys)
    assert code == 3 and "func_name: 'f(); int x' is not a C identifier" in err


def test_a_module_name_with_a_trailing_newline_is_not_an_identifier(tmp_path):
    files = TinyModel().files()
    meta = json.loads(files["metadata.json"])
    meta["modules"] = {"tiny\n": meta["modules"]["tiny"]}
    files["metadata.json"] = json.dumps(meta).encode()
    with pytest.raises(MetadataError, match=r"module name 'tiny\\n' is not a C identifier"):
        describe(_folder(files, tmp_path / "mlf"))


def test_an_operator_function_name_must_be_a_c_identifier(fixtures_dir, tmp_path):
    root = _unpacked(fixtures_dir, ("tvm-0.13", "op_vector_add_c.tar"), tmp_path / "mlf")
    _edit_json(root / "metadata.json", lambda meta: meta.update(model_name="vector_add\n"))
    with pytest.raises(MetadataError, match="operator name 'vector_add\\\\n' is not a C identifier"):
        describe(root)


def test_a_board_name_with_a_trailing_newline_is_refused(tmp_path):
    path = tmp_path / "mine\n.toml"
    path.write_text(BOARD.replace('name = "mps2-an386"', 'name = "mine\\n"'))
    with pytest.raises(BoardError, match="may only use"):
        load_board_file(path)


# --- sizes --------------------------------------------------------------------------------------

def test_an_impossible_graph_shape_is_refused_at_read_time(fixtures_dir, tmp_path, capsys):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")
    _edit_json(_mlp_graph(root), lambda g: g["attrs"]["shape"][1].__setitem__(3, [2**62] * 3))
    code, err = _inspect(root, capsys)
    assert code == 3 and "beyond any address space" in err and "Traceback" not in err


def test_metadata_sizes_beyond_int64_are_refused(tmp_path):
    files = TinyModel().files()
    meta = json.loads(files["metadata.json"])
    meta["modules"]["tiny"]["memory"]["functions"]["main"][0]["workspace_size_bytes"] = 10**30
    files["metadata.json"] = json.dumps(meta).encode()
    with pytest.raises(MetadataError, match="workspace_size_bytes: about 10\\^30 bytes is beyond any address space"):
        describe(_folder(files, tmp_path / "mlf"))


def _kws_with_workspace(fixtures_dir: Path, root: Path, nbytes: int) -> Path:
    root = _unpacked(fixtures_dir, KWS_NOUSMP, root)
    _edit_json(root / "metadata.json",
               lambda m: m["modules"]["default"]["memory"]["functions"]["main"][0].update(workspace_size_bytes=nbytes))
    return root


def _kws_with_allocation(fixtures_dir: Path, root: Path, nbytes: int) -> Path:
    """kws whose code asks TVMBackendAllocWorkspace for `nbytes` wherever TVM asked for 24,192: the pool
    is sized from the code's own allocation sizes, so this is what the board must bound."""
    root = _unpacked(fixtures_dir, KWS_NOUSMP, root)
    source = root / "codegen" / "host" / "src" / "default_lib1.c"
    text = source.read_text()
    assert "(uint64_t)24192," in text
    source.write_text(text.replace("(uint64_t)24192,", f"(uint64_t){nbytes},"))
    return root


@pytest.mark.cross
@pytest.mark.parametrize("board,nbytes,error,message", [
    ("mps2-an386", 10**12, InvalidInputError, "the workspace pool: 10000000"),
    ("mps2-an386", 3 * 2**30, OverBudgetError, "does not fit the board: the workspace pool needs"),
    ("host", 10**12, OverBudgetError, "host has 2147483648 bytes of static data limit"),
])
def test_workspace_sizes_are_bounded_by_the_board(fixtures_dir, tmp_path, board, nbytes, error, message):
    root = _kws_with_allocation(fixtures_dir, tmp_path / "mlf", nbytes)
    with pytest.raises(error) as caught:
        _render(root, board)
    assert message in str(caught.value) and type(caught.value) is error
    assert not (tmp_path / "project" / "src").exists()  # refused before any C was written


def test_an_impossible_metadata_workspace_is_refused_though_the_code_sizes_the_pool(fixtures_dir, tmp_path):
    with pytest.raises(InvalidInputError, match="the metadata's workspace_size_bytes: 1000000000000 bytes is "
                                                "impossible on mps2-an386"):
        _render(_kws_with_workspace(fixtures_dir, tmp_path / "mlf", 10**12), "mps2-an386")
    assert not (tmp_path / "project" / "src").exists()


@pytest.mark.cross
def test_an_overstated_metadata_workspace_does_not_size_the_pool(fixtures_dir, tmp_path):
    honest = _render(_unpacked(fixtures_dir, KWS_NOUSMP, tmp_path / "honest" / "mlf"), "mps2-an386")
    overstated = _render(_kws_with_workspace(fixtures_dir, tmp_path / "mlf", 3 * 2**30), "mps2-an386")
    assert overstated.workspace_bytes == honest.workspace_bytes < 3 * 2**30  # the code's own peak


@pytest.mark.cross
def test_an_impossible_workspace_exits_3_from_the_cli(fixtures_dir, tmp_path, capsys):
    root = _kws_with_allocation(fixtures_dir, tmp_path / "mlf", 10**12)
    assert main(["build", str(root), "-o", str(tmp_path / "out")]) == 3
    assert "impossible on mps2-an386" in capsys.readouterr().err


def test_a_metadata_tensor_size_beyond_the_address_space_is_impossible(tmp_path):
    files = TinyModel().files()
    del files["src/tiny.relay"]  # no shapes anywhere: the metadata's byte size is all there is
    meta = json.loads(files["metadata.json"])
    meta["modules"]["tiny"]["memory"]["functions"]["main"][0]["inputs"]["input"]["size"] = 10**12
    files["metadata.json"] = json.dumps(meta).encode()
    with pytest.raises(InvalidInputError, match="tiny: input 'input': 1000000000000 bytes is impossible"):
        _render(_folder(files, tmp_path / "mlf"), "mps2-an386")


def test_a_dimension_beyond_int32_is_impossible_even_for_an_empty_tensor(fixtures_dir, tmp_path):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")
    _edit_json(_mlp_graph(root), lambda g: g["attrs"]["shape"][1].__setitem__(0, [0, 2**40]))
    with pytest.raises(InvalidInputError, match="dimension 1099511627776 is impossible on host"):
        _render(root, "host")


# --- dtypes -------------------------------------------------------------------------------------

def test_a_relay_dtype_of_unknown_size_is_refused(tmp_path):
    files = TinyModel().v5_files()
    files["src/relay.txt"] = files["src/relay.txt"].replace(b"Tensor[(1, 16), int8]", b"Tensor[(1, 16), int3]")
    with pytest.raises(MetadataError, match="unsupported dtype 'int3'"):
        describe(_folder(files, tmp_path / "mlf"))


def test_a_tensor_whose_dtype_is_recorded_nowhere_is_refused(tmp_path, capsys):
    files = TinyModel().v5_files()
    del files["src/relay.txt"]  # TVM 0.8 metadata has no per-tensor dtypes
    root = _folder(files, tmp_path / "mlf")
    code, err = _inspect(root, capsys)
    assert code == 3 and "tiny: input tensor 'input': its dtype is recorded nowhere" in err


# --- graph size ---------------------------------------------------------------------------------

def _chain_graph(nodes: int) -> str:
    kernel = {"func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}
    return json.dumps({
        "nodes": [{"op": "null", "name": "x", "inputs": []}]
                 + [{"op": "tvm_op", "name": f"n{i}", "inputs": [[i - 1, 0, 0]], "attrs": kernel} for i in range(1, nodes)],
        "arg_nodes": [0], "heads": [[nodes - 1, 0, 0]], "node_row_ptr": list(range(nodes + 1)),
        "attrs": {"dltype": ["list_str", ["int8"] * nodes], "shape": ["list_shape", [[4]] * nodes],
                  "storage_id": ["list_int", [i % 2 for i in range(nodes)]]}})


def test_graph_node_count_is_capped_by_default_and_quickly():
    started = time.monotonic()
    with pytest.raises(GraphError, match=f"{DEFAULT_MAX_GRAPH_NODES + 1} nodes is more than the limit of "
                                         f"{DEFAULT_MAX_GRAPH_NODES} \\(raise it with --max-nodes\\)"):
        read_graph(_chain_graph(DEFAULT_MAX_GRAPH_NODES + 1))
    assert time.monotonic() - started < 30
    assert len(read_graph(_chain_graph(DEFAULT_MAX_GRAPH_NODES)).nodes) == DEFAULT_MAX_GRAPH_NODES


def test_the_node_limit_can_be_changed(fixtures_dir, tmp_path, capsys):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")
    assert main(["inspect", str(root), "--max-nodes", "5"]) == 3
    assert "10 nodes is more than the limit of 5" in capsys.readouterr().err
    assert main(["inspect", str(root), "--max-nodes", "10"]) == 0


def test_a_graph_text_too_long_for_its_node_limit_is_not_parsed():
    with pytest.raises(GraphError, match="bytes is more than a graph of at most 1 nodes may take"):
        read_graph(" " * 3000 + _chain_graph(1), max_nodes=1)


def test_storage_ids_are_bounded_by_the_entries():
    graph = json.loads(_chain_graph(3))
    graph["attrs"]["storage_id"][1][2] = 10**400
    with pytest.raises(GraphError, match=r"storage_id\[1\]\[2\]: about 10\^400 is out of range \(valid: in 0..2\)"):
        read_graph(json.dumps(graph))


def test_generated_c_is_capped(fixtures_dir, tmp_path, capsys):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")
    weights_as_c = describe(root).modules[0].params_bytes * 6  # what passes the check before rendering
    with pytest.raises(InvalidInputError, match=f"default: the generated C would be \\d+ bytes, above the limit of {weights_as_c}"):
        _render(root, "host", max_code_bytes=weights_as_c)
    assert main(["build", str(root), "--board", "host", "-o", str(tmp_path / "o"), "--max-code-size", "2k"]) == 3
    assert "raise it with --max-code-size" in capsys.readouterr().err


def test_weights_too_large_for_the_c_limit_are_refused_before_rendering(fixtures_dir, tmp_path):
    root = _unpacked(fixtures_dir, MLP_GRAPH, tmp_path / "mlf")
    params = describe(root).modules[0].params_bytes
    with pytest.raises(InvalidInputError, match="the weights as C initializers would be"):
        _render(root, "host", max_code_bytes=params * 6 - 1)


# --- the build's stdin and its time -------------------------------------------------------------

def _cli_with_open_stdin(args: list[str], timeout: float, logs: Path) -> subprocess.CompletedProcess:
    """Run the CLI with a stdin pipe that stays open and silent, as an interactive shell's would."""
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "mlfbuild", *args], stdin=subprocess.PIPE, stdout=stdout,
                                   stderr=stderr, cwd=REPO, start_new_session=True)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    finally:
        process.stdin.close()
    return subprocess.CompletedProcess(process.args, process.returncode, out.read_text(), err.read_text())


def _model_including(path: str, tmp_path: Path) -> Path:
    model = TinyModel()
    files = model.files()
    files["codegen/host/src/tiny_lib1.c"] = f'#include "{path}"\n{model.lib1()}'.encode()
    return tar_tree(files, tmp_path / "including.tar")


def test_generated_code_reading_stdin_reads_nothing(tmp_path):
    mlf = _model_including("/dev/stdin", tmp_path)
    # One job: GNU make hands its own stdin to the only recipe running (parallel ones get a broken one)
    result = _cli_with_open_stdin(["build", str(mlf), "--board", "host", "-o", str(tmp_path / "out"), "--jobs", "1"],
                                  timeout=60, logs=tmp_path)
    assert result.returncode == 0, result.stderr


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and proc.name != str(os.getpid()):
            found.append(f"{proc.name}: {cmdline}")
    return found


def test_a_build_that_never_ends_is_stopped_whole(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # opening it for reading waits for a writer that never comes
    mlf = _model_including(str(fifo), tmp_path)
    out = tmp_path / "out"
    started = time.monotonic()
    result = _cli_with_open_stdin(["build", str(mlf), "--board", "host", "-o", str(out), "--build-timeout", "3"],
                                  timeout=120, logs=tmp_path)
    assert result.returncode == 4, result.stderr
    assert "the build did not finish within 3 s; make and the compiler were stopped" in result.stderr
    assert "Traceback" not in result.stderr
    # The analysis gives up on the code once (10 s), not once per analysis (it was 3 × 10 s).
    assert time.monotonic() - started < 30
    assert _processes_mentioning(str(out)) == []


def test_a_compiler_that_grows_without_end_stops_at_the_memory_limit(tmp_path, capsys):
    mlf = _model_including("/dev/zero", tmp_path)  # the compiler reads it into memory, and it never ends
    assert main(["build", str(mlf), "--board", "host", "-o", str(tmp_path / "out"), "--build-memory", "256M"]) == 4
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # after the progress lines
    assert len(err) == 1 and "tiny_lib1.c): the compiler ran out of its 256 MiB of memory (cc1: out of memory" in err[0]


def test_the_memory_limit_from_the_project_file_and_in_matrix_builds(tmp_path, monkeypatch, capsys):
    from mlfbuild.matrix.stage import build_task

    mlf = _model_including("/dev/zero", tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlfbuild.toml").write_text(f'mlf = "{mlf}"\nboard = "host"\nbuild_memory = "256M"\n')
    assert main(["build", "-o", str(tmp_path / "out")]) == 4
    assert "ran out of its 256 MiB of memory" in capsys.readouterr().err
    assert main(["build", "-o", str(tmp_path / "flag"), "--build-memory", "320M"]) == 4  # a flag wins over the file
    assert "ran out of its 320 MiB of memory" in capsys.readouterr().err
    spec = {"mlf_name": "model.tar", "board": "host", "board_file_names": [], "opt": "-Os", "runtime": "builtin",
            "budget_flash": None, "budget_ram": None, "build_memory": 288 << 20, "timeout": 300}
    built = build_task(spec, mlf.read_bytes(), [], None)
    assert built["status"] == "build error" and "ran out of its 288 MiB of memory" in built["message"], built


@pytest.mark.parametrize("value, why", [("0", "must be from 64M to 1024G, got '0'"), ("1K", "must be from 64M"),
                                        ("2048G", "must be from 64M"), (str(2**64), "must be from 64M"),
                                        ("lots", "not a size: 'lots'")])
def test_a_memory_limit_out_of_range_is_one_line_in_flag_project_file_and_matrix(value, why, tmp_path,
                                                                                 monkeypatch, capsys):
    from mlfbuild.matrix import BuildConfig
    from mlfbuild.errors import UsageError

    monkeypatch.chdir(tmp_path)
    for command in (["build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host"], ["matrix", "--build-only"]):
        assert main([*command, "-o", str(tmp_path / "out"), "--build-memory", value]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"--build-memory: {why}" in err, err
    (tmp_path / "mlfbuild.toml").write_text(f'build_memory = "{value}"\n')
    assert main(["build", str(REPO / "examples" / "tiny_aot.tar"), "-b", "host", "-o", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"mlfbuild.toml: build_memory: {why}" in err, err
    assert not (tmp_path / "out").exists()
    with pytest.raises(UsageError, match="build_memory: "):
        BuildConfig(build_memory=int(value) if value.isdigit() else value)


def _set(data: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


@pytest.mark.parametrize("fixture, path, value, said", [
    (None, ("style",), float("nan"), "metadata.json.style: expected a string, got a number nan"),
    ("v5", ("style",), float("nan"), "metadata.json.style: expected a string, got a number nan"),
    (None, ("style",), "full-modle", "metadata.json.style: expected one of 'full-model', 'operator', got a string"),
    (("tvm-0.13", "op_vector_add_c.tar"), ("memory", "vector_add", 0, "input_binding"), float("nan"),
     "input_binding: expected a string or null, got a number nan"),
    (("tvm-0.13", "kws_aot_c_unpacked_usmp.tar"),
     ("modules", "kws", "external_dependencies", 0, "version_spec"), float("nan"),
     "version_spec: expected a string or null, got a number nan"),
], ids=["style-nan", "v5-style-nan", "style-unknown", "input-binding-nan", "version-spec-nan"])
def test_a_metadata_string_that_is_not_a_string_is_refused(fixtures_dir, tmp_path, capsys, fixture, path, value, said):
    if isinstance(fixture, tuple):
        root = _unpacked(fixtures_dir, fixture, tmp_path / "mlf")
    else:
        model = TinyModel()
        root = _folder(model.v5_files() if fixture == "v5" else model.files(), tmp_path / "mlf")
    _edit_json(root / "metadata.json", lambda data: _set(data, path, value))
    code, err = _inspect(root, capsys)
    assert code == 3 and said in err and len(err.strip().splitlines()) == 1, err


def test_export_s_compiler_reads_no_stdin_either(tmp_path):
    """export compiles the MLF's code for its prebuilt libraries outside make: the same limits apply
    (it inherited the terminal's stdin, and an `#include "/dev/stdin"` waited for it forever)."""
    mlf = _model_including("/dev/stdin", tmp_path)
    result = _cli_with_open_stdin(["export", str(mlf), "--board", "host", "-o", str(tmp_path / "out")],
                                  timeout=60, logs=tmp_path)
    assert result.returncode == 0, result.stderr
