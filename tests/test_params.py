"""mlfbuild.mlf.params: TVM `.params` files — real files, round trips, every check, fuzzing."""

from __future__ import annotations

import json
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mlfbuild.errors import EXIT_INVALID_INPUT, ParamsError
from mlfbuild.mlf.dtypes import DTYPE_BYTES, dtype_nbytes
from mlfbuild.mlf.graph import read_graph
from mlfbuild.mlf.params import ARRAY_MAGIC, LIST_MAGIC, Param, params_summary, read_params, write_params

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- helpers ----------------------------------------------------------------------------------------

def tar_members(tar_path: Path, suffix: str) -> dict[str, bytes]:
    """{member name: bytes} of the regular files in `tar_path` whose name ends with `suffix`."""
    with tarfile.open(tar_path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile() and m.name.endswith(suffix)}


def fixture_tars(fixtures_dir: Path) -> list[Path]:
    tars = sorted(fixtures_dir.glob("tvm-*/*.tar"))
    assert tars, f"no fixture tarballs under {fixtures_dir}"
    return tars


def manifest_entry(tar_path: Path) -> dict:
    manifest = json.loads((tar_path.parent / "manifest.json").read_text())
    return next(f for f in manifest["fixtures"] if f["file"] == tar_path.name)


def expected_size(params: dict[str, Param]) -> int:
    """File size implied by the parsed content: header, names, array headers, data."""
    size = 32
    for name, p in params.items():
        size += 8 + len(name.encode("utf-8")) + 40 + 8 * len(p.shape) + len(p.data)
    return size


def header(n_names: int) -> bytes:
    return struct.pack("<QQQ", LIST_MAGIC, 0, n_names)


def name_block(*names: str | bytes) -> bytes:
    out = b""
    for name in names:
        raw = name.encode() if isinstance(name, str) else name
        out += struct.pack("<Q", len(raw)) + raw
    return out


