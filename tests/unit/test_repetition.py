"""The loop detector (rag_core.answer.generation.repetition): a model repeating itself is caught within a few repeats, fed
piece by piece as it streams; ordinary answers, lists of lines of the same shape included, never are."""
from __future__ import annotations

import re

import pytest

from rag_core.answer.generation.repetition import (
    NGRAM_MIN_WORDS,
    SENTENCE_REPEATS,
    Loop,
    LoopKind,
    RepetitionGuard,
)

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


def _stream(text: str, pieces: str = "words") -> tuple[Loop | None, int]:
    """Feed `text` the way a model streams it (word by word, or character by character); the loop, and how much
    of the text had been fed when it was seen."""
    guard = RepetitionGuard()
    fed = 0
    for piece in (_TOKEN_RE.findall(text) if pieces == "words" else list(text)):
        fed += len(piece)
        if guard.feed(piece) is not None:
            return guard.loop, fed
    return guard.loop, fed


@pytest.mark.parametrize("pieces", ["words", "chars"])
def test_the_same_sentence_over_and_over_is_a_loop_caught_at_its_third_time(pieces):
    sentence = "The capital of Finland is Helsinki [1]. "
    text = "Helsinki lies on the coast. " + sentence * 50
    loop, fed = _stream(text, pieces)
    assert loop is not None and loop.kind is LoopKind.SENTENCE
    assert loop.repeated == "the capital of finland is helsinki"
    kept = text[:loop.start]
    assert kept.count("Helsinki [1]") == SENTENCE_REPEATS - 1 and text[loop.start:].startswith("The capital")
    assert fed < len(sentence) * (SENTENCE_REPEATS + 2) + 30  # caught right away, not at the end


def test_a_sentence_repeated_between_others_is_a_loop_and_markers_or_bullets_do_not_hide_it():
    text = ("* The capital of Portugal is Lisbon.\n* The capital of France is Paris, on the Seine [1].\n"
            "* The capital of Austria is Vienna [2].\n- The capital of France is Paris, on the Seine [3].\n"
            "1. the capital of France is Paris on the Seine\n* The capital of Spain is Madrid.\n")
    loop, _ = _stream(text)
    assert loop is not None and loop.kind is LoopKind.SENTENCE
    assert text[loop.start:].startswith("1. the capital of France")  # the third time, from its bullet


def test_a_word_or_a_clause_repeated_without_full_stops_is_a_loop():
    loop, _ = _stream("The answer is " + "Helsinki " * 100)
    assert loop is not None and loop.kind is LoopKind.NGRAM and loop.repeated == "helsinki"
    clause = "and the museum opens at nine "
    text = "Yes, " + clause * 20
    loop, fed = _stream(text)
    assert loop is not None and loop.kind is LoopKind.NGRAM and loop.repeated == clause.strip()
    assert text[:loop.start] == "Yes, " + clause  # the text keeps its first time
    assert fed <= len("Yes, ") + len(clause) * (NGRAM_MIN_WORDS // 6 + 2)


@pytest.mark.parametrize("answer", [
    # numbered steps of the same shape
    "\n".join(f"- Step {i}: open the lid of the box and pour the water into it [1]." for i in range(1, 40)),
    "\n".join(f"{i}. Step {i}: open the valve, then wait [2]." for i in range(1, 30)),
    # one line per day, the same hours
    "\n".join(f"- **{d}**: open from 9:00 to 17:00 [1]." for d in
              ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")),
    # a table, a wide separator row and many equal cells
    "| Feature | A | B | C | D | E | F | G | H | I | J | K | L |\n" + "|---" * 13 + "|\n"
    + "\n".join(f"| Feature {i} | Yes | Yes | No | Yes | Yes | Yes | No | Yes | Yes | Yes | No | Yes |"
                for i in range(30)),
    # short lines that do repeat ("Yes."), and one sentence written twice (a summary)
    "Is it open on Monday? Yes. Is it open on Tuesday? Yes. Is it open on Sunday? Yes. Yes. Yes.\n"
    "The museum opens at nine in the morning [1]. Tickets cost twelve euros [2]. "
    "In short: the museum opens at nine in the morning [1].",
    # ordinary prose
    "The LinnSequencer is a MIDI sequencer made by Linn Electronics in 1985 [1]. It has 32 tracks and can record "
    "up to 10,000 notes [2]. Songs are saved to floppy disk [1]. Its timing is known to be tight [3].",
])
def test_ordinary_answers_are_never_cut(answer):
    assert _stream(answer)[0] is None
    assert _stream(answer, "chars")[0] is None


def test_a_loop_once_found_stays_found_and_empty_pieces_are_fine():
    guard = RepetitionGuard()
    assert guard.feed("") is None
    for _ in range(3):
        guard.feed("Paris is the capital of France. ")
    found = guard.loop
    assert found is not None
    assert guard.feed("Something else entirely. ") is found
