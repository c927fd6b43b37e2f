"""docs/architecture.md names only what exists, and its picture and contract table say what .importlinter says.

Read from the source text (ast), nothing is imported: every path in backticks exists; every dotted name
`rag_core.x.y.Name` (or `ui.…`, `pages.…`) is a module, or a name a module defines, imports or assigns, or a member
of a class it defines; in "The path of a question" and "The path of a file", each numbered step names its file first
and every `name()` in the step is defined in that file (a `Class.member()` in a class of that file, or of the
project); the picture lists the rooms in the contract's order; the `ui` row lists exactly the contract's forbidden
modules.
"""
from __future__ import annotations

import ast
import configparser
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
CODE_DIRS = ("rag_core", "ui", "pages")
TOP_DIRS = ("rag_core", "ui", "pages", "tests", "benchmarks", "docs", "deploy", "scripts", "samples")
TOP_PATH = re.compile(r"(?:" + "|".join(TOP_DIRS) + r")/[\w./-]*")
PATH_SECTIONS = ("## The path of a question", "## The path of a file")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else len(text)]


def _expand(token: str) -> list[str]:
    """`a.{b, c}` -> a.b, a.c (one brace group)."""
    m = re.fullmatch(r"([\w.]*)\{([^}]*)\}", token)
    if not m:
        return [token]
    return [m.group(1) + part.strip() for part in m.group(2).split(",") if part.strip()]


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _bound(body: list[ast.stmt]) -> set[str]:
    """The names a module or class body defines, assigns or imports."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks, optional imports
            names |= _bound(node.body)
    return names


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _resolves(dotted: str) -> bool:
    """A module, a name bound at its top level, or (one level down) a member of a class it defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(parts[:cut])
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        if (ROOT.joinpath(*parts[:cut]) / rest[0]).with_suffix(".py").is_file():
            continue  # a submodule: resolved by the longer cut, which failed
        tree = _tree(path)
        if rest[0] not in _bound(tree.body):
            return False
        if len(rest) == 1:
            return True
        cls = _class(tree, rest[0])
        return len(rest) == 2 and cls is not None and rest[1] in _bound(cls.body)
    return False


@functools.cache
def _members(cls_name: str) -> tuple[frozenset[str], ...]:
    """The members of each product class named `cls_name` (only files that say `class cls_name` are parsed)."""
    out = []
    for file in _product_files():
        if f"class {cls_name}" in (ROOT / file).read_text(encoding="utf-8"):
            out += [frozenset(_bound(n.body)) for n in ast.walk(_tree(ROOT / file))
                    if isinstance(n, ast.ClassDef) and n.name == cls_name]
    return tuple(out)


def _defined_in(path: Path, name: str) -> bool:
    """`name` (a function or class, at any depth) or `Class.member` is defined in `path`, or the class is elsewhere."""
    tree = _tree(path)
    if "." not in name:
        return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name
                   for n in ast.walk(tree))
    cls_name, member = name.split(".", 1)
    if "." in member:
        return False
    cls = _class(tree, cls_name)
    if cls is not None:
        return member in _bound(cls.body)
    return any(member in members for members in _members(cls_name))


@functools.cache
def _product_files() -> tuple[str, ...]:
    """The product's Python files, as paths from the repository's top."""
    files = [p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")] + list(ROOT.glob("*.py"))
    return tuple(p.relative_to(ROOT).as_posix() for p in files)


def test_every_path_named_exists():
    missing = []
    files = _product_files()
    basenames = {f.rsplit("/", 1)[-1] for f in files}
    for token in _ticked(_text()):
        token = token.rstrip(".,")
        if TOP_PATH.fullmatch(token) or token == ".importlinter":
            if not (ROOT / token).exists():
                missing.append(token)
        elif re.fullmatch(r"[\w/]+\.py", token):  # a module named by its file inside its room
            if "/" in token:
                if not any(f.endswith("/" + token) for f in files):
                    missing.append(token)
            elif token not in basenames:
                missing.append(token)
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_every_dotted_name_exists():
    missing = []
    for token in _ticked(_text()):
        for name in _expand(token.removesuffix("()")):
            if re.fullmatch(r"(rag_core|ui|pages)(\.\w+)+", name) and not _resolves(name):
                missing.append(name)
    assert not missing, f"docs/architecture.md names modules or names that do not exist: {missing}"


def test_each_step_names_functions_of_its_file():
    text, wrong, steps = _text(), [], 0
    for heading in PATH_SECTIONS:
        for step in re.split(r"\n(?=\d+\. )", _section(text, heading))[1:]:
            first = re.match(r"\d+\. `([^`]+)`", step)
            assert first, f"a step that does not start with its file: {step[:80]!r}"
            path = ROOT / first.group(1)
            assert path.is_file(), f"no such file: {first.group(1)}"
            steps += 1
            for token in _ticked(step):
                if not token.endswith("()"):
                    continue
                name = token.removesuffix("()")
                if name.startswith(("rag_core.", "ui.", "pages.")):
                    continue  # checked by test_every_dotted_name_exists
                if re.fullmatch(r"\w+(\.\w+)?", name) and not _defined_in(path, name):
                    wrong.append(f"{first.group(1)}: {name}")
    assert steps >= 20, "the two paths are written as numbered steps, each naming its file first"
    assert not wrong, f"steps name functions their file does not define: {wrong}"


def _contracts() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter", encoding="utf-8")
    return cfg


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.strip().splitlines() if line.strip()]