def array_block(shape=(2,), code=0, bits=8, lanes=1, *, magic=ARRAY_MAGIC, device_type=1, ndim=None,
                size=None, data=None) -> bytes:
    ndim = len(shape) if ndim is None else ndim
    count = int(np.prod(shape, dtype=object)) if shape else 1
    if size is None:
        size = count * ((bits + 7) // 8)
    if data is None:
        data = bytes(size) if 0 <= size < 1 << 20 else b""
    return (struct.pack("<QQiiiBBH", magic, 0, device_type, 0, ndim, code, bits, lanes)
            + b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<q", size) + data)


def blob(names=("a",), arrays=None, *, n_names=None, n_arrays=None) -> bytes:
    arrays = [array_block() for _ in names] if arrays is None else arrays
    return (header(len(names) if n_names is None else n_names) + name_block(*names)
            + struct.pack("<Q", len(arrays) if n_arrays is None else n_arrays) + b"".join(arrays))


def rejects(data: bytes, *fragments: str, source: str = "test.params") -> str:
    """read_params must raise ParamsError with a one-line message holding every fragment."""
    with pytest.raises(ParamsError) as info:
        read_params(data, source=source)
    message = str(info.value)
    assert "\n" not in message and len(message.splitlines()) == 1, message
    assert message.startswith(f"{source}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert info.value.exit_code == EXIT_INVALID_INPUT
    return message


def check_outcome(data: bytes) -> None:
    """Fuzz oracle: ParamsError or a result that is consistent with the bytes it came from."""
    try:
        params = read_params(data)
    except ParamsError as exc:
        assert len(str(exc).splitlines()) == 1
        return
    for p in params.values():
        count = 1
        for dim in p.shape:
            count *= dim
        assert len(p.data) == count * dtype_nbytes(p.dtype)
        assert p.array().shape == p.shape
    assert expected_size(params) == len(data)
    rewritten = write_params(params)  # reserved fields / device_id may differ, the layout may not
    assert len(rewritten) == len(data)
    assert read_params(rewritten) == params


# --- dtypes -----------------------------------------------------------------------------------------

def test_dtype_sizes():
    assert dtype_nbytes("int8") == 1 and dtype_nbytes("bool") == 1
    assert dtype_nbytes("float16") == 2 and dtype_nbytes("uint32") == 4 and dtype_nbytes("float64") == 8
    assert set(DTYPE_BYTES) == {f"{k}{b}" for k in ("int", "uint") for b in (8, 16, 32, 64)} | {
        "float16", "float32", "float64", "bool"}
    for bad in ("bfloat16", "int4", "float8", "", "handle", None):
        with pytest.raises(ValueError):
            dtype_nbytes(bad)


# --- real files -------------------------------------------------------------------------------------

def test_every_fixture_params_file_parses_and_round_trips(fixtures_dir):
    seen = 0
    for tar_path in fixture_tars(fixtures_dir):
        for member, data in tar_members(tar_path, ".params").items():
            where = f"{tar_path.name}:{member}"
            params = read_params(data, source=where)
            assert expected_size(params) == len(data), where
            count, total = params_summary(data, source=where)
            assert count == len(params) and total == sum(p.nbytes for p in params.values())
            assert write_params({n: p.array() for n, p in params.items()}) == data, where
            assert write_params(params) == data, where
            seen += 1
    assert seen >= 20


def test_aot_and_linked_v7_params_are_empty_containers(fixtures_dir):
    empties = 0
    for tar_path in sorted((fixtures_dir / "tvm-0.13").glob("*.tar")):
        entry = manifest_entry(tar_path)
        if entry.get("executor") == "aot" or entry.get("link_params"):
            for member, data in tar_members(tar_path, ".params").items():
                assert len(data) == 32, member
                assert read_params(data) == {}
                assert params_summary(data) == (0, 0)
                assert data == write_params({})
                empties += 1
    assert empties >= 10


def test_graph_fixture_params_are_exactly_the_non_input_arg_nodes(fixtures_dir):
    checked = 0
    for tar_path in fixture_tars(fixtures_dir):
        entry = manifest_entry(tar_path)
        if entry.get("executor") != "graph":
            continue
        graphs = tar_members(tar_path, ".graph") or tar_members(tar_path, "graph.json")
        (graph_text,) = graphs.values()
        (params_data,) = tar_members(tar_path, ".params").values()
        graph = read_graph(graph_text)
        params = read_params(params_data)
        inputs = [i["name"] for i in entry["inputs"]]
        if not params:  # v7 with link-params: weights are in the code
            assert entry["link_params"] and graph.input_names(set()) == inputs
            continue
        arg_names = [graph.nodes[i].name for i in graph.arg_nodes]
        assert set(params) == set(arg_names) - set(inputs), tar_path.name
        assert graph.input_names(set(params)) == inputs
        for nid in graph.arg_nodes:
            node = graph.nodes[nid]
            if node.name in params:
                e = graph.entries[graph.entry_id(nid, 0)]
                assert (params[node.name].shape, params[node.name].dtype) == (e.shape, e.dtype), node.name
        checked += 1
    assert checked >= 6


def test_kws_v013_params_content(fixtures_dir):
    (data,) = tar_members(fixtures_dir / "tvm-0.13" / "kws_graph_c.tar", ".params").values()
    assert len(data) == 56708
    params = read_params(data)
    assert len(params) == 50 and params_summary(data) == (50, 53304)
    assert list(params)[:3] == ["p15", "p32", "p2"]  # file (hash) order, not sorted
    assert {p.dtype for p in params.values()} == {"int16", "int32"}
    assert params["p2"].shape == (1, 1, 1, 64) and params["p2"].array().dtype == np.int32


def test_v08_kws_has_scalar_params(fixtures_dir):
    (data,) = tar_members(fixtures_dir / "tvm-0.8" / "kws_graph_c.tar", ".params").values()
    params = read_params(data)
    scalars = [p for p in params.values() if p.shape == ()]
    assert scalars and all(len(p.data) == dtype_nbytes(p.dtype) for p in scalars)
    assert scalars[0].array().shape == ()


# --- format basics ----------------------------------------------------------------------------------

def test_empty_container():
    data = struct.pack("<QQQQ", LIST_MAGIC, 0, 0, 0)
    assert len(data) == 32 and read_params(data) == {} and write_params({}) == data


def test_minimal_file_by_hand():
    data = blob(("w",), [array_block((2, 3), code=0, bits=8, data=bytes(range(6)))])
    params = read_params(data)
    assert list(params) == ["w"]
    p = params["w"]
    assert (p.name, p.dtype, p.shape, p.data) == ("w", "int8", (2, 3), bytes(range(6)))
    np.testing.assert_array_equal(p.array(), np.arange(6, dtype=np.int8).reshape(2, 3))


@pytest.mark.parametrize("code,bits,dtype", [
    (0, 8, "int8"), (0, 16, "int16"), (0, 32, "int32"), (0, 64, "int64"),
    (1, 8, "uint8"), (1, 16, "uint16"), (1, 32, "uint32"), (1, 64, "uint64"),
    (2, 16, "float16"), (2, 32, "float32"), (2, 64, "float64"), (1, 1, "bool"),
])
def test_supported_type_codes(code, bits, dtype):
    params = read_params(blob(("t",), [array_block((3,), code=code, bits=bits)]))
    assert params["t"].dtype == dtype and len(params["t"].data) == 3 * DTYPE_BYTES[dtype]
    assert params["t"].array().dtype == np.dtype(dtype)


def test_little_endian_decoding():
    data = blob(("x",), [array_block((2,), code=0, bits=32, data=struct.pack("<ii", 1, -2))])
    assert read_params(data)["x"].array().tolist() == [1, -2]
    data = blob(("f",), [array_block((), code=2, bits=32, data=struct.pack("<f", 1.5))])
    assert read_params(data)["f"].array().item() == 1.5


def test_scalar_and_zero_sized_arrays():
    data = blob(("s", "z"), [array_block((), code=0, bits=32), array_block((0, 5), code=2, bits=32)])
    params = read_params(data)
    assert params["s"].shape == () and len(params["s"].data) == 4
    assert params["z"].shape == (0, 5) and params["z"].data == b"" and params["z"].array().shape == (0, 5)


def test_order_is_file_order_and_unicode_names():
    names = ("zeta", "alpha", "größe", "m:1")
    params = read_params(blob(names))
    assert tuple(params) == names


def test_param_is_frozen():
    p = read_params(blob())["a"]
    with pytest.raises(AttributeError):
        p.name = "b"  # type: ignore[misc]


# --- every check, by hand -----------------------------------------------------------------------

def test_error_message_format_matches_the_house_style():
    names = ("p0", "p1", "p3", "p2")
    arrays = [array_block() for _ in range(3)] + [array_block((1 << 32,), size=1 << 32, data=bytes(120))]
    message = rejects(blob(names, arrays), source="kws.params")
    assert message == "kws.params: array 3 ('p2') declares 4294967296 data bytes but only 120 remain"


@pytest.mark.parametrize("data,fragment", [
    (b"", "too short"),
    (b"\x00" * 7, "too short"),
    (struct.pack("<Q", LIST_MAGIC), "truncated"),
    (struct.pack("<QQ", LIST_MAGIC, 0), "name count"),
    (struct.pack("<QQQ", LIST_MAGIC, 0, 0), "array count"),
])
def test_truncated_headers(data, fragment):
    rejects(data, fragment)


def test_bad_list_magic():
    rejects(struct.pack("<QQQQ", 0x1234, 0, 0, 0), "not a TVM params file", "0x0000000000001234")
    rejects(b"PK\x03\x04" + bytes(40), "not a TVM params file")
    rejects(struct.pack(">QQQQ", LIST_MAGIC, 0, 0, 0), "not a TVM params file")  # big-endian writer


@pytest.mark.parametrize("n_names", [1, 2**32, 2**63, 2**64 - 1])
def test_name_count_beyond_the_file(n_names):
    rejects(header(n_names), f"declares {n_names} names")


@pytest.mark.parametrize("length", [1, 100, 2**31, 2**64 - 1])
def test_name_length_beyond_the_file(length):
    rejects(header(1) + struct.pack("<Q", length), f"name 0 declares {length} bytes")


def test_name_not_utf8():
    rejects(blob((b"\xff\xfe",)), "name 0 is not valid UTF-8", "fffe")


def test_duplicate_names():
    rejects(blob(("a", "b", "a")), "name 2 ('a') appears twice")


@pytest.mark.parametrize("n_arrays", [0, 2, 2**64 - 1])
def test_array_count_differs_from_name_count(n_arrays):
    rejects(blob(("a",), n_arrays=n_arrays), f"declares {n_arrays} arrays for 1 names")


def test_array_count_beyond_the_file():
    rejects(blob(("a", "b", "c"), [], n_arrays=3), "declares 3 arrays but only 0 bytes remain")


def test_truncated_array_header():
    rejects(blob(("a",), [array_block()[:20]]), "declares 1 arrays but only 20 bytes remain")
    big = array_block((8, 8))  # room for two minimal arrays, but the second header is cut short
    rejects(blob(("a", "b"), [big, array_block()[:20]]), "the header of array 1 ('b')")


def test_bad_array_magic():
    rejects(blob(("w",), [array_block(magic=0xDEADBEEF)]), "array 0 ('w')", "bad array magic")


@pytest.mark.parametrize("device_type", [0, 2, 4, -1])
def test_device_type_must_be_cpu(device_type):
    rejects(blob(("w",), [array_block(device_type=device_type)]), "array 0 ('w')", f"device type {device_type}")


@pytest.mark.parametrize("ndim", [-1, 33, 2**31 - 1, -(2**31)])
def test_ndim_out_of_range(ndim):
    rejects(blob(("w",), [array_block((), ndim=ndim)]), "array 0 ('w')", f"ndim {ndim}")


def test_ndim_32_is_accepted():
    shape = (1,) * 32
    assert read_params(blob(("w",), [array_block(shape)]))["w"].shape == shape


@pytest.mark.parametrize("lanes", [0, 2, 4, 65535])
def test_vector_lanes_rejected(lanes):
    rejects(blob(("v",), [array_block(lanes=lanes)]), "array 0 ('v')", f"{lanes} lanes")


@pytest.mark.parametrize("code,bits,kind", [
    (4, 16, "bfloat"), (3, 64, "opaque handle"), (5, 64, "complex"), (5, 128, "complex"),
    (0, 1, "int"), (0, 4, "int"), (0, 128, "int"), (1, 7, "uint"), (2, 8, "float"), (2, 128, "float"),
    (6, 8, "type code 6"), (255, 8, "type code 255"),
])
def test_unsupported_element_types(code, bits, kind):
    rejects(blob(("q",), [array_block(code=code, bits=bits, size=2)]), "array 0 ('q')", kind, f"{bits} bits")


def test_negative_dimension():
    rejects(blob(("w",), [array_block((2, -3), size=0)]), "array 0 ('w')", "negative dimension")


def test_truncated_shape():
    block = array_block((2, 3, 4))
    cut = struct.calcsize("<QQiiiBBH") + 8  # only the first of three dims
    rejects(blob(("w",), [block[:cut]]), "the shape of array 0 ('w')")


def test_negative_data_size():
    rejects(blob(("w",), [array_block(size=-1)]), "negative data size -1")


def test_data_size_differs_from_shape():
    rejects(blob(("w",), [array_block((2, 3), code=0, bits=32, size=6, data=bytes(6))]),
            "array 0 ('w')", "declares 6 data bytes but int32[2, 3] needs 24")


def test_data_size_ignores_lanes_like_tvm_but_bool_is_one_byte():
    ok = read_params(blob(("b",), [array_block((9,), code=1, bits=1, size=9)]))
    assert ok["b"].dtype == "bool" and len(ok["b"].data) == 9
    rejects(blob(("b",), [array_block((9,), code=1, bits=1, size=2, data=bytes(2))]), "needs 9")


def test_shape_product_overflow_is_not_an_exception():
    huge = (2**62, 2**62, 2**62)
    rejects(blob(("h",), [array_block(huge, size=0)]), "array 0 ('h')", "needs")
    rejects(blob(("h",), [array_block((2**32, 2**32), size=0)]), f"needs {2**64}")
    rejects(blob(("h",), [array_block((2**31, 2**31), code=0, bits=64, size=2**63 - 1)]), "only 0 remain")


def test_data_beyond_the_file():
    data = blob(("w",), [array_block((4, 4), code=2, bits=32)])
    rejects(data[:-1], "array 0 ('w') declares 64 data bytes but only 63 remain")
    rejects(blob(("w",), [array_block((2**40,), size=2**40)]), f"declares {2**40} data bytes but only 0 remain")


def test_missing_data_size_field():
    block = array_block((2,))
    rejects(blob(("w",), [block[:-2 - 8]]), "the data size of array 0 ('w')")


def test_trailing_garbage():
    rejects(blob() + b"\x00", "1 unexpected bytes after the last array")
    rejects(write_params({}) + b"junk", "4 unexpected bytes")


def test_second_array_errors_name_it():
    data = blob(("first", "second"), [array_block(), array_block(code=4, bits=16)])
    rejects(data, "array 1 ('second')", "bfloat")


def test_long_and_hostile_names_stay_on_one_line():
    name = "evil\nname\r\u2028" + "x" * 500
    message = rejects(blob((name,), [array_block(code=4, bits=16)]), "array 0 ('evil\\nname")
    assert len(message) < 300


def test_not_bytes():
    with pytest.raises(ParamsError):
        read_params("not bytes")  # type: ignore[arg-type]


def test_bytearray_and_memoryview_accepted():
    data = blob()
    assert read_params(bytearray(data)) == read_params(memoryview(data)) == read_params(data)


# --- writer -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", sorted(DTYPE_BYTES))
def test_round_trip_every_dtype(dtype):
    rng = np.random.default_rng(1)
    array = (rng.integers(0, 2, size=(2, 3)) if dtype == "bool" else rng.integers(0, 100, size=(2, 3))).astype(dtype)
    data = write_params({"a": array, "s": np.array(7, dtype=dtype) if dtype != "bool" else np.bool_(True)})
    params = read_params(data)
    assert params["a"].dtype == dtype and params["a"].shape == (2, 3)
    np.testing.assert_array_equal(params["a"].array(), array)
    assert params["s"].shape == ()


def test_writer_normalises_layout_and_byte_order():
    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    big = base.astype(">i4")
    transposed = base.T
    data = write_params({"big": big, "t": transposed, "slice": base[:, ::2], "list": [[1, 2], [3, 4]]})
    params = read_params(data)
    np.testing.assert_array_equal(params["big"].array(), base)
    assert params["big"].data == base.astype("<i4").tobytes()
    np.testing.assert_array_equal(params["t"].array(), transposed)
    np.testing.assert_array_equal(params["slice"].array(), base[:, ::2])
    assert params["list"].dtype == "int64"


def test_writer_layout_matches_tvm_byte_for_byte():
    data = write_params({"w": np.array([1, -1], dtype=np.int16)})
    assert data == (struct.pack("<QQQ", LIST_MAGIC, 0, 1) + struct.pack("<Q", 1) + b"w" + struct.pack("<Q", 1)
                    + struct.pack("<QQiiiBBH", ARRAY_MAGIC, 0, 1, 0, 1, 0, 16, 1) + struct.pack("<qq", 2, 4)
                    + struct.pack("<hh", 1, -1))


@pytest.mark.parametrize("bad", [np.zeros(2, np.complex64), np.array(["x"]), np.array([object()]),
                                 np.zeros(2, "datetime64[s]")])
def test_writer_rejects_unsupported_dtypes(bad):
    with pytest.raises(ValueError):
        write_params({"bad": bad})


_arrays = hnp.arrays(
    dtype=st.sampled_from(sorted(DTYPE_BYTES)).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)


@FUZZ
@given(st.dictionaries(st.text(max_size=12), _arrays, max_size=5))
def test_round_trip_property(arrays):
    data = write_params(arrays)
    params = read_params(data)
    assert list(params) == list(arrays)
    for name, array in arrays.items():
        assert params[name].shape == array.shape and params[name].dtype == array.dtype.name
        assert params[name].data == array.tobytes()
    assert write_params(params) == data
    assert expected_size(params) == len(data)


# --- fuzzing ----------------------------------------------------------------------------------------

@FUZZ
@given(st.binary(max_size=600))
def test_fuzz_arbitrary_bytes(data):
    check_outcome(data)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_bytes_after_a_valid_header(tail):
    check_outcome(struct.pack("<QQ", LIST_MAGIC, 0) + tail)


_BASE = write_params({
    "p0": np.arange(6, dtype=np.int8).reshape(2, 3),
    "bias": np.array([1, -2, 3], dtype=np.int32),
    "s": np.float32(2.5),
    "mask": np.array([True, False]),
    "w16": np.ones((1, 2, 2), dtype=np.float16),
})
_INTERESTING = [0, 1, 2, 7, 8, 31, 32, 33, 255, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1]

_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(_BASE) * 8 - 1)),
    st.tuples(st.just("truncate"), st.integers(0, len(_BASE) - 1)),
    st.tuples(st.just("insert"), st.integers(0, len(_BASE)), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, len(_BASE) - 1), st.integers(1, 16)),
    st.tuples(st.just("u64"), st.integers(0, len(_BASE) - 8), st.sampled_from(_INTERESTING)),
    st.tuples(st.just("u32"), st.integers(0, len(_BASE) - 4), st.sampled_from([v % 2**32 for v in _INTERESTING])),
)


