"""Property tests for the parsers of untrusted input not covered elsewhere: board files, the
firmware's console replies, tensor files and ELF files given to `size`."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import REPO
from mlfbuild.boards import load_board_file
from mlfbuild.errors import BoardError, InvalidInputError, RunError
from mlfbuild.run.tensorfile import load_tensors
from mlfbuild.console.client import Client
from mlfbuild.console.frames import encode_frame
from mlfbuild.size import size_report

BOARD = (REPO / "boards" / "mps2-an386.toml").read_text()
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.data())
def test_board_files_fail_only_with_board_errors(tmp_path_factory, data):
    lines = BOARD.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        choice = data.draw(st.sampled_from(["drop", "replace", "garble", "value"]))
        if choice == "drop":
            lines.pop(index)
        elif choice == "replace":
            lines[index] = data.draw(st.text(max_size=30))
        elif choice == "garble":
            line = lines[index]
            cut = data.draw(st.integers(0, len(line)))
            lines[index] = line[:cut] + data.draw(st.text(max_size=5)) + line[cut:]
        elif "=" in lines[index]:
            key = lines[index].split("=", 1)[0]
            value = data.draw(st.sampled_from(['"x"', "-1", "0", "true", "[]", "{}", "1e99", "0xFFFFFFFFFFFF", '""']))
            lines[index] = f"{key}= {value}"
    path = tmp_path_factory.mktemp("board") / "mps2-an386.toml"
    path.write_bytes("\n".join(lines).encode("utf-8", errors="replace"))
    try:
        load_board_file(path)
    except BoardError as exc:
        assert "\n" not in str(exc)


class _Replay:
    """A port that plays back fixed bytes, then stays silent."""

    def __init__(self, data: bytes):
        self.stream = io.BytesIO(data)
        self.written = b""

    def read(self, size=1):
        return self.stream.read(size)

    def write(self, data):
        self.written += data
        return len(data)


@SETTINGS
@given(noise=st.binary(max_size=200), reply=st.binary(max_size=40), kind=st.sampled_from("hpzxo?"),
       seq=st.sampled_from([0, 1, 2, 255]))
def test_console_replies_never_crash_the_client(noise, reply, kind, seq):
    stream = noise + encode_frame(kind, reply, seq)
    client = Client(_Replay(stream), timeout=0.01)
    try:
        client.request("P", b"x", "p")
    except RunError as exc:
        assert "\n" not in str(exc)


_COMMANDS = {"hello": ("h", lambda c: c.hello()), "run": ("x", lambda c: c.run(0)),
             "read": ("o", lambda c: c.read_output(0, 0, 4)), "write": ("k", lambda c: c.write_input(0, 0, b"abc"))}


@SETTINGS
@given(command=st.sampled_from(sorted(_COMMANDS)), payload=st.binary(max_size=40))
# Past failures, kept: a 2-byte run reply was unpacked unchecked (struct.error and an orphaned
# QEMU); so was a short hello; a hello announcing a max_payload below the protocol minimum was taken.
@example(command="run", payload=b"\x01\x02")
@example(command="hello", payload=b"\x02\x01")
@example(command="hello", payload=struct.pack("<BBII", 2, 1, 1000, 0) + b"board")
def test_a_reply_of_the_right_kind_with_any_payload_is_a_result_or_a_run_error(command, payload):
    kind, call = _COMMANDS[command]
    client = Client(_Replay(b""), timeout=0.04, attempt_seconds=0.02)
    client.port = _Replay(encode_frame(kind, payload, client._seq % 255 + 1))
    try:
        call(client)
    except RunError as exc:
        assert "\n" not in str(exc)


def test_the_client_skips_replies_that_answer_other_requests():
    client = Client(_Replay(b""), timeout=0.5, attempt_seconds=0.5)
    seq = client._seq % 255 + 1  # the number the next request gets
    client.port = _Replay(encode_frame("z", b"\x04bad arguments", 0)  # about a frame that was not ours
                          + encode_frame("h", b"", seq)  # stale traffic that happens to carry our number
                          + encode_frame("p", b"old", (seq + 7) % 256)  # the answer to some earlier request
                          + encode_frame("p", b"pong", seq))
    assert client.request("P", b"pong", "p") == b"pong"
    assert client.unexpected == {"h"}
    client.port = _Replay(encode_frame("h", b"", seq % 255 + 1))
    with pytest.raises(RunError, match="replies to other requests came: hello"):
        client.request("P", b"", "p")


def test_a_refusal_of_our_own_request_ends_it_with_the_firmware_s_reason():
    client = Client(_Replay(b""), timeout=0.5)
    client.port = _Replay(encode_frame("z", b"\x04bad arguments", client._seq % 255 + 1))
    with pytest.raises(RunError, match="the firmware refused the output read request: bad arguments"):
        client.request("R", b"\x09", "o")


@SETTINGS
@given(blob=st.binary(max_size=400))
def test_arbitrary_bytes_as_console_never_crash_the_client(blob):
    client = Client(_Replay(blob), timeout=0.01)
    try:
        client.hello()
    except RunError:
        pass


@SETTINGS
@given(blob=st.binary(max_size=300), suffix=st.sampled_from([".npz", ".npy"]))
def test_tensor_files_fail_only_with_invalid_input(tmp_path_factory, blob, suffix):
    path = tmp_path_factory.mktemp("tensors") / f"t{suffix}"
    path.write_bytes(blob)
    try:
        load_tensors(path)
    except InvalidInputError:
        pass


def _npy(shape: tuple[int, ...], dtype: str, data: bytes) -> bytes:
    """A .npy file whose header says `shape` and `dtype`, followed by `data` whatever its length."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + data


