"""Damaged and hostile variants of a valid .tflite, for tests of what reads one.

`damaged_variants(data)` names one variant per kind of damage a reader must survive: a file cut
short or empty, the wrong file identifier, offsets that point outside the buffer, vectors and
strings that claim billions of entries, offsets that point at themselves, a vtable that is its own
table, offsets that point back at an enclosing table (a cycle to a reader that takes FlatBuffers'
unsigned offsets for signed ones; far past the end to one that does not). `hostile_variants(data)`
are well-formed FlatBuffers that break the model's own rules (indices past their vectors, unknown
operators and types, negative or absurd shapes), packed by the schema's object API.
`random_damage(all_variants(data), rng)` draws one of either and replaces a few bytes besides, for
fuzz loops.

The places to damage are found with TFLite's schema (ai_edge_litert.schema_py_generated): its
generated readers give each table's position and each field's offset, so nothing here assumes a
layout beyond FlatBuffers' own (a table starts with an int32 back to its vtable; a table's field
holding a table, vector or string is a uint32 forward offset from itself; a vector or string starts
with its uint32 length).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

HUGE = 0x7FFFFFFF
LARGEST = 0xFFFFFFFF


def _field_slot(field_id: int) -> int:
    """The vtable byte offset of a table's field: FlatBuffers' vtables start with two uint16 sizes."""
    return 4 + 2 * field_id


# Field ids of schema.fbs used here.
MODEL_SUBGRAPHS, MODEL_BUFFERS = 2, 4
SUBGRAPH_TENSORS, SUBGRAPH_INPUTS, SUBGRAPH_OUTPUTS, SUBGRAPH_OPERATORS = 0, 1, 2, 3
TENSOR_SHAPE, TENSOR_NAME, TENSOR_QUANTIZATION = 0, 3, 4
BUFFER_DATA = 0


@dataclass(frozen=True)
class Layout:
    """Absolute positions in a valid model: `*_field` are the uoffset fields of a table, `*_length`
    the length words of vectors and strings, `*_table` the starts of tables (where their soffset is)."""

    model_table: int
    subgraphs_field: int
    subgraphs_length: int
    subgraph_table: int
    subgraph_element: int  # the uoffset in the subgraphs vector that leads to subgraph 0
    tensors_field: int
    tensors_length: int
    tensor_element: int  # the uoffset in the tensors vector that leads to tensor 0
    tensor_table: int
    inputs_length: int
    outputs_length: int
    operators_length: int | None
    shape_length: int | None
    name_field: int | None
    name_length: int | None
    buffer_data_length: int | None  # of the first buffer that holds data


def _field(table, field_id: int) -> int | None:
    offset = table._tab.Offset(_field_slot(field_id))
    return table._tab.Pos + offset if offset else None


def _length_word(table, field_id: int) -> int | None:
    at = _field(table, field_id)
    return None if at is None else at + struct.unpack_from("<I", table._tab.Bytes, at)[0]


def locate(data: bytes) -> Layout:
    """Where the damageable parts of a valid model are (its first subgraph and tensor)."""
    model = schema.Model.GetRootAs(bytearray(data), 0)
    subgraph = model.Subgraphs(0)
    tensor = subgraph.Tensors(0)
    buffer_data_length = None
    for i in range(model.BuffersLength()):
        if model.Buffers(i).DataLength():
            buffer_data_length = _length_word(model.Buffers(i), BUFFER_DATA)
            break
    return Layout(
        model_table=model._tab.Pos,
        subgraphs_field=_field(model, MODEL_SUBGRAPHS),
        subgraphs_length=_length_word(model, MODEL_SUBGRAPHS),
        subgraph_table=subgraph._tab.Pos,
        subgraph_element=_length_word(model, MODEL_SUBGRAPHS) + 4,
        tensors_field=_field(subgraph, SUBGRAPH_TENSORS),
        tensors_length=_length_word(subgraph, SUBGRAPH_TENSORS),
        tensor_element=_length_word(subgraph, SUBGRAPH_TENSORS) + 4,
        tensor_table=tensor._tab.Pos,
        inputs_length=_length_word(subgraph, SUBGRAPH_INPUTS),
        outputs_length=_length_word(subgraph, SUBGRAPH_OUTPUTS),
        operators_length=_length_word(subgraph, SUBGRAPH_OPERATORS),
        shape_length=_length_word(tensor, TENSOR_SHAPE),
        name_field=_field(tensor, TENSOR_NAME),
        name_length=_length_word(tensor, TENSOR_NAME),
        buffer_data_length=buffer_data_length,
    )


# --- primitive damage -------------------------------------------------------------------------------------

def put_u32(data: bytes, at: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<I", out, at, value & 0xFFFFFFFF)
    return bytes(out)


def put_i32(data: bytes, at: int, value: int) -> bytes:
    return put_u32(data, at, value & 0xFFFFFFFF)


def point_uoffset(data: bytes, field_at: int, target: int) -> bytes:
    """Make the uoffset at `field_at` lead to absolute position `target` (wrapping modulo 2^32 when
    the target is before it, which a reader must see as far past the end)."""
    return put_u32(data, field_at, target - field_at)


def truncated(data: bytes, size: int) -> bytes:
    return data[:size]


def with_identifier(data: bytes, identifier: bytes = b"TFL2") -> bytes:
    return data[:4] + identifier + data[8:]


def flip_bytes(data: bytes, rng: np.random.Generator, count: int) -> bytes:
    """`count` bytes anywhere replaced by random values."""
    out = bytearray(data)
    for at in rng.integers(0, len(out), size=count) if out else ():
        out[int(at)] = int(rng.integers(0, 256))
    return bytes(out)


def flip_bits(data: bytes, rng: np.random.Generator, count: int) -> bytes:
    """`count` single bits anywhere inverted."""
    out = bytearray(data)
    for at in rng.integers(0, len(out) * 8, size=count) if out else ():
        out[int(at) // 8] ^= 1 << (int(at) % 8)
    return bytes(out)


# --- named variants ----------------------------------------------------------------------------------------

# The variants of damaged_variants and hostile_variants that mlfbuild's input/output reader
# (mlfbuild/reference/tflite.py) must refuse: it reads the identifier, the root, the subgraphs, the
# tensors and the graph inputs' and outputs' shapes, names and types. The others damage what it does
# not look at (operators, operator codes, buffers, quantization values) or what it reads well enough
# (the padding at the end); a reader of the whole model must refuse them too.
REACHES_IO_READER = frozenset({
    "empty", "identifier_only", "wrong_identifier", "cut_in_root_table", "root_outside", "root_negative",
    "root_into_identifier", "model_vtable_outside", "model_vtable_before_start", "subgraphs_outside",
    "subgraphs_huge", "subgraphs_largest", "subgraph_element_outside", "tensors_outside", "tensors_huge",
    "inputs_huge", "outputs_huge", "tensor_element_outside", "shape_huge", "name_huge", "name_outside",
    "input_index_past_tensors", "input_index_negative",
    # hostile_variants
    "no_subgraphs", "tensor_type_unknown", "tensor_shape_negative", "tensor_shape_rank_64",
    "graph_output_past_tensors",
})


def damaged_variants(data: bytes) -> dict[str, bytes]:
    """Every named damage of the valid model `data` (name → bytes). See REACHES_IO_READER."""
    at = locate(data)
    size = len(data)
    variants = {
        "empty": b"",
        "identifier_only": data[:8],
        "wrong_identifier": with_identifier(data),
        "cut_in_root_table": truncated(data, at.model_table + 2),
        "cut_in_half": truncated(data, size // 2),
        "cut_last_byte": truncated(data, size - 1),
        "root_outside": put_u32(data, 0, size + 64),
        "root_negative": put_u32(data, 0, LARGEST - 3),
        "root_into_identifier": put_u32(data, 0, 4),
        "root_to_itself": put_u32(data, 0, 0),
        "model_vtable_outside": put_i32(data, at.model_table, -(size + 64)),
        "model_vtable_before_start": put_i32(data, at.model_table, at.model_table + 64),
        "model_vtable_is_table": put_i32(data, at.model_table, 0),
        "subgraphs_outside": point_uoffset(data, at.subgraphs_field, size + 64),
        "subgraphs_to_itself": put_u32(data, at.subgraphs_field, 0),
        "subgraphs_huge": put_u32(data, at.subgraphs_length, HUGE),
        "subgraphs_largest": put_u32(data, at.subgraphs_length, LARGEST),
        "subgraph_element_outside": point_uoffset(data, at.subgraph_element, size + 64),
        # backward offsets: subgraph 0 is the model table, tensor 0 is subgraph 0, the tensors are the subgraphs
        "subgraph_is_model": point_uoffset(data, at.subgraph_element, at.model_table),
        "tensor_is_subgraph": point_uoffset(data, at.tensor_element, at.subgraph_table),
        "tensors_are_subgraphs": point_uoffset(data, at.tensors_field, at.subgraphs_length),
        "tensors_outside": point_uoffset(data, at.tensors_field, size + 64),
        "tensors_huge": put_u32(data, at.tensors_length, HUGE),
        "inputs_huge": put_u32(data, at.inputs_length, HUGE),
        "outputs_huge": put_u32(data, at.outputs_length, LARGEST),
        "tensor_element_outside": point_uoffset(data, at.tensor_element, size + 64),
        "input_index_past_tensors": put_i32(data, at.inputs_length + 4, 1 << 20),
        "input_index_negative": put_i32(data, at.inputs_length + 4, -1),
    }
    if at.operators_length is not None:
        variants["operators_huge"] = put_u32(data, at.operators_length, HUGE)
    if at.shape_length is not None:
        variants["shape_huge"] = put_u32(data, at.shape_length, HUGE)
    if at.name_length is not None:
        variants["name_huge"] = put_u32(data, at.name_length, HUGE)
        variants["name_outside"] = point_uoffset(data, at.name_field, size + 64)
    if at.buffer_data_length is not None:
        variants["buffer_data_huge"] = put_u32(data, at.buffer_data_length, HUGE)
    return variants


def _altered(data: bytes, alter) -> bytes:
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    alter(model)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=data[4:8])
    return bytes(builder.Output())


def _set(obj, name: str, value):
    setattr(obj, name, value)


def hostile_variants(data: bytes) -> dict[str, bytes]:
    """Well-formed FlatBuffers of the valid model `data` that break the model's rules (name → bytes):
    what only a reader of operators, buffers and shapes can notice. The first subgraph's first
    operator and first tensor are the ones altered."""
    def graph(m):
        return m.subgraphs[0]

    alterations = {
        "no_subgraphs": lambda m: _set(m, "subgraphs", []),
        "no_operators": lambda m: _set(graph(m), "operators", []),
        "no_operator_codes": lambda m: _set(m, "operatorCodes", []),
        "no_buffers": lambda m: _set(m, "buffers", []),
        "opcode_index_past_codes": lambda m: _set(graph(m).operators[0], "opcodeIndex", 1 << 20),
        "operator_input_past_tensors": lambda m: graph(m).operators[0].inputs.__setitem__(0, 1 << 20),
        "operator_output_negative": lambda m: graph(m).operators[0].outputs.__setitem__(0, -5),
        "operator_input_is_its_output": lambda m: graph(m).operators[0].inputs.__setitem__(
            0, graph(m).operators[0].outputs[0]),
        "unknown_builtin_code": lambda m: _set(m.operatorCodes[0], "builtinCode", 10_000),
        "custom_operator": lambda m: (_set(m.operatorCodes[0], "builtinCode", schema.BuiltinOperator.CUSTOM),
                                      _set(m.operatorCodes[0], "deprecatedBuiltinCode", schema.BuiltinOperator.CUSTOM),
                                      _set(m.operatorCodes[0], "customCode", "Hostile")),
        "operator_version_huge": lambda m: _set(m.operatorCodes[0], "version", HUGE),
        "tensor_buffer_past_buffers": lambda m: _set(graph(m).tensors[0], "buffer", 1 << 20),
        "tensor_type_unknown": lambda m: _set(graph(m).tensors[0], "type", 100),
        "tensor_shape_negative": lambda m: _set(graph(m).tensors[0], "shape", np.array([1, -4], np.int32)),
        "tensor_shape_rank_64": lambda m: _set(graph(m).tensors[0], "shape", np.ones(64, np.int32)),
        "tensor_shape_huge": lambda m: _set(graph(m).tensors[0], "shape", np.array([HUGE, HUGE], np.int32)),
        "tensor_scale_nan": lambda m: _set(graph(m).tensors[0], "quantization", schema.QuantizationParametersT(
            scale=np.array([np.nan], np.float32), zeroPoint=np.array([0], np.int64))),
        "graph_output_past_tensors": lambda m: graph(m).outputs.__setitem__(0, 1 << 20),
    }
    return {name: _altered(data, alter) for name, alter in alterations.items()}


def all_variants(data: bytes) -> dict[str, bytes]:
    """damaged_variants and hostile_variants of `data` together (names as there)."""
    return {**damaged_variants(data), **hostile_variants(data)}


def random_damage(variants: dict[str, bytes], rng: np.random.Generator) -> tuple[str, bytes]:
    """(description, bytes): one of `variants` (as all_variants gives, made once per model) with up
    to 4 random bytes replaced."""
    name = sorted(variants)[int(rng.integers(len(variants)))]
    flips = int(rng.integers(0, 5))
    damaged = flip_bytes(variants[name], rng, flips)
    return (f"{name} + {flips} bytes replaced" if flips else name), damaged
