"""Can the library answer this question at all, and does the best quote answer it directly? Checked from evidence
before any answer is written, by meaning as well as by words (people describe what documents name).

Measured on benchmarks/answers.py and chosen on the tune split of both wordings (XQuAD's and the paraphrased sets)
by benchmarks/answer_tuning.py; docs/faithfulness.md has the figures.
- **key terms**: the names and numbers of the question ("Super Bowl 51", "Tom Brady") are looked for in the retrieved
  passages, then in the whole library in scope (one lexical search per missing term). A missing number refuses, and
  the reply says exactly what is missing ("Your documents mention Super Bowl 50 but not Super Bowl 51."); a missing
  name refuses only when nothing retrieved is on topic in meaning ("the Red Planet" may be how a person says Mars).
- **off topic**: the best passage and the best sentence far in meaning and the best quote far in words: refused.
- **closest passages**: on topic, but the best quote carries too little of the question (its words, bridged through
  sentences that name the same thing, or what it asks about): answered, labelled "not a direct answer".
"""
from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from rag_core.answer.grounding.quotes import ANSWER_KIND_WORDS, GENERIC_WORDS, Candidate, quote_text
from rag_core.core.models import Passage
from rag_core.core.text import STOP_WORDS, TOKEN_RE, content_terms, mentions, sentences, stem_phrase
from rag_core.retrieve.search import ON_TOPIC

# Measured on the tune split (benchmarks/answers.py --tune): see docs/faithfulness.md.
MIN_SUPPORT = 0.2  # not a direct answer: less than this share of the question words in the best quote (bridged) ...
MIN_QUOTE_SCORE = 2.0  # ... or a best quote scoring below this (rag_core.answer.grounding.quotes scores, about 0-5) ...
MIN_ASKED = 0.2  # ... or less than this share of what it asks about (its words other than names: "cost" of
# "How much does the LinnSequencer cost?") in the best quote ...
DIRECT_COSINE = 0.6  # ... unless the best quote is this close in meaning to the question
# ON_TOPIC (rag_core.retrieve.search, where the Match levels use it too): a passage this close in meaning (cosine)
# is about the question: a missing *name* may just be what the person calls the document ("the Zen of Python" for a
# file of its aphorisms); a missing number still refuses
ON_TOPIC_SENTENCE = 0.5  # ... or a quotable sentence this close
OFF_RELEVANCE = 0.38  # off-topic: the best passage farther than this (cosine) ...
OFF_COSINE = 0.4  # ... and the best sentence farther than this ...
OFF_SUPPORT = 0.67  # ... and less than this share of the question's words in the best quote (bridged)
TYPO_RATIO = 0.8  # a question word this close (difflib ratio) to a word of the passages is taken as a typo of it

NOTICE_MISSING = "Your documents mention {present} but not {missing}."
NOTICE_MISSING_ALL = "Your documents don't mention {missing}."
DETAILS_MISSING = ("DocChat looked for {terms} in the passages it found and in the whole library in scope, and found "
                   "no mention, so it did not answer.")

_WORD = r"[^\W\d_][\w'’.-]*"
_NAME_RE = re.compile(rf"(?:[A-Z]{_WORD}|\d[\d,.]*)(?:\s+(?:(?:of|de|von|van|the|and|der|la|le|du|al)\s+)?"
                      rf"(?:[A-Z]{_WORD}|\d[\d,.]*))*")
_MARKER_RE = re.compile(r"\[[\d,\s–-]*\]")
_GLUED_RE = re.compile(r"[^\W\d_]+$")  # letters with a number written onto them: "bzip" of "bzip2" (not "mid-" of "mid-1961")
_ACRONYM_RE = re.compile(r"[A-Z]{2,5}")
_QUESTION_OPENERS = frozenset(["what", "which", "who", "whom", "whose", "when", "where", "why", "how", "in", "on",
                               "at", "the", "a", "an", "is", "was", "are", "were", "did", "do", "does", "according",
                               "during", "after", "before", "for", "from", "to", "with", "by", "if", "i", "can",
                               "could", "should", "would", "will", "has", "have", "had", "name", "list", "tell",
                               "give", "besides", "along", "other", "than", "apart", "since", "as", "of"])


