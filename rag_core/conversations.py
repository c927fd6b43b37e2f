"""Saved conversations: each question with its answer, citations and passages, kept as it happens.

Local mode keeps one JSON file per conversation under `<data dir>/conversations/` (written atomically, so a crash
leaves the previous version); the hosted demo keeps them in memory with the browser session and forgets them with it.
`export_markdown` turns a conversation into a file a person can send to a colleague.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from .models import Answer, Chunk, Citation, Passage, SentenceCheck, SourceMeta

log = logging.getLogger(__name__)

FORMAT = 1
MAX_FILE_BYTES = 20 * 1024 * 1024  # a conversation file larger than this is not read (damaged or hostile)
MAX_TITLE = 80
_ID = re.compile(r"^[0-9a-f]{12,32}$")
UNTITLED = "New conversation"
KEPT_EXTRA = ("details", "closest")  # what of Answer.extra a saved conversation keeps (the notice's technical part,
# and whether quotes were only the closest passages, for the reply's badge)


def new_id() -> str:
    """A fresh conversation or turn id."""
    return uuid.uuid4().hex[:16]


def title_for(question: str) -> str:
    """A conversation's default title: its first question, shortened on a word boundary."""
    text = " ".join(question.split())
    if len(text) <= MAX_TITLE:
        return text or UNTITLED
    cut = text[:MAX_TITLE].rsplit(" ", 1)[0] or text[:MAX_TITLE]
    return cut + "…"


# -- (de)serialising answers -----------------------------------------------------------------------------------
def answer_to_dict(answer: Answer) -> dict[str, Any]:
    """A JSON-ready dict of an answer (citations, passages and sentence checks included)."""
    d = asdict(answer)
    kept = {k: v for k, v in (answer.extra or {}).items() if k in KEPT_EXTRA and isinstance(v, (str, bool))}
    d["extra"] = kept  # the rest is run-time detail (timings, raw text)
    return d


def _chunk(d: dict[str, Any]) -> Chunk:
    return Chunk(**{**d, "heading_path": tuple(d.get("heading_path") or ()), "source": SourceMeta(**d["source"])})


def _passage(d: dict[str, Any]) -> Passage:
    return Passage(chunk=_chunk(d["chunk"]), score=float(d["score"]))


def answer_from_dict(d: dict[str, Any]) -> Answer:
    """The answer saved by `answer_to_dict` (ValueError/KeyError/TypeError when damaged)."""
    citations = tuple(replace(Citation(**{k: v for k, v in c.items() if k not in ("passage", "answer_spans")},
                                       passage=_passage(c["passage"])),
                              answer_spans=tuple(tuple(s) for s in c.get("answer_spans") or ()))
                      for c in d.get("citations") or ())
    sentences = tuple(SentenceCheck(**{**s, "cited": tuple(s.get("cited") or ()),
                                       "supported_by": tuple(s.get("supported_by") or ())})
                      for s in d.get("sentences") or ())
    plain = {k: v for k, v in d.items() if k not in ("citations", "passages", "sentences", "extra")}
    extra = {k: v for k, v in (d.get("extra") or {}).items() if k in KEPT_EXTRA and isinstance(v, (str, bool))}
    return Answer(**plain, citations=citations, passages=tuple(_passage(p) for p in d.get("passages") or ()),
                  sentences=sentences, extra=extra)


# -- conversations --------------------------------------------------------------------------------------------
@dataclass
class Conversation:
    """One conversation: turns are dicts {"id", "role", "text", "answer": Answer | None, "error", ...}."""

    id: str = field(default_factory=new_id)
    title: str = UNTITLED
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    turns: list[dict[str, Any]] = field(default_factory=list)
    titled_by_user: bool = False


@dataclass(frozen=True)
class ConversationInfo:
    """One line of the sidebar's list of past conversations."""

    id: str
    title: str
    updated: float
    questions: int


def _turn_to_json(turn: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in turn.items()
                           if k != "answer" and isinstance(v, str | int | float | bool | type(None))}
    answer = turn.get("answer")
    if isinstance(answer, Answer):
        out["answer"] = answer_to_dict(answer)
    return out


def _turn_from_json(d: dict[str, Any]) -> dict[str, Any]:
    turn = {k: v for k, v in d.items() if k != "answer"}
    turn["answer"] = answer_from_dict(d["answer"]) if d.get("answer") else None
    turn.setdefault("text", "")
    turn["pending"] = False  # a turn saved mid-answer is shown as it got, never as still running
    return turn


def to_json(conv: Conversation) -> dict[str, Any]:
    """The conversation as a JSON-ready dict."""
    return {"format": FORMAT, "id": conv.id, "title": conv.title, "created": conv.created, "updated": conv.updated,
            "titled_by_user": conv.titled_by_user, "turns": [_turn_to_json(t) for t in conv.turns]}


def from_json(d: dict[str, Any]) -> Conversation:
    """The conversation saved by `to_json` (ValueError/KeyError/TypeError when damaged)."""
    if d.get("format") != FORMAT or not _ID.match(str(d.get("id", ""))):
        raise ValueError("not a DocChat conversation")
    return Conversation(id=d["id"], title=str(d.get("title") or UNTITLED)[:MAX_TITLE + 1],
                        created=float(d.get("created", 0)), updated=float(d.get("updated", 0)),
                        turns=[_turn_from_json(t) for t in d.get("turns") or ()],
                        titled_by_user=bool(d.get("titled_by_user")))


def questions(conv: Conversation) -> int:
    """How many questions the conversation holds."""
    return sum(1 for t in conv.turns if t.get("role") == "user")


