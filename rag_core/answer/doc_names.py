"""Which document(s) a phrase of a question means: a title or file name typed loosely ("the budget report",
"thesis_final_v2.pdf", "attention is all you need"), "this document" / "it" (the one scoped in the chat, or the only
one), "these documents" / "both" / "them" (all in scope), or "the last file I uploaded". Used by
rag_core.answer.intent; plain rules, no model.

A named phrase resolves when every content word of it (stemmed; one typo allowed in words of five letters or more)
is in one document's title or file name. Words naming a part of a document ("chapter 3", "the results table", "the
section on risks") are content words like any other, so a phrase about a part resolves to no document unless a
title holds those words too.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePath
from typing import Protocol

from rag_core.core.text import STOP_WORDS, stem


class DocLike(Protocol):
    """What is read of a library entry (rag_core.core.models.DocumentInfo has it all)."""

    @property
    def doc_id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def file_name(self) -> str: ...
    @property
    def added_at(self) -> str: ...


class Reference(StrEnum):
    """How an intent's documents were found."""

    NONE = "none"  # a fact question, or a question about the library itself
    NAMED = "named"  # by title, file name or "the last file I uploaded"
    SCOPED = "scoped"  # "this document", "these", or nothing: the documents selected in the chat
    ONLY = "only"  # "this document", or nothing, with a single document in the library
    ALL = "all"  # nothing named and several documents in scope (no selection): all of them


@dataclass(frozen=True)
class Resolved:
    """The documents a phrase means, and how they were found."""

    doc_ids: tuple[str, ...]
    reference: Reference


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Nouns that say "a document" without naming one ("this pdf", "the paper", "the uploaded file").
DOC_NOUNS = _set("""document documents doc docs file files pdf pdfs paper papers report reports article articles
text texts book books ebook presentation presentations deck decks slides slideshow spreadsheet spreadsheets workbook
memo letter contract contracts agreement agreements manual manuals guide guides thesis dissertation study studies essay
transcript notes policy proposal whitepaper webpage website publication publications upload uploads attachment
attachments docx pptx xlsx csv html epub odt rtf txt md one ones thing things stuff item items material materials
sources source""")
DETERMINERS = _set("""the this that these those my our your his her their a an its both all every each
of two three 2 3 whole entire full complete attached uploaded selected current open above following same given""")
_TRAILING = re.compile(r"\s+(?:(?:that |which )?(?:i|we|you)(?: have| just| 've)? (?:just )?(?:uploaded|added|sent|shared|"
                       r"gave you|attached|selected|opened|have open|have selected|provided|have)(?: (?:you|earlier|"
                       r"today|yesterday|here|above))?|(?:here|above|attached|in (?:my|the|this) (?:library|chat)))$")
_DEFAULT = re.compile(r"(?:it|this|that|this one|that one|here|the above|everything|the thing|this thing)")
_PLURAL = re.compile(r"(?:them|these|those|both|all|all of them|both of them|everything i (?:have|uploaded))")
_JUST = re.compile(r"\b(?:i|we|you) (?:have |'ve )?just (?:uploaded|added|sent|shared|gave you|attached)|"
                   r"\b(?:uploaded|added) (?:last|most recently|just now)\b")
_NEWEST = re.compile(r"(?:the )?(?:last|latest|newest|most recent|recent|new)\b")
_OLDEST = re.compile(r"(?:the )?(?:first|oldest|earliest)\b")
_WORD = re.compile(r"[^\W_]+")
_FILE_NAME = re.compile(r"[\w.-]+\.(?:pdf|docx?|pptx?|xlsx?|csv|tsv|html?|epub|odt|odp|ods|rtf|txt|md|png|jpe?g|tiff?|webp)")
_EXTENSIONS = _set("pdf doc docx ppt pptx xls xlsx csv tsv htm html epub odt odp ods rtf txt md png jpg jpeg tif "
                        "tiff webp")
_COUNTS = _set("two three four five six 2 3 4 5 6")
_IGNORED = (STOP_WORDS - {"document", "documents", "text", "source", "sources"}) | (DETERMINERS - {"two", "three", "2", "3"})


