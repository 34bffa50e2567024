"""The shape of the package holds: stages import in one direction, no cycles, the command line stays
in its own layer, and each shared concept has one home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mlfbuild"
CLI_MODULES = ("mlfbuild.cli", "mlfbuild.cliargs", "mlfbuild.launch", "mlfbuild.__main__")


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(package: Path = PACKAGE, *, annotations: bool = False) -> dict[str, set[str]]:
    """module → every module of `package` it imports, at any depth of the file (lazy imports count;
    those under `if TYPE_CHECKING:` only with `annotations`). `from P import name` names the module
    P.name when there is one, else P itself (an attribute of P's __init__)."""
    root = package.name
    files = {_module_name(path, package): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        parent = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(), str(path))
        found: set[str] = set()
        for node in (ast.walk(tree) if annotations else _runtime_nodes(tree)):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = parent.split(".")[: len(parent.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base)
        graph[name] = {i for i in found if i in files and i != name and i.split(".")[0] == root}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One closed path through each strongly connected group of modules (Tarjan), [] when none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while not group or module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_closed_path(graph, group) for group in groups]


def _closed_path(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path from the group's first module back to it, inside the group: what a reader follows."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        module = frontier.pop(0)
        for target in sorted(graph[module] & group):
            if target == start:
                return paths[module] + [start]
            if target not in paths:
                paths[target] = paths[module] + [target]
                frontier.append(target)
    return sorted(group)


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
    """Not one circle in the whole package: not through a lazy import inside a function, nor through
    an import for annotations only, nor through a package __init__ and a submodule that takes a name
    from it (`from . import template_environment`)."""
    assert _cycles(_imports(annotations=True)) == []


def test_the_cycle_check_sees_every_kind_of_circle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g\n",                          # lazy
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
        "sub/__init__.py": "from .worker import work\nHELPER = 1\n",          # a package re-exporting
        "sub/worker.py": "def work():\n    from . import HELPER\n",           # ... a module using its __init__
        "sub/leaf.py": "from . import worker\n",                            # a sibling: no circle
        "c.py": "from pkg import a\nimport pkg.b\n",                          # absolute: into a, not a circle
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = _imports(package, annotations=True)
    assert graph["pkg.sub.leaf"] == {"pkg.sub.worker"} and graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert sorted(_cycles(graph)) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.sub", "pkg.sub.worker", "pkg.sub"]]
    assert _cycles(_imports(package)) == [["pkg.sub", "pkg.sub.worker", "pkg.sub"]]   # annotations left out


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