def test_picture_lists_the_rooms_in_the_contracts_order():
    text = _text()
    picture = text[text.index("```text"):text.index("```", text.index("```text") + 3)]
    drawn = re.findall(r"rag_core/(\w+)/", picture)
    layers = [room.strip() for layer in _lines(_contracts()["importlinter:contract:rooms"]["layers"])
              for room in layer.split("|")]
    assert drawn == layers, f"the picture's rooms {drawn} are not the contract's layers {layers}"
    ignored = _lines(_contracts()["importlinter:contract:rooms"]["exhaustive_ignores"])
    assert all(f"`{name}.py`" in text for name in ignored), "the loose modules outside the rooms are named"
    rooms_row = next(line for line in text.splitlines() if line.startswith("| `rooms` |"))
    said = re.findall(r"`([\w |\\]+)`", rooms_row.split("inside `rag_core`:", 1)[1])
    assert [r.strip(" \\") for part in said for r in part.split("|")] == layers


def test_ui_row_lists_exactly_the_forbidden_modules():
    ui = _contracts()["importlinter:contract:ui"]
    forbidden = set(_lines(ui["forbidden_modules"]))
    row = next(line for line in _text().splitlines() if line.startswith("| `ui` |"))
    listed = {name for token in _ticked(row.split("|", 2)[2]) for name in _expand(token)
              if re.fullmatch(r"[\w.]+", name)}
    assert listed == forbidden, (f"in the doc, not the contract: {sorted(listed - forbidden)}; "
                                 f"in the contract, not the doc: {sorted(forbidden - listed)}")
    allowed = {line.replace(" ", "") for line in _lines(ui["ignore_imports"])}
    assert allowed == {t.replace(" ", "") for t in _ticked(row) if "->" in t}


def test_picture_files_are_in_their_rooms():
    """Each file or folder drawn in a room (a row of the room, or a column of the five independent rooms) is there."""
    text = _text()
    picture = text[text.index("```text"):text.index("```", text.index("```text") + 3)]
    room, columns, wrong = "", [], []
    for line in picture.splitlines()[1:]:
        cells = [c for c in re.split(r"[│┌┐└┘┬┴]", line)]
        header = re.search(r"(?:^|\s)((?:rag_core/)?\w+/)\s{2,}", line)
        if line.strip().startswith("│ │"):  # the row of independent rooms: one room per column
            inner = cells[2:-2]
            found = [re.match(r"\s*(rag_core/\w+/)\s*$", c) for c in inner]
            if all(found):
                columns = [f.group(1) for f in found if f]
                continue
            pairs = list(zip(columns, inner, strict=True))
        else:
            if header and (ROOT / header.group(1)).is_dir():
                room = header.group(1)
            pairs = [(room, " ".join(cells))]
        for where, cell in pairs:
            for name in re.findall(r"(?<![\w/])(\w+\.py|\w+/)(?![\w/])", cell):
                if name == where.rsplit("/", 2)[-2] + "/" or f"{name}" in ("rag_core/",):
                    continue
                if not (ROOT / where / name).exists() and not (ROOT / name).exists():
                    wrong.append(f"{where}{name}")
    assert not wrong, f"the picture draws files that are not in their rooms: {wrong}"


# Names in backticks that are not DocChat's own: the libraries' and the language's.
FOREIGN = {"Protocol", "StrEnum", "TYPE_CHECKING", "AppTest"}  # typing, enum, Streamlit


def test_every_class_and_constant_named_exists():
    """A bare `CamelCase` or `UPPER_CASE` name is a class, function or constant defined somewhere in the product."""
    source = "\n".join((ROOT / f).read_text(encoding="utf-8") for f in _product_files())
    missing = []
    for token in set(_ticked(_text())):
        if token in FOREIGN or not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", token):
            continue
        if token.startswith("DOCCHAT_"):
            continue  # an environment variable (docs/settings.md lists them)
        if not re.search(rf"^\s*(?:class|def)\s+{token}\b|^\s*{token}\s*(?::[^=\n]+)?=", source, re.MULTILINE):
            missing.append(token)
    assert not missing, f"docs/architecture.md names classes or constants that do not exist: {sorted(missing)}"
