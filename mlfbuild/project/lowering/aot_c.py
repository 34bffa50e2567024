"""AOT executor with the C interface: tvmgen_<mod>_run(&inputs, &outputs) over static buffers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidInputError
from ...mlf.model import Module
from ..pool_plan import plan_usmp_pool
from .base import CTensor, Lowered, Lowering, allocator_pool, module_sources, shape_of


@dataclass
class _IoTensor(CTensor):
    c_name: str = ""


def io_tensors(module: Module, prefix: str) -> tuple[list[_IoTensor], list[_IoTensor]]:
    def make(kind, specs):
        return [_IoTensor(name=s.name, dtype=s.dtype, shape=shape_of(s), nbytes=s.nbytes,
                          data=f"{prefix}_{kind}{i}_data", c_name=s.c_name) for i, s in enumerate(specs)]
    return make("input", module.inputs), make("output", module.outputs)


class AotCInterface(Lowering):
    template = "aot_c.c.j2"

    def applies(self, module: Module) -> bool:
        return module.executor == "aot" and module.interface_api == "c"

    def lower(self, module: Module, root: Path, env) -> Lowered:
        if module.header is None:
            raise InvalidInputError(f"{module.name}: AOT C interface without codegen/host/include/tvmgen_{module.name}.h")
        header = (root / module.header).read_text(errors="replace")
        if f"struct tvmgen_{module.name}_workspace_pools" in header or f"struct tvmgen_{module.name}_devices" in header:
            raise InvalidInputError(f"{module.name}: external USMP workspace pools / BYOC device handles in "
                                    f"tvmgen_{module.name}.h are not supported yet; export with internal pools")
        prefix = f"mlf_{module.name}"
        inputs, outputs = io_tensors(module, prefix)
        code = self.render(env, m=module, prefix=prefix, symbol=f"mlf_model_{module.name}", inputs=inputs, outputs=outputs)
        if module.usmp:  # operators inside may still allocate: those get a pool of their own
            workspace, _ = allocator_pool(module, root)
            pool = plan_usmp_pool(module_sources(module, root), module.name)
        else:
            workspace, pool = allocator_pool(module, root)
        return Lowered(module=module, symbol=f"mlf_model_{module.name}", code=code, workspace_bytes=workspace,
                       pool=pool, notes=[pool.note(module.name)] if pool else [])
