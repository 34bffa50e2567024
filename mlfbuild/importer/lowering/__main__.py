"""`python -m mlfbuild.importer.lowering`: the operator table of docs/import.md, from the code."""

from ..coverage import markdown_table
from . import rules

print(markdown_table(rules()), end="")