@dataclass(frozen=True)
class Verdict:
    """The outcome of the check: answerable, or a refusal with its reason and one plain sentence."""

    answerable: bool
    reason: str = ""  # "" | "missing" | "off_topic" | "weak" (answered, but with the closest passages)
    notice: str | None = None
    details: str | None = None
    missing: tuple[str, ...] = ()
    direct: bool = True  # False: no quote answers directly; the reply is labelled "closest passages"
    lacking_names: tuple[str, ...] = ()  # names of the question the documents lack (refusing or not)
    lacking_numbers: tuple[str, ...] = ()  # numbers (with their names) the documents lack: these always refuse


def _strip_possessive(phrase: str) -> str:
    return re.sub(r"['’]s?$", "", phrase.strip(" ,.?!"))


def key_phrases(question: str) -> list[str]:
    """The names and numbers of a question as phrases: runs of capitalised words and numbers ("Super Bowl 51",
    "Martin Luther"), without a question word that merely opens the sentence."""
    out: list[str] = []
    question = _MARKER_RE.sub(" ", question)  # "… e.g. [1]": a citation marker is not a number asked about
    for m in _NAME_RE.finditer(question):
        start, text = m.start(), m.group()
        if text[0].isdigit() and (glued := _GLUED_RE.search(question, 0, start)):  # "bzip2", "internet2": one name,
            start, text = glued.start(), question[glued.start():m.end()]  # not the number "2" alone
        words = text.split()
        starts = not question[:start].strip() or question[:start].rstrip()[-1] in ".?!:;"
        if starts and len(words) == 1 and not _ACRONYM_RE.fullmatch(words[0]) and not any(map(str.isdigit, words[0])):
            continue  # a capitalised first word alone ("Boycotting, …") is the sentence start, not a name
        while words and words[0].casefold().strip("'’") in _QUESTION_OPENERS and starts:
            words = words[1:]
        for part in re.split(r"\s+and\s+", " ".join(words)):
            phrase = _strip_possessive(re.sub(r"^(?:the|The)\s+", "", part))
            if phrase and phrase.casefold() not in STOP_WORDS:
                out.append(phrase)
    return list(dict.fromkeys(out))


def analogue(texts: Sequence[str], phrase: str) -> str | None:
    """A phrase of the texts like `phrase` with another number or last name ("Super Bowl 50" for "Super Bowl 51")."""
    words = phrase.split()
    if len(words) < 2:
        return None
    head = r"\s+".join(map(re.escape, words[:-1]))
    tail = r"\d[\d,.]*" if words[-1][0].isdigit() else r"[A-Z][\w'’-]*"
    for t in texts:
        m = re.search(rf"\b{head}\s+({tail})\b", t)
        if m and m.group(1) != words[-1]:
            return m.group(0)
    return None


def _quoted(phrases: Sequence[str]) -> str:
    shown = [f"“{p}”" if not p[:1].isupper() else p for p in phrases]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _units(phrase: str) -> list[str]:
    """What must occur for a key phrase to be mentioned: each of its words, and a number together with the name
    just before it ("Bowl 51" of "Super Bowl 51": the documents may well mention Super Bowl and 51 apart)."""
    words = phrase.split()
    out: list[str] = []
    for i, w in enumerate(words):
        if w[0].isdigit() and i and words[i - 1][:1].isupper() and not re.search(r"['’]s?$", words[i - 1]):
            out.append(f"{words[i - 1]} {w}")
        elif stem_phrase(w).strip():
            out.append(_strip_possessive(w))
    return out


def _acronym_of(word: str, texts: Sequence[str]) -> bool:
    """Is `word` ("UMC") the initials of a run of capitalised words in the texts ("United Methodist Church")?"""
    if not _ACRONYM_RE.fullmatch(word):
        return False
    pattern = r"\b" + r"\w*\s+(?:(?:of|the|and|for|de)\s+)?".join(word) + r"\w*"
    return any(re.search(pattern, t) for t in texts)


