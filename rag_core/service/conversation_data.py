"""A saved conversation's data: the Conversation, the sidebar's lines (with when each was last used), their JSON form
(answers with their citations, passages and sentence checks), read back defensively: a file of the wrong shape is a
ValueError, never an AttributeError halfway through; and its Markdown export."""
from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, tzinfo
from typing import Any

from rag_core.answer.grounding.citations import renumbered
from rag_core.core.files import portable_name
from rag_core.core.models import (
    Answer,
    AnswerMode,
    Chunk,
    Citation,
    CitationStatus,
    DocKind,
    Match,
    MatchKind,
    MatchLevel,
    Passage,
    SentenceCheck,
    SourceMeta,
)

log = logging.getLogger(__name__)

FORMAT = 1
MAX_TITLE = 80
ID_RE = re.compile(r"^[0-9a-f]{12,32}$")
UNTITLED = "New conversation"
WEEK_DAYS = 6  # a conversation used within this many days before today is labelled by its weekday
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
    for passage in (*d["passages"], *(c["passage"] for c in d["citations"])):
        if passage.get("match") and not passage["match"]["reranked"]:  # saved only when set: the files of answers
            del passage["match"]["reranked"]  # made without the reranker stay as they were
    return d


def _object(value: Any, what: str) -> dict[str, Any]:
    """`value` when it is a JSON object; ValueError naming `what` otherwise (a damaged or hand-edited file)."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is a JSON {type(value).__name__}, not an object")
    return value


def _objects(value: Any, what: str) -> list[dict[str, Any]]:
    """The objects of a JSON array (or of a tuple: the memory store keeps `to_json` unserialised; none for a missing
    one); ValueError for any other shape."""
    if not value:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"the {what}s are a JSON {type(value).__name__}, not an array")
    return [_object(v, f"a {what}") for v in value]


def _chunk(d: dict[str, Any]) -> Chunk:
    return Chunk(**{**d, "heading_path": tuple(d.get("heading_path") or ()),
                    "source": SourceMeta(**_object(d["source"], "a source"))})


def _match(d: Any) -> Match | None:
    """A passage's saved Match; None when there is none (saved by an earlier release) or it is of no known shape."""
    if not isinstance(d, dict):
        return None
    try:
        match = Match(MatchKind(d["kind"]), MatchLevel(d["level"]), d.get("cosine"), d.get("lexical"),
                      tuple(d.get("words") or ()), bool(d.get("reranked", False)))
        return _typed(match)
    except (KeyError, TypeError, ValueError) as e:  # only the explanation is lost: the passage itself is fine
        log.debug("A saved passage's match is unreadable: %s", e)
        return None


def _passage(d: dict[str, Any]) -> Passage:
    return Passage(chunk=_chunk(_object(d["chunk"], "a chunk")), score=float(d["score"]), match=_match(d.get("match")))


def answer_from_dict(d: dict[str, Any]) -> Answer:
    """The answer saved by `answer_to_dict` (ValueError/KeyError/TypeError when damaged)."""
    d = _object(d, "an answer")
    if not isinstance(d.get("text"), str):
        raise ValueError("an answer has no text")
    citations = tuple(replace(Citation(**{k: v for k, v in c.items() if k not in ("passage", "answer_spans", "status")},
                                       status=CitationStatus(c.get("status", "cited")),
                                       passage=_passage(_object(c["passage"], "a passage"))),
                              answer_spans=tuple(tuple(s) for s in c.get("answer_spans") or ()))
                      for c in _objects(d.get("citations"), "citation"))
    sentences = tuple(SentenceCheck(**{**s, "status": CitationStatus(str(s.get("status"))), "cited": tuple(s.get("cited") or ()),
                                       "supported_by": tuple(s.get("supported_by") or ())})
                      for s in _objects(d.get("sentences"), "sentence check"))
    plain = {k: v for k, v in d.items() if k not in ("citations", "passages", "sentences", "extra")}
    plain["mode"] = AnswerMode.read(str(plain.get("mode")))  # ValueError: not a mode of any release
    extra = {k: v for k, v in _object(d.get("extra") or {}, "extra").items()
             if k in KEPT_EXTRA and isinstance(v, (str, bool))}
    answer = Answer(**plain, citations=citations, passages=tuple(_passage(p) for p in _objects(d.get("passages"),
                                                                                                "passage")),
                    sentences=sentences, extra=extra)
    parts: list[Any] = [answer, *answer.citations, *answer.sentences]
    for passage in (*answer.passages, *(c.passage for c in answer.citations)):
        parts += [passage, passage.chunk, passage.chunk.source]
    for part in parts:
        _typed(part)
    return answer