class Conversations(Protocol):
    """Where one person's conversations are kept."""

    def list(self) -> list[ConversationInfo]: ...

    def load(self, conv_id: str) -> Conversation | None: ...

    def save(self, conv: Conversation) -> None: ...

    def rename(self, conv_id: str, title: str) -> None: ...

    def delete(self, conv_id: str) -> None: ...


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
        conv = self.load(conv_id)
        if conv is not None:
            conv.title, conv.titled_by_user = _clean_title(title), True
            self.save(conv)


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that a crash leaves either the old or the new version (OSError when the disk fails)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class MemoryConversations(_Renaming):
    """Conversations kept in memory (the hosted demo: they live and die with the browser session)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def list(self) -> list[ConversationInfo]:
        """Conversations with at least one question, newest first."""
        with self._lock:
            convs = [from_json(d) for d in self._items.values()]
        return sorted((_info(c) for c in convs if questions(c)), key=lambda i: -i.updated)

    def load(self, conv_id: str) -> Conversation | None:
        """A conversation by id, or None."""
        with self._lock:
            d = self._items.get(conv_id)
        return from_json(d) if d else None

    def save(self, conv: Conversation) -> None:
        """Keep the conversation as it is now."""
        conv.updated = time.time()
        with self._lock:
            self._items[conv.id] = to_json(conv)

    def delete(self, conv_id: str) -> None:
        """Forget a conversation."""
        with self._lock:
            self._items.pop(conv_id, None)


class FileConversations(_Renaming):
    """Conversations kept as JSON files in one folder (local mode): they survive reloads and restarts."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()

    def _path(self, conv_id: str) -> Path:
        if not _ID.match(conv_id):
            raise ValueError(f"bad conversation id {conv_id!r}")
        return self.folder / f"{conv_id}.json"

    def _read(self, path: Path) -> Conversation | None:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                log.warning("Skipping conversation file %s: larger than %d bytes", path.name, MAX_FILE_BYTES)
                return None
            return from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
            log.warning("Skipping unreadable conversation file %s: %s", path.name, e)
            return None

    def list(self) -> list[ConversationInfo]:
        """Saved conversations with at least one question, newest first (unreadable files are skipped)."""
        try:
            paths: Iterable[Path] = list(self.folder.glob("*.json"))
        except OSError as e:
            log.warning("Cannot list conversations in %s: %s", self.folder, e)
            return []
        convs = [c for c in (self._read(p) for p in paths if _ID.match(p.stem)) if c is not None]
        return sorted((_info(c) for c in convs if questions(c)), key=lambda i: -i.updated)

    def load(self, conv_id: str) -> Conversation | None:
        """A saved conversation by id, or None (missing or unreadable)."""
        return self._read(self._path(conv_id)) if _ID.match(conv_id) else None

    def save(self, conv: Conversation) -> None:
        """Write the conversation atomically (a crash leaves the previous version); OSError when the disk fails."""
        conv.updated = time.time()
        path = self._path(conv.id)
        data = json.dumps(to_json(conv), ensure_ascii=False).encode("utf-8")
        with self._lock:
            write_atomic(path, data)

    def delete(self, conv_id: str) -> None:
        """Delete a saved conversation."""
        if _ID.match(conv_id):
            self._path(conv_id).unlink(missing_ok=True)


# -- export ---------------------------------------------------------------------------------------------------
def _quote(text: str, start: int | None, end: int | None, limit: int = 600) -> str:
    if start is not None and end is not None and 0 <= start < end <= len(text):
        text = text[start:end]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def _plain(text: str) -> str:
    """Text as readable Markdown that can't carry HTML (documents and replies are untrusted)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _source_line(n: int, c: Citation) -> list[str]:
    from . import render

    chunk = c.passage.chunk
    title = _plain(chunk.source.title or chunk.source.file_name or "Untitled")
    where = render.location_label(chunk)
    head = f"**[{n}]** {title}" + (f", {_plain(where)}" if where else "")
    if chunk.source.file_name and chunk.source.kind != "wikipedia" and chunk.source.file_name != chunk.source.title:
        head += f" ({_plain(chunk.source.file_name)})"
    url = render.safe_source_url(chunk)
    lines = [head + (f" — {url}" if url else "")]
    status = {"verified": "checked: the quote backs the answer", "matched": "matched to the answer",
              "unsupported": "not backed by this passage"}.get(c.status)
    quote = _plain(_quote(chunk.text, c.evidence_start, c.evidence_end))
    lines.append(f"> {quote}" + (f"  \n> *({status})*" if status else ""))
    return lines


def export_markdown(conv: Conversation) -> str:
    """The conversation as Markdown: each question, its answer, and numbered sources with quotes and links."""

    out = [f"# {_plain(conv.title)}",
           "", f"*Exported from DocChat on {time.strftime('%Y-%m-%d %H:%M', time.localtime())}.*", ""]
    for turn in conv.turns:
        if turn.get("role") == "user":
            out += [f"## {_plain(' '.join(str(turn.get('text', '')).split()))}", ""]
            continue
        answer = turn.get("answer")
        if not isinstance(answer, Answer):
            text = turn.get("error") or turn.get("text") or ""
            out += [_plain(str(text)), ""]
            continue
        out += [_plain(answer.text), ""]
        if answer.incomplete:
            out += ["*(This answer was stopped before it finished.)*", ""]
        if answer.notice:
            out += [f"*{_plain(answer.notice)}*", ""]
        if answer.citations:
            out += ["**Sources**", ""]
            for c in sorted(answer.citations, key=lambda c: c.n):
                out += _source_line(c.n, c) + [""]
    return "\n".join(out).rstrip() + "\n"


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
