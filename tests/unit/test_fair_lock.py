"""The embedding model's lock hands over in arrival order: a question waits for the upload batch in progress, not
for the whole upload (a plain Lock lets the uploading thread take it straight back, batch after batch)."""
from __future__ import annotations

import threading
import time

from rag_core.embeddings import FairLock


def _order_after_release_and_retake(lock) -> list[str]:
    """Who gets `lock` first when its holder releases it and at once asks again, while another thread waits."""
    order: list[str] = []
    lock.__enter__()

    def question() -> None:
        with lock:
            order.append("question")

    waiter = threading.Thread(target=question)
    waiter.start()
    time.sleep(0.1)  # the question is waiting now
    lock.__exit__(None, None, None)
    with lock:  # the next upload batch, straight away
        order.append("batch")
    waiter.join(5)
    return order


def test_a_waiting_question_goes_before_the_next_batch():
    assert _order_after_release_and_retake(FairLock()) == ["question", "batch"]


def test_a_plain_lock_would_let_the_batch_jump_the_queue():
    """What FairLock is for (if this ever fails, a plain Lock became fair and FairLock could go)."""
    runs = [_order_after_release_and_retake(threading.Lock()) for _ in range(5)]
    assert ["batch", "question"] in runs


def test_waiters_are_served_in_arrival_order():
    lock, order = FairLock(), []
    lock.__enter__()
    threads = []
    for i in range(5):
        def take(i: int = i) -> None:
            with lock:
                order.append(i)
        t = threading.Thread(target=take)
        t.start()
        threads.append(t)
        time.sleep(0.05)  # each one is waiting before the next arrives
    lock.__exit__(None, None, None)
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3, 4]


def test_an_uncontended_lock_is_taken_and_released():
    lock = FairLock()
    for _ in range(3):
        with lock:
            pass
    got = threading.Event()
    threading.Thread(target=lambda: (lock.__enter__(), got.set(), lock.__exit__(None, None, None))).start()
    assert got.wait(2)