def _stem(word: str) -> str:
    return word if word.isdigit() else stem(word)


def words(text: str) -> list[str]:
    """The lower-case words and numbers of a title, file name or phrase (underscores, hyphens and dots split)."""
    return _WORD.findall(text.casefold().replace("’", "'").replace("'s ", " ").replace("'", ""))


def _doc_words(doc: DocLike) -> set[str]:
    name = PurePath(doc.file_name or "").name
    stem_of_name = name.rsplit(".", 1)[0] if "." in name else name
    return {_stem(w) for w in (*words(doc.title), *words(stem_of_name)) if w not in _EXTENSIONS}


def close_words(a: str, b: str) -> bool:
    """Equal, or one edit apart when both have five letters or more (a typo in a title word)."""
    if a == b:
        return True
    if min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1 or a.isdigit() or b.isdigit():
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _in_scope(documents: Sequence[DocLike], scope: Sequence[str] | None) -> list[DocLike]:
    if not scope:
        return list(documents)
    wanted = set(scope)
    return [d for d in documents if d.doc_id in wanted]


def default_documents(documents: Sequence[DocLike], scope: Sequence[str] | None) -> Resolved:
    """No document named: the ones selected in the chat, else the library's only one, else all of them."""
    if scope:
        return Resolved(tuple(scope), Reference.SCOPED)
    if len(documents) == 1:
        return Resolved((documents[0].doc_id,), Reference.ONLY)
    return Resolved(tuple(d.doc_id for d in documents), Reference.ALL)


def _by_date(documents: Sequence[DocLike], newest: bool) -> Resolved | None:
    dated = [d for d in documents if d.added_at]
    if not dated:
        return None
    pick = max(dated, key=lambda d: d.added_at) if newest else min(dated, key=lambda d: d.added_at)
    return Resolved((pick.doc_id,), Reference.NAMED)


def _generic(phrase_words: list[str]) -> bool:
    """Only determiners and nouns for "a document": "the uploaded pdf", "this whole document"."""
    return all(w in DETERMINERS or w in DOC_NOUNS or w in ("i", "you", "we", "just", "s") for w in phrase_words)


def _named(core: list[str], nouns: list[str], documents: Sequence[DocLike],
           scope: Sequence[str] | None) -> tuple[str, ...]:
    """The documents whose title or file name holds every core word (best match; ties: all, scoped ones first)."""
    best: list[tuple[float, DocLike]] = []
    top = 0.0
    for doc in documents:
        have = _doc_words(doc)
        if not all(any(close_words(w, h) for h in have) for w in core):
            continue
        score = len(core) + 0.5 * sum(n in have for n in nouns)
        if score > top:
            best, top = [(score, doc)], score
        elif score == top:
            best.append((score, doc))
    found = [d for _, d in best]
    if len(found) > 1 and scope:
        scoped = [d for d in found if d.doc_id in set(scope)]
        found = scoped or found
    return tuple(d.doc_id for d in found)


def _title_share(core: list[str], doc: DocLike) -> float:
    """The share of the title's (or the file name's) content words that `core` names."""
    best = 0.0
    for text in (doc.title, PurePath(doc.file_name or "").name.rsplit(".", 1)[0]):
        have = {_stem(w) for w in words(text) if w not in _IGNORED and w not in _EXTENSIONS and (len(w) > 1 or w.isdigit())}
        if have:
            best = max(best, sum(any(close_words(w, h) for w in core) for h in have) / len(have))
    return best


