"""A readers-writer gate between searches and the one step that swaps two versions of a document.

Searches take the gate shared (many at once, never waiting for each other); replacing a changed file's passages takes
it exclusively for two quick engine calls (new version visible, old version hidden), so one search sees either the old
version or the new one, never both or neither. Within one process: the embedded library has only one.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SwapGate:
    """Shared for readers, exclusive for a swap; a waiting swap lets no new reader in (it is never starved)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._swapping = False
        self._waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the gate shared for one search."""
        with self._cond:
            while self._swapping or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def swapping(self) -> Iterator[None]:
        """Hold the gate alone: no search runs meanwhile."""
        with self._cond:
            self._waiting += 1
            try:
                while self._swapping or self._readers:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._swapping = True
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()