def _npz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@SETTINGS
@given(shape=st.lists(st.integers(0, 1 << 42), max_size=4).map(tuple), dtype=st.sampled_from(["|i1", "<i4", "<f8"]),
       extra=st.integers(-8, 8), archived=st.booleans())
# A header that declares 2^40 elements once ended in numpy's _ArrayMemoryError.
@example(shape=(1 << 40,), dtype="|i1", extra=-(1 << 40), archived=False)
@example(shape=(1 << 20, 1 << 20), dtype="<i4", extra=0, archived=True)
def test_array_headers_must_describe_the_bytes_they_hold(tmp_path_factory, shape, dtype, extra, archived):
    elements = int(np.prod(shape, dtype=object)) if shape else 1
    held = max(min(elements * np.dtype(dtype).itemsize + extra, 4096), 0)
    npy = _npy(shape, dtype, bytes(held))
    path = tmp_path_factory.mktemp("headers") / ("t.npz" if archived else "t.npy")
    path.write_bytes(_npz({"output_0.npy": npy}) if archived else npy)
    try:
        tensors = load_tensors(path)
    except InvalidInputError as error:
        assert "\n" not in str(error)
        return
    array = tensors["output_0" if archived else ""]
    assert array.shape == shape and array.nbytes == held


@pytest.mark.parametrize("archived", [False, True])
def test_a_header_declaring_2_to_the_40_elements_is_invalid_input(tmp_path, archived):
    npy = _npy((1 << 40,), "|i1", b"\0" * 16)
    path = tmp_path / ("huge.npz" if archived else "huge.npy")
    path.write_bytes(_npz({"input.npy": npy}) if archived else npy)
    with pytest.raises(InvalidInputError, match=r"declares 1,099,511,627,776 elements of int8 .* holds 16 B"):
        load_tensors(path)


def test_a_tensor_file_that_is_a_fifo_is_refused_at_once(tmp_path):
    import os

    os.mkfifo(tmp_path / "ref.npz")
    with pytest.raises(InvalidInputError, match="not a regular file"):
        load_tensors(tmp_path / "ref.npz")


def test_a_real_tensor_file_with_pickled_objects_is_refused(tmp_path):
    path = tmp_path / "evil.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InvalidInputError):
        load_tensors(path)


