"""The shape of the package holds: stages import in one direction, no cycles, the command line stays
in its own layer, and each shared concept has one home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mlfbuild"
CLI_MODULES = ("mlfbuild.cli", "mlfbuild.cliargs", "mlfbuild.launch", "mlfbuild.__main__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """module → every mlfbuild module it imports (at any depth of the file: lazy imports count)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("mlfbuild"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                if not base.startswith("mlfbuild"):
                    continue
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = found
    return {name: {i for i in imported if i in graph and i != name} for name, imported in graph.items()}


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


GRAPH = _imports()


def _importers_of(prefix: str, *, within: str) -> list[str]:
    return sorted(m for m, imported in GRAPH.items() if m.startswith(within)
                  for i in imported if i == prefix or i.startswith(prefix + "."))


def test_the_size_report_does_not_reach_into_run_or_build():
    assert _importers_of("mlfbuild.run", within="mlfbuild.size") == []
    assert _importers_of("mlfbuild.build", within="mlfbuild.size") == []


def test_the_mlf_reader_knows_nothing_of_boards_projects_or_compilers():
    for stage in ("mlfbuild.boards", "mlfbuild.project", "mlfbuild.toolchain", "mlfbuild.build"):
        assert _importers_of(stage, within="mlfbuild.mlf") == [], stage


def test_the_console_protocol_knows_nothing_of_builds_boards_or_runs():
    for stage in ("mlfbuild.run", "mlfbuild.flash", "mlfbuild.build", "mlfbuild.boards", "mlfbuild.record"):
        assert _importers_of(stage, within="mlfbuild.console") == [], stage


def test_one_protocol_decoder():
    """Only console/frames.py takes frames apart; the client and the monitor use its decoder."""
    users = sorted(m for m, imported in GRAPH.items() if "mlfbuild.console.frames" in imported)
    assert users and all(m.startswith("mlfbuild.console") for m in users), users
    for path in PACKAGE.rglob("*.py"):
        if path.name != "frames.py":
            text = path.read_text().lower()
            assert "\\xa5\\x5a" not in text and "def decode_stream" not in text, path


@pytest.mark.parametrize("cli", ["mlfbuild.commands", *CLI_MODULES])
def test_no_library_module_imports_the_command_line(cli):
    library = [m for m in GRAPH if not m.startswith("mlfbuild.commands") and m not in CLI_MODULES]
    assert [m for m in library if any(i == cli or i.startswith(cli + ".") for i in GRAPH[m])] == []


def test_only_the_command_line_uses_argparse():
    users = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name.startswith("mlfbuild.commands") or name in CLI_MODULES:
            continue
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names) or
               isinstance(n, ast.ImportFrom) and n.module == "argparse" for n in ast.walk(tree)):
            users.append(name)
    assert users == []


def test_no_import_cycles():
    # Package __init__ files re-export their submodules; an edge from a package to its own
    # submodule is that, not a dependency.
    def edges(module: str) -> set[str]:
        return {i for i in GRAPH[module] if not i.startswith(module + ".")}

    state: dict[str, int] = {}
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges(module)):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert cycles == []


def test_one_home_for_the_build_folders_file_names():
    """build.json, run.json and size.json are named in mlfbuild/record.py only (docs and messages aside)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if _module_name(path) == "mlfbuild.record":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ("build.json", "run.json", "size.json"):
                offenders.append(f"{_module_name(path)}:{node.lineno}")
    assert offenders == []


def test_the_graph_sees_real_imports():
    """The checks above would pass on an empty graph: make sure it is not one."""
    assert "mlfbuild.record" in GRAPH["mlfbuild.build"]
    assert "mlfbuild.commands" in GRAPH["mlfbuild.cli"]
    assert "mlfbuild.record" in GRAPH["mlfbuild.run"]
