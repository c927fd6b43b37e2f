"""Every package pinned in requirements.txt is imported by the product code (rag_core/, ui/, pages/, app.py).

A pin nobody imports is weight in every install and a false promise about how DocChat is built; this test names
it. Distribution -> import names come from the installed metadata (importlib.metadata.packages_distributions()).
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("rag_core", "ui", "pages", "app.py")  # folders that do not exist (yet) are skipped
# Pinned on purpose though no product file imports them, with the reason.
ALLOWED_UNIMPORTED = {
    # sentence-transformers imports torch; pinning it first in requirements.txt (with the CPU index) keeps pip
    # from pulling the multi-GB CUDA build as sentence-transformers' dependency.
    "torch": "pins the CPU-only wheel that sentence-transformers runs on",
}
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:[=<>!~]=|===|[<>])")


def normalize(dist: str) -> str:
    """PEP 503 name: lower case, runs of '-', '_' and '.' become '-'."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def pinned(requirements: str) -> list[str]:
    """Normalised distribution names pinned in a requirements file (comments, options and blanks skipped)."""
    out = []
    for line in requirements.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = _PIN.match(line)
        assert m, f"requirements.txt: cannot read the line {line!r}"
        out.append(normalize(m.group(1)))
    return out


def imported_modules(files: Iterable[Path]) -> set[str]:
    """Top-level names of the absolute imports in these Python files (imports inside functions included)."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def unimported_pins(pins: Iterable[str], modules: set[str], providers: Mapping[str, list[str]],
                    allowed: Iterable[str] = ()) -> list[str]:
    """Pinned distributions none of whose import names is in `modules` (`providers`: import name -> dists)."""
    provided: dict[str, set[str]] = {}
    for module, dists in providers.items():
        for dist in dists:
            provided.setdefault(normalize(dist), set()).add(module)
    skip = {normalize(a) for a in allowed}
    out = []
    for dist in pins:
        # Fallback for a package not installed here: its import name is usually the dist name with '_'.
        names = provided.get(dist) or {dist.replace("-", "_")}
        if dist not in skip and not names & modules:
            out.append(dist)
    return out


def product_files(root: Path = ROOT) -> list[Path]:
    """The product's Python files."""
    files: list[Path] = []
    for part in PRODUCT:
        path = root / part
        if path.is_dir():
            files.extend(sorted(path.rglob("*.py")))
        elif path.is_file():
            files.append(path)
    return files


def test_every_pinned_package_is_imported_by_the_product():
    pins = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    assert "langchain-core" in pins and "torch" in pins  # the parser read the real file
    files = product_files()
    assert any(f.parent.name == "rag_core" for f in files) and any(f.name == "app.py" for f in files)
    unused = unimported_pins(pins, imported_modules(files), packages_distributions(), ALLOWED_UNIMPORTED)
    assert not unused, (f"pinned in requirements.txt but imported by no product file: {', '.join(unused)}; "
                        "drop the pin, or add it to ALLOWED_UNIMPORTED with the reason")


def test_allow_list_entries_are_still_pinned():
    pins = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    assert {normalize(a) for a in ALLOWED_UNIMPORTED} <= set(pins)


def test_checker_names_a_synthetic_unused_pin(tmp_path):
    (tmp_path / "rag_core").mkdir()
    (tmp_path / "rag_core" / "a.py").write_text(
        "import yaml\nfrom docx import Document\nfrom . import b\n\n\ndef f():\n    import fitz.utils\n",
        encoding="utf-8")
    (tmp_path / "app.py").write_text("import streamlit as st\n", encoding="utf-8")
    reqs = ("# comment\n--index-url https://example.invalid/simple\n\nPyYAML==6.0\npython-docx==1.2.0  # docx\n"
            "PyMuPDF>=1.2\nstreamlit[all]==1.0\ntorch==2.0\nlangchain_text.splitters==1.1\nnot-installed-pkg==1\n")
    providers = {"yaml": ["PyYAML"], "docx": ["python-docx"], "fitz": ["PyMuPDF"], "pymupdf": ["PyMuPDF"],
                 "streamlit": ["streamlit"], "torch": ["torch"], "langchain_text_splitters": ["langchain-text-splitters"]}
    files = product_files(tmp_path)
    assert {f.name for f in files} == {"a.py", "app.py"}
    modules = imported_modules(files)
    assert modules == {"yaml", "docx", "fitz", "streamlit"}  # relative imports are not packages
    pins = pinned(reqs)
    assert pins == ["pyyaml", "python-docx", "pymupdf", "streamlit", "torch", "langchain-text-splitters",
                    "not-installed-pkg"]
    assert unimported_pins(pins, modules, providers, ["torch"]) == ["langchain-text-splitters", "not-installed-pkg"]
    assert unimported_pins(pins, modules, providers) == ["torch", "langchain-text-splitters", "not-installed-pkg"]
    assert unimported_pins(pins, modules | {"not_installed_pkg"}, providers, ["torch"]) == ["langchain-text-splitters"]
