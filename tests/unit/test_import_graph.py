"""The rag_core package has no import cycles: its import graph, read with `ast`, is acyclic.

Every import counts, at module level or inside a function (a lazy import still ties the two modules together);
only imports under `if TYPE_CHECKING:` are skipped, as they never run.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rag_core"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, except those inside `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _resolve(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The package's own modules an import statement loads (relative imports resolved)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from .pkg import mod` loads the submodule; `from .mod import name` loads .mod itself
        names = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix for alias in node.names]
    out = set()
    for name in names:
        while name and name not in known:  # `import a.b.c` of a name inside a module: walk up to the module
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports at run time (a package's __init__ is its own node)."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for node in _runtime_imports(tree):
            targets |= _resolve(node, name, path.name == "__init__.py", known)
        # Importing a submodule first runs its parent packages (`from .generation.prompt import x` runs
        # generation/__init__.py): a real edge too, except to the importer's own parents, which already run.
        parents = {t.rsplit(".", i)[0] for t in targets for i in range(1, t.count(".") + 1)}
        targets |= {p for p in parents if p in known and not name.startswith(p + ".")}
        graph[name] = targets - {name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph, one per strongly connected component, each as a closed path a -> ... -> a."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_path_in(sorted(comp), graph) for comp in components]


def _path_in(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One closed path through a strongly connected component, from its first module back to it."""
    members, start = set(comp), comp[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first: the shortest way back to `start`
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"not a cycle: {comp}")


def test_rag_core_has_no_import_cycles():
    graph = import_graph(PACKAGE)
    assert "rag_core.answer.grounding.evidence" in graph and "rag_core.core.text" in graph  # the graph really covers the package
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in rag_core: " + "; ".join(" -> ".join(c) for c in cycles)


# --------------------------------------------------------------------------- the detector itself
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, source in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_detector_finds_a_cycle_through_a_lazy_import(tmp_path):
    root = _package(tmp_path, {
        "a.py": "from .b import thing\n",
        "b.py": "def thing():\n    from .c import other\n    return other\n",
        "c.py": "import pkg.a\nother = 1\n",
    })
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_detector_ignores_type_checking_imports_and_resolves_subpackages(tmp_path):
    root = _package(tmp_path, {
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nelse:\n    import os\n",
        "b.py": "from . import a\nfrom .sub.deep import x\n",
        "sub/__init__.py": "from .deep import x\n",
        "sub/deep.py": "from ..a import y\nx = 1\n",
    })
    graph = import_graph(root)
    assert graph["pkg.a"] == set()
    assert graph["pkg.b"] == {"pkg.a", "pkg.sub", "pkg.sub.deep"}
    assert graph["pkg.sub"] == {"pkg.sub.deep"} and graph["pkg.sub.deep"] == {"pkg.a"}
    assert find_cycles(graph) == []


@pytest.mark.parametrize("back_edge", ["from .. import a\n", "from ..a import y\n", "def f():\n    import pkg.a\n"])
def test_detector_names_a_cycle_through_a_package_init(tmp_path, back_edge):
    root = _package(tmp_path, {
        "a.py": "from .sub import thing\ny = 1\n",
        "sub/__init__.py": "from .deep import thing\n",
        "sub/deep.py": back_edge + "thing = 1\n",
    })
    assert find_cycles(import_graph(root)) == [["pkg.a", "pkg.sub", "pkg.sub.deep", "pkg.a"]]


def test_detector_passes_an_acyclic_package(tmp_path):
    root = _package(tmp_path, {"a.py": "from .sub import thing\n", "sub/__init__.py": "from .deep import thing\n",
                               "sub/deep.py": "import os\nthing = 1\n"})
    assert find_cycles(import_graph(root)) == []
