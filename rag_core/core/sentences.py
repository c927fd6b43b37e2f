"""The sentence splitter: abbreviation-safe sentence and paragraph spans with exact character offsets.

Measured against sentencex, pysbd, syntok, blingfire and nupunkt on XQuAD and PubMedQA by benchmarks/splitters.py
(docs/sentences.md). Re-exported by rag_core.core.text, which the rest of the package imports from.
"""
from __future__ import annotations

import re

Span = tuple[int, int]

# A sentence ends at terminal punctuation (Latin, CJK, Arabic), optionally followed by closing quotes or brackets,
# when whitespace follows (CJK full stops need none). Whether it really ends is decided by `_ends_sentence`.
_END_RE = re.compile(r"[.!?…؟。！？]+[\"'”’“‘»)\]」』]*")  # “ ‘ close German quotes: „Ja.“
_CLOSERS = "\"'”’“‘»)]」』"
_NEXT_RE = re.compile(r"\s*(\S)")
_NEXT_WORD_RE = re.compile(r"\s*([^\W\d_]+)")
_CJK_STOPS = "。！？"
_LINE_BREAK_RE = re.compile(r"\n")
_PARAGRAPH_BREAK_RE = re.compile(r"\n[ \t]*\n")
# With lines=False a single line break still ends a sentence before a list item ("- a", "• b", "2. c", "3) d").
_BLOCK_BREAK_RE = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-•*]|\d+[.)]\s))")
_WORD_BEFORE_RE = re.compile(r"[^\s(\[\"'“‘«]+$")
_WORD_WINDOW = 30  # a longer word before a stop is no abbreviation
# The letters of the word before the stop, with inner dots: "95%C.I" -> "C.I", "(st.dev" -> "st.dev".
_LETTERS_RE = re.compile(r"[^\W\d_]+(?:\.[^\W\d_]+)*$")
_NUMBER_END = "0123456789%"  # letters right after a number may still be an abbreviation; after "°", "&", "/" not
_INITIALS_RE = re.compile(r"(?:[A-Z]\.)*[A-Z]")  # "J", "U.S", "J.R.R": an initial or an acronym
_DOTTED_RE = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}")  # "st.dev", "i.c.v", "Ph.D": a dotted abbreviation
# A sentence so far made of nothing but a list marker ("1.", "b.", "iv.") or of nothing (a leading "...") goes on.
_MARKER_RE = re.compile(r"\s*[(\[]?(?:\d{1,3}|[A-Za-z]|[ivxIVX]{1,4})?\s*")
_MARKER_MAX = 12  # longer text before a stop is more than a marker

# Never a sentence end before a word: Latin and German abbreviations (any case: "E.g.", "e.g.", "Brown v. Board").
_LATIN = frozenset(["e.g", "i.e", "cf", "vs", "v", "viz", "approx", "ca", "resp", "incl", "esp", "z.b", "d.h", "bzw",
                    "u.a", "o.ä"])
# A sentence end only before a word that usually opens one ("He moved to the U.S. He stayed", "Acme Inc. The firm",
# "Baker St. The house"), not before a name ("St. Johns River", "J. R. R. Tolkien", "Smith & Co. Ltd."): titles,
# companies, "et al.", initials and acronyms, dotted abbreviations.
_TITLES = frozenset(["Dr", "Mr", "Mrs", "Ms", "Mme", "Mlle", "Messrs", "Prof", "St", "Mt", "Ft", "Gen", "Col", "Lt",
                     "Sgt", "Capt", "Cmdr", "Adm", "Rev", "Hon", "Gov", "Sen", "Rep", "Pres", "Fr", "Sr", "Jr", "Rt"])