@SETTINGS
@given(blob=st.binary(max_size=600))
def test_size_refuses_broken_elf_files(tmp_path_factory, blob):
    folder = tmp_path_factory.mktemp("elf")
    (folder / "firmware.elf").write_bytes(b"\x7fELF" + blob)
    record = json.loads(json.dumps({"board": {"name": "x", "kind": "qemu", "memory": {
        "flash": {"origin": 0, "length": 1 << 20}, "ram": {"origin": 0x20000000, "length": 1 << 16},
        "stack_bytes": 1024, "heap_bytes": 0}}, "library": {"modules": []}, "models": []}))
    try:
        size_report(folder / "firmware.elf", record)
    except InvalidInputError as exc:
        assert "\n" not in str(exc)


# --- hostile MLFs: relay text, names, sizes -------------------------------------------------------
# Whatever the MLF says, reading it and rendering its project ends in the project's own errors
# (exit 3 or 5), and any name that reaches C is there only as an escaped string or comment.

import subprocess  # noqa: E402
import tarfile  # noqa: E402



from mlfbuild.boards import load_board  # noqa: E402
from mlfbuild.errors import OverBudgetError  # noqa: E402
from mlfbuild.mlf import relay  # noqa: E402
from mlfbuild.mlf.reader import describe  # noqa: E402
from mlfbuild.project import render_project  # noqa: E402
from mlfbuild.project.ctext import c_comment_text, c_string_body  # noqa: E402
from mlfwriter import TinyModel  # noqa: E402

HOSTILE = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_RELAY_PIECES = st.sampled_from(["def @main(", "%input", ": ", "Tensor[(", "1, 16", "), ", "int8", "int3", "float32",
                                 "]", ", ", ") -> ", "{", "}", "\n", "%0 = ", "nn.dense(", "units=8", "reshape(",
                                 "newshape=[-1, 4]", 'out_dtype="int3"', "qnn.quantize(", "%0", ");", "/* x */",
                                 "99999999999999999999999", "-1", "?", "0"])


def _write(files: dict[str, bytes], root: Path) -> Path:
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    return root


def _read_and_render(root: Path, board: str = "host") -> None:
    """Only the project's own errors may come out, each one line."""
    try:
        render_project(describe(root), load_board(board), root.parent / "project")
    except (InvalidInputError, OverBudgetError) as exc:
        assert "\n" not in str(exc)


@HOSTILE
@given(text=st.one_of(st.text(max_size=200), st.lists(_RELAY_PIECES, max_size=40).map("".join)))
@example(text="def @main(%input: Tensor[(1, 16), int3]) -> Tensor[(1, 4), int8] {\n  %0\n}\n")
@example(text="def @main(%input: Tensor[(1, 99999999999999999999999), int8]) {\n  %0\n}\n")
@example(text='def @main(%input: Tensor[(1, 16), int8]) {\n  %0 = nn.dense(%input, units=4, out_dtype="int3");\n'
              "  qnn.quantize(%0)\n}\n")
def test_relay_text_fails_only_with_invalid_input(tmp_path_factory, text):
    relay.main_signature(text)
    relay.infer_single_output(text, None)
    relay.infer_single_output(text, 4)
    files = TinyModel().v5_files()
    files["src/relay.txt"] = text.encode()
    _read_and_render(_write(files, tmp_path_factory.mktemp("relay") / "mlf"))


def _named_input(name: str) -> dict[str, bytes]:
    model = TinyModel()
    files = model.files()
    files["codegen/host/include/tvmgen_tiny.h"] = model.header().replace("void* input;", "void* in_put;").encode()
    files["codegen/host/src/tiny_lib0.c"] = model.lib0().replace("inputs->input", "inputs->in_put").encode()
    meta = json.loads(files["metadata.json"])
    meta["modules"]["tiny"]["memory"]["functions"]["main"][0]["inputs"] = {name: {"dtype": "int8", "size": 16}}
    files["metadata.json"] = json.dumps(meta).encode()
    return files