def _like(word: str, vocabulary: Iterable[str]) -> bool:
    """A misspelling of a word of the vocabulary ("Ghandi" for "Gandhi", "Maastrich" for "Maastricht")?"""
    low = word.casefold()
    return len(low) >= 4 and bool(difflib.get_close_matches(low, list(vocabulary), n=1, cutoff=TYPO_RATIO))


@dataclass(frozen=True)
class Signals:
    """What the check measures of the retrieved evidence (None: not measured)."""

    relevance: float | None = None  # the best passage's cosine to the question (retrieval)
    cosine: float | None = None  # the best quotable sentence's cosine to the question (rag_core.answer.grounding.quotes shortlist)
    support: float | None = None  # share of the question's words in the best quote, its title and section
    bridged: float | None = None  # ... also counting sentences that name what the quote names (see `bridged`)
    score: float | None = None  # the best quote's score (rag_core.answer.grounding.quotes, about 0-5)
    asked: float | None = None  # share of what the question asks about (its words but names) in the best quote

    def on_topic(self) -> bool:
        """Close enough in meaning that a name the documents lack may just be described otherwise."""
        return ((self.relevance is not None and self.relevance >= ON_TOPIC)
                or (self.cosine is not None and self.cosine >= ON_TOPIC_SENTENCE))

    def off_topic(self) -> bool:
        """Far in meaning and in words: the documents are not about this question."""
        if self.relevance is None or self.cosine is None:
            return False
        words = self.bridged if self.bridged is not None else self.support
        return (self.relevance < OFF_RELEVANCE and self.cosine < OFF_COSINE
                and (words is None or words < OFF_SUPPORT))

    def direct(self) -> bool:
        """Does the best quote answer directly (else the reply is labelled "closest passages")?"""
        if self.cosine is not None and self.cosine >= DIRECT_COSINE:
            return True
        words = self.bridged if self.bridged is not None else self.support
        return not ((words is not None and words < MIN_SUPPORT) or (self.asked is not None and self.asked < MIN_ASKED)
                    or (self.score is not None and self.score < MIN_QUOTE_SCORE))

    def as_dict(self) -> dict[str, float | None]:
        """The measurements, rounded, for Answer.extra["answerability"]."""
        return {k: None if v is None else round(v, 4) for k, v in vars(self).items()}


def missing_phrases(question: str, passages: Sequence[Passage], in_library: Callable[[str], bool]
                    ) -> tuple[list[str], list[str], list[str]]:
    """The question's key phrases, and those the documents lack: (keys, missing names, missing numbers)."""
    texts = [f"{p.chunk.source.title}\n{p.chunk.section}\n{p.chunk.text}" for p in passages]
    vocabulary = {t.casefold() for text in texts for t in TOKEN_RE.findall(text) if len(t) >= 4}
    keys = key_phrases(question)
    names, numbers = [], []
    for k in keys:
        gone = [u for u in _units(k) if not mentions(texts, u)
                and not (" " not in u and not u[0].isdigit() and (_like(u, vocabulary) or _acronym_of(u, texts)))
                and not in_library(u)]
        if any(u[-1].isdigit() for u in gone):
            numbers.append(k)
        elif gone:
            names.append(k)
    return keys, names, numbers


def check(question: str, passages: Sequence[Passage], in_library: Callable[[str], bool],
          signals: Signals | None = None) -> Verdict:
    """Is the question answerable from these passages (and the library behind them), and does the best quote
    answer it directly?

    `in_library(phrase)` says whether the phrase occurs anywhere in the library in scope. A missing number always
    refuses; a missing name only when the evidence is also far in meaning (a question may describe what the
    documents name); evidence far in meaning and words refuses as off-topic; weak evidence that is on topic is
    answered with the closest passages, labelled so (`Verdict.direct` False)."""
    sig = signals or Signals()
    texts = [f"{p.chunk.source.title}\n{p.chunk.section}\n{p.chunk.text}" for p in passages]
    keys, names, numbers = missing_phrases(question, passages, in_library)
    missing = [k for k in keys if k in numbers or (k in names and not sig.on_topic())]
    if missing:
        present = [k for k in keys if k not in missing]
        near = next((a for k in missing if (a := analogue(texts, k))), None)
        if near is not None:
            notice = NOTICE_MISSING.format(present=near, missing=_quoted(missing))
        elif present:
            notice = NOTICE_MISSING.format(present=_quoted(present), missing=_quoted(missing))
        else:
            notice = NOTICE_MISSING_ALL.format(missing=_quoted(missing))
        return Verdict(False, "missing", notice, DETAILS_MISSING.format(terms=_quoted(missing)), tuple(missing),
                       lacking_names=tuple(names), lacking_numbers=tuple(numbers))
    lacking = Verdict(True, lacking_names=tuple(names), lacking_numbers=tuple(numbers))
    if sig.off_topic():
        return replace(lacking, answerable=False, reason="off_topic")
    if not sig.direct():
        return replace(lacking, reason="weak", direct=False)
    return lacking


