"""Races between browser sessions of one process (issue 24): saved conversations and Settings choices are written
under one lock per file for the whole process, however many objects reach that file; a session the demo's janitor
expired stays expired when an upload of it settles afterwards."""
from __future__ import annotations

import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rag_core.core.config import Settings
from rag_core.demo.quotas import Ledger
from rag_core.service import conversations as conversations_module
from rag_core.service.conversations import Conversation, FileConversations
from rag_core.service.preferences import FilePreferences

WAIT_S = 10.0  # upper bound on any wait for a state: reached only when the test is failing


class _Spied:
    """A lock that says when a thread has to wait for it (the moment another writer is held back)."""

    def __init__(self, inner: Any, contended: threading.Event) -> None:
        self._inner = inner
        self._contended = contended

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._inner.acquire(False):
            return True
        self._contended.set()
        return self._inner.acquire(blocking, timeout)

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.fixture
def contended(monkeypatch) -> threading.Event:
    """Set when a writer waits for a lock of rag_core.service.conversations (the only place their locks are made)."""
    event = threading.Event()
    spy = types.SimpleNamespace(**{name: getattr(threading, name) for name in dir(threading)
                                   if not name.startswith("__")})
    spy.Lock = lambda: _Spied(threading.Lock(), event)
    spy.RLock = lambda: _Spied(threading.RLock(), event)
    monkeypatch.setattr(conversations_module, "threading", spy)
    return event


def _held_open(read: Callable[..., Any], other_wrote: threading.Event, other_waits: threading.Event,
               reading: threading.Event) -> Callable[..., Any]:
    """`read`, which then holds on until the other writer has written, or is waiting for the lock."""

    def hold(*args: Any) -> Any:
        got = read(*args)
        reading.set()
        for _ in range(int(WAIT_S / 0.01)):
            if other_wrote.is_set() or other_waits.wait(0.01):
                break
        return got

    return hold


def _run(target: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_rename_never_drops_turns_another_session_saves_meanwhile(tmp_path, contended, monkeypatch):
    """Two tabs: one renames the conversation (read, change the title, write) while the other saves its new
    question. Each tab has its own FileConversations (a workspace per page run); the new question must survive."""
    folder = tmp_path / "conversations"
    renaming, saving = FileConversations(folder), FileConversations(folder)
    conv = Conversation(turns=[{"role": "user", "text": "first question"}])
    saving.save(conv)

    wrote, reading = threading.Event(), threading.Event()
    real_write = conversations_module.write_atomic

    def write(path: Path, data: bytes) -> None:
        real_write(path, data)
        if threading.current_thread() is not rename_thread:
            wrote.set()

    monkeypatch.setattr(conversations_module, "write_atomic", write)
    monkeypatch.setattr(renaming, "load", _held_open(renaming.load, wrote, contended, reading))

    rename_thread = threading.Thread(target=lambda: renaming.rename(conv.id, "Chosen title"), daemon=True)
    rename_thread.start()
    assert reading.wait(WAIT_S)  # the rename has read the file and not written it yet
    newer = saving.load(conv.id)
    assert newer is not None
    newer.turns.append({"role": "user", "text": "second question"})
    save_thread = _run(lambda: saving.save(newer))
    rename_thread.join(WAIT_S)
    save_thread.join(WAIT_S)
    assert not rename_thread.is_alive() and not save_thread.is_alive()

    final = FileConversations(folder).load(conv.id)
    assert final is not None
    assert [t["text"] for t in final.turns] == ["first question", "second question"]


def test_a_delete_is_not_undone_by_a_rename_under_way(tmp_path, contended, monkeypatch):
    """One tab deletes the conversation while another renames it: it stays deleted."""
    folder = tmp_path / "conversations"
    renaming, deleting = FileConversations(folder), FileConversations(folder)
    conv = Conversation(turns=[{"role": "user", "text": "a question"}])
    deleting.save(conv)
    gone, reading = threading.Event(), threading.Event()
    monkeypatch.setattr(renaming, "load", _held_open(renaming.load, gone, contended, reading))

    rename_thread = _run(lambda: renaming.rename(conv.id, "New title"))
    assert reading.wait(WAIT_S)

    def delete() -> None:
        deleting.delete(conv.id)
        gone.set()

    delete_thread = _run(delete)
    rename_thread.join(WAIT_S)
    delete_thread.join(WAIT_S)
    assert not rename_thread.is_alive() and not delete_thread.is_alive()
    assert FileConversations(folder).load(conv.id) is None


def test_two_sessions_changing_different_choices_keep_both(tmp_path, contended, monkeypatch):
    """Two pages change one Settings choice each (read, change, write) through their own FilePreferences: the
    file ends with both changes."""
    base = Settings(data_dir=tmp_path / "data")
    first, second = FilePreferences(base), FilePreferences(base)
    first.save({"top_k": 4})
    wrote, reading = threading.Event(), threading.Event()
    monkeypatch.setattr(first, "load", _held_open(first.load, wrote, contended, reading))

    first_thread = _run(lambda: first.update({"use_llm": False}))
    assert reading.wait(WAIT_S)

    def change() -> None:
        second.update({"top_k": 7})
        wrote.set()

    second_thread = _run(change)
    first_thread.join(WAIT_S)
    second_thread.join(WAIT_S)
    assert not first_thread.is_alive() and not second_thread.is_alive()
    assert FilePreferences(base).load() == {"top_k": 7, "use_llm": False}


def test_writers_of_one_folder_share_one_lock_and_other_folders_do_not(tmp_path):
    a = conversations_module.lock_for(tmp_path / "x")
    assert conversations_module.lock_for(tmp_path / "y" / ".." / "x") is a
    assert conversations_module.lock_for(tmp_path / "z") is not a
    with a, conversations_module.lock_for(tmp_path / "x"):  # taken again by one thread (a rename saves under it)
        pass


# --------------------------------------------------------------------------- the demo's quota ledger
class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_upload_settling_after_its_session_expired_does_not_bring_the_session_back(tmp_path):
    clock = _Clock()
    ledger = Ledger(Settings(data_dir=tmp_path / "data", mode="demo"), clock)
    ledger.touch("s1", "203.0.113.9")
    ledger.reserve("s1", "big.pdf", 1000, {})
    clock.now += 3600
    expired, live = ledger.expire(60)
    assert expired == ["s1"] and live == set()

    ledger.settle("s1", 1000, "doc-1")  # the upload ends after the janitor expired its session
    ledger.renamed("s1", "doc-1", "doc-2")
    assert ledger.sessions() == []
    assert ledger.client_of("s1") == "unknown"  # nothing is known of it any more
    clock.now += 3600
    assert ledger.expire(60) == ([], set())


def test_a_live_sessions_upload_still_settles(tmp_path):
    clock = _Clock()
    ledger = Ledger(Settings(data_dir=tmp_path / "data", mode="demo"), clock)
    ledger.touch("s1", "203.0.113.9")
    ledger.reserve("s1", "a.pdf", 1000, {})
    ledger.settle("s1", 1000, "doc-1")
    usage = ledger.usage("s1", {"s1": {"doc-1"}})
    assert usage.files == 1 and usage.bytes == 1000