@HOSTILE
@given(middle=st.text(max_size=30))
@example(middle='"')
@example(middle="\n")
@example(middle="\\")
@example(middle="??/")
@example(middle="*/ int PWNED = 1; /*")
def test_tensor_names_reach_c_only_escaped(tmp_path_factory, middle):
    name = f"in{middle}put"  # TVM's sanitised C name of it is the header's in_put only for one-char middles
    root = _write(_named_input(name), tmp_path_factory.mktemp("name") / "mlf")
    try:
        project = render_project(describe(root), load_board("host"), root.parent / "project")
    except InvalidInputError as exc:
        assert "\n" not in str(exc)
        return
    # the console's table (models.c) and the application's header (mlf_tiny.h) both carry the name
    for rendered in (project.path / "src" / "models.c", project.path / "include" / "mlf_tiny.h"):
        if len(middle) == 1 and not middle.isalnum():
            assert f'"{c_string_body(name)}"' in rendered.read_text(), rendered.name


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=30))
@example(names=['in"put', "a\\b", "??/", "x */ int PWNED = 1; /* y", "\u2028é\x00", "0123\t7"])
def test_escaped_names_compile_to_their_own_bytes(tmp_path_factory, names):
    """Through a real C compiler: each escaped string holds exactly the name's UTF-8 bytes, and no
    comment made from a name ends early (the program would not compile, or PWNED would be defined)."""
    folder = tmp_path_factory.mktemp("cstr")
    body = "".join(f'  /* {c_comment_text(n)} */ "{c_string_body(n)}",\n' for n in names)
    source = ('#include <stdio.h>\n#include <string.h>\nstatic const char* const names[] = {\n' + body + "};\n"
              "int main(void) {\n  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {\n"
              '    for (const char* c = names[i]; *c; c++) printf("%02x", (unsigned char)*c);\n'
              '    printf("\\n");\n  }\n  return 0;\n}\n')
    (folder / "names.c").write_text(source)
    subprocess.run(["gcc", "-std=c99", "-trigraphs", "-Wall", "-Werror", "-o", str(folder / "names"),
                    str(folder / "names.c")], check=True, capture_output=True)
    printed = subprocess.run([str(folder / "names")], check=True, capture_output=True, text=True).stdout.split("\n")
    # C strings end at the first NUL: that is all a name with a NUL can carry
    assert printed[:-1] == [n.encode().split(b"\0")[0].hex() for n in names]


_SIZES = st.one_of(st.integers(-2, 2**70), st.sampled_from([10**12, 10**30, 2**31, 2**32, 2**63, 10**400]))
_SIZE_FIELDS = [("workspace_size_bytes",), ("constants_size_bytes",), ("io_size_bytes",), ("inputs", "input", "size"),
                ("outputs", "output", "size")]


@pytest.mark.cross
@HOSTILE
@given(changes=st.lists(st.tuples(st.sampled_from(_SIZE_FIELDS), _SIZES), min_size=1, max_size=3),
       board=st.sampled_from(["host", "mps2-an386"]), relay_shapes=st.booleans())
@example(changes=[(("workspace_size_bytes",), 10**30)], board="mps2-an386", relay_shapes=True)
@example(changes=[(("inputs", "input", "size"), 10**12)], board="mps2-an386", relay_shapes=False)
def test_metadata_sizes_fail_only_with_invalid_input_or_over_budget(tmp_path_factory, changes, board, relay_shapes):
    files = TinyModel().files()
    if not relay_shapes:
        del files["src/tiny.relay"]
    meta = json.loads(files["metadata.json"])
    main = meta["modules"]["tiny"]["memory"]["functions"]["main"][0]
    for path, value in changes:
        node = main
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    files["metadata.json"] = json.dumps(meta).encode()
    _read_and_render(_write(files, tmp_path_factory.mktemp("sizes") / "mlf"), board)


_GRAPH_VALUES = st.one_of(_SIZES, st.lists(_SIZES, max_size=4), st.text(max_size=12),
                          st.sampled_from(["x */ int PWNED = 1; /* y", "f(); int x", "abc\n", "__nop", "int3"]))


