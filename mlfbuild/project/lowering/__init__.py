"""Executor lowerings: each turns one Module into C that the firmware's model table can call.

One module per executor style, behind one small interface; adding a style means adding a file and
one line to LOWERINGS.
"""

from __future__ import annotations

from ...errors import InvalidInputError
from ...mlf.model import Module
from .base import Lowered, Lowering
from .aot_c import AotCInterface
from .aot_packed import AotPacked
from .graph import GraphExecutor
from .graph_tvm import GraphTvmExecutor
from .operator import OperatorExport

LOWERINGS: tuple[Lowering, ...] = (AotCInterface(), AotPacked(), GraphExecutor(), OperatorExport())
GRAPH_TVM = GraphTvmExecutor()  # graph modules with --runtime tvm


def lowering_for(module: Module, runtime: str = "builtin") -> Lowering:
    if runtime == "tvm" and GRAPH_TVM.applies(module):  # TVM's own graph executor runs the graph JSON
        return GRAPH_TVM
    for lowering in LOWERINGS:
        if lowering.applies(module):
            return lowering
    raise InvalidInputError(f"{module.name}: no lowering for executor {module.executor!r} "
                            f"with interface {module.interface_api!r}")


__all__ = ["Lowered", "Lowering", "LOWERINGS", "lowering_for"]
