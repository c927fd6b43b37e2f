"""No import cycle between any two modules of rag_core, read with grimp, TYPE_CHECKING imports included.

An edge is every import grimp finds: at module level, inside a function (a lazy import still ties the two modules
together) and under `if TYPE_CHECKING:` (annotations only, but a cycle in the design all the same). A package is its
`__init__` module, so `from rag_core.x import y` with `y` defined in x/__init__.py is an edge to rag_core.x, and a
submodule doing that while x/__init__.py imports the submodule is a cycle. A run-time import of a submodule also runs
its parent packages' `__init__` first (`import rag_core.x.sub` runs rag_core/x/__init__.py): an edge to each parent
too, except the importer's own parents (they are already running) and for TYPE_CHECKING imports (they never run).
"""
from __future__ import annotations

import importlib.util
import textwrap
from collections import deque
from pathlib import Path

import grimp
import pytest

Graph = dict[str, set[str]]


def import_graph(package: str) -> tuple[Graph, dict[tuple[str, str], list[str]]]:
    """The package's module -> modules graph and, per edge, where it is made ("path:line `import …` [TYPE_CHECKING]")."""
    every = grimp.build_graph(package, include_external_packages=False, exclude_type_checking_imports=False,
                              cache_dir=None)
    runtime = grimp.build_graph(package, include_external_packages=False, exclude_type_checking_imports=True,
                                cache_dir=None)
    graph: Graph = {m: set(every.find_modules_directly_imported_by(m)) - {m} for m in every.modules}
    where: dict[tuple[str, str], list[str]] = {}

    def lines(g: grimp.ImportGraph, importer: str, imported: str) -> set[tuple[int, str]]:
        return {(d["line_number"], d["line_contents"]) for d in g.get_import_details(importer=importer,
                                                                                      imported=imported)}

    for importer, targets in graph.items():
        for imported in targets:
            run = lines(runtime, importer, imported) if imported in runtime.modules else set()
            where[importer, imported] = [
                f"{_path(importer)}:{n} `{text}`" + ("" if (n, text) in run else " [TYPE_CHECKING]")
                for n, text in sorted(lines(every, importer, imported))
            ]
    for importer in runtime.modules:  # importing a submodule runs its parent packages first
        for imported in sorted(runtime.find_modules_directly_imported_by(importer)):
            parts = imported.split(".")
            for cut in range(1, len(parts)):
                parent = ".".join(parts[:cut])
                if parent in graph and parent != importer and not importer.startswith(parent + "."):
                    if parent not in graph[importer]:
                        graph[importer].add(parent)
                        where[importer, parent] = []
                    n, text = min(lines(runtime, importer, imported))
                    where[importer, parent].append(f"{_path(importer)}:{n} `{text}` (runs {parent}'s __init__ first)")
    return graph, where


def _path(module: str) -> str:
    """A module's file, from the folder that holds its top package (rag_core/ingest/loaders/pdf.py)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level name: found, not imported
    assert spec is not None and spec.submodule_search_locations, top
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*rest)
    rel = [top, *rest]
    return "/".join(rel + ["__init__.py"]) if path.is_dir() else "/".join(rel) + ".py"


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of 2+ modules (each sorted), in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def shortest_cycle(component: list[str], graph: Graph) -> list[str]:
    """The shortest closed chain from the component's first module back to it, within the component."""
    members, start = set(component), component[0]
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v] & members):
            if w == start:
                chain = [v]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [*reversed(chain), start]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"not a cycle: {component}")


def find_cycles(package: str) -> list[str]:
    """One report per import cycle of `package`: its modules, then one chain through them with file:line of each edge."""
    graph, where = import_graph(package)
    reports = []
    for component in strongly_connected(graph):
        chain = shortest_cycle(component, graph)
        steps = "\n".join(f"    {a} -> {b}: " + "; ".join(where[a, b]) for a, b in zip(chain, chain[1:]))
        reports.append(f"cycle of {len(component)} modules: {', '.join(component)}\n  chain:\n{steps}")
    return reports


# --------------------------------------------------------------------------- rag_core itself
def test_rag_core_has_no_import_cycles() -> None:
    cycles = find_cycles("rag_core")
    assert not cycles, f"{len(cycles)} import cycle(s) in rag_core:\n" + "\n".join(cycles)


