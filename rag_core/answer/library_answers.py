"""Answers about the library itself, without a model: "what documents do I have" (the library's own list: titles,
kinds, pages, dates added) and "which of my documents mention X" (each document that mentions the topic, with its
best passage quoted and cited, so the sources column shows them beside the reply).

`library_answer(intent, library, settings, scope, owners=..., question=...)` is the one entry point; it returns the same
`Answer` the rest of the answer pipeline returns (quotes mode, citations checked by the evidence check).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from rag_core.answer.grounding.evidence import verify_answer
from rag_core.answer.grounding.quotes import passage_candidates
from rag_core.answer.intent import Intent, IntentKind
from rag_core.answer.notices import DETAILS_EMPTY, NOTICE_EMPTY, details_extra
from rag_core.core.config import Settings
from rag_core.core.formats import format_of
from rag_core.core.models import Answer, AnswerMode, Citation, CitationStatus, DocKind, DocumentInfo, Passage
from rag_core.core.text import content_terms, plural
from rag_core.injection.detect import mark_answer
from rag_core.retrieve.search import embed_queries, zscore_fuse
from rag_core.store.backends import Search

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.view import LibraryView

log = logging.getLogger(__name__)

LIST_MAX = 50  # documents named in a library list; the rest are counted ("… and 12 more")
TOPIC_MAX = 10  # documents quoted in a topic answer
DENSE_POOL = 50  # chunks nearest in meaning read for a topic
LEXICAL_POOL = 300  # chunks with the topic's words read for a topic (cheap: the lexical index), so that one long
#                     document that mentions it everywhere does not hide the others
QUOTE_MAX_CHARS = 400

NOTICE_LIST = "From your library's own list of documents (titles, kinds, lengths and dates added)."
NOTICE_TOPIC = "Each document that mentions it, with its best passage quoted from the document."
NOTICE_TOPIC_CLOSEST = ("None of your documents uses these words, so these are the documents with the passage nearest "
                        "in meaning. Check whether they are about what you asked.")
NOTICE_TOPIC_NONE = "None of your documents mentions this. Try other words, or widen the document scope."


def _kind_name(kind: str) -> str:
    fmt = format_of(kind)
    return fmt.name if fmt else ("Wikipedia" if kind == DocKind.WIKIPEDIA else (kind.upper() or "Document"))


def _date(iso: str) -> str:
    """An ISO-8601 timestamp as "2 May 2024" in local time ("" when unreadable)."""
    try:
        when = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return ""
    if when.tzinfo is not None:
        when = when.astimezone()
    return f"{when.day} {when:%b %Y}"


def describe(doc: DocumentInfo) -> str:
    """One document in a line: "Annual Budget Report 2024 — PDF, 11 pages, added 2 May 2024 (budget_2024.pdf)"."""
    fmt = format_of(doc.kind)
    parts = [_kind_name(doc.kind)]
    if doc.pages:
        parts.append(plural(doc.pages, fmt.page if fmt else "page"))
    added = _date(doc.added_at)
    if added:
        parts.append(f"added {added}")
    title = " ".join((doc.title or doc.file_name or "Untitled").split())
    name = f" ({doc.file_name})" if doc.file_name and doc.file_name != doc.title else ""
    return f"{title} — {', '.join(parts)}{name}"


def list_documents_answer(documents: Sequence[DocumentInfo], scope: Sequence[str] | None = None,
                          question: str = "") -> Answer:
    """The library list as an answer (no passage searched, no model): every document, newest first, with its kind,
    length and date added; those selected in the chat (`scope`) are marked."""
    docs = sorted(documents, key=lambda d: d.added_at, reverse=True)
    extra = {"intent": IntentKind.LIBRARY_LIST.value, "documents": [d.doc_id for d in docs]}
    if not docs:
        return Answer(text=NOTICE_EMPTY, mode=AnswerMode.NOT_FOUND, notice=NOTICE_EMPTY, question=question,
                      standalone_question=question, extra={**extra, **details_extra(DETAILS_EMPTY)})
    chosen = set(scope or ())
    lines = [f"Your library has {plural(len(docs), 'document')} (newest first):" if len(docs) > 1
             else "Your library has one document:"]
    for d in docs[:LIST_MAX]:
        lines.append(f"- {describe(d)}" + (" — selected in this chat" if d.doc_id in chosen else ""))
    if len(docs) > LIST_MAX:
        lines.append(f"… and {len(docs) - LIST_MAX} more (the Library page lists them all).")
    if chosen and len(chosen) < len(docs):
        lines.append(f"This chat searches only the {plural(len(chosen), 'document')} marked as selected.")
    return Answer(text="\n".join(lines), mode=AnswerMode.QUOTES, notice=NOTICE_LIST, question=question,
                  standalone_question=question, extra=extra)


def _mentions(passage: Passage, words: frozenset[str]) -> bool:
    """Does the passage (its title and section heading included) hold every content word of the topic?"""
    chunk = passage.chunk
    return words <= content_terms(f"{chunk.source.title}\n{chunk.section}\n{chunk.text}").words


def _best_span(text: str, words: frozenset[str]) -> tuple[int, int]:
    """The sentence (or row, or list item) of `text` holding most of the topic's words; the whole text if none."""
    best, best_hits = (0, len(text)), 0
    for start, end in ((c.start, c.end) for c in passage_candidates(1, text)):  # its quotable units
        hits = len(words & content_terms(text[start:end]).words)
        if hits > best_hits:
            best, best_hits = (start, end), hits
    return best


