"""The hosted demo's quota bookkeeping: per session, per client address and for the whole demo.

A plain thread-safe ledger: `rag_core.demo.hub` decides what it means (which documents exist, when a session expires)
and asks the ledger to check and reserve room. Every session belongs to a client address (the bucket "unknown" when
the UI had none); the documents a session holds count against its session, its client and the whole demo until they
are deleted or the session expires, so opening new sessions never buys more room. Questions and page images are
counted per minute at the same three levels.
"""
from __future__ import annotations

import ipaddress
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from rag_core.core.config import Settings
from rag_core.core.errors import LimitReached
from rag_core.core.text import plural

RATE_WINDOW_S = 60.0
MB = 1024 * 1024
UNKNOWN_CLIENT = "unknown"  # the one bucket of every session without a client address (local use, tests)
IPV6_PREFIX = 64  # one IPv6 customer gets a /64; counting per address would let them rotate through it

#: The visitors' documents in the library now: owner (session id) -> ids of the documents it holds.
Holdings = Mapping[str, Collection[str]]


def client_address(remote: str | None, forwarded_for: str | None = None, trust_proxy: bool = False) -> str | None:
    """The address whose quotas a visitor uses: the connection's `remote` address, or, when the proxy in front is
    trusted, the last address in its X-Forwarded-For (the one it saw; earlier entries can be forged by the client).
    IPv6 addresses are grouped by /64; None when there is no usable address."""
    if trust_proxy and forwarded_for:
        parts = [p for p in forwarded_for.split(",") if p.strip()]
        found = _normalise(parts[-1]) if parts else None
        if found is not None:
            return found
    return _normalise(remote) if remote else None


def _normalise(raw: str) -> str | None:
    text = raw.strip().strip('"')
    if text.startswith("["):  # "[2001:db8::1]:443"
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:  # "203.0.113.9:51234"
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/{IPV6_PREFIX}", strict=False))
    return str(ip)


class _Window:
    """Times of the events of the last RATE_WINDOW_S seconds."""

    def __init__(self) -> None:
        self.times: deque[float] = deque()

    def count(self, now: float) -> int:
        while self.times and now - self.times[0] >= RATE_WINDOW_S:
            self.times.popleft()
        return len(self.times)

    def wait_s(self, now: float, limit: int) -> int | None:
        """Seconds until one more event is allowed, or None when it is allowed now."""
        if self.count(now) < limit:
            return None
        return max(1, int(RATE_WINDOW_S - (now - self.times[0]) + 0.999))


@dataclass
class _Session:
    client: str
    last_seen: float
    questions: _Window = field(default_factory=_Window)
    renders: _Window = field(default_factory=_Window)
    sizes: dict[str, int] = field(default_factory=dict)  # doc_id -> bytes counted against the size quotas
    pending_files: int = 0
    pending_bytes: int = 0

    def used_bytes(self, held: Collection[str]) -> int:
        return sum(b for doc_id, b in self.sizes.items() if doc_id in held)


@dataclass
class _Client:
    questions: _Window = field(default_factory=_Window)
    renders: _Window = field(default_factory=_Window)


@dataclass(frozen=True)
class Usage:
    """What a session uses of its limits, and what its client address uses of the client's (Library page)."""

    files: int
    max_files: int
    bytes: int
    max_bytes: int
    max_questions_per_minute: int
    client_files: int = 0
    max_client_files: int = 0
    client_bytes: int = 0
    max_client_bytes: int = 0
    demo_full: bool = False  # the whole demo holds as many documents (or bytes) as it may
    # The network's documents held by its other sessions (other tabs, also closed or reloaded ones): when the first of
    # them is deleted if its tab stays unused (seconds from now; None: there are none), and after how long unused.
    others_freed_in_s: float | None = None
    idle_minutes: int = 0


def _rate_messages(kind: str, n: int, wait: int) -> tuple[str, str, str]:
    """The session, client and whole-demo sentences for a per-minute limit of `kind` ("questions" or "renders")."""
    after = f"please wait about {plural(wait, 'second')}, then"
    if kind == "questions":
        return (f"You have asked {plural(n, 'question')} in the last minute, the most the demo allows; {after} ask again.",
                f"Visitors from your network have asked {plural(n, 'question')} in the last minute, the most the demo "
                f"allows for one network; {after} ask again.",
                f"The demo has received {plural(n, 'question')} in the last minute, as many as it can answer; {after} "
                "ask again.")
    return (f"You have opened {plural(n, 'page image')} in the last minute, the most the demo allows; {after} open the "
            "page again.",
            f"Visitors from your network have opened {plural(n, 'page image')} in the last minute, the most the demo "
            f"allows for one network; {after} open the page again.",
            f"The demo has drawn {plural(n, 'page image')} in the last minute, as many as it can; {after} open the page "
            "again.")