def resolve(phrase: str, documents: Sequence[DocLike], scope: Sequence[str] | None = None,
            names: frozenset[str] = frozenset()) -> Resolved | None:
    """The document(s) `phrase` (lower case, as the question wrote it) refers to, or None when it names none of
    them: then the question is about something inside the documents, not about a whole document.

    A bare phrase (no "the", "this", "my", no "report" or "file") is a concept as often as a title ("tell me about
    attention"): it names a document only when it gives more than half of the title's words, or holds a word the
    question wrote as a name (`names`: lower-cased words typed in capitals or with digits, "BERT", "Q3", "2023")."""
    phrase = " ".join(phrase.split())
    newest = bool(_JUST.search(phrase))
    phrase = _TRAILING.sub("", phrase).strip()
    if not phrase or _DEFAULT.fullmatch(phrase):
        return default_documents(documents, scope)
    if _PLURAL.fullmatch(phrase):
        return plural_documents(phrase, documents, scope)
    found = _FILE_NAME.search(phrase)
    if found and found.group() == phrase:  # a file name typed out: match its stem's words
        phrase = phrase.rsplit(".", 1)[0]
    ws = words(phrase)
    if not ws:
        return None
    content = [w for w in ws if w not in _IGNORED and (len(w) > 1 or w.isdigit())]
    core = [_stem(w) for w in content if w not in DOC_NOUNS and w not in _EXTENSIONS]
    nouns = [_stem(w) for w in content if w in DOC_NOUNS]
    # "these", "both", or a count before a plural ("the two budgets", "2 files"; not "figure 3"): several documents
    counts = {w for i, w in enumerate(ws[:-1]) if w in _COUNTS and ws[i + 1].endswith("s")}
    several = bool(counts) or any(w in ("these", "those", "both", "all") for w in ws)
    counted = [w for w in core if w not in counts]
    first = ws[0] if ws[0] not in ("the", "my", "your") else (ws[1] if len(ws) > 1 else "")
    if newest and not core:  # "the document I just uploaded"
        return _by_date(_in_scope(documents, scope), newest=True)
    if (_NEWEST.match(" ".join(ws)) or _NEWEST.match(first)) and _generic([w for w in ws if w not in (
            "last", "latest", "newest", "most", "recent", "new")]):
        return _by_date(_in_scope(documents, scope), newest=True)
    if (_OLDEST.match(" ".join(ws)) or _OLDEST.match(first)) and _generic([w for w in ws if w not in (
            "first", "oldest", "earliest")]):
        return _by_date(_in_scope(documents, scope), newest=False)
    if not counted and several and _generic([w for w in ws if w not in counts]):
        return plural_documents(phrase, documents, scope)
    if not core:
        if not _generic(ws):
            return None
        if any(w.endswith("s") and w in DOC_NOUNS and w not in ("thesis", "notes", "slides") for w in ws) or \
                any(w in ("these", "those", "both", "all", "two", "three") for w in ws):
            return plural_documents(phrase, documents, scope)
        return _generic_singular(nouns, documents, scope)
    named = _named(core, nouns, documents, scope)
    bare = ws[0] not in DETERMINERS and not nouns and not found
    if named and bare and not set(core) & {_stem(n) for n in names}:
        by_id = {d.doc_id: d for d in documents}
        named = tuple(i for i in named if _title_share(core, by_id[i]) > 0.5)
    if named:
        return Resolved(named, Reference.NAMED)
    if len(counted) == 1 and several:
        return plural_documents(phrase, documents, scope, noun=counted[0])  # "the two budgets"
    return None


def _generic_singular(nouns: list[str], documents: Sequence[DocLike], scope: Sequence[str] | None) -> Resolved:
    """"the report", "this pdf": the scoped or only document; else the one document whose title has the noun."""
    if scope or len(documents) <= 1:
        return default_documents(documents, scope)
    specific = [n for n in nouns if n not in {_stem(x) for x in ("document", "doc", "file", "one", "thing", "text")}]
    if specific:
        named = _named(specific, [], documents, scope)
        if len(named) == 1:
            return Resolved(named, Reference.NAMED)
    return default_documents(documents, scope)


def plural_documents(phrase: str, documents: Sequence[DocLike], scope: Sequence[str] | None,
                     noun: str | None = None) -> Resolved:
    """"these documents", "both", "the two budgets": the documents in scope (those whose title has `noun`, when at
    least two do)."""
    pool = _in_scope(documents, scope)
    if noun is not None:
        having = [d for d in pool if any(close_words(noun, h) for h in _doc_words(d))]
        if len(having) >= 2:
            return Resolved(tuple(d.doc_id for d in having), Reference.NAMED)
    if scope:
        return Resolved(tuple(scope), Reference.SCOPED)
    return Resolved(tuple(d.doc_id for d in pool), Reference.ALL if len(pool) != 1 else Reference.ONLY)
