"""Words and sentences, in one place: the sentence splitter (abbreviation-safe spans, from rag_core.core.sentences),
content terms (tokens, stop words, Snowball stems) and refusal detection, shared by chunking, evidence, generation
and rendering."""
from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The sentence splitter lives in its own module; everything imports it from here.
from rag_core.core.sentences import Span, paragraph_spans, sentence_spans, sentences, trim_span

# --------------------------------------------------------------------------- words and terms
STOP_WORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
                        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
                        "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few",
                        "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers",
                        "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its",
                        "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of",
                        "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own",
                        "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs",
                        "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to",
                        "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
                        "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
                        "yourselves", "yes", "may", "might", "must", "shall", "st", "nd", "rd", "th", "s", "t",
                        "answer", "answers", "question", "questions", "source", "sources", "passage", "passages",
                        "document", "documents", "according", "based", "provided", "context", "text", "information",
                        "mentioned", "stated", "says", "said", "given", "n"])
TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")  # numbers ("1,200.5") and runs of letters


def tokens(text: str) -> list[str]:
    """The words and numbers of `text`, in order, as written."""
    return TOKEN_RE.findall(text)


@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    from py_rust_stemmers import SnowballStemmer  # ships with fastembed, which the lexical index already uses

    return SnowballStemmer("english")


def stem(word: str) -> str:
    """The English Snowball stem of a (case-folded) word."""
    return str(_stemmer().stem_word(word))


@dataclass(frozen=True)
class Terms:
    """The content of a sentence: word stems and numbers, and its key terms.

    Key terms are the numbers and names (capitalised words): the words an answer most often gets wrong while the
    rest of the sentence still matches ("The capital of Belgium is Paris"). A capitalised first word may just be
    the sentence start, so it is kept apart (`opener`) and only checked against the whole passage."""

    words: frozenset[str]
    keys: frozenset[str]
    opener: frozenset[str]


def content_terms(text: str) -> Terms:
    """Stems and numbers of `text` (stop words dropped, "1,200" read as 1200), with its key terms."""
    words: list[str] = []
    keys: set[str] = set()
    opener: set[str] = set()
    first = True
    for m in TOKEN_RE.finditer(text):
        tok = m.group().casefold()
        if tok[0].isdigit():
            tok = tok.replace(",", "")
            words.append(tok)
            keys.add(tok)
        elif tok not in STOP_WORDS and len(tok) > 1:
            stemmed = stem(tok)
            words.append(stemmed)
            if m.group()[0].isupper():
                (opener if first else keys).add(stemmed)
        first = False
    return Terms(frozenset(words), frozenset(keys), frozenset(opener - keys))


@functools.lru_cache(maxsize=256)
def stem_phrase(text: str) -> str:
    """The text as a space-padded string of word stems and numbers, without stop words ("Luther's Bible" and
    "the Bible of Luther" differ; "Grammys" and "Grammy" do not)."""
    out = []
    for tok in TOKEN_RE.findall(text.replace("’", "'")):
        low = tok.casefold()
        if low in STOP_WORDS:
            continue
        out.append(low.replace(",", "") if low[0].isdigit() else stem(low))
    return " " + " ".join(out) + " "


def mentions(texts: Sequence[str], phrase: str) -> bool:
    """Does any text contain the phrase's words in a row (stems; case, punctuation and stop words ignored)?"""
    want = stem_phrase(phrase)
    return bool(want.strip()) and any(want in stem_phrase(t) for t in texts)


# --------------------------------------------------------------------------- counts
def plural(n: float | None, word: str) -> str:
    """A count with its noun in the right number: "1 page", "3 pages", "0.5 seconds"."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- refusals
_REFUSAL_RE = re.compile(
    r"(couldn['’]?t|could not|can['’]?t|cannot|unable to|did not|didn['’]?t) find"
    r"|(do|does|did)(n['’]?t| not) (contain|mention|provide|include|say|cover|answer)"
    r"|no (relevant )?information (about|on|regarding|in)"
    r"|not (mentioned|covered|stated|provided|found|available) in "
    r"(the|your|these|any of the) (sources|documents|passages)",
    re.IGNORECASE)


def is_refusal(text: str) -> bool:
    """True when the text says the sources do not contain the answer ("I couldn't find …", "The sources do not …")."""
    return bool(_REFUSAL_RE.search(" ".join(text.split())))


__all__ = ["STOP_WORDS", "TOKEN_RE", "Span", "Terms", "content_terms", "is_refusal", "paragraph_spans", "plural",
           "sentence_spans", "sentences", "stem", "tokens", "trim_span"]


def with_article(what: str) -> str:
    """The name with "a" or "an" before it: "an Excel workbook", "a PDF", "an RTF document" (an acronym by the sound
    of its first letter's name)."""
    word = what.split(" ", 1)[0]
    acronym = len(word) > 1 and word.isupper()
    return ("an " if what[:1] in ("AEFHILMNORSX" if acronym else "AEIOUaeiou") else "a ") + what