def test_the_graph_covers_rag_core_with_its_type_checking_imports() -> None:
    graph, where = import_graph("rag_core")
    assert len(graph) > 100 and "rag_core.answer.grounding.evidence" in graph and "rag_core.core.text" in graph
    assert "rag_core.ingest.loaders._pdf_order" in graph["rag_core.ingest.loaders._pdf_layout"]
    # an import under `if TYPE_CHECKING:` only is an edge, and is said to be one
    edge = ("rag_core.answer.summaries.text", "rag_core.answer.generation.reading")
    assert edge[1] in graph[edge[0]] and all(w.endswith("[TYPE_CHECKING]") for w in where[edge])


# --------------------------------------------------------------------------- the finder itself
def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, files: dict[str, str]) -> str:
    """A package `name` of these files (module path -> source) under tmp_path, importable for grimp."""
    for rel, source in {"__init__.py": "", **files}.items():
        path = tmp_path / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_finder_reports_a_two_module_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _package(tmp_path, monkeypatch, "cyc_two", {
        "a.py": "import os\nfrom cyc_two.b import B\nA = 1\n",
        "b.py": "def f():\n    from cyc_two import a\n    return a\nB = 2\n",
        "c.py": "from cyc_two import a\n",  # imports into the cycle, is not part of it
    })
    [report] = find_cycles(pkg)
    assert report.startswith("cycle of 2 modules: cyc_two.a, cyc_two.b\n")
    assert "cyc_two.a -> cyc_two.b: cyc_two/a.py:2 `from cyc_two.b import B`" in report
    assert "cyc_two.b -> cyc_two.a: cyc_two/b.py:2 `from cyc_two import a`" in report
    assert "TYPE_CHECKING" not in report


def test_finder_reports_a_cycle_made_only_by_a_type_checking_import(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _package(tmp_path, monkeypatch, "cyc_typing", {
        "layout.py": "from cyc_typing.order import reading_order\n",
        "order.py": """\
            from __future__ import annotations
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from cyc_typing.layout import TextBlock

            def reading_order(blocks: list[TextBlock]) -> list[TextBlock]:
                return blocks
            """,
    })
    [report] = find_cycles(pkg)
    assert "cyc_typing.layout, cyc_typing.order" in report
    assert "cyc_typing.order -> cyc_typing.layout: cyc_typing/order.py:5 `from cyc_typing.layout import TextBlock`" \
           " [TYPE_CHECKING]" in report


def test_finder_reports_a_submodule_importing_its_own_package(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _package(tmp_path, monkeypatch, "cyc_init", {
        "x/__init__.py": "from cyc_init.x.sub import thing\nhelper = 1\n",
        "x/sub.py": "from cyc_init.x import helper\nthing = helper\n",  # helper is a name in x/__init__.py
    })
    [report] = find_cycles(pkg)
    assert "cyc_init.x, cyc_init.x.sub" in report and "cyc_init/x/sub.py:1" in report


def test_finder_counts_a_parent_package_run_by_importing_its_submodule(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # a -> x.deep runs x/__init__.py, which imports b, which imports a: a cycle at import time
    pkg = _package(tmp_path, monkeypatch, "cyc_parent", {
        "a.py": "from cyc_parent.x.deep import thing\ny = 1\n",
        "b.py": "from cyc_parent.a import y\n",
        "x/__init__.py": "from cyc_parent import b\n",
        "x/deep.py": "thing = 1\n",
    })
    [report] = find_cycles(pkg)
    assert "cyc_parent.a, cyc_parent.b, cyc_parent.x\n" in report
    assert "cyc_parent/a.py:1 `from cyc_parent.x.deep import thing` (runs cyc_parent.x's __init__ first)" in report


def test_finder_passes_an_acyclic_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _package(tmp_path, monkeypatch, "acyclic", {
        "a.py": "from acyclic.x import thing\n",
        "x/__init__.py": "from acyclic.x.deep import thing\n",  # a package's __init__ importing its submodules
        "x/deep.py": "from acyclic.x.other import base\nthing = base\n",  # a sibling: x/__init__ is already running
        "x/other.py": "import os\nbase = 1\n",
        # a type-only import of a submodule runs no __init__: no edge to acyclic.y, so no cycle through it
        "y/__init__.py": "from acyclic import z\n",
        "y/deep.py": "V = 1\n",
        "z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from acyclic.y.deep import V\n",
    })
    assert find_cycles(pkg) == []