@pytest.mark.cross
@HOSTILE
@given(data=st.data())
def test_graph_values_fail_only_with_invalid_input_or_over_budget(fixtures_dir, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("graph") / "mlf"
    with tarfile.open(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar") as tar:
        tar.extractall(root, filter="data")
    path = root / "executor-config" / "graph" / "default.graph"
    graph = json.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        place = data.draw(st.sampled_from(["shape", "storage_id", "name", "func_name", "dltype"]))
        value = data.draw(_GRAPH_VALUES)
        if place in ("shape", "storage_id", "dltype"):
            column = graph["attrs"][place][1]
            column[data.draw(st.integers(0, len(column) - 1))] = value
        else:
            node = graph["nodes"][data.draw(st.integers(0, len(graph["nodes"]) - 1))]
            if place == "name":
                node["name"] = value
            elif "attrs" in node:
                node["attrs"]["func_name"] = value
    path.write_text(json.dumps(graph))
    _read_and_render(root, data.draw(st.sampled_from(["host", "mps2-an386"])))


# --- size snapshots (`size --diff BASE.json`) ------------------------------------------------------

SNAPSHOT = {
    "schema": "mlfbuild-size/1",
    "build": {"board": "mps2-an386", "toolchain": "gcc", "mlf": {"name": "m.tar", "sha256": "ab" * 32}},
    "flash": {"used": 5000, "budget": 65536}, "ram": {"used": 1000, "budget": None},
    "categories": [{"name": "model", "label": "model", "flash": 400, "ram": 16,
                    "subcategories": [{"name": "constants", "module": "m", "flash": 400, "ram": 0}]}],
    "symbols": [{"name": "tvmgen_m_run", "category": "model", "subcategory": "code", "module": "m",
                 "file": "m_lib0.c", "flash": 40, "ram": 0, "sections": [".text"]}],
    "modules": [{"name": "m", "predicted_vs_linked": [{"kind": "workspace", "device": 1, "linked": 16,
                                                      "predicted": 16, "explanation": "as planned"}]}],
}


def _paths(value, prefix=()):
    """Every path into a JSON value: keys of objects, indices of lists."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield from _paths(inner, prefix + (key,))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=6)
_SNAPSHOT_PATHS = [p for p in _paths(SNAPSHOT) if p and p != ("schema",)]


def _mutated(path: tuple, replacement, delete: bool) -> dict:
    snapshot = json.loads(json.dumps(SNAPSHOT))
    parent = snapshot
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return snapshot


@SETTINGS
@given(path=st.sampled_from(_SNAPSHOT_PATHS), replacement=_JSON, delete=st.booleans())
# Fields missing or of another kind once ended in KeyError or TypeError, in text and Markdown alike.
@example(path=("flash",), replacement=None, delete=True)
@example(path=("ram", "used"), replacement="1000", delete=False)
@example(path=("categories", 0, "subcategories", 0, "flash"), replacement=None, delete=False)
@example(path=("categories",), replacement={"model": 1}, delete=False)
@example(path=("symbols", 0, "name"), replacement=None, delete=True)
@example(path=("symbols", 0, "flash"), replacement=[1], delete=False)
@example(path=("modules", 0, "predicted_vs_linked", 0, "kind"), replacement=None, delete=True)
@example(path=("build", "mlf"), replacement=["m.tar"], delete=False)
@example(path=("flash", "used"), replacement=float("nan"), delete=False)
def test_size_snapshots_fail_only_with_invalid_input(tmp_path_factory, path, replacement, delete):
    from mlfbuild.size import diff, load_snapshot

    file = tmp_path_factory.mktemp("snapshot") / "base.json"
    file.write_text(json.dumps(_mutated(path, replacement, delete)))
    try:
        changes = diff(load_snapshot(file), SNAPSHOT)
    except InvalidInputError as error:
        assert "\n" not in str(error) and str(file) in str(error)
        return
    changes.format_text()
    changes.format_markdown()
    json.dumps(changes.to_json())