def _quote(text: str) -> str:
    text = " ".join(text.split()).replace("“", "\"").replace("”", "\"")
    if len(text) <= QUOTE_MAX_CHARS:
        return text
    return text[:QUOTE_MAX_CHARS].rsplit(" ", 1)[0] + " …"


def _per_document(topic: str, library: LibraryView, doc_ids: list[str] | None,
                  owners: Sequence[str | None] | None) -> tuple[list[Passage], dict[str, float]]:
    """The best passage of each document for the topic (best first), and each document's best dense cosine."""
    store = library.store
    vectors = embed_queries(store, [topic])[0]
    searches = [Search(DENSE_POOL, dense=vectors.dense)]
    if vectors.sparse.indices:
        searches.append(Search(LEXICAL_POOL, sparse=vectors.sparse))
    lists = store.run(searches, doc_ids, None if owners is None else list(owners))
    dense, lexical = lists[0], (lists[1] if len(lists) > 1 else [])
    cosine: dict[str, float] = {}
    for p in dense:
        cosine[p.chunk.doc_id] = max(cosine.get(p.chunk.doc_id, -1.0), p.score)
    words = content_terms(topic).words
    ranked = zscore_fuse(dense, lexical)
    best: dict[str, Passage] = {}
    for p in ranked:  # best first: the first passage of a document that mentions the topic, else its first
        doc = p.chunk.doc_id
        if doc not in best or (not _mentions(best[doc], words) and _mentions(p, words)):
            best[doc] = p
    return list(best.values()), cosine


def topic_answer(topic: str, library: LibraryView, settings: Settings, scope: Sequence[str] | None = None,
                 owners: Sequence[str | None] | None = None, question: str = "") -> Answer:
    """The documents (in scope) that mention `topic`, each with its best passage quoted and cited [n]; when none
    uses its words, the documents with a passage close in meaning (at least settings.min_relevance), labelled as
    the closest passages; a not-found answer when there are none."""
    question = question or topic
    extra: dict = {"intent": IntentKind.LIBRARY_TOPIC.value, "topic": topic}
    docs = {d.doc_id: d for d in library.documents(None if owners is None else list(owners))}
    if scope:
        docs = {k: v for k, v in docs.items() if k in set(scope)}
    if not docs:
        return Answer(text=NOTICE_EMPTY, mode=AnswerMode.NOT_FOUND, notice=NOTICE_EMPTY, question=question,
                      standalone_question=question, extra={**extra, **details_extra(DETAILS_EMPTY)})
    found, cosine = _per_document(topic, library, list(scope) if scope else None, owners)
    words = content_terms(topic).words
    chosen = [p for p in found if words and _mentions(p, words)]
    closest = not chosen
    if closest:
        chosen = [p for p in found if cosine.get(p.chunk.doc_id, -1.0) >= settings.retrieval.min_relevance]
        chosen.sort(key=lambda p: cosine[p.chunk.doc_id], reverse=True)
    if not chosen:
        text = f"None of your documents mentions “{topic}”."
        return Answer(text=text, mode=AnswerMode.NOT_FOUND, notice=NOTICE_TOPIC_NONE, question=question,
                      standalone_question=question, extra=extra)
    shown = chosen[:TOPIC_MAX]
    where = (f"the {plural(len(docs), 'document')} selected in this chat" if scope
             else f"your {plural(len(docs), 'document')}")
    if closest:
        head = f"None of {where} uses the words “{topic}”; the nearest passages in meaning are in:"
    elif len(chosen) == 1:
        one = "The document selected in this chat" if scope else "Your document"
        head = f"One of {where} mentions “{topic}”:" if len(docs) > 1 else f"{one} mentions “{topic}”:"
    else:
        head = f"{len(chosen)} of {where} mention “{topic}”:"
    lines, citations = [head], []
    for n, p in enumerate(shown, 1):
        info = docs.get(p.chunk.doc_id)
        start, end = _best_span(p.chunk.text, words)
        lines += ["", f"{describe(info) if info else p.chunk.source.title}:",
                  f"- “{_quote(p.chunk.text[start:end])}” [{n}]"]
        citations.append(Citation(n, p, CitationStatus.CITED, start, end))
    if len(chosen) > TOPIC_MAX:
        lines += ["", f"… and {len(chosen) - TOPIC_MAX} more documents."]
    extra.update(documents=[p.chunk.doc_id for p in chosen], closest=closest)
    answer = Answer(text="\n".join(lines), mode=AnswerMode.QUOTES, citations=tuple(citations), passages=tuple(shown),
                    notice=NOTICE_TOPIC_CLOSEST if closest else NOTICE_TOPIC, question=question,
                    standalone_question=question, extra=extra, context_passages=len(shown))
    return mark_answer(verify_answer(answer, library.embedder))


def library_answer(intent: Intent, library: LibraryView, settings: Settings, scope: Sequence[str] | None = None, *,
                   owners: Sequence[str | None] | None, question: str = "") -> Answer:
    """The answer to a LIBRARY_LIST or LIBRARY_TOPIC intent (rag_core.answer.intent.classify), from the library's
    list and search only (no model); `scope` is the ids selected in the chat (None: all), `owners` whose documents
    the person sees (None: everyone's — required, so that a private library is never listed to another session by
    forgetting it). ValueError for any other intent."""
    if intent.kind is IntentKind.LIBRARY_LIST:
        return list_documents_answer(library.documents(None if owners is None else list(owners)), scope, question)
    if intent.kind is IntentKind.LIBRARY_TOPIC and intent.topic:
        return topic_answer(intent.topic, library, settings, scope, owners, question)
    raise ValueError(f"not a question about the library: {intent.kind}")
