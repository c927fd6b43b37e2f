"""How an answer ended and what of its text is kept (rag_core.answer.generation.outcome), on hand-made checked answers."""
from __future__ import annotations

import numpy as np

from rag_core.answer.generation.outcome import (
    DETAILS_LENGTH,
    NOTICE_LEFT_OUT_MANY,
    NOTICE_LENGTH,
    NOTICE_LOOP,
    NOTICE_STOPPED,
    End,
    MemoEncoder,
    ending,
    keep_backed,
)
from rag_core.answer.generation.repetition import Loop, LoopKind
from rag_core.answer.grounding.evidence import MATCHED, NO_CLAIM, UNSUPPORTED, VERIFIED
from rag_core.core.errors import LLMTimeout, StreamInterrupted
from rag_core.core.models import Answer, SentenceCheck


def _checked(*parts: tuple[str, str], sep: str = " ") -> Answer:
    """An answer whose sentences (text, status) were checked, joined by `sep`."""
    text, checks = "", []
    for sentence, status in parts:
        if text:
            text += sep
        checks.append(SentenceCheck(len(text), len(text) + len(sentence), status))
        text += sentence
    return Answer(text=text, mode="model", sentences=tuple(checks))


def test_only_backed_sentences_are_kept_with_the_lines_leading_into_them():
    answer = _checked(("The features are:", NO_CLAIM), ("- It has 32 tracks [1].", VERIFIED),
                      ("- It was made on the Moon [1].", UNSUPPORTED), ("- It saves to floppy disk.", MATCHED),
                      ("- It sings opera [2].", UNSUPPORTED), ("Also:", NO_CLAIM), ("- The", NO_CLAIM), sep="\n")
    kept = keep_backed(answer)
    assert kept.text == "The features are:\n- It has 32 tracks [1].\n- It saves to floppy disk."
    assert kept.unbacked == 2 and kept.backed == 2
    assert kept.notice == NOTICE_LEFT_OUT_MANY.format(n=2)
    assert kept.left_out == "- It was made on the Moon [1]. - It sings opera [2]. Also: - The"


def test_a_repeated_backed_sentence_is_kept_once_and_a_fully_backed_text_is_kept_as_written():
    loop = _checked(("Paris is the capital [1].", VERIFIED), ("Paris is the capital [2].", VERIFIED),
                    ("Lyon is a city [1].", VERIFIED), ("paris is the capital", VERIFIED))
    kept = keep_backed(loop)
    assert kept.text == "Paris is the capital [1]. Lyon is a city [1]." and kept.notice is None and not kept.left_out
    whole = Answer(text="Beautiful is  ", mode="model", sentences=(SentenceCheck(0, 12, VERIFIED),))
    assert keep_backed(whole).text == "Beautiful is  "  # nothing left out: not even a space changes
    nothing = keep_backed(_checked(("Made up [1].", UNSUPPORTED), ("Hello!", NO_CLAIM)))
    assert nothing.text == "" and nothing.backed == 0 and nothing.unbacked == 1


def test_the_ending_says_why_stop_first_then_a_fault_a_loop_the_length_limit():
    loop = Loop(LoopKind.SENTENCE, 10, "paris is the capital")
    assert ending("length", StreamInterrupted(), loop, 100, stopped=True).notice == NOTICE_STOPPED
    failed = ending(None, LLMTimeout(5), loop)
    assert failed.end is End.FAILED and failed.notice.endswith("The answer below is incomplete.")
    assert "incomplete" not in failed.withheld("text")[0] and "DOCCHAT_LLM_TIMEOUT" in failed.details
    assert ending("length", None, loop).notice == NOTICE_LOOP
    length = ending("length", answer_tokens=64)
    assert length.notice == NOTICE_LENGTH and length.details == DETAILS_LENGTH.format(n=64) and length.incomplete
    finished = ending("stop")
    assert finished.end is End.FINISHED and finished.notice is None and not finished.incomplete


class _Counting:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32).reshape(len(texts), 2)


def test_the_memo_encoder_encodes_each_text_once():
    inner = _Counting()
    memo = MemoEncoder(inner)  # type: ignore[arg-type]
    first = memo.encode(["a", "bb", "a"])
    again = memo.encode(["bb", "ccc"])
    assert inner.calls == [["a", "bb"], ["ccc"]]
    assert first.tolist() == [[1, 1], [2, 1], [1, 1]] and again.tolist() == [[2, 1], [3, 1]]
    assert memo.encode([]).shape == (0, 2)
