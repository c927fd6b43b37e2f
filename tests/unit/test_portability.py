"""DocChat on macOS and Windows: file names Windows accepts, Tesseract found where Homebrew and the Windows installer
put it, the store, locks, space reserve and reader process working with Linux's own calls removed, no Linux-only
process calls in the product, and every test that needs Linux-only tools marked `linux_only`."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import NoTextLayer, tesseract_install_hint
from rag_core.core.files import portable_name, reserved_on_windows
from rag_core.ingest import originals
from rag_core.ingest.loaders import _tesseract, ocr
from rag_core.service.conversation_data import ID_RE, file_name_for, new_id

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = sorted([ROOT / "app.py", *(ROOT / "rag_core").rglob("*.py"), *(ROOT / "pages").glob("*.py"),
                  *(ROOT / "ui").glob("*.py")])
WINDOWS_REFUSED = re.compile(r'[<>:"/\\|?*\x00-\x1f]')


def _windows_accepts(name: str) -> bool:
    """Windows' rules for one file name (Naming Files, Paths, and Namespaces)."""
    return (bool(name) and not WINDOWS_REFUSED.search(name) and not name.endswith((".", " "))
            and not reserved_on_windows(name) and len(name) <= 255)


# -- file names ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "expected"), [
    ("report.md", "report.md"), ("con.md", "con_.md"), ("NUL", "NUL_"), ("Aux .txt", "Aux_.txt"),
    ("com1.pdf", "com1_.pdf"), ("lpt9", "lpt9_"), ("COM¹.md", "COM¹_.md"), ("a:b?.md", "a-b-.md"),
    ('q"<x>|*.md', "q--x---.md"), ("notes. ", "notes"), ("...", "file"), ("  ", "file"), ("e\x01f", "e-f"),
    ("console.md", "console.md"), ("nul-results.md", "nul-results.md")])
def test_portable_names_are_ones_windows_accepts(name, expected):
    assert portable_name(name) == expected
    assert _windows_accepts(portable_name(name))


def test_a_long_name_keeps_its_extension():
    name = portable_name("x" * 300 + ".md")
    assert name.endswith(".md") and len(name) == 200 and _windows_accepts(name)


@pytest.mark.parametrize("title", ["CON", "nul", "Aux", "com2", "What: is it?", "a/b\\c", "...", "", "   ", "x " * 80])
def test_export_names_of_any_title_are_accepted_by_windows(title):
    name = file_name_for(title)
    assert name.endswith(".md") and _windows_accepts(name), name


def test_saved_originals_of_reserved_ids_get_a_name_windows_accepts(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert originals.original_path(settings, "con").name == "con~.pdf"
    assert originals.original_path(settings, "con_").name == "con_.pdf"  # no two ids share a file
    assert originals.original_path(settings, "0123456789abcdef").name == "0123456789abcdef.pdf"
    for doc_id in ("con", "LPT1", "wp-sample-0123456789abcdef"):
        path = originals.save_original(settings, doc_id, b"%PDF-1.4 x", "pdf")
        assert path is not None and _windows_accepts(path.name)
        assert originals.load_original(settings, doc_id) == b"%PDF-1.4 x"
        assert originals.delete_original(settings, doc_id) and not path.exists()


def test_conversation_ids_make_file_names_windows_accepts():
    for _ in range(50):
        conv_id = new_id()
        assert ID_RE.match(conv_id) and _windows_accepts(f"{conv_id}.json")


# -- Tesseract ----------------------------------------------------------------------------------------------------
@pytest.fixture
def no_system_tesseract(monkeypatch, tmp_path):
    """Nothing from this machine: no TESSDATA_PREFIX, no usual folders, an empty PATH."""
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    monkeypatch.setattr(ocr, "_TESSDATA_GLOBS", ())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(_tesseract, "UNIX_PROGRAM_FOLDERS", ())


def _install(bin_dir: Path, tessdata: Path, program: str = "tesseract") -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / program).write_bytes(b"")
    tessdata.mkdir(parents=True, exist_ok=True)
    (tessdata / "eng.traineddata").write_bytes(b"x")


def test_without_tesseract_nothing_is_found(no_system_tesseract):
    assert ocr.find_tessdata() is None


