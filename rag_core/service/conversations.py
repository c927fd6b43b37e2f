"""Saved conversations: each question with its answer, citations and passages, kept as it happens.

Local mode keeps one JSON file per conversation under `<data dir>/conversations/` (written atomically, so a crash
leaves the previous version); the hosted demo keeps them in memory with the browser session and forgets them with it.
Every file there is read as untrusted: a regular file only, up to a limit, its shape checked (rag_core.core.safe_files);
the sidebar's list reads only the head of the newest files. A deleted conversation can be put back (`restore`, the
sidebar's Undo). `export_markdown` (in conversation_data) turns a conversation into a file a person can send to a
colleague, every text in it escaped so that rendering it shows text and fetches nothing.
"""
from __future__ import annotations

import json
import logging
import math
import os
import stat
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from rag_core.core.errors import ConversationUnreadable
from rag_core.core.files import write_atomic
from rag_core.core.safe_files import UnsafeFile, json_members_before, read_head, read_json
from rag_core.service.conversation_data import (
    FORMAT,
    MAX_TITLE,
    UNTITLED,
    Conversation,
    ConversationInfo,
    Listing,
    from_json,
    questions,
    to_json,
)
from rag_core.service.conversation_data import ID_RE as _ID
from rag_core.service.conversation_data import answer_from_dict as answer_from_dict
from rag_core.service.conversation_data import answer_to_dict as answer_to_dict
from rag_core.service.conversation_data import export_markdown as export_markdown
from rag_core.service.conversation_data import file_name_for as file_name_for
from rag_core.service.conversation_data import new_id as new_id
from rag_core.service.conversation_data import title_for as title_for

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 20 * 1024 * 1024  # a conversation file larger than this is not read (damaged or hostile)
MAX_LISTED = 100  # the newest conversation files the sidebar's list reads (older ones stay on disk, unlisted)
MAX_SCANNED = 5000  # entries of the conversations folder looked at to find them
HEAD_BYTES = 8192  # read of each listed file: its title, times and question count come before its turns


class Conversations(Protocol):
    """Where one person's conversations are kept."""

    def list(self) -> list[ConversationInfo]: ...

    def listing(self) -> Listing: ...

    def load(self, conv_id: str) -> Conversation | None: ...

    def open(self, conv_id: str) -> Conversation | None: ...

    def save(self, conv: Conversation) -> None: ...

    def rename(self, conv_id: str, title: str) -> None: ...

    def delete(self, conv_id: str) -> None: ...

    def restore(self, conv: Conversation) -> bool: ...


def _info(conv: Conversation) -> ConversationInfo:
    return ConversationInfo(conv.id, conv.title, conv.updated, questions(conv))


def _clean_title(title: str) -> str:
    return " ".join(title.split())[:MAX_TITLE] or UNTITLED


class _Renaming:
    """What every kind of conversation store does the same way."""

    def load(self, conv_id: str) -> Conversation | None:
        raise NotImplementedError

    def save(self, conv: Conversation) -> None:
        raise NotImplementedError

    def rename(self, conv_id: str, title: str) -> None:
        """Give a conversation a new title (chosen by the person: never replaced by the first question again)."""
        with self._writing():  # read and written under one lock: a save or delete meanwhile is not undone
            conv = self.load(conv_id)
            if conv is not None:
                conv.title, conv.titled_by_user = _clean_title(title), True
                self.save(conv)

    def _writing(self) -> AbstractContextManager[object]:
        """The lock held while this store's conversations are changed."""
        return nullcontext()


_LOCKS: dict[str, threading.RLock] = {}  # resolved path -> its lock (a few per data dir: never pruned)
_LOCKS_GUARD = threading.Lock()


def lock_for(path: Path) -> threading.RLock:
    """The one lock of this process for a file or folder, by its resolved path: every object that reads, changes
    and writes it (a new workspace is made on every page run) holds this one, so their writes never interleave."""
    key = os.path.realpath(path)
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.RLock()
        return lock


