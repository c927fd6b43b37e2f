"""The hosted demo's per-session bookkeeping: last activity, files and bytes held or on the way, question times.

A plain thread-safe ledger: `rag_core.sessions` decides what it means (which documents a session holds, when a session
expires) and asks the ledger to check and reserve room.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .config import Settings
from .errors import LimitReached

RATE_WINDOW_S = 60.0
MB = 1024 * 1024


@dataclass
class _Entry:
    last_seen: float
    questions: deque[float] = field(default_factory=deque)  # times of recent questions
    sizes: dict[str, int] = field(default_factory=dict)  # doc_id -> bytes counted against the size quota
    pending_files: int = 0
    pending_bytes: int = 0


@dataclass(frozen=True)
class Usage:
    """What a session uses of its limits (for the Library page)."""

    files: int
    max_files: int
    bytes: int
    max_bytes: int
    questions_last_minute: int
    max_questions_per_minute: int


class Ledger:
    """Per-session activity and quota use, guarded by one lock."""

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.clock = clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def _entry(self, session_id: str) -> _Entry:
        entry = self._entries.get(session_id)
        if entry is None:
            entry = self._entries[session_id] = _Entry(last_seen=self.clock())
        return entry

    def touch(self, session_id: str) -> None:
        """Record activity of a session (creating its entry on first use)."""
        with self._lock:
            self._entry(session_id).last_seen = self.clock()

    def sessions(self) -> list[str]:
        """Ids of the sessions with an entry."""
        with self._lock:
            return list(self._entries)

    def forget(self, session_id: str) -> None:
        """Drop a session's entry."""
        with self._lock:
            self._entries.pop(session_id, None)

    def expire(self, idle_s: float) -> tuple[list[str], set[str]]:
        """Drop the sessions idle for longer than `idle_s`: (the expired ids, the ids still live)."""
        now = self.clock()
        with self._lock:
            expired = [sid for sid, e in self._entries.items() if now - e.last_seen > idle_s]
            for sid in expired:
                del self._entries[sid]
            return expired, set(self._entries)

    def reserve(self, session_id: str, name: str, size: int, held: Iterable[str]) -> None:
        """Check that one more document of `size` bytes fits beside the `held` doc ids and reserve room for it;
        LimitReached (one sentence naming the file) when it does not."""
        s = self.settings
        if size > s.demo_max_file_mb * MB:
            raise LimitReached(f"“{name}” is {size / MB:.1f} MB; the demo accepts files up to "
                               f"{s.demo_max_file_mb} MB each. Try a smaller file, or run DocChat on your own "
                               "computer for larger ones.")
        present = set(held)
        with self._lock:
            entry = self._entry(session_id)
            used = sum(b for doc_id, b in entry.sizes.items() if doc_id in present)
            if len(present) + entry.pending_files >= s.demo_max_files_per_session:
                n = s.demo_max_files_per_session
                raise LimitReached(f"Your demo library already holds {n} file{'' if n == 1 else 's'}, the most "
                                   "the demo allows. Remove one on the Library page to add another.")
            if used + entry.pending_bytes + size > s.demo_max_session_mb * MB:
                raise LimitReached(f"Adding “{name}” would take your demo library past {s.demo_max_session_mb} MB, "
                                   "the most the demo allows per visitor. Remove a document to make room.")
            entry.pending_files += 1
            entry.pending_bytes += size

    def settle(self, session_id: str, size: int, doc_id: str | None) -> None:
        """Release a reservation; when the document was stored, count its bytes against the session."""
        with self._lock:
            entry = self._entry(session_id)
            entry.pending_files = max(0, entry.pending_files - 1)
            entry.pending_bytes = max(0, entry.pending_bytes - size)
            if doc_id is not None:
                entry.sizes[doc_id] = size

    def count_question(self, session_id: str) -> None:
        """Count one question against the per-minute limit (LimitReached, saying how long to wait, when over)."""
        per_minute = self.settings.demo_questions_per_minute
        with self._lock:
            entry = self._entry(session_id)
            now = self.clock()
            while entry.questions and now - entry.questions[0] >= RATE_WINDOW_S:
                entry.questions.popleft()
            if len(entry.questions) >= per_minute:
                wait = max(1, int(RATE_WINDOW_S - (now - entry.questions[0]) + 0.999))
                raise LimitReached(f"You have asked {per_minute} questions in the last minute, the most the demo "
                                   f"allows. Please wait about {wait} second{'' if wait == 1 else 's'}, then ask "
                                   "again.")
            entry.questions.append(now)

    def usage(self, session_id: str, held: Iterable[str]) -> Usage:
        """Files, bytes and questions used of one session's limits."""
        s = self.settings
        present = set(held)
        with self._lock:
            entry = self._entries.get(session_id) or _Entry(last_seen=self.clock())
            now = self.clock()
            recent = sum(1 for t in entry.questions if now - t < RATE_WINDOW_S)
            used = sum(b for doc_id, b in entry.sizes.items() if doc_id in present)
        return Usage(len(present), s.demo_max_files_per_session, used, s.demo_max_session_mb * MB, recent,
                     s.demo_questions_per_minute)
