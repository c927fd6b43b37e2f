"""DocChat's store, locks, space reserve and reader process, run in a fresh interpreter whose Linux-only calls are
removed (as on macOS and Windows): tests/unit/test_portable_run.py runs `python -m tests.portable_helpers DIR` and
reads the JSON it prints. Also the stand-in loaders the reader process runs (importable from its child)."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

#: Modules Windows does not have: `import fcntl` raises ImportError once its sys.modules entry is None.
REMOVED_MODULES = ("fcntl", "resource", "termios", "pwd", "grp")
#: os functions missing on Windows (and posix_fallocate on macOS too). Not statvfs: shutil.disk_usage stands on it
#: here and on GetDiskFreeSpaceEx on Windows.
REMOVED_OS = ("posix_fallocate", "killpg", "setsid", "getpgid", "sched_getaffinity", "fork", "mkfifo")
WAIT_S = 60


def remove_linux_only() -> list[str]:
    """Make the Linux-only modules unimportable and delete the Linux-only os functions; what was removed."""
    loaded = [m for m in REMOVED_MODULES if m in sys.modules]
    if loaded:
        raise RuntimeError(f"already imported before the removal: {loaded}")
    # psutil (the reader's memory ceiling) has a backend per system; here its Linux one, which imports `resource`
    # first. It keeps its own reference; DocChat's code still finds `resource` gone below.
    import psutil  # noqa: F401
    for name in REMOVED_MODULES:
        sys.modules[name] = None  # type: ignore[assignment]
    removed = [name for name in REMOVED_OS if hasattr(os, name)]
    for name in removed:
        delattr(os, name)
    return [*REMOVED_MODULES, *removed]


# -- the stand-in loaders (module-level: the reader's child process imports them by name) -------------------------
def echo(value: str, deadline: object, progress: object = None) -> str:
    """Answer `value` (a loader that reports one progress step when asked to)."""
    if callable(progress):
        progress("reading", 1, 1)
    return value


def hang(started: str, deadline: object) -> str:
    """Create the file `started`, then never finish (a native parser stuck on a crafted file)."""
    Path(started).touch()
    time.sleep(3600)
    return "woke"


def grow(settings: object, deadline: object) -> str:
    """Take 16 MB more every few milliseconds, without end (a parser building a huge tree); `settings` carries the
    memory ceiling."""
    held = []
    while True:
        held.append(b"x" * (16 << 20))
        time.sleep(0.005)


def die(deadline: object) -> str:
    """End the reader child at once, without an answer (a native parser crashing)."""
    sys.stderr.write("Fatal error in the parser\n")
    sys.stderr.flush()
    os._exit(3)


def answer_when(started: str, go: str, value: str, deadline: object) -> str:
    """Create the file `started`, wait for the file `go`, then answer `value`."""
    Path(started).touch()
    _wait_for(Path(go))
    return value


def environment(name: str, deadline: object) -> str | None:
    """The reader child's value of the environment variable `name`."""
    return os.environ.get(name)


def _wait_for(path: Path) -> bool:
    """Wait until `path` exists (the child has started), at most WAIT_S."""
    end = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def run(folder: Path) -> dict[str, object]:
    """Exercise the lock, the reserve, the store and the reader; what was seen, for the test to check."""
    seen: dict[str, object] = {"removed": remove_linux_only()}
    from rag_core.core.errors import IngestCancelled, IngestTimedOut, LibraryBusy
    from rag_core.core.files import allocated_bytes, exclusive_lock, reserve_space
    from rag_core.ingest.loaders import _isolated
    from rag_core.store.backends.edge import RESERVE_BYTES, RESERVE_FILE
    from tests.store_helpers import add_synthetic, open_bare_store

    try:
        import fcntl  # noqa: F401 - the removal must hold
        seen["fcntl_importable"] = True
    except ImportError:
        seen["fcntl_importable"] = False
    seen["fcntl_loaded"] = sorted(m for m in REMOVED_MODULES if sys.modules.get(m) is not None)

    # the lock: one holder, a second refused, taken again once released
    lock = exclusive_lock(folder / "lock", folder)
    try:
        exclusive_lock(folder / "lock", folder)
        seen["second_lock_refused"] = False
    except LibraryBusy:
        seen["second_lock_refused"] = True
    lock.release()
    again = exclusive_lock(folder / "lock", folder)
    seen["lock_taken_again"] = again.held
    again.release()

    # space reserved by writing zeros
    fd = os.open(folder / "reserve", os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
    try:
        reserve_space(fd, 3 * (1 << 20) + 5)
    finally:
        os.close(fd)
    seen["reserved"] = allocated_bytes((folder / "reserve").stat()) >= 3 * (1 << 20) + 5

    # the store (Qdrant Edge): written, refused to a second opener, read again after closing
    data_dir = str(folder / "data")
    store = open_bare_store("edge", data_dir)
    add_synthetic(store, "doc1", 5)
    seen["chunks"] = store.count_chunks()
    try:
        open_bare_store("edge", data_dir)
        seen["second_store_refused"] = False
    except LibraryBusy:
        seen["second_store_refused"] = True
    reserve = next(Path(data_dir).rglob(RESERVE_FILE))
    seen["store_reserve"] = allocated_bytes(reserve.stat()) >= RESERVE_BYTES
    store.close()
    store = open_bare_store("edge", data_dir)
    seen["chunks_after_reopen"] = store.count_chunks()
    seen["documents"] = [d.doc_id for d in store.list_documents()]
    store.close()

    # the reader process, without a pipe handed to the child (Windows) and stopped with Popen.kill
    from rag_core.core.deadline import Deadline, cancellable

    _isolated._PASS_FDS = False
    reports: list[tuple] = []
    seen["echo"] = _isolated.run_isolated(echo, ("hello",), Deadline(WAIT_S, "a.txt"), "test",
                                          progress=lambda *r: reports.append(r))
    seen["reports"] = reports
    start = time.monotonic()
    try:
        _isolated.run_isolated(hang, (str(folder / "started-1"),), Deadline(2.0, "slow.pdf"), "PDF")
        seen["timed_out"] = False
    except IngestTimedOut:
        seen["timed_out"] = True
    seen["timeout_s"] = round(time.monotonic() - start, 1)
    cancel = threading.Event()
    started = folder / "started-2"
    threading.Thread(target=lambda: _wait_for(started) and cancel.set(), daemon=True).start()
    start = time.monotonic()
    try:
        with cancellable(cancel):
            _isolated.run_isolated(hang, (str(started),), Deadline(WAIT_S, "stuck.pdf"), "PDF")
        seen["cancelled"] = False
    except IngestCancelled:
        seen["cancelled"] = True
    seen["cancel_s"] = round(time.monotonic() - start, 1)
    return seen


if __name__ == "__main__":
    from tests.portable_helpers import run as imported_run  # the loaders by their importable name, not __main__

    print(json.dumps(imported_run(Path(sys.argv[1]))))
