"""The embedding model's lock hands over in arrival order: a question waits for the upload batch in progress, not
for the whole upload (a plain Lock lets the uploading thread take it straight back, batch after batch). A waiter
that gives up or is interrupted leaves the queue, so the lock still passes on."""
from __future__ import annotations

import threading
import types
from collections.abc import Callable

import pytest

from rag_core.store import embeddings
from rag_core.store.embeddings import FairLock

WAIT_S = 5.0  # upper bound on any wait for a state: reached only when the test is failing


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state (polling an event, never a fixed sleep)."""
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.005)):
        if condition():
            return
        pause.wait(0.005)
    raise AssertionError(f"timed out waiting until {what}")


def _taker(lock: FairLock, order: list, name: object, go: threading.Event | None = None) -> threading.Thread:
    def take() -> None:
        with lock:
            order.append(name)
            if go is not None:
                assert go.wait(WAIT_S)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_a_waiting_question_goes_before_the_next_batch():
    lock, order = FairLock(), []
    lock.__enter__()
    question = _taker(lock, order, "question")
    _until(lambda: lock.waiting == 1, "the question waits")
    lock.__exit__(None, None, None)
    with lock:  # the next upload batch, straight away
        order.append("batch")
    question.join(WAIT_S)
    assert order == ["question", "batch"]


def test_release_hands_the_lock_to_the_waiter_directly():
    """What FairLock is for: between a release and the waiter running, nobody else can take the lock (a plain
    Lock is free in that moment, and the releasing thread usually takes it straight back)."""
    lock, order, go = FairLock(), [], threading.Event()
    lock.__enter__()
    question = _taker(lock, order, "question", go)
    _until(lambda: lock.waiting == 1, "the question waits")
    lock.__exit__(None, None, None)
    assert not lock.acquire(timeout=0)  # whether or not the question's thread has run yet: it holds the lock
    go.set()
    question.join(WAIT_S)
    assert order == ["question"]
    assert lock.acquire(timeout=0)
    lock.release()


def test_waiters_are_served_in_arrival_order():
    lock, order = FairLock(), []
    lock.__enter__()
    threads = []
    for i in range(5):
        threads.append(_taker(lock, order, i))
        _until(lambda n=i + 1: lock.waiting == n, f"{i + 1} threads wait")  # each waits before the next arrives
    lock.__exit__(None, None, None)
    for t in threads:
        t.join(WAIT_S)
    assert order == [0, 1, 2, 3, 4]


def test_an_uncontended_lock_is_taken_and_released():
    lock = FairLock()
    for _ in range(3):
        with lock:
            pass
    got = threading.Event()
    threading.Thread(target=lambda: (lock.__enter__(), got.set(), lock.__exit__(None, None, None)),
                     daemon=True).start()
    assert got.wait(WAIT_S)


def _interrupting(monkeypatch: pytest.MonkeyPatch, before_raising: Callable[[], object] = lambda: None) -> None:
    """Make the next wait for a turn of a FairLock raise KeyboardInterrupt (Ctrl+C while waiting)."""

    class Interrupted(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            before_raising()
            raise KeyboardInterrupt

    patched = types.SimpleNamespace(**{n: getattr(threading, n) for n in dir(threading) if not n.startswith("__")})
    patched.Event = Interrupted
    monkeypatch.setattr(embeddings, "threading", patched)


def _taken_by_another_thread(lock: FairLock) -> bool:
    got = threading.Event()

    def take() -> None:
        with lock:
            got.set()

    threading.Thread(target=take, daemon=True).start()
    return got.wait(WAIT_S)


def test_an_interrupted_waiter_leaves_the_queue(monkeypatch):
    lock = FairLock()
    lock.__enter__()
    _interrupting(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        lock.__enter__()  # waits behind the holder, and is interrupted
    monkeypatch.undo()
    lock.__exit__(None, None, None)
    assert _taken_by_another_thread(lock), "the release handed the lock to the interrupted waiter"
    assert lock.waiting == 0


def test_a_waiter_interrupted_just_as_the_lock_is_handed_to_it_passes_it_on(monkeypatch):
    lock = FairLock()
    lock.__enter__()
    _interrupting(monkeypatch, before_raising=lambda: lock.__exit__(None, None, None))  # handed over, then Ctrl+C
    with pytest.raises(KeyboardInterrupt):
        lock.__enter__()
    monkeypatch.undo()
    assert _taken_by_another_thread(lock), "the interrupted waiter kept the lock it was handed"


def test_a_waiter_that_times_out_leaves_the_queue():
    lock = FairLock()
    lock.__enter__()
    assert not lock.acquire(timeout=0.01)
    assert lock.waiting == 0
    lock.__exit__(None, None, None)
    assert _taken_by_another_thread(lock)
