"""Instructions addressed to an AI inside document text (prompt injection), found by cheap regular expressions.

A passage is flagged when it speaks *to the assistant* (or tells it what to tell "the user"), not when it merely
gives instructions: manuals, recipes, exam papers and contracts are full of imperatives, and none of them addresses a
language model. Each family of cues (rag_core.injection.rules.Cue: the text addresses an AI, overrides earlier
instructions, reassigns a role, says what to tell the user, directs the reply, carries system or chat-template
markers, hides itself from the person, smuggles a link or secret out through the reply, or hides in markup) is a
weak signal on its own (text *about* prompts subtracts, once per passage); a passage is flagged when the families found within `WINDOW` neighbouring sentences add up
to `THRESHOLD` (weights and threshold chosen on the tune half of benchmarks/data/injection.jsonl, see
benchmarks/injection.py and docs/faithfulness.md). Text the loader saw drawn invisibly (white or tiny text in a PDF,
hidden or white runs in a Word file) adds `HIDDEN_TEXT_WEIGHT` to the chunks that hold it.

It runs on every chunk when a document is added (`flag_chunks`, stored as `Chunk.instructions`) and again on every
passage an answer uses (`mark_answer`), so libraries added before the check existed are covered too.
"""
from __future__ import annotations

import bisect
import functools
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from rag_core.core.models import Answer, Chunk, Citation, CitationStatus, Passage
from rag_core.injection.lexicon import CJK, MENTION, PREFIX, Cue, Rule
from rag_core.injection.rules import RULES

log = logging.getLogger(__name__)

NOTICE_INSTRUCTIONS = ("This source contains instructions addressed to an AI; the reply may follow them rather than "
                       "answer you.")

THRESHOLD = 2.0
"""Sum of cue weights (within `WINDOW` neighbouring sentences) from which a passage is flagged."""
WINDOW = 3  # sentences
SECOND_RULE = 0.5  # a second rule of the same family in the window
HIDDEN_TEXT_WEIGHT = 1.0  # text the loader saw drawn invisibly, inside the passage
MAX_SCAN = 20_000  # characters of one passage that are examined (chunks are far shorter)
MAX_HIDDEN_PIECES = 400  # word windows of hidden text matched against each chunk at ingest

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+")
_SPACED = re.compile(r"(?<![\w.])[A-Za-z]([ .\-_*])(?:[A-Za-z]\1)+[A-Za-z](?!\w)")  # "I g n o r e", "D.i.s.r.e.g.a.r.d"
_SEPARATORS = re.compile(r"[ .\-_*]")
_LEET = re.compile(r"(?<=[A-Za-z])[013457@$]+(?=[A-Za-z])")  # "prev1ous", "passw0rd"
_LEET_LETTERS = str.maketrans("013457@$", "oieastas")
_ADDRESSING = frozenset(r for r in RULES if r.cue is Cue.ADDRESS and r.weight > MENTION)
_DIRECTIVES = tuple(r for r in RULES if r.cue is Cue.DIRECTIVE)
_OTHERS = tuple(r for r in RULES if r.cue is not Cue.DIRECTIVE)
_DISCUSS = Cue.DISCUSS  # counted once for the whole passage (text about prompts), not per window


@dataclass(frozen=True)
class Detection:
    """What `detect` found: the score of the best window of sentences, its cues, and whether it is flagged."""

    score: float
    cues: tuple[str, ...] = ()

    @property
    def flagged(self) -> bool:
        """The passage contains instructions addressed to an AI."""
        return self.score >= THRESHOLD


def _prefixes(text: str) -> frozenset[str] | None:
    """The beginnings (2..PREFIX characters) and, as "=word", the words of `text`; None: run every rule (Chinese,
    Japanese: no spaces between words)."""
    if CJK.search(text):
        return None
    words = set(_WORD.findall(text.casefold()))
    keys = {"=" + w for w in words}
    for n in range(2, PREFIX + 1):
        keys.update(w[:n] for w in words)
    return frozenset(keys)


def _matches(rules: Iterable[Rule], text: str, prefixes: frozenset[str] | None) -> list[tuple[int, Rule]]:
    found: list[tuple[int, Rule]] = []
    for rule in rules:
        if prefixes is not None and not rule.may_match(prefixes):
            continue
        found.extend((m.start(), rule) for m in rule.pattern.finditer(text))
    return found


def _score(window: set[Rule]) -> tuple[float, tuple[str, ...]]:
    families: dict[Cue, list[float]] = {}
    for rule in window:
        families.setdefault(rule.cue, []).append(rule.weight)
    if max(families.get(Cue.ADDRESS, [0.0])) <= MENTION:  # an imperative counts only in text that speaks to an AI
        families.pop(Cue.DIRECTIVE, None)
    # A family counts at its strongest rule, plus SECOND_RULE when another of its rules is there too (a negative
    # family, text about prompts rather than to an AI, subtracts once).
    score = sum(max(ws) + (SECOND_RULE if len(ws) > 1 and max(ws) > 0 else 0.0) for ws in families.values())
    return score, tuple(sorted(families))


def deobfuscate(text: str) -> str:
    """`text` with words spelt out letter by letter joined ("I g n o r e", "D.i.s.r.e.g.a.r.d") and digits inside
    words read as letters ("prev1ous"); the text itself when there is nothing of the kind."""
    text = _SPACED.sub(lambda m: _SEPARATORS.sub("", m.group()), text)
    return _LEET.sub(lambda m: m.group().translate(_LEET_LETTERS), text)