_COMPANIES = frozenset(["Inc", "Ltd", "Co", "Corp", "Bros", "Plc", "al"])
_OPENERS = frozenset(["The", "This", "That", "These", "Those", "It", "Its", "He", "She", "They", "We", "His", "Her",
                      "Their", "Our", "In", "On", "At", "After", "Before", "During", "However", "But", "And", "As",
                      "When", "While", "Although", "Though", "Since", "There", "Then", "Thus", "Also", "Both", "Many",
                      "Most", "Some", "Such", "From", "For", "By", "With", "Other", "Others", "All", "Each", "Another",
                      "Today", "Later"])
# Not a sentence end before a number (any case): "No. 5", "Fig. 2", "pp. 10-12", "Jan. 5", "c. 1500", "(no. 25)".
_BEFORE_NUMBERS = frozenset(["no", "nos", "nr", "vol", "vols", "fig", "figs", "p", "pp", "art", "sec", "ch", "eq",
                             "ref", "tab", "c", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
                             "nov", "dec"])


def _ends_sentence(text: str, m: re.Match[str], sentence_start: int, block_start: int, block_end: int) -> bool:
    """Is the punctuation `m` the end of a sentence (not a decimal point, an abbreviation or an initial)?"""
    punct = m.group().rstrip(_CLOSERS)
    after = m.end()
    if after < block_end and not text[after].isspace():
        return punct[-1] in _CJK_STOPS  # "3.14", "e.g" and "U.S" go on; "。" needs no space after it
    nxt = _NEXT_RE.match(text, after, block_end)
    if nxt is None:
        return True
    first = nxt.group(1)
    if first.islower() or first in ".…":  # "e.g. this", "approx. three", ". . ." : no sentence starts so
        return False
    if m.start() - sentence_start <= _MARKER_MAX and _MARKER_RE.fullmatch(text, sentence_start, m.start()):
        # "1. Mix the flour.", "... The reason": a list marker or an elision opens the sentence that follows
        return False
    if punct != ".":
        return True
    window = max(block_start, m.start() - _WORD_WINDOW)
    word = _WORD_BEFORE_RE.search(text, window, m.start())
    if word is None or word.start() == window > block_start:
        return True  # no word, or one too long to be an abbreviation
    letters = _LETTERS_RE.search(text, word.start(), word.end())
    if letters is None or (letters.start() > word.start() and text[letters.start() - 1] not in _NUMBER_END):
        return True  # "in 1945. The", "(p<0.05). The", "40 °C. Crops", "IM&A. Investigator"
    w = letters.group()
    if w.lower() in _LATIN or (first.isdigit() and w.lower() in _BEFORE_NUMBERS):
        return False
    if w in _TITLES or w in _COMPANIES or _INITIALS_RE.fullmatch(w) or _DOTTED_RE.fullmatch(w):
        opener = _NEXT_WORD_RE.match(text, after, block_end)
        return opener is not None and opener.group(1) in _OPENERS
    return True


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
    an abbreviation ("Dr.", "St.", "e.g.", "No. 5", "c. 1500"), an initial ("J. R. R. Tolkien", "U.S. Army"), a
    list marker ("1. Mix") or inside a number; after a title, an initial or a company only before a word that
    usually opens a sentence ("… in the U.S. He stayed"). With `lines`, every line break also ends a sentence;
    else only blank lines and breaks before list items do.
    """
    end = len(text) if end is None else end
    spans: list[Span] = []
    for bs, be in _split(text, start, end, _LINE_BREAK_RE if lines else _BLOCK_BREAK_RE):
        pos = bs
        for m in _END_RE.finditer(text, bs, be):
            if _ends_sentence(text, m, pos, bs, be):
                spans.append(trim_span(text, pos, m.end()))
                pos = m.end()
        spans.append(trim_span(text, pos, be))
    return [(s, e) for s, e in spans if e > s]


def sentences(text: str, *, lines: bool = True) -> list[str]:
    """The sentences of `text` as strings (see sentence_spans)."""
    return [text[s:e] for s, e in sentence_spans(text, lines=lines)]


__all__ = ["Span", "paragraph_spans", "sentence_spans", "sentences", "trim_span"]
