"""Random but valid one-operator cases for the operators beyond tflitewriter's own, one module per
family of mlfbuild/importer/lowering/; importing this package registers every module's cases with
tflitewriter.register_cases, so bundle_model and chain_model take them by name."""

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
    importlib.import_module(f"{__name__}.{_info.name}")
