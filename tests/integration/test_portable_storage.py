"""The embedded library (Qdrant Edge) on systems without Linux's calls: its folder lock is the portable one, released
by whichever thread closes the library, and its space reserve is made without posix_fallocate (macOS, Windows)."""
from __future__ import annotations

import os
import threading

import pytest

from rag_core.core.errors import LibraryBusy
from rag_core.core.files import allocated_bytes
from rag_core.store.backends.edge import RESERVE_BYTES, RESERVE_FILE, EdgeBackend

WAIT_S = 60


def test_the_library_keeps_its_space_reserve_without_posix_fallocate(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "posix_fallocate", raising=False)  # as on macOS and Windows
    backend = EdgeBackend(tmp_path / "library")
    try:
        reserve = tmp_path / "library" / RESERVE_FILE
        assert reserve.is_file() and allocated_bytes(reserve.stat()) >= RESERVE_BYTES
        backend.create(4, {"embedding_model": "test", "dim": 4})  # writes still go through the room checks
        assert backend.read_meta() == {"embedding_model": "test", "dim": 4}
        reserve.unlink()  # given back on a full disk: made again, by writing, when there is room
        backend.check_room([])
        assert allocated_bytes(reserve.stat()) >= RESERVE_BYTES
    finally:
        backend.close()


def test_a_library_opened_on_one_thread_and_closed_on_another_can_be_opened_again(tmp_path):
    """The app opens the library on a page run's thread and closes it on the shutdown thread."""
    opened: list[EdgeBackend] = []
    opener = threading.Thread(target=lambda: opened.append(EdgeBackend(tmp_path / "library")))
    opener.start()
    opener.join(WAIT_S)
    with pytest.raises(LibraryBusy):
        EdgeBackend(tmp_path / "library")  # held, whichever thread asks
    closer = threading.Thread(target=opened[0].close)
    closer.start()
    closer.join(WAIT_S)
    again = EdgeBackend(tmp_path / "library")  # LibraryBusy if the lock had stayed with the opening thread
    again.close()
    again.close()  # a second close does nothing
