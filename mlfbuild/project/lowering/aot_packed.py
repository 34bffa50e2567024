"""AOT executor with the packed interface: call the packed entry point with DLTensor arguments."""

from __future__ import annotations

from pathlib import Path

from ...errors import InvalidInputError
from ...mlf import csource
from ...mlf.model import Module
from .aot_c import io_tensors
from ..pool_plan import plan_usmp_pool
from .base import Lowered, Lowering, allocator_pool, module_sources


def packed_entry(module: Module, root: Path) -> str:
    """The packed function that runs the whole model: tvmgen_<mod>_run when the MLF defines it
    (C sources), else the AOT main itself (LLVM exports define only __tvm_main__)."""
    defined: set[str] = set()
    for rel in module.sources:
        defined |= csource.defined_functions((root / rel).read_text(errors="replace"))
    for obj in module.objects:
        defined |= obj.symbols
    for candidate in (f"tvmgen_{module.name}_run", f"tvmgen_{module.name}___tvm_main__"):
        if candidate in defined:
            return candidate
    raise InvalidInputError(f"{module.name}: no AOT entry point (tvmgen_{module.name}_run or "
                            f"tvmgen_{module.name}___tvm_main__) is defined by the generated code")


class AotPacked(Lowering):
    template = "packed_call.c.j2"

    def applies(self, module: Module) -> bool:
        return module.executor == "aot" and module.interface_api == "packed"

    def lower(self, module: Module, root: Path, env, include_dirs: tuple[Path, ...] = ()) -> Lowered:
        prefix = f"mlf_{module.name}"
        inputs, outputs = io_tensors(module, prefix)
        entry = packed_entry(module, root)
        rename = None
        if entry == f"tvmgen_{module.name}_run":  # the packed function takes the C interface's name
            rename = entry = f"tvmgen_{module.name}_run_packed"
        if module.usmp:  # operators inside may still allocate: those get a pool of their own
            workspace, _ = allocator_pool(module, root, include_dirs)
            pool = plan_usmp_pool(module_sources(module, root), module.name, include_dirs=include_dirs,
                                  producer=module.producer,
                                  tvm_bytes=module.workspace_bytes())
        else:
            workspace, pool = allocator_pool(module, root, include_dirs)
        code = self.render(env, description="AOT executor, packed interface.", m=module, prefix=prefix,
                           inputs=inputs, outputs=outputs, entry=entry, pool_bytes=workspace)
        return Lowered(module=module, symbol=prefix, code=code, workspace_bytes=workspace, entry_rename=rename,
                       interface_header=self.interface_header(env, module, "AOT executor, packed interface"),
                       pool=pool, notes=[pool.note(module.name)] if pool else [])
