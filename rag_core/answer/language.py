"""The language of a question against the language of the passages found for it: a reply says plainly when they differ.

The embedding model (all-MiniLM-L6-v2) was trained on English, so a question in French over English documents, or
the reverse, finds its passages far less well (benchmarks/multilingual.py measures how much). DocChat cannot fix
that without a multilingual model that installs from a package on every platform (none does: docs/retrieval.md),
so it says so: the reply's notice gets one sentence naming both languages. Languages come from py3langid (a naive
Bayes model of byte n-grams, bundled in its wheel, ~0.1 ms a question), restricted to LANGUAGES; a question too
short or too unsure to tell gets no sentence, so an English question is not mislabelled (measured in
benchmarks/multilingual.py on the English sets).
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag_core.core.models import Passage

# The languages told apart (ISO 639-1) with their names in a reply. A short question is only ever guessed among these.
LANGUAGES = {
    "en": "English", "fr": "French", "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "pl": "Polish",
    "cs": "Czech", "ro": "Romanian", "hu": "Hungarian", "tr": "Turkish", "el": "Greek", "ru": "Russian",
    "uk": "Ukrainian", "ar": "Arabic", "he": "Hebrew", "hi": "Hindi", "zh": "Chinese", "ja": "Japanese",
    "ko": "Korean", "vi": "Vietnamese", "id": "Indonesian",
}
MIN_QUESTION_WORDS = 3  # fewer words than this say too little about their language ("Tesla?")
MIN_CONFIDENCE = 0.9  # py3langid's normalised probability; checked on the tune split (benchmarks/multilingual.py)
PASSAGE_CHARS = 2000  # of the top passages read to tell their language
NOTICE_LANGUAGE = ("Your question seems to be in {question} and the passages found are in {documents}: DocChat finds "
                   "passages best when you ask in the language of your documents, so try asking in {documents}.")

_lock = threading.Lock()


@dataclass(frozen=True)
class Guess:
    """A language and how sure py3langid is of it (0..1)."""

    code: str
    confidence: float


@functools.cache
def _identifier() -> Any:  # a py3langid LanguageIdentifier, loaded once (about half a second)
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(list(LANGUAGES))
    return ident


def guess(text: str) -> Guess:
    """The most likely language of `text` among LANGUAGES."""
    with _lock:  # classify reuses the identifier's arrays: one caller at a time (each call takes ~0.1 ms)
        code, confidence = _identifier().classify(text[:4000])  # bounded: a pasted book reads as its start
    return Guess(str(code), float(confidence))


def question_language(question: str) -> str | None:
    """The question's language when it is long and clear enough to tell, else None."""
    if len(question.split()) < MIN_QUESTION_WORDS:
        return None
    g = guess(question)
    return g.code if g.confidence >= MIN_CONFIDENCE else None


def passages_language(passages: Sequence[Passage]) -> str | None:
    """The language of the top passages' text (the first PASSAGE_CHARS characters), or None when unsure."""
    text = " ".join(p.chunk.text for p in passages[:3])[:PASSAGE_CHARS]
    if len(text.split()) < 20:
        return None
    g = guess(text)
    return g.code if g.confidence >= MIN_CONFIDENCE else None


def language_notice(question: str, passages: Sequence[Passage]) -> str | None:
    """One sentence when the question and its passages are in different languages, else None."""
    if not passages:
        return None
    asked = question_language(question)
    if asked is None:
        return None
    found = passages_language(passages)
    if found is None or found == asked:
        return None
    return NOTICE_LANGUAGE.format(question=LANGUAGES[asked], documents=LANGUAGES[found])


def with_language_notice(notice: str | None, question: str, passages: Sequence[Passage]) -> str | None:
    """The reply's notice with the language sentence added when the languages differ."""
    extra = language_notice(question, passages)
    if extra is None:
        return notice
    return f"{notice} {extra}" if notice else extra
