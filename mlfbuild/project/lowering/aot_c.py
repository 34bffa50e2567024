"""AOT executor with the C interface: tvmgen_<mod>_run(&inputs, &outputs) over static buffers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import InvalidInputError
from ...mlf import csource
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

    def lower(self, module: Module, root: Path, env, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        if module.header is None:
            raise InvalidInputError(f"{module.name}: AOT C interface without codegen/host/include/tvmgen_{module.name}.h")
        header = (root / module.header).read_text(errors="replace")
        if f"struct tvmgen_{module.name}_workspace_pools" in header or f"struct tvmgen_{module.name}_devices" in header:
            raise InvalidInputError(f"{module.name}: external USMP workspace pools / BYOC device handles in "
                                    f"tvmgen_{module.name}.h are not supported yet; export with internal pools")
        prefix = f"mlf_{module.name}"
        if module.usmp:  # operators inside may still allocate: those get a pool of their own
            workspace, _ = allocator_pool(module, root, include_dirs)
            pool = plan_usmp_pool(module_sources(module, root), module.name, include_dirs=include_dirs,
                                  producer=module.producer,
                                  tvm_bytes=module.workspace_bytes())
        else:
            workspace, pool = allocator_pool(module, root, include_dirs)
        notes = [pool.note(module.name)] if pool else []
        if not workspace:  # TVM's own tvmgen_<mod>_run is the whole interface
            return Lowered(module=module, symbol=prefix, code="", pool=pool, notes=notes)
        rename = f"tvmgen_{module.name}_run_tvm"
        if not any(f"tvmgen_{module.name}_run" in csource.defined_functions((root / rel).read_text(errors="replace"))
                   for rel in module.sources):
            raise InvalidInputError(f"{module.name}: tvmgen_{module.name}_run allocates from TVMBackendAllocWorkspace "
                                    "but is not defined by the generated C sources")
        code = self.render(env, m=module, entry_rename=rename, pool_bytes=workspace)
        return Lowered(module=module, symbol=prefix, code=code, workspace_bytes=workspace, entry_rename=rename,
                       pool=pool, notes=notes)
