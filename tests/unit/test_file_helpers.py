"""One exclusive lock, one atomic write and the disk-space helpers (rag_core.core.files), portable to macOS and Windows;
and the small duplicates stay gone: one class per public name (how long a function or class may be:
tests/unit/test_cohesion.py)."""
from __future__ import annotations

import ast
import errno
import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import LibraryBusy
from rag_core.core.files import allocated_bytes, exclusive_lock, free_bytes, reserve_space, write_atomic
from rag_core.ingest.originals import save_original
from rag_core.service.conversations import Conversation, FileConversations
from rag_core.service.preferences import FilePreferences

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = sorted([ROOT / "app.py", *(ROOT / "rag_core").rglob("*.py"), *(ROOT / "pages").glob("*.py"),
                  *(ROOT / "ui").glob("*.py")])
WAIT_S = 60


# -- the lock ------------------------------------------------------------------------------------------------------
def test_a_second_holder_in_the_same_process_is_refused_until_the_first_releases(tmp_path):
    first = exclusive_lock(tmp_path / "lock", tmp_path / "library")
    assert first.held
    with pytest.raises(LibraryBusy) as e:
        exclusive_lock(tmp_path / "lock", tmp_path / "library")
    assert e.value.path == str(tmp_path / "library") and "another DocChat process" in str(e.value)
    first.release()
    first.release()  # a second release does nothing
    assert not first.held
    with exclusive_lock(tmp_path / "lock") as second:  # free again; a with-block gives it back
        assert second.held
        with pytest.raises(LibraryBusy) as e:
            exclusive_lock(tmp_path / "lock")
        assert e.value.path == str(tmp_path)  # default: the lock file's folder
    assert not second.held
    exclusive_lock(tmp_path / "lock").release()


def test_a_lock_taken_by_one_thread_is_released_by_another(tmp_path):
    """A library opened on one thread is closed on another at shutdown: the release must free the file."""
    taken: list = []
    opener = threading.Thread(target=lambda: taken.append(exclusive_lock(tmp_path / "lock")))
    opener.start()
    opener.join(WAIT_S)
    closer = threading.Thread(target=taken[0].release)
    closer.start()
    closer.join(WAIT_S)
    exclusive_lock(tmp_path / "lock").release()  # LibraryBusy here if the release was per thread


def _holder(lock_file: Path) -> subprocess.Popen:
    """A process that takes the lock whenever it reads "take" and answers "held" or "busy"."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from rag_core.core.errors import LibraryBusy
        from rag_core.core.files import exclusive_lock
        held = []
        for line in sys.stdin:
            try:
                held.append(exclusive_lock(Path({str(lock_file)!r})))
                print("held", flush=True)
            except LibraryBusy:
                print("busy", flush=True)
    """)
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)


def _ask(proc: subprocess.Popen) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("take\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_another_process_is_refused_while_the_lock_is_held_and_a_killed_holder_leaves_it_free(tmp_path):
    lock_file = tmp_path / "lock"
    proc = _holder(lock_file)
    try:
        mine = exclusive_lock(lock_file)
        assert _ask(proc) == "busy"
        mine.release()
        assert _ask(proc) == "held"
        with pytest.raises(LibraryBusy):
            exclusive_lock(lock_file)
    finally:
        proc.kill()  # a crash: the system drops the lock with the process
        proc.wait(WAIT_S)
    exclusive_lock(lock_file).release()


# -- the atomic write --------------------------------------------------------------------------------------------
def _record_durability(monkeypatch) -> list[tuple]:
    """Record each fsync (by the file or folder it flushed) and each replace, in order."""
    events: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src, dst) -> None:
        real_replace(src, dst)
        events.append(("replace", Path(dst).name))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _saves(tmp_path: Path) -> dict:
    """Each product write that must survive a crash: what to call, and the file it writes."""
    settings = Settings(data_dir=tmp_path)
    conv = Conversation(turns=[{"role": "user", "text": "first question"}])
    return {
        "conversation": (lambda: FileConversations(tmp_path / "conversations").save(conv),
                         tmp_path / "conversations" / f"{conv.id}.json"),
        "preferences": (lambda: FilePreferences(settings).save({"top_k": 5}), tmp_path / "preferences.json"),
        "original": (lambda: save_original(settings, "doc1", b"%PDF-1.4 x", "pdf"), tmp_path / "originals" / "doc1.pdf"),
    }


