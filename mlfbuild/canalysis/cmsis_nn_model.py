"""Which bytes a CMSIS-NN call touches through each pointer it is handed, from the library's own
prototypes (parsed from arm_nnfunctions.h) and its documented shapes.

CMSIS-NN describes a tensor by a `cmsis_nn_dims` parameter placed just before the tensor's data
(`const cmsis_nn_dims *input_dims, const int8_t *input_data`): the call reads or writes n*h*w*c
elements. A scratch buffer comes in a `cmsis_nn_context {buf, size}`: `size` bytes of `buf`. The few
functions without dims state their lengths in scalar parameters, listed below from their
documentation. Any other pointer parameter has no stated extent: handing it a pointer into the pool
is not proven.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ctype import CType

# function name prefix -> {pointer parameter: the integer parameters whose product is its element count}
_STATED_LENGTHS = {
    "arm_softmax_": {"input": ("num_rows", "row_size"), "output": ("num_rows", "row_size")},
    "arm_elementwise_add_": {"input_1_vect": ("block_size",), "input_2_vect": ("block_size",), "output": ("block_size",)},
    "arm_elementwise_mul_": {"input_1_vect": ("block_size",), "input_2_vect": ("block_size",), "output": ("block_size",)},
}
DIMS_TYPE = "cmsis_nn_dims"
CONTEXT_TYPE = "cmsis_nn_context"
DIMS_FIELDS = ("n", "h", "w", "c")


@dataclass(frozen=True)
class Parameter:
    name: str
    type: CType


@dataclass(frozen=True)
class Extent:
    """The pointer parameter at `index` touches `count` elements (each `element` bytes) counted by
    the product of the named dims struct's fields or scalar parameters, or `bytes_field` of a context."""

    index: int
    element: int | None
    dims_index: int | None = None  # the cmsis_nn_dims parameter describing it
    factors: tuple[int, ...] = ()  # scalar parameters whose product is the element count
    context: bool = False  # a cmsis_nn_context: its buf, `size` bytes long


def is_cmsis_nn(name: str) -> bool:
    return name.startswith("arm_")


def extents(function: str, parameters: list[Parameter]) -> dict[int, Extent]:
    """For each parameter through which the call touches memory given to it, how far it reaches."""
    found: dict[int, Extent] = {}
    names = [p.name for p in parameters]
    stated = next((lengths for prefix, lengths in _STATED_LENGTHS.items() if function.startswith(prefix)), {})
    for index, parameter in enumerate(parameters):
        pointee = parameter.type.pointee
        if parameter.type.kind != "pointer" or pointee is None:
            continue
        if pointee.kind == "struct" and pointee.struct == CONTEXT_TYPE:
            found[index] = Extent(index, 1, context=True)
        elif parameter.name in stated and all(f in names for f in stated[parameter.name]):
            found[index] = Extent(index, parameter.type.element_bytes,
                                  factors=tuple(names.index(f) for f in stated[parameter.name]))
        elif index and _is_dims(parameters[index - 1].type) and pointee.kind in ("int", "void"):
            found[index] = Extent(index, parameter.type.element_bytes if pointee.kind == "int" else None,
                                  dims_index=index - 1)
    return found


def _is_dims(ctype: CType) -> bool:
    return ctype.kind == "pointer" and ctype.pointee is not None and ctype.pointee.struct == DIMS_TYPE