_PLAIN: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
_TUPLE = re.compile(r"^tuple\[(.+), \.\.\.\]$")


def _fits(value: Any, annotation: str) -> bool | None:
    """Whether `value` fits a field annotation made of plain types, `X | None` and `tuple[X, ...]` (None: an
    annotation of another kind, not checked here)."""
    kinds = [k.strip() for k in annotation.split("|")] if "[" not in annotation else [annotation.strip()]
    if value is None:
        return "None" in kinds
    verdicts = []
    for kind in (k for k in kinds if k != "None"):
        inner = _TUPLE.match(kind)
        if inner:
            items = [_fits(v, inner.group(1)) for v in value] if isinstance(value, tuple) else [False]
            verdicts.append(None if None in items else all(items))
        elif kind in ("tuple[int, int]",):
            verdicts.append(isinstance(value, tuple) and len(value) == 2 and all(_fits(v, "int") for v in value))
        elif kind in _PLAIN:
            verdicts.append(isinstance(value, _PLAIN[kind]) and (kind == "bool" or not isinstance(value, bool)))
        else:
            verdicts.append(None)
    return None if None in verdicts else any(verdicts)


def _typed(obj: Any) -> Any:
    """`obj` (a dataclass read from a file) when its plainly typed fields hold values of their types; ValueError
    naming the field otherwise (a title that is a list, a citation number that is text, ...)."""
    for f in fields(obj):
        if _fits(getattr(obj, f.name), str(f.type)) is False:
            raise ValueError(f"{type(obj).__name__}.{f.name} holds a {type(getattr(obj, f.name)).__name__}")
    return obj


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


def _zone(tz_name: str | None) -> tzinfo | None:
    """The time zone named `tz_name` (the browser's, e.g. "Europe/Helsinki"); None (this computer's) when it is
    missing or unknown here."""
    if not tz_name:
        return None
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(tz_name)
    except (KeyError, ValueError, OSError) as e:  # ZoneInfoNotFoundError is a KeyError
        log.debug("Unknown time zone %r: %s", tz_name, e)
        return None


def when_label(ts: float, now: float | None = None, tz_name: str | None = None) -> str:
    """When a conversation was last used, short: today the time ("14:05"), yesterday "Yesterday", earlier this week
    the weekday ("Tuesday"), before that the date ("3 Nov", with the year when it is not this year's); "" for no time."""
    if not ts or ts <= 0:
        return ""
    zone = _zone(tz_name)
    when = datetime.fromtimestamp(ts, zone)
    today = datetime.fromtimestamp(time.time() if now is None else now, zone).date()
    days = (today - when.date()).days
    if days <= 0:
        return f"{when:%H:%M}"
    if days == 1:
        return "Yesterday"
    if days <= WEEK_DAYS:
        return f"{when:%A}"
    return f"{when.day} {when:%b}" + (f" {when.year}" if when.year != today.year else "")


def full_when(ts: float, tz_name: str | None = None) -> str:
    """The day and time in full, e.g. "Tuesday 2 Dec 2026, 14:05" ("" for no time)."""
    if not ts or ts <= 0:
        return ""
    when = datetime.fromtimestamp(ts, _zone(tz_name))
    return f"{when:%A} {when.day} {when:%b %Y, %H:%M}"


@dataclass(frozen=True)
class ConversationInfo:
    """One line of the sidebar's list of past conversations."""

    id: str
    title: str
    updated: float
    questions: int  # (at least 1 for a file saved before the count was written into it, when it has turns)

    def when(self, now: float | None = None, tz_name: str | None = None) -> str:
        """When it was last used, short (see `when_label`): tells apart conversations with the same title."""
        return when_label(self.updated, now, tz_name)

    def when_in_full(self, tz_name: str | None = None) -> str:
        """When it was last used, in full (a tooltip)."""
        return full_when(self.updated, tz_name)


@dataclass(frozen=True)
class Listing:
    """The sidebar's list of past conversations, newest first, and what could not be listed."""

    items: tuple[ConversationInfo, ...]
    unreadable: tuple[str, ...] = ()  # names of conversation files that could not be read (damaged, not regular, ...)
    left_out: int = 0  # older conversation files not read (only the MAX_LISTED newest are)
    folder: str = ""  # where the files are (local mode)


def _turn_to_json(turn: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in turn.items()
                           if k != "answer" and isinstance(v, str | int | float | bool | type(None))}
    answer = turn.get("answer")
    if isinstance(answer, Answer):
        out["answer"] = answer_to_dict(answer)
    return out


