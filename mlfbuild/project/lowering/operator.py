"""Operator-style exports (tvm.build of one function): a test firmware that runs the operator."""

from __future__ import annotations

from pathlib import Path

from ...mlf.model import Module
from .aot_c import io_tensors
from .base import Lowered, Lowering, workspace_with_slack


class OperatorExport(Lowering):
    template = "packed_call.c.j2"

    def applies(self, module: Module) -> bool:
        return module.style == "operator"

    def lower(self, module: Module, root: Path, env) -> Lowered:
        prefix = f"mlf_{module.name}"
        inputs, outputs = io_tensors(module, prefix)
        code = self.render(env, description="operator-style export, run as a test firmware.", m=module, prefix=prefix, symbol=f"mlf_model_{module.name}",
                           inputs=inputs, outputs=outputs, entry=module.entry_function)
        return Lowered(module=module, symbol=f"mlf_model_{module.name}", code=code,
                       workspace_bytes=workspace_with_slack(0, module, root))
