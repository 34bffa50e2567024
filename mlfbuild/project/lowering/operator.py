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

    def lower(self, module: Module, root: Path, env, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        prefix = f"mlf_{module.name}"
        inputs, outputs = io_tensors(module, prefix)
        pool = workspace_with_slack(0, module, root)
        code = self.render(env, description="operator-style export.", m=module, prefix=prefix,
                           inputs=inputs, outputs=outputs, entry=module.entry_function, pool_bytes=pool)
        return Lowered(module=module, symbol=prefix, code=code, workspace_bytes=pool,
                       interface_header=self.interface_header(env, module, f"operator {module.entry_function}"))
