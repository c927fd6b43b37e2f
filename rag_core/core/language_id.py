"""Which language a text is in: py3langid (a naive Bayes model of byte n-grams, bundled in its wheel), restricted to
LANGUAGES. Pure and cheap (~0.1 ms a question); the ground floor, so the search (rag_core.retrieve.search: a passage
in another language than the question's has no lexical vote) and the reply's language sentence
(rag_core.answer.language) share one identifier.
"""
from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rag_core.core.memory import release_free_memory

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
PASSAGE_PREFIX = 400  # characters of a passage read to tell its language (fewer lost xx-en a question: docs/retrieval.md)
MIN_SCRIPT_SHARE = 0.6  # of a text's letters in one writing system for the text to be said to be in it
PASSAGES_KEPT = 8192  # passages' languages remembered per process (a prefix and a code each, ~4 MB at most)

# Writing systems counted as one: Japanese mixes kana with Han characters (telling it from Chinese is the identifier's job).
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HALFWIDTH": "CJK"}
# Chinese, Japanese and Korean write no spaces between words: each of their characters counts as a word.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_lock = threading.Lock()


@dataclass(frozen=True)
class Guess:
    """A language and how sure py3langid is of it (0..1)."""

    code: str
    confidence: float


@functools.cache
def _identifier() -> Any:  # a py3langid LanguageIdentifier, loaded once (about half a second)
    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier
    from py3langid.modelio import load_model

    # Built from the model's columns for LANGUAGES only (what set_languages() keeps), so the other 70 languages'
    # table (~19 MB) is not held for the life of the app as set_languages() would.
    ptc, pc, classes, nextmove, row, output = load_model(MODEL_DIR / MODEL_FILE)
    keep = [i for i, c in enumerate(classes) if c in LANGUAGES]
    ident = LanguageIdentifier(np.ascontiguousarray(np.asarray(ptc)[:, keep]), np.asarray(pc)[keep],
                               [classes[i] for i in keep], nextmove, output, norm_probs=True, tk_row=row)
    del ptc
    release_free_memory()  # the model's file is decompressed into buffers that are freed by now
    return ident


def guess(text: str) -> Guess:
    """The most likely language of `text` among LANGUAGES."""
    with _lock:  # classify reuses the identifier's arrays: one caller at a time (each call takes ~0.1 ms)
        code, confidence = _identifier().classify(text[:4000])  # bounded: a pasted book reads as its start
    return Guess(str(code), float(confidence))


def words(text: str) -> int:
    """How many words `text` has: the spaced ones, plus one per character of a script without spaces."""
    return len(text.split()) + len(_UNSPACED.findall(text))


def text_language(text: str) -> str | None:
    """The language of `text` when it has MIN_QUESTION_WORDS words or more and py3langid is sure of it, else None."""
    if words(text) < MIN_QUESTION_WORDS:
        return None
    g = guess(text)
    return g.code if g.confidence >= MIN_CONFIDENCE else None


def passage_language(text: str) -> str | None:
    """`text_language` of a passage's first PASSAGE_PREFIX characters, remembered (a passage is found again and
    again)."""
    return _prefix_language(text[:PASSAGE_PREFIX])


@functools.lru_cache(maxsize=PASSAGES_KEPT)
def _prefix_language(prefix: str) -> str | None:
    return text_language(prefix)


def script(text: str) -> str | None:
    """The writing system most of `text`'s letters are in ("LATIN", "CYRILLIC", "ARABIC", "THAI", "DEVANAGARI",
    "HANGUL", "CJK", …: the first word of the letters' Unicode names) when it holds MIN_SCRIPT_SHARE of them, else
    None. Two texts in different writing systems are in different languages, whichever they are: this holds for the
    languages the identifier does not know (Thai, Bengali, Tamil, …) too."""
    counts: Counter[str] = Counter()
    for ch in text[:PASSAGE_PREFIX]:
        if ch.isalpha():
            first = unicodedata.name(ch, "").split(" ", 1)[0]
            counts[_SCRIPT_GROUPS.get(first, first)] += 1
    if not counts:
        return None
    name, n = counts.most_common(1)[0]
    return name if name and n >= MIN_SCRIPT_SHARE * sum(counts.values()) else None