def detect(text: str, hidden_text: bool = False, prefilter: bool = True) -> Detection:
    """Score `text` for instructions addressed to an AI; `hidden_text`: the loader saw part of it drawn invisibly.
    Obfuscated spellings are read both as written and spelt out (`deobfuscate`); the higher score counts.
    (`prefilter` False runs every rule on every text: the same result, slower; for tests.)"""
    text = text[:MAX_SCAN]
    found = _detect(text, hidden_text, prefilter)
    plain = deobfuscate(text)
    if plain != text:
        other = _detect(plain, hidden_text, prefilter)
        if other.score > found.score:
            return other
    return found


def _detect(text: str, hidden_text: bool, prefilter: bool) -> Detection:
    prefixes = _prefixes(text) if prefilter else None
    found = _matches(_OTHERS, text, prefixes)
    if any(rule in _ADDRESSING for _, rule in found):
        found += _matches(_DIRECTIVES, text, prefixes)
    starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
    hits: list[set[Rule]] = [set() for _ in starts]  # the rules found in each sentence
    discuss = [rule for _, rule in found if rule.cue is _DISCUSS]
    for at, rule in found:
        if rule.cue is not _DISCUSS:
            hits[bisect.bisect_right(starts, at) - 1].add(rule)
    extra = HIDDEN_TEXT_WEIGHT if hidden_text else 0.0
    if discuss:  # the passage talks about prompts and bots: every window counts less
        extra += min(rule.weight for rule in discuss)
    hidden: tuple[str, ...] = ("hidden_text",) if hidden_text else ()
    hidden += (_DISCUSS.value,) if discuss else ()
    best, best_cues = max(extra, 0.0), hidden
    for i in range(len(starts)):
        window: set[Rule] = set().union(*hits[i:i + WINDOW])
        if window:
            score, cues = _score(window)
            if score + extra > best:
                best, best_cues = score + extra, cues + hidden
    return Detection(round(best, 3), best_cues)


@functools.lru_cache(maxsize=1024)
def _flagged_text(text: str) -> bool:
    return detect(text).flagged


def is_flagged(chunk: Chunk) -> bool:
    """Flagged at ingest (`Chunk.instructions`) or by the detector now (libraries added before the check)."""
    return chunk.instructions or _flagged_text(chunk.text)


# --------------------------------------------------------------------------- ingest
def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _hidden_pieces(hidden: Iterable[str]) -> list[str]:
    """Runs of hidden text as word windows (≤ 8 words, ≥ 3) to look for in the chunks."""
    pieces: list[str] = []
    for snippet in hidden:
        words = _words(snippet)
        for i in range(0, len(words), 8):
            part = words[i:i + 8]
            if len(part) >= 3 or (i == 0 and len(part) >= 2):
                pieces.append(" ".join(part))
            if len(pieces) >= MAX_HIDDEN_PIECES:
                return pieces
    return pieces


def flag_chunks(chunks: Sequence[Chunk], hidden: Iterable[str] = ()) -> list[Chunk]:
    """The chunks with `instructions` set where they hold instructions addressed to an AI; `hidden` is the text the
    loader saw drawn invisibly (it counts as one more cue in the chunks that contain it)."""
    pieces = _hidden_pieces(hidden)
    out: list[Chunk] = []
    flagged = 0
    for c in chunks:
        has_hidden = False
        if pieces:
            flat = " ".join(_words(c.text))
            has_hidden = any(p in flat for p in pieces)
        found = detect(c.text, has_hidden)
        if found.flagged:
            flagged += 1
            c = replace(c, instructions=True)
        out.append(c)
    if flagged:
        log.info("%s: %d passage(s) contain instructions addressed to an AI", chunks[0].source.file_name or
                 chunks[0].doc_id, flagged)
    return out


# --------------------------------------------------------------------------- answers
def _flag_passage(p: Passage, flagged: dict[str, bool]) -> Passage:
    key = p.chunk.point_id
    if key not in flagged:
        flagged[key] = is_flagged(p.chunk)
    if flagged[key] and not p.chunk.instructions:
        return replace(p, chunk=replace(p.chunk, instructions=True))
    return p


def flagged_citations(answer: Answer) -> tuple[Citation, ...]:
    """The citations of `answer` whose passage contains instructions addressed to an AI."""
    return answer.flagged()


def mark_answer(answer: Answer) -> Answer:
    """Check the passages an answer used for instructions addressed to an AI: flagged passages are marked
    (`Chunk.instructions`), a verified or matched citation of one becomes "flagged", and the reply gets
    NOTICE_INSTRUCTIONS when it cites one."""
    if not answer.passages and not answer.citations:
        return answer
    seen: dict[str, bool] = {}
    passages = tuple(_flag_passage(p, seen) for p in answer.passages)
    citations = []
    for c in answer.citations:
        p = _flag_passage(c.passage, seen)
        backed = c.status in (CitationStatus.VERIFIED, CitationStatus.MATCHED)
        status = CitationStatus.FLAGGED if p.chunk.instructions and backed else c.status
        citations.append(replace(c, passage=p, status=status))
    marked = replace(answer, passages=passages, citations=tuple(citations))
    cited = flagged_citations(marked)
    if not cited:
        return marked
    log.info("The reply cites %d passage(s) containing instructions addressed to an AI", len(cited))
    notice = answer.notice or ""
    if NOTICE_INSTRUCTIONS not in notice:
        notice = f"{NOTICE_INSTRUCTIONS} {notice}".strip()
    return replace(marked, notice=notice,
                   extra={**answer.extra, "instructions": [c.n for c in cited]})


__all__ = ["Cue", "Detection", "NOTICE_INSTRUCTIONS", "THRESHOLD", "deobfuscate", "detect", "flag_chunks",
           "flagged_citations", "is_flagged", "mark_answer"]