class MemoryConversations(_Renaming):
    """Conversations kept in memory (the hosted demo: they live and die with the browser session)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()

    def _writing(self) -> AbstractContextManager[object]:
        return self._lock

    def list(self) -> list[ConversationInfo]:
        """Conversations with at least one question, newest first."""
        with self._lock:
            convs = [from_json(d) for d in self._items.values()]
        return sorted((_info(c) for c in convs if questions(c)), key=lambda i: -i.updated)

    def listing(self) -> Listing:
        """The list with nothing left out (memory holds only what this session saved)."""
        return Listing(tuple(self.list()))

    def load(self, conv_id: str) -> Conversation | None:
        """A conversation by id, or None."""
        with self._lock:
            d = self._items.get(conv_id)
        return from_json(d) if d else None

    def open(self, conv_id: str) -> Conversation | None:
        """The same as `load`: what this session saved is always readable."""
        return self.load(conv_id)

    def save(self, conv: Conversation) -> None:
        """Keep the conversation as it is now."""
        conv.updated = time.time()
        with self._lock:
            self._items[conv.id] = to_json(conv)

    def delete(self, conv_id: str) -> None:
        """Forget a conversation."""
        with self._lock:
            self._items.pop(conv_id, None)

    def restore(self, conv: Conversation) -> bool:
        """Put back a deleted conversation as it was (its time of last use kept); False when one of its id exists."""
        with self._lock:
            if conv.id in self._items:
                return False
            self._items[conv.id] = to_json(conv)
        return True


class FileConversations(_Renaming):
    """Conversations kept as JSON files in one folder (local mode): they survive reloads and restarts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = lock_for(folder)  # shared by every FileConversations of this folder in this process

    def _writing(self) -> AbstractContextManager[object]:
        return self._lock

    def _path(self, conv_id: str) -> Path:
        if not _ID.match(conv_id):
            raise ValueError(f"bad conversation id {conv_id!r}")
        return self.folder / f"{conv_id}.json"

    def _read(self, path: Path) -> Conversation:
        """The conversation in `path`: FileNotFoundError when there is none, ConversationUnreadable (logged, naming
        the file) when it is not a regular file, larger than MAX_FILE_BYTES, or not a conversation of this id."""
        try:
            conv = from_json(read_json(path, MAX_FILE_BYTES))
            if conv.id != path.stem:
                raise ValueError(f"it holds conversation {conv.id}")
            return conv
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError) as e:
            raise _unreadable(path, e) from e

    def _summary(self, path: Path) -> ConversationInfo:
        """The sidebar's line for a file, from its first HEAD_BYTES only (to_json writes the turns last)."""
        try:
            head = read_head(path, HEAD_BYTES)
            members, turns = json_members_before(head, "turns", complete=len(head) < HEAD_BYTES)
            if members.get("format") != FORMAT or members.get("id") != path.stem:
                raise ValueError("not a DocChat conversation of this name")
            if turns is not None and not turns.startswith("["):
                raise ValueError("its turns are not a JSON array")
            count = members.get("questions")
            if turns is None or turns[1:].lstrip().startswith("]"):
                count = 0
            elif not isinstance(count, int) or isinstance(count, bool) or count < 0:
                count = 1  # saved before the count was written: it has turns, so at least one question
            updated = float(members.get("updated", 0))
            title = str(members.get("title") or UNTITLED)[:MAX_TITLE + 1]
        except FileNotFoundError:
            raise
        except (OSError, ValueError, TypeError, RecursionError, MemoryError) as e:
            raise _unreadable(path, e) from e
        return ConversationInfo(path.stem, title, updated if math.isfinite(updated) else 0.0, count)

    def _newest(self) -> tuple[list[Path], list[str], int]:
        """The MAX_LISTED newest conversation files (by modification time), the names of those that are not regular
        files, and how many older ones were left out."""
        found: list[tuple[float, str, Path]] = []
        bad: list[str] = []
        with os.scandir(self.folder) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_SCANNED:
                    log.warning("Listing only the first %d entries of %s", MAX_SCANNED, self.folder)
                    break
                if not entry.name.endswith(".json") or not _ID.match(entry.name[:-5]):
                    continue
                try:
                    st = entry.stat()  # the link followed: a link to a device is no regular file
                except FileNotFoundError:
                    continue  # deleted meanwhile, or a dangling link
                except OSError as e:
                    log.warning("Skipping conversation file %s: %s", entry.path, e)
                    bad.append(entry.name)
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.append((st.st_mtime, entry.name, Path(entry.path)))
                else:
                    log.warning("Skipping conversation file %s: not a regular file", entry.path)
                    bad.append(entry.name)
        found.sort(reverse=True)
        return [p for _, _, p in found[:MAX_LISTED]], bad, max(0, len(found) - MAX_LISTED)

    def listing(self) -> Listing:
        """Saved conversations with at least one question, newest first, read from a bounded head of a bounded
        number of files; files that could not be read are named, never fatal."""
        try:
            paths, bad, left_out = self._newest()
        except FileNotFoundError:
            return Listing((), folder=str(self.folder))
        except OSError as e:
            log.warning("Cannot list conversations in %s: %s", self.folder, e)
            return Listing((), folder=str(self.folder))
        infos: list[ConversationInfo] = []
        for path in paths:
            try:
                infos.append(self._summary(path))
            except FileNotFoundError:
                continue
            except ConversationUnreadable:
                bad.append(path.name)
        infos.sort(key=lambda i: -i.updated)
        return Listing(tuple(i for i in infos if i.questions), tuple(bad), left_out, str(self.folder))

    def list(self) -> list[ConversationInfo]:
        """Saved conversations with at least one question, newest first (unreadable files are skipped)."""
        return list(self.listing().items)

    def load(self, conv_id: str) -> Conversation | None:
        """A saved conversation by id, or None (missing or unreadable: logged)."""
        try:
            return self.open(conv_id)
        except ConversationUnreadable:
            return None

    def open(self, conv_id: str) -> Conversation | None:
        """A saved conversation by id, None when there is none; ConversationUnreadable (naming its file) when its
        file can't be read."""
        if not _ID.match(conv_id):
            return None
        try:
            return self._read(self._path(conv_id))
        except FileNotFoundError:
            return None

    def save(self, conv: Conversation) -> None:
        """Write the conversation atomically (a crash leaves the previous version); OSError when the disk fails."""
        conv.updated = time.time()
        path = self._path(conv.id)
        data = json.dumps(to_json(conv), ensure_ascii=False).encode("utf-8")
        with self._lock:
            write_atomic(path, data)

    def restore(self, conv: Conversation) -> bool:
        """Write back a deleted conversation as it was (its time of last use kept, so it returns to its place in the
        list); False when a file of its id exists (never overwritten); OSError when the disk fails."""
        path = self._path(conv.id)
        data = json.dumps(to_json(conv), ensure_ascii=False).encode("utf-8")
        with self._lock:
            if path.exists():
                return False
            write_atomic(path, data)
        return True

    def delete(self, conv_id: str) -> None:
        """Delete a saved conversation."""
        if _ID.match(conv_id):
            with self._lock:
                self._path(conv_id).unlink(missing_ok=True)