def test_tesseract_is_found_where_homebrew_puts_it_even_off_path(no_system_tesseract, monkeypatch, tmp_path):
    prefix = tmp_path / "opt" / "homebrew"  # /opt/homebrew/bin/tesseract -> ../Cellar/tesseract/5.5.1/bin/tesseract
    cellar = prefix / "Cellar" / "tesseract" / "5.5.1"
    _install(cellar / "bin", cellar / "share" / "tessdata")
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "tesseract").symlink_to(cellar / "bin" / "tesseract")
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(_tesseract, "UNIX_PROGRAM_FOLDERS", (str(tmp_path / "nothing"), str(prefix / "bin")))
    assert ocr.find_tessdata() == cellar / "share" / "tessdata"
    assert ocr.installed_languages(ocr.find_tessdata()) == {"eng"}


def test_tesseract_is_found_where_the_windows_installer_puts_it(no_system_tesseract, monkeypatch, tmp_path):
    install = tmp_path / "Program Files" / "Tesseract-OCR"  # C:\Program Files\Tesseract-OCR\tesseract.exe
    _install(install, install / "tessdata", "tesseract.exe")
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("PROGRAMFILES", str(tmp_path / "Program Files"))
    monkeypatch.delenv("PROGRAMFILES(X86)", raising=False)
    monkeypatch.delenv("LOCALAPPDATA", raising=False)
    assert _tesseract.tesseract_folders() == [install]
    assert ocr.find_tessdata() == install / "tessdata"


def test_tesseract_on_path_brings_its_language_data(no_system_tesseract, monkeypatch, tmp_path):
    prefix = tmp_path / "usr" / "local"
    _install(prefix / "bin", prefix / "share" / "tessdata")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "empty"), str(prefix / "bin")]))
    assert ocr.find_tessdata() == prefix / "share" / "tessdata"


@pytest.mark.parametrize(("platform", "words"), [
    ("darwin", "brew install tesseract"), ("win32", "winget install UB-Mannheim.TesseractOCR"),
    ("linux", "apt-get install tesseract-ocr")])
def test_missing_tesseract_says_how_to_install_it_on_this_system(monkeypatch, platform, words):
    monkeypatch.setattr(sys, "platform", platform)
    message = str(NoTextLayer("scan.pdf", "no-tesseract"))
    assert words in message and message.startswith("“scan.pdf”: ") and "\n" not in message and len(message) < 400
    others = {"darwin": "brew", "win32": "winget", "linux": "apt-get"}
    assert not [w for p, w in others.items() if p != platform and w in message]
    missing = str(NoTextLayer("scan.pdf", "no-language:ita"))
    assert ("ita" in missing) and ("apt-get" in missing) == (platform == "linux")


def test_the_language_pack_hint_names_each_system_s_way():
    assert tesseract_install_hint(["deu"], "darwin") == "`brew install tesseract tesseract-lang`"
    assert "Additional language data" in tesseract_install_hint(["deu"], "win32")
    assert tesseract_install_hint(["deu", "fra"], "linux") == "`apt-get install tesseract-ocr-deu tesseract-ocr-fra`"


# -- no Linux-only process calls in the product --------------------------------------------------------------------
#: Keyword arguments that do nothing on Windows (start_new_session) or fail there (preexec_fn).
POSIX_KEYWORDS = ("preexec_fn", "start_new_session", "process_group", "user", "group", "extra_groups")
#: Paths only Linux has; allowed where the code checks for them first (file: why).
LINUX_PATHS = ("/proc", "/sys", "/dev/shm")
LINUX_PATHS_ALLOWED = {"rag_core/ingest/folder_confine.py": "system folders refused, listed only where os.name is posix"}


def _linux_only_uses(path: Path, root: Path = ROOT) -> list[str]:
    where = str(path.relative_to(root))
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            found += [f"{where}:{node.lineno} {k.arg}=" for k in node.keywords if k.arg in POSIX_KEYWORDS]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and where not in LINUX_PATHS_ALLOWED
              and any(node.value == p or node.value.startswith(p + "/") for p in LINUX_PATHS)):
            found.append(f"{where}:{node.lineno} {node.value!r}")
    return found


def test_product_code_starts_and_stops_processes_the_same_way_everywhere():
    """killpg, setsid, SIGKILL and the like are caught by `mypy --platform win32` (make lint); these are not."""
    assert [use for path in PRODUCT for use in _linux_only_uses(path)] == []


def test_the_process_checker_sees_each_kind(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess\nsubprocess.Popen(['x'], start_new_session=True, preexec_fn=None)\n"
                   "open('/proc/self/status')\n")
    assert len(_linux_only_uses(bad, tmp_path)) == 3


