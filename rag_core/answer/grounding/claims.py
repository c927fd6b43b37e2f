"""The sentences of an answer and the claim each one makes: what rag_core.answer.grounding.evidence checks.

An answer is split line by line at sentence ends (a quoted bullet of an extractive answer stays whole); the [n]
markers written for each sentence are collected (markers that open a sentence belong to the one before); a claim is
the sentence without its markers, bullet and quotes, and counts only when it states something (not a heading line,
a question or a refusal).
"""
from __future__ import annotations

import re

from rag_core.answer.grounding.citations import find_markers
from rag_core.core.text import is_refusal, sentence_spans, trim_span

_QUOTE_LINE_RE = re.compile(r"^\s*(?:[-•*]|\d+[.)])\s*[“\"«]")  # an extractive bullet: keep the quote whole
_BULLET_RE = re.compile(r"^\s*(?:[-•*]|\d+[.)])\s+")
_QUOTES = " “”\"«»'"


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`: every line is split at sentence ends; a quoted bullet stays whole."""
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", text):
        if _QUOTE_LINE_RE.match(line.group()):
            spans.append(trim_span(text, *line.span()))
        else:
            spans.extend(sentence_spans(text, *line.span()))
    return [(s, e) for s, e in spans if e > s]


def answer_sentences(text: str) -> list[tuple[tuple[int, int], tuple[int, ...]]]:
    """Sentences of an answer with the [n] written for each; markers opening a sentence belong to the one before."""
    markers = find_markers(text)
    out: list[list] = []
    for s, e in split_sentences(text):
        inside = [mk for mk in markers if s <= mk.start and mk.end <= e]
        lead = []
        if out:  # "Brussels is the capital. [1] Paris ..." -> [1] belongs to the first sentence
            pos = s
            for mk in inside:
                if text[pos:mk.start].strip():
                    break
                lead.append(mk)
                pos = mk.end
        if lead:
            out[-1][0] = (out[-1][0][0], lead[-1].end)
            out[-1][1].extend(n for mk in lead for n in mk.numbers)
            s, e = trim_span(text, lead[-1].end, e)
            inside = inside[len(lead):]
            if e <= s:
                continue
        out.append([(s, e), [n for mk in inside for n in mk.numbers]])
    return [(span, tuple(dict.fromkeys(nums))) for span, nums in out]


def claim_text(sentence: str) -> str:
    """The sentence without its citation markers, bullet and surrounding quotes."""
    pieces, pos = [], 0
    for mk in find_markers(sentence):
        pieces.append(sentence[pos:mk.start])
        pos = mk.end
    pieces.append(sentence[pos:])
    text = " ".join("".join(pieces).split())
    text = _BULLET_RE.sub("", text).strip(_QUOTES)
    return re.sub(r"\s+([.,;:!?])", r"\1", text).strip()


def is_claim(text: str, terms: frozenset[str]) -> bool:
    """Does this claim text (with these content words) state something to check?"""
    t = text.strip()
    return bool(terms) and not t.endswith((":", "?")) and not is_refusal(t)