def _mutate(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for m in mutations:
        kind = m[0]
        if kind == "flip" and m[1] // 8 < len(buf):
            buf[m[1] // 8] ^= 1 << (m[1] % 8)
        elif kind == "truncate":
            del buf[m[1]:]
        elif kind == "insert":
            buf[m[1]:m[1]] = m[2]
        elif kind == "delete":
            del buf[m[1]:m[1] + m[2]]
        elif kind == "u64" and m[1] + 8 <= len(buf):
            buf[m[1]:m[1] + 8] = struct.pack("<Q", m[2])
        elif kind == "u32" and m[1] + 4 <= len(buf):
            buf[m[1]:m[1] + 4] = struct.pack("<I", m[2])
    return bytes(buf)


def test_mutation_base_is_valid():
    assert len(read_params(_BASE)) == 5


@FUZZ
@given(st.lists(_mutation, min_size=1, max_size=4))
def test_fuzz_mutations_of_a_valid_file(mutations):
    check_outcome(_mutate(_BASE, mutations))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutations_of_a_real_file(fixtures_dir, data):
    real = _real_params(fixtures_dir)
    ops = data.draw(st.lists(st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 2048 * 8)),  # headers and names are at the front
        st.tuples(st.just("u64"), st.integers(0, 2048), st.sampled_from(_INTERESTING)),
        st.tuples(st.just("truncate"), st.integers(0, len(real) - 1)),
    ), min_size=1, max_size=3))
    check_outcome(_mutate(real, ops))


_REAL: dict[Path, bytes] = {}


def _real_params(fixtures_dir: Path) -> bytes:
    if fixtures_dir not in _REAL:
        (_REAL[fixtures_dir],) = tar_members(fixtures_dir / "tvm-0.13" / "mlp_graph_c.tar", ".params").values()
    return _REAL[fixtures_dir]