# -- the store, locks, space reserve and reader without Linux's calls --------------------------------------------
@pytest.mark.slow
def test_store_locks_reserve_and_reader_work_without_linux_only_calls(tmp_path):
    """In a fresh interpreter where `import fcntl` (and resource, termios, pwd, grp) fails and os has no
    posix_fallocate, killpg, setsid, getpgid, fork or mkfifo (tests/portable_helpers.py)."""
    done = subprocess.run([sys.executable, "-m", "tests.portable_helpers", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"fcntl", "posix_fallocate", "killpg"} <= set(seen["removed"])
    assert seen["fcntl_importable"] is False and seen["fcntl_loaded"] == []
    assert seen["second_lock_refused"] and seen["lock_taken_again"] and seen["reserved"]
    assert seen["chunks"] == 5 and seen["chunks_after_reopen"] == 5 and seen["documents"] == ["doc1"]
    assert seen["second_store_refused"] and seen["store_reserve"]
    assert seen["echo"] == "hello" and seen["reports"] == []  # no progress pipe where pass_fds is missing
    assert seen["timed_out"] and seen["timeout_s"] < 30  # the stuck reader was killed at its deadline
    assert seen["cancelled"] and seen["cancel_s"] < 30


# -- Linux-only tests are marked ----------------------------------------------------------------------------------
#: What only Linux has: namespaces (unshare), strace, loop-mounted disks, /proc.
LINUX_TOOLS = re.compile(r'"unshare"|"strace"|"mkfs\.\w+"|"losetup"|"-o", "loop"|"/proc/self')
#: An inline check that skips the Linux-only part elsewhere (the rest of the test runs everywhere).
INLINE_GUARDS = ('sys.platform.startswith("linux")', 'os.path.isdir("/proc")', "os.path.lexists(path)")


def _defined_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement defines (a function, a class, assigned variables)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _unmarked_linux_tests(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()

    def segment(node: ast.AST) -> str:  # ast.get_source_segment splits the whole file on every call: 14 s here
        return "\n".join(lines[node.lineno - 1:node.end_lineno]) if hasattr(node, "lineno") else ""

    module_marked = "pytest.mark.linux_only" in "".join(
        segment(n) or "" for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets))
    # module-level helpers and constants that use the tools (a test using one of them uses the tools too)
    tainted = {name for n in tree.body if LINUX_TOOLS.search(segment(n) or "")
               for name in _defined_names(n) if not name.startswith("test_")}
    uses = re.compile("|".join([LINUX_TOOLS.pattern, *(rf"\b{re.escape(n)}\b" for n in sorted(tainted))]))
    unmarked = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            body = segment(node) or ""
            marked = module_marked or any("linux_only" in (segment(d) or "")
                                          for d in node.decorator_list)
            if uses.search(body) and not marked and not any(g in body for g in INLINE_GUARDS):
                unmarked.append(f"{path.relative_to(path.parents[2])}::{node.name}")
    return unmarked


def test_every_test_that_needs_linux_only_tools_is_marked():
    tests = [p for p in sorted((ROOT / "tests").rglob("test_*.py")) if p.name != Path(__file__).name]
    assert [t for p in tests for t in _unmarked_linux_tests(p)] == []


def test_the_marker_checker_sees_an_unmarked_test(tmp_path):
    folder = tmp_path / "tests" / "integration"
    folder.mkdir(parents=True)
    bad = folder / "test_x.py"
    bad.write_text('import subprocess\nTRACE = ["strace", "-f"]\n\ndef test_a():\n    subprocess.run(["unshare", "-n"])\n\n'
                   '@pytest.mark.linux_only("namespaces")\ndef test_b():\n    subprocess.run(["strace", "true"])\n\n'
                   'def test_c():\n    open("/proc/self/status")\n\ndef test_d():\n    subprocess.run([*TRACE, "x"])\n\n'
                   'def test_e():\n    subprocess.run(["true"])\n')
    assert _unmarked_linux_tests(bad) == [f"tests/integration/test_x.py::test_{x}" for x in "acd"]


@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_the_marker_is_registered_and_skips_elsewhere_with_its_reason(monkeypatch, platform):
    from tests.conftest import pytest_runtest_setup

    assert "linux_only(reason)" in (ROOT / "pytest.ini").read_text()
    item = type("Item", (), {"get_closest_marker": lambda self, name: pytest.mark.linux_only("strace").mark
                             if name == "linux_only" else None})()
    monkeypatch.setattr(sys, "platform", platform)
    if platform == "linux":
        pytest_runtest_setup(item)  # runs
    else:
        with pytest.raises(pytest.skip.Exception, match="Linux only: strace"):
            pytest_runtest_setup(item)
