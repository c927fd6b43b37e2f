"""The layers hold: import-linter's contracts (.importlinter: rag_core's rooms top to bottom, pages and ui/ through the
service interface only) pass and catch a breach; pages and UI helpers never branch on demo vs local, never touch
Streamlit's private attributes, and nothing edits sys.path."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UI_FILES = sorted([ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")])
FORBIDDEN_IMPORTS = ("langchain", "langchain_core", "langchain_ollama", "langchain_qdrant", "qdrant_client", "ollama")
DEMO_WORDS = ("is_demo", "DOCCHAT_MODE", "SHARED_OWNER", "session_library", "DemoHub", "SessionLibrary",
              "demo_banner", "llm_mode")


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
            out.add(node.module)
    return out


def _names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            out.update(a.name for a in node.names)
    return out


def _mode_compares(tree: ast.AST) -> list[int]:
    """Lines that compare something to the string "demo" or read `.mode`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Constant) and p.value in ("demo", "local") for p in parts):
                lines.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "mode" and isinstance(node.value, ast.Name) \
                and node.value.id in ("settings", "base", "cfg", "_base"):
            lines.append(node.lineno)
    return lines


def check_ui_file(source: str) -> list[str]:
    """Every layering rule this file breaks, one sentence each."""
    tree = ast.parse(source)
    problems = [f"imports {m}" for m in sorted(_imports(tree)) if m in FORBIDDEN_IMPORTS]  # (lint-imports: all)
    problems += [f"uses {w}" for w in DEMO_WORDS if w in _names(tree)]
    problems += [f"branches on the mode at line {n}" for n in _mode_compares(tree)]
    problems += ["touches Streamlit's PagesManager"] if "PagesManager" in _names(tree) else []
    problems += ["edits sys.path"] if "sys.path" in source else []
    return problems


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_ui_files_keep_to_their_layer(path):
    assert check_ui_file(path.read_text()) == []


def test_the_checker_catches_each_kind_of_breach():
    bad = ("import qdrant_client\nfrom rag_core.demo.hub import SHARED_OWNER\n"
           "if settings.mode == 'demo':\n    pass\nfrom streamlit.runtime.pages_manager import PagesManager\n"
           "import sys\nsys.path.insert(0, '.')\n")
    found = check_ui_file(bad)
    assert "imports qdrant_client" in found and "uses SHARED_OWNER" in found
    assert any(f.startswith("branches on the mode") for f in found)
    assert "touches Streamlit's PagesManager" in found and "edits sys.path" in found


def test_no_python_file_edits_sys_path():
    offenders = []
    for folder in ("rag_core", "ui", "pages", "tests", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            if path.name == "test_layers.py":
                continue
            if "sys.path.insert" in text or "sys.path.append" in text or "sys.path[" in text:
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--config", str(root / ".importlinter"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": ""})


def test_the_import_contracts_hold():
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 kept, 0 broken" in run.stdout


@pytest.mark.parametrize(("file", "line", "contract"), [
    ("pages/chat.py", "from rag_core.service.jobs import JobView", "the data contract (core) BROKEN"),
    ("ui/sources.py", "import qdrant_client", "the data contract (core) BROKEN"),
    ("rag_core/store/vector_store.py", "from rag_core.service import workspace", "-> core BROKEN"),
    ("rag_core/core/models.py", "from rag_core.retrieve import search", "-> core BROKEN"),
    ("rag_core/retrieve/search.py", "from rag_core.ingest import chunking", "-> core BROKEN"),
    ("rag_core/service/render.py", "import ui.safe", "rag_core never imports the UI BROKEN"),
])
def test_the_import_contracts_catch_a_breach(tmp_path, file, line, contract):
    for part in ("rag_core", "ui", "pages"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path)
    with open(tmp_path / file, "a") as f:
        f.write(f"\n{line}  # noqa\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0 and contract in run.stdout.replace("\n", " "), run.stdout[-3000:]