def _unreadable(path: Path, e: BaseException) -> ConversationUnreadable:
    """The error for a conversation file that could not be read (logged, with its reason)."""
    log.warning("Skipping unreadable conversation file %s: %s", path, e)
    if isinstance(e, UnsafeFile):
        reason = e.reason
    elif isinstance(e, MemoryError):
        reason = "it is too large to read"
    elif isinstance(e, OSError):
        reason = e.strerror or "it could not be read"
    else:
        reason = "it is damaged or not a DocChat conversation"
    return ConversationUnreadable(str(path), reason)


class SessionConversations:
    """The hosted demo's conversations, one MemoryConversations per browser session, forgotten with the session."""

    def __init__(self) -> None:
        self._by_session: dict[str, MemoryConversations] = {}
        self._lock = threading.Lock()

    def for_session(self, session_id: str) -> MemoryConversations:
        """The conversations of one session (created on first use)."""
        with self._lock:
            return self._by_session.setdefault(session_id, MemoryConversations())

    def keep_only(self, live: Iterable[str]) -> int:
        """Forget the conversations of sessions no longer live; returns how many sessions were forgotten."""
        keep = set(live)
        with self._lock:
            gone = [s for s in self._by_session if s not in keep]
            for s in gone:
                del self._by_session[s]
        return len(gone)
