"""A saved conversation's data: the Conversation, the sidebar's lines, and their JSON form (answers with their
citations, passages and sentence checks), read back defensively: a file of the wrong shape is a ValueError, never an
AttributeError halfway through."""
from __future__ import annotations

import re
import time
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from rag_core.core.models import Answer, AnswerMode, Chunk, Citation, CitationStatus, Passage, SentenceCheck, SourceMeta

FORMAT = 1
MAX_TITLE = 80
ID_RE = re.compile(r"^[0-9a-f]{12,32}$")
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


def _passage(d: dict[str, Any]) -> Passage:
    return Passage(chunk=_chunk(_object(d["chunk"], "a chunk")), score=float(d["score"]))


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


@dataclass(frozen=True)
class ConversationInfo:
    """One line of the sidebar's list of past conversations."""

    id: str
    title: str
    updated: float
    questions: int  # (at least 1 for a file saved before the count was written into it, when it has turns)


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