def _turn_from_json(d: dict[str, Any]) -> dict[str, Any]:
    d = _object(d, "a turn")
    if not isinstance(d.get("text", ""), str):
        raise ValueError("a turn's text is not a string")
    turn = {k: v for k, v in d.items() if k != "answer"}
    turn["answer"] = answer_from_dict(d["answer"]) if d.get("answer") else None
    turn.setdefault("text", "")
    turn["pending"] = False  # a turn saved mid-answer is shown as it got, never as still running
    return turn


def to_json(conv: Conversation) -> dict[str, Any]:
    """The conversation as a JSON-ready dict."""
    # Everything the sidebar's list shows comes before the turns: it reads only the head of each file (_summary).
    return {"format": FORMAT, "id": conv.id, "title": conv.title, "created": conv.created, "updated": conv.updated,
            "titled_by_user": conv.titled_by_user, "questions": questions(conv),
            "turns": [_turn_to_json(t) for t in conv.turns]}


def from_json(d: dict[str, Any]) -> Conversation:
    """The conversation saved by `to_json` (ValueError/KeyError/TypeError when damaged)."""
    d = _object(d, "the conversation")
    if d.get("format") != FORMAT or not ID_RE.match(str(d.get("id", ""))):
        raise ValueError("not a DocChat conversation")
    return Conversation(id=d["id"], title=str(d.get("title") or UNTITLED)[:MAX_TITLE + 1],
                        created=float(d.get("created", 0)), updated=float(d.get("updated", 0)),
                        turns=[_turn_from_json(t) for t in _objects(d.get("turns"), "turn")],
                        titled_by_user=bool(d.get("titled_by_user")))


def questions(conv: Conversation) -> int:
    """How many questions the conversation holds."""
    return sum(1 for t in conv.turns if t.get("role") == "user")


# -- export ---------------------------------------------------------------------------------------------------
def _quote(text: str, start: int | None, end: int | None, limit: int = 600) -> str:
    if start is not None and end is not None and 0 <= start < end <= len(text):
        text = text[start:end]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def _plain(text: str) -> str:
    """Untrusted text (a title, question, reply, document text) as Markdown that renders as exactly that text, its
    lines kept: every ASCII punctuation character is backslash-escaped (render.escape_markdown), so no link, image,
    HTML, emphasis, heading, list or Streamlit directive survives, and bare URLs are not auto-linked."""
    from rag_core.service import render

    return "\n".join(render.escape_markdown(line) for line in str(text).splitlines())


def _source_line(n: int, c: Citation) -> list[str]:
    from rag_core.service import render

    chunk = c.passage.chunk
    title = _plain(chunk.source.title or chunk.source.file_name or "Untitled")
    where = render.location_label(chunk)
    head = f"**[{n}]** {title}" + (f", {_plain(where)}" if where else "")
    if chunk.source.file_name and chunk.source.kind != DocKind.WIKIPEDIA and chunk.source.file_name != chunk.source.title:
        head += f" ({_plain(chunk.source.file_name)})"
    url = render.safe_source_url(chunk)
    lines = [head + (f" — {url}" if url else "")]
    status = {"verified": "checked: the quote backs the answer", "matched": "matched to the answer",
              "unsupported": "not backed by this passage",
              "flagged": "source contains instructions addressed to an AI"}.get(c.status)
    quote = _plain(_quote(chunk.text, c.evidence_start, c.evidence_end))
    lines.append(f"> {quote}" + (f"  \n> *({status})*" if status else ""))
    return lines


def file_name_for(title: str) -> str:
    """A file name for a conversation's export that every system accepts."""
    slug = re.sub(r"[^\w-]+", "-", title.lower(), flags=re.UNICODE).strip("-")[:60]
    return portable_name(f"{slug or 'conversation'}.md")


def export_markdown(conv: Conversation) -> str:
    """The conversation as Markdown: each question, its answer, and numbered sources with quotes and links."""

    out = [f"# {_plain(' '.join(str(conv.title).split())) or UNTITLED}",
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
        answer = renumbered(answer)  # numbered as the chat shows it
        out += [_plain(answer.text), ""]
        if answer.incomplete:
            out += ["*(This answer was stopped before it finished.)*", ""]
        if answer.notice:
            out += [f"*{_plain(' '.join(answer.notice.split()))}*", ""]
        if answer.citations:
            out += ["**Sources**", ""]
            for c in sorted(answer.citations, key=lambda c: c.n):
                out += _source_line(c.n, c) + [""]
    return "\n".join(out).rstrip() + "\n"
