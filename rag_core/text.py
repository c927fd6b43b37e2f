"""Words and sentences, in one place: the sentence splitter (abbreviation-safe spans), content terms (tokens, stop
words, Snowball stems) and refusal detection, shared by chunking, evidence, generation and rendering."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

Span = tuple[int, int]

# --------------------------------------------------------------------------- sentences
# A sentence ends at terminal punctuation (Latin, CJK, Arabic), optionally followed by closing quotes or brackets,
# when whitespace follows (CJK full stops need none). Whether it really ends is decided by `_ends_sentence`.
_END_RE = re.compile(r"[.!?…؟。！？]+[\"'”’»)\]」』]*")
_CLOSERS = "\"'”’»)]」』"
_NEXT_RE = re.compile(r"\s*(\S)")
_CJK_STOPS = "。！？"
_LINE_BREAK_RE = re.compile(r"\n")
_PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t]*\n")
# With lines=False a single line break still ends a sentence before a list item ("- a", "• b", "2. c").
_BLOCK_BREAK_RE = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*[-•*\d])")
_WORD_BEFORE_RE = re.compile(r"[^\s(\[\"'“‘«]+$")
_INITIALS_RE = re.compile(r"(?:[A-Z]\.)*[A-Z]")  # "J", "U.S", "J.R.R": an initial, not a sentence end

# Never a sentence end before a word: titles, and Latin/German abbreviations (any case: "E.g.", "e.g.").
_TITLES = frozenset(["Dr", "Mr", "Mrs", "Ms", "Mme", "Mlle", "Prof", "St", "Mt", "Ft", "Gen", "Col", "Lt", "Sgt",
                     "Capt", "Cmdr", "Adm", "Rev", "Hon", "Gov", "Sen", "Rep", "Pres"])
_LATIN = frozenset(["e.g", "i.e", "cf", "vs", "viz", "al", "approx", "ca", "resp", "z.b", "d.h", "bzw", "u.a", "o.ä"])
# Not a sentence end before a number: "No. 5", "Fig. 2", "pp. 10-12", "Jan. 5".
_BEFORE_NUMBERS = frozenset(["No", "Nos", "Nr", "Vol", "Vols", "Fig", "Figs", "p", "pp", "Art", "Sec", "Ch", "Eq",
                             "Ref", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov",
                             "Dec"])


def _ends_sentence(text: str, m: re.Match[str], block_start: int, block_end: int) -> bool:
    """Is the punctuation `m` the end of a sentence (not a decimal point, an abbreviation or an initial)?"""
    punct = m.group().rstrip(_CLOSERS)
    after = m.end()
    if after < block_end and not text[after].isspace():
        return punct[-1] in _CJK_STOPS  # "3.14", "e.g" and "U.S" go on; "。" needs no space after it
    nxt = _NEXT_RE.match(text, after, block_end)
    if nxt is None:
        return True
    first = nxt.group(1)
    if first.islower():  # "e.g. this", "approx. three": a sentence does not start in lower case
        return False
    if punct != ".":
        return True
    word = _WORD_BEFORE_RE.search(text, max(block_start, m.start() - 12), m.start())
    if word is None:
        return True
    w = word.group()
    if w in _TITLES or w.lower() in _LATIN or _INITIALS_RE.fullmatch(w):
        return False
    return not (w in _BEFORE_NUMBERS and first.isdigit())


def trim_span(text: str, start: int, end: int) -> Span:
    """(start, end) narrowed to leave out the whitespace at both ends of text[start:end]."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _split(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[Span]:
    spans, pos = [], start
    for m in pattern.finditer(text, start, end):
        spans.append(trim_span(text, pos, m.start()))
        pos = m.end()
    spans.append(trim_span(text, pos, end))
    return [(s, e) for s, e in spans if e > s]


def paragraph_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """(start, end) of each blank-line separated paragraph of text[start:end], trimmed, absolute offsets."""
    return _split(text, start, len(text) if end is None else end, _PARAGRAPH_BREAK_RE)


def sentence_spans(text: str, start: int = 0, end: int | None = None, *, lines: bool = True) -> list[Span]:
    """(start, end) of each sentence of text[start:end], trimmed, absolute offsets.

    Sentences end at . ! ? … (with closing quotes) before a word that does not start in lower case, but not after
    an abbreviation ("Dr.", "St.", "e.g.", "No. 5"), an initial ("J. R. R. Tolkien", "U.S.") or inside a number.
    With `lines`, every line break also ends a sentence; else only blank lines and breaks before list items do.
    """
    end = len(text) if end is None else end
    spans: list[Span] = []
    for bs, be in _split(text, start, end, _LINE_BREAK_RE if lines else _BLOCK_BREAK_RE):
        pos = bs
        for m in _END_RE.finditer(text, bs, be):
            if _ends_sentence(text, m, bs, be):
                spans.append(trim_span(text, pos, m.end()))
                pos = m.end()
        spans.append(trim_span(text, pos, be))
    return [(s, e) for s, e in spans if e > s]


def sentences(text: str, *, lines: bool = True) -> list[str]:
    """The sentences of `text` as strings (see sentence_spans)."""
    return [text[s:e] for s, e in sentence_spans(text, lines=lines)]


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