def support(question: str, quote: str, passage: Passage) -> float:
    """The share of the question's content words found in a quote, its passage's title or its section."""
    words = content_terms(question).words
    if not words:
        return 1.0
    chunk = passage.chunk
    return len(words & content_terms(f"{quote} {chunk.source.title} {chunk.section}").words) / len(words)


def bridged(question: str, quote: str, passage: Passage, passages: Sequence[Passage]) -> float:
    """Like `support`, also counting the question's words in the sentences of `passages` that name something the
    quote names and the question does not: a question that describes ("the reformer", "the NFC champions") finds
    its words where the documents introduce the name ("Luther, the reformer …")."""
    words = content_terms(question).words
    if not words:
        return 1.0
    chunk = passage.chunk
    have = set(content_terms(f"{quote} {chunk.source.title} {chunk.section}").words)
    names = {k for k in content_terms(quote).keys if not k[0].isdigit()} - words
    if names:
        for p in passages:
            for s in _sentences_of(p.chunk.text):
                terms = content_terms(s)
                if terms.keys & names:
                    have |= terms.words
    return len(words & have) / len(words)


def asked(question: str, quote: str, passage: Passage) -> float:
    """The share of what the question asks about — its content words other than names and generic verbs — found in
    a quote, its title or section (1.0 when it asks about names only)."""
    terms = content_terms(question)
    wanted = terms.words - terms.keys - GENERIC_WORDS - ANSWER_KIND_WORDS
    if not wanted:
        return 1.0
    chunk = passage.chunk
    return len(wanted & content_terms(f"{quote} {chunk.source.title} {chunk.section}").words) / len(wanted)


@functools.lru_cache(maxsize=64)
def _sentences_of(text: str) -> tuple[str, ...]:
    return tuple(sentences(text, lines=False))


__all__ = ["DETAILS_MISSING", "MIN_QUOTE_SCORE", "MIN_SUPPORT", "NOTICE_MISSING", "NOTICE_MISSING_ALL", "Signals",
           "Verdict", "analogue", "asked", "bridged", "check", "key_phrases", "mentions", "missing_phrases", "support"]


def gather(wordings: Iterable[str], ranked: Sequence[Candidate], passages: Sequence[Passage], relevance: float,
           score: float, near: int) -> Signals:
    """The signals of the best quote for `check` (only the relevance when nothing is quotable); `wordings` are the
    question as searched and as asked, `near` how many top passages may bridge a quote."""
    if not ranked:
        return Signals(relevance=relevance)
    best, words = ranked[0], set(wordings)
    passage = passages[best.n - 1]
    quote = quote_text(passage.chunk.text, best)
    return Signals(relevance=relevance, cosine=max((c.cosine for c in ranked if c.cosine is not None), default=None),
                   support=max(support(q, quote, passage) for q in words),
                   bridged=max(bridged(q, quote, passage, passages[:near]) for q in words),
                   score=score, asked=max(asked(q, quote, passage) for q in words))


def measured(verdict: Verdict, signals: Signals) -> dict[str, object]:
    """What the check measured and decided, for Answer.extra["answerability"]."""
    return {"reason": verdict.reason, "missing": list(verdict.missing), "direct": verdict.direct,
            "lacking_names": list(verdict.lacking_names), "lacking_numbers": list(verdict.lacking_numbers),
            **signals.as_dict()}
