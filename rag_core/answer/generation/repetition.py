"""Catch a chat model stuck in a loop while it streams, so the answer can be stopped early with a reason.

Small models sometimes write the same sentence, or the same run of words, over and over until their token limit
(minutes on a slow computer). `RepetitionGuard` is fed the streamed text piece by piece and reports a `Loop` when

  sentence  one sentence of at least SENTENCE_MIN_WORDS words comes back SENTENCE_REPEATS times (anywhere in the
            answer; citation markers, list bullets, case and punctuation ignored), or
  ngram     a block of up to NGRAM_MAX_PERIOD words is repeated back to back NGRAM_COPIES times, covering at least
            NGRAM_MIN_WORDS words ("Helsinki Helsinki Helsinki …", or a clause repeated without a full stop).

Ordinary answers are never cut: list items share their structure ("- Step 1: …", "- Step 2: …") but differ in their
words, and one repeated short line ("Yes.") is too short to count. Each word costs NGRAM_MAX_PERIOD comparisons.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

SENTENCE_REPEATS = 3  # the same sentence this many times is a loop ...
SENTENCE_MIN_WORDS = 5  # ... when it has at least this many words ("Yes, it is." may repeat in a list)
NGRAM_COPIES = 3  # a block of words written this many times back to back is a loop ...
NGRAM_MIN_WORDS = 24  # ... when the copies cover at least this many words
NGRAM_MAX_PERIOD = 60  # the longest block looked for, in words (longer repeats are sentences: see above)

_WORD_RE = re.compile(r"(\S+)(\s+)")
_MARKER_RE = re.compile(r"^\[[\d,\s\-–]*\][.,;:!?)]*$")  # a citation marker, [1] or [1, 2].
_BULLET_RE = re.compile(r"^(?:[-*•+]|\d{1,3}[.)])$")  # a list bullet or item number opening a line
_END_RE = re.compile(r"[.!?…][\"'”’»)\]]*$|[.!?…][\"'”’»)]*\[[\d,\s\-–]*\][.,;:!?]*$")
_NON_WORD_RE = re.compile(r"[\W_]+")


class LoopKind(StrEnum):
    """What kind of repetition was seen."""

    SENTENCE = "sentence"
    NGRAM = "ngram"


@dataclass(frozen=True)
class Loop:
    """A repetition found in the streamed text."""

    kind: LoopKind
    start: int  # offset in the streamed text where the repetition starts: the answer keeps the text before it
    repeated: str  # the repeated sentence or block, normalised (for the log)


class RepetitionGuard:
    """Feed it the streamed text piece by piece; `feed` returns the Loop once the text repeats itself."""

    def __init__(self) -> None:
        self.loop: Loop | None = None
        self._pending = ""  # text not yet cut into words (its last word may go on in the next piece)
        self._pending_at = 0  # offset of _pending in the whole text
        self._words: list[str] = []  # normalised words that count for the n-gram check
        self._starts: list[int] = []  # offset of each of them
        self._runs = [0] * (NGRAM_MAX_PERIOD + 1)  # _runs[p]: words in a row equal to the word p before them
        self._sentence: list[str] = []
        self._sentence_at = -1
        self._seen: dict[str, int] = {}

    def feed(self, delta: str) -> Loop | None:
        """Take the next piece of the stream; the Loop when the text now repeats itself (then always that Loop)."""
        if self.loop is not None or not delta:
            return self.loop
        text = self._pending + delta
        pos = 0
        while self.loop is None:
            m = _WORD_RE.match(text, pos)
            if m is None:
                if pos < len(text) and text[pos].isspace():  # whitespace before the next word: skip it
                    stripped = len(text) - len(text[pos:].lstrip())
                    if self._sentence and "\n" in text[pos:stripped]:
                        self._end_sentence()
                    pos = stripped
                    continue
                break
            self._word(m.group(1), self._pending_at + m.start(1), "\n" in m.group(2))
            pos = m.end()
        self._pending, self._pending_at = text[pos:], self._pending_at + pos
        return self.loop

    # -- one word ------------------------------------------------------------------------------------------------
    def _word(self, raw: str, at: int, line_end: bool) -> None:
        if not self._sentence and self._sentence_at < 0 and _BULLET_RE.match(raw):
            self._sentence_at = at  # the sentence starts at its bullet: "- Paris is …" is one item
            return
        if not _MARKER_RE.match(raw):
            word = _NON_WORD_RE.sub("", raw.lower())
            if word:
                if self._sentence_at < 0:
                    self._sentence_at = at
                self._sentence.append(word)
                self._repeat(word, at)
        if line_end or _END_RE.search(raw):
            self._end_sentence()

    def _repeat(self, word: str, at: int) -> None:
        """The n-gram check: extend or reset the run of repeats at every period for one new word."""
        words, runs = self._words, self._runs
        for p in range(1, min(NGRAM_MAX_PERIOD, len(words)) + 1):
            runs[p] = runs[p] + 1 if words[-p] == word else 0
            if runs[p] >= p * (NGRAM_COPIES - 1) and runs[p] + p >= NGRAM_MIN_WORDS:
                first = len(words) - runs[p] + 1  # the first word of the second copy
                block = " ".join(words[first - p:first])
                self.loop = Loop(LoopKind.NGRAM, self._starts[first], block)
                break
        words.append(word)
        self._starts.append(at)

    def _end_sentence(self) -> None:
        words, at = self._sentence, self._sentence_at
        self._sentence, self._sentence_at = [], -1
        if len(words) < SENTENCE_MIN_WORDS or self.loop is not None:
            return
        key = " ".join(words)
        self._seen[key] = self._seen.get(key, 0) + 1
        if self._seen[key] >= SENTENCE_REPEATS:
            self.loop = Loop(LoopKind.SENTENCE, at, key)


__all__ = ["Loop", "LoopKind", "NGRAM_COPIES", "NGRAM_MAX_PERIOD", "NGRAM_MIN_WORDS", "RepetitionGuard",
           "SENTENCE_MIN_WORDS", "SENTENCE_REPEATS"]