class Ledger:
    """Per-session, per-client and demo-wide activity and quota use, guarded by one lock."""

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.clock = clock
        self._sessions: dict[str, _Session] = {}
        self._clients: dict[str, _Client] = {}
        self._questions = _Window()  # the whole demo's
        self._renders = _Window()
        self._lock = threading.Lock()

    # -- sessions ------------------------------------------------------------------
    def _entry(self, session_id: str) -> _Session:
        entry = self._sessions.get(session_id)
        if entry is None:
            entry = self._sessions[session_id] = _Session(UNKNOWN_CLIENT, self.clock())
        return entry

    def touch(self, session_id: str, client: str | None = None) -> None:
        """Record activity of a session (creating its entry on first use); a given `client` address becomes the
        one its documents, questions and page images count against."""
        with self._lock:
            entry = self._entry(session_id)
            entry.last_seen = self.clock()
            if client:
                entry.client = client

    def client_of(self, session_id: str) -> str:
        """The client address a session counts against ("unknown" when none was given)."""
        with self._lock:
            entry = self._sessions.get(session_id)
            return entry.client if entry is not None else UNKNOWN_CLIENT

    def sessions(self) -> list[str]:
        """Ids of the sessions with an entry."""
        with self._lock:
            return list(self._sessions)

    def forget(self, session_id: str) -> None:
        """Drop a session's entry."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def expire(self, idle_s: float) -> tuple[list[str], set[str]]:
        """Drop the sessions idle for longer than `idle_s` (and clients left without sessions or recent activity):
        (the expired ids, the ids still live)."""
        now = self.clock()
        with self._lock:
            expired = [sid for sid, e in self._sessions.items() if now - e.last_seen > idle_s]
            for sid in expired:
                del self._sessions[sid]
            in_use = {e.client for e in self._sessions.values()}
            for name in [c for c, e in self._clients.items() if c not in in_use
                         and not e.questions.count(now) and not e.renders.count(now)]:
                del self._clients[name]
            return expired, set(self._sessions)

    def renamed(self, session_id: str, old_doc_id: str, new_doc_id: str) -> None:
        """A document was replaced by a new version (a refreshed article): its bytes now count under the new id."""
        with self._lock:
            entry = self._sessions.get(session_id)  # an expired session stays expired
            if entry is not None and old_doc_id in entry.sizes:
                entry.sizes[new_doc_id] = entry.sizes.pop(old_doc_id)

    # -- documents and bytes --------------------------------------------------------
    def reserve(self, session_id: str, name: str, size: int, holdings: Holdings) -> None:
        """Check that one more document of `size` bytes fits for the session, its client and the whole demo, and
        reserve room for it; LimitReached (one sentence saying which limit and what to do) when it does not."""
        s = self.settings
        if size > s.demo.max_file_mb * MB:
            raise LimitReached(f"“{name}” is {size / MB:.1f} MB; the demo accepts files up to "
                               f"{s.demo.max_file_mb} MB each. Try a smaller file, or run DocChat on your own "
                               "computer for larger ones.")
        with self._lock:
            entry = self._entry(session_id)
            peers = self._peers(entry.client)
            held = len(holdings.get(session_id, ())) + entry.pending_files
            if held >= s.demo.max_files_per_session:
                n = s.demo.max_files_per_session
                raise LimitReached(f"Your demo library already holds {plural(n, 'file')}, the most the demo allows. "
                                   "Remove one on the Library page to add another.")
            if self._files(peers, holdings) >= s.demo.max_files_per_client:
                n = s.demo.max_files_per_client
                raise LimitReached(f"This demo already holds {plural(n, 'document')} from your network, the most it "
                                   "allows for one network; delete a document or try again later.")
            if self._total_files(holdings) >= s.demo.total_files:
                raise LimitReached("The demo holds as many visitors' documents as it can right now; try again later, "
                                   "or run DocChat on your own computer.")
            self._check_bytes(session_id, name, size, holdings)
            entry.pending_files += 1
            entry.pending_bytes += size

    def grow(self, session_id: str, name: str, extra: int, holdings: Holdings) -> None:
        """Add `extra` bytes to a reservation once a document's size is known (a Wikipedia article's text), after
        checking that they fit (LimitReached otherwise; the reservation stays as it was)."""
        with self._lock:
            entry = self._entry(session_id)
            self._check_bytes(session_id, name, extra, holdings)
            entry.pending_bytes += extra

    def settle(self, session_id: str, size: int, doc_id: str | None) -> None:
        """Release a reservation; when the document was stored, count its bytes against the session. Nothing
        happens for a session that expired meanwhile: its reservation went with it, and it stays expired (its
        document, now ownerless, goes with the idle clean-up of leftover owners)."""
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                return
            entry.pending_files = max(0, entry.pending_files - 1)
            entry.pending_bytes = max(0, entry.pending_bytes - size)
            if doc_id is not None:
                entry.sizes[doc_id] = size

    def _peers(self, client: str) -> dict[str, _Session]:
        return {sid: e for sid, e in self._sessions.items() if e.client == client}

    @staticmethod
    def _files(group: Mapping[str, _Session], holdings: Holdings) -> int:
        """Documents held or on the way for a group of sessions."""
        return sum(len(holdings.get(sid, ())) + e.pending_files for sid, e in group.items())

    def _total_files(self, holdings: Holdings) -> int:
        """Documents of the whole demo: every visitor's, also those of owners no live session has any more (until
        the idle clean-up removes them), and those on the way."""
        return sum(len(ids) for ids in holdings.values()) + sum(e.pending_files for e in self._sessions.values())

    @staticmethod
    def _bytes(group: Mapping[str, _Session], holdings: Holdings) -> int:
        return sum(e.used_bytes(holdings.get(sid, ())) + e.pending_bytes for sid, e in group.items())

    def _check_bytes(self, session_id: str, name: str, size: int, holdings: Holdings) -> None:
        s = self.settings
        entry = self._sessions[session_id]
        peers = self._peers(entry.client)
        if entry.used_bytes(holdings.get(session_id, ())) + entry.pending_bytes + size > s.demo.max_session_mb * MB:
            raise LimitReached(f"Adding “{name}” would take your demo library past {s.demo.max_session_mb} MB, "
                               "the most the demo allows per visitor. Remove a document to make room.")
        if self._bytes(peers, holdings) + size > s.demo.max_client_mb * MB:
            raise LimitReached(f"Adding “{name}” would take this demo past its storage limit for your network "
                               f"({s.demo.max_client_mb} MB); delete a document or try again later.")
        if self._bytes(self._sessions, holdings) + size > s.demo.total_mb * MB:
            raise LimitReached(f"Adding “{name}” would take the demo past its total storage limit; try again later, "
                               "or run DocChat on your own computer.")

    # -- per-minute limits ----------------------------------------------------------
    def count_question(self, session_id: str) -> None:
        """Count one question against the per-minute limits of the session, its client and the whole demo
        (LimitReached, saying which limit and how long to wait, when one is reached; nothing is counted then)."""
        s = self.settings
        self._count(session_id, "questions", (s.demo.questions_per_minute, s.demo.client_questions_per_minute,
                                              s.demo.questions_per_minute_total))

    def count_render(self, session_id: str) -> None:
        """Count one page image against the per-minute limits of the session, its client and the whole demo."""
        s = self.settings
        self._count(session_id, "renders", (s.demo.page_renders_per_minute, s.demo.client_page_renders_per_minute,
                                            s.demo.page_renders_per_minute_total))

    def _count(self, session_id: str, kind: str, limits: tuple[int, int, int]) -> None:
        with self._lock:
            entry = self._entry(session_id)
            client = self._clients.setdefault(entry.client, _Client())
            windows: list[_Window] = [getattr(entry, kind), getattr(client, kind),
                                      self._questions if kind == "questions" else self._renders]
            now = self.clock()
            for level, (window, limit) in enumerate(zip(windows, limits, strict=True)):
                wait = window.wait_s(now, limit)
                if wait is not None:
                    raise LimitReached(_rate_messages(kind, limit, wait)[level])
            for window in windows:
                window.times.append(now)

    # -- the Library page -------------------------------------------------------------
    def usage(self, session_id: str, holdings: Holdings, sweep_s: float = 0.0) -> Usage:
        """Files and bytes used of one session's limits (and its question limit), and of its client's, with when
        the first document of the client's other sessions is deleted if they stay idle (plus `sweep_s`: how often
        the clean-up looks)."""
        s = self.settings
        with self._lock:
            entry = self._sessions.get(session_id) or _Session(UNKNOWN_CLIENT, self.clock())
            peers = self._peers(entry.client) if session_id in self._sessions else {session_id: entry}
            held = holdings.get(session_id, ())
            full = (self._total_files(holdings) >= s.demo.total_files
                    or self._bytes(self._sessions, holdings) >= s.demo.total_mb * MB)
            idle_s = s.demo.session_idle_minutes * 60
            ends = [e.last_seen + idle_s for sid, e in peers.items() if sid != session_id and holdings.get(sid)]
            freed = max(0.0, min(ends) - self.clock()) + sweep_s if ends else None
            return Usage(len(held), s.demo.max_files_per_session, entry.used_bytes(held), s.demo.max_session_mb * MB,
                         s.demo.questions_per_minute,
                         sum(len(holdings.get(sid, ())) for sid in peers), s.demo.max_files_per_client,
                         sum(e.used_bytes(holdings.get(sid, ())) for sid, e in peers.items()),
                         s.demo.max_client_mb * MB, full, freed, s.demo.session_idle_minutes)


def visitors(owners: Iterable[tuple[str | None, str]], shared: str) -> dict[str, set[str]]:
    """Holdings from (owner, doc_id) pairs: every owner but the shared library (and ownerless documents)."""
    out: dict[str, set[str]] = {}
    for owner, doc_id in owners:
        if owner is not None and owner != shared:
            out.setdefault(owner, set()).add(doc_id)
    return out