@pytest.mark.parametrize("kind", ["conversation", "preferences", "original"])
def test_a_save_is_flushed_before_its_rename_and_the_folder_after_it(tmp_path, monkeypatch, kind):
    """Durable: the new file's bytes are on the disk before it replaces the old one, and the rename itself is on
    the disk (the folder flushed) before the save returns."""
    save, path = _saves(tmp_path)[kind]
    events = _record_durability(monkeypatch)
    save()
    monkeypatch.undo()
    assert path.is_file()
    renamed = events.index(("replace", path.name))
    assert ("fsync", _identity(path)) in events[:renamed], events  # the file's data, before the rename
    if sys.platform != "win32":  # Windows cannot open a folder to flush it
        assert ("fsync", _identity(path.parent)) in events[renamed:], events
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("kind", ["conversation", "preferences", "original"])
def test_a_save_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch, kind):
    save, path = _saves(tmp_path)[kind]
    before = None
    if kind != "original":  # an original is written once, never replaced
        save()
        before = path.read_bytes()

    def disk_full(src, dst) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError):
        save()
    assert (path.read_bytes() if path.exists() else None) == before
    assert [p.name for p in path.parent.iterdir() if p.name != path.name] == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_atomic_write_sets_the_permissions_asked_for(tmp_path):
    write_atomic(tmp_path / "private", b"x", mode=0o600)
    assert stat.S_IMODE(os.stat(tmp_path / "private").st_mode) == 0o600
    path = save_original(Settings(data_dir=tmp_path), "doc1", b"%PDF-1.4 x", "pdf")
    assert path is not None and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


# -- disk space --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fallocate", [True, False], ids=["posix_fallocate", "zeros-written"])
def test_reserved_space_takes_its_size_on_the_disk(tmp_path, monkeypatch, fallocate):
    if fallocate and not hasattr(os, "posix_fallocate"):
        pytest.skip("this system has no posix_fallocate")
    if not fallocate:
        monkeypatch.delattr(os, "posix_fallocate", raising=False)  # as on macOS and Windows
    size = 3 * (1 << 20) + 5
    path = tmp_path / "reserve"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        reserve_space(fd, size)
    finally:
        os.close(fd)
    assert path.stat().st_size == size
    assert allocated_bytes(path.stat()) >= size


def test_free_and_allocated_bytes_without_statvfs_or_st_blocks(tmp_path):
    assert allocated_bytes(SimpleNamespace(st_size=1234)) == 1234  # type: ignore[arg-type]  # Windows: no st_blocks
    assert allocated_bytes(SimpleNamespace(st_size=1, st_blocks=8)) == 4096  # type: ignore[arg-type]
    if hasattr(os, "statvfs"):
        st = os.statvfs(tmp_path)
        assert abs(free_bytes(tmp_path) - st.f_bavail * st.f_frsize) < 64 << 20  # what an unprivileged user may use
    assert free_bytes(tmp_path) > 0


# -- the code stays portable, one class per name ----------------------------------------------------------------
POSIX_ONLY_ATTRIBUTES = {"statvfs": "use rag_core.core.files.free_bytes",
                         "posix_fallocate": "use rag_core.core.files.reserve_space",
                         "st_blocks": "use rag_core.core.files.allocated_bytes",
                         "flock": "use rag_core.core.files.exclusive_lock"}


def _posix_only_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {m} (POSIX only)" for m in modules
                      if m.split(".")[0] in ("fcntl", "termios", "pwd", "grp", "resource")]
        elif isinstance(node, ast.Attribute) and node.attr in POSIX_ONLY_ATTRIBUTES:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}: {POSIX_ONLY_ATTRIBUTES[node.attr]}")
    return found


def test_product_code_calls_nothing_that_exists_only_on_posix():
    """fcntl, statvfs, posix_fallocate and st_blocks are missing on Windows (and posix_fallocate on macOS): the
    product reaches them only through rag_core.core.files, which has a portable path for each."""
    assert [use for path in PRODUCT for use in _posix_only_uses(path)] == []


def test_the_checker_sees_each_kind_of_posix_only_call(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_text("import fcntl\nimport os\nos.statvfs('.')\nos.posix_fallocate(1, 0, 1)\nos.stat('.').st_blocks\n")
    assert len(_posix_only_uses(bad)) == 4


def test_each_public_class_is_defined_once():
    """No two modules define a class of the same public name (two `Deadline`s did different jobs)."""
    where: dict[str, list[str]] = {}
    for path in PRODUCT:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}

