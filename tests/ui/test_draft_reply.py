"""A reply is a draft until it is checked (AppTest on the real app): the streamed text is shown greyed under a
"Draft" line, and a reply stopped before its check ended never shows the model's unchecked text as the answer: the
page shows the draft as one while the check goes on, then the checked answer; after a reload, one sentence and the
draft under Details."""
from __future__ import annotations

import threading
import time

from ui_helpers import new_app, plain, texts

from rag_core.answer.generation.outcome import NOTICE_LEFT_OUT_ONE, NOTICE_STOPPED
from rag_core.core.models import Answer, StageEvent, Step
from rag_core.service.live import LiveAnswer
from ui.sources import DRAFT_NOTE, DRAFT_STOPPED_NOTE, UNCHECKED_NOTE

BACKED = "The capital of Belgium is Brussels [1]."
INVENTED = "Brussels was founded on the Moon in 1842."
QUESTION = "What is the capital of Belgium?"


class SlowCheck:
    """An answer stream that has written its text and whose check (run when it is closed, as a Stop closes it) ends
    only when the test sets `checked`."""

    def __init__(self, text: str, answer: Answer) -> None:
        self.text, self._answer = text, answer
        self.checked, self._tick = threading.Event(), threading.Event()
        self.answer: Answer | None = None
        self.passages: list = []
        self._listeners: list = []

    def listen(self, listener) -> None:
        self._listeners.append(listener)
        listener(StageEvent(Step.WRITING, time.monotonic()))

    def __iter__(self):
        yield self.text
        while True:  # the model's next word does not come; the reader looks for a Stop between pieces
            self._tick.wait(0.02)
            yield ""

    def close(self) -> None:
        for listener in self._listeners:
            listener(StageEvent(Step.CHECKING, time.monotonic()))
        assert self.checked.wait(30), "the test never let the check end"
        self.answer = self._answer


def _page(at) -> tuple[str, str]:
    """(the answer-like text: markdown and boxes, the greyed text: captions) of the page, escapes removed."""
    shown = plain("\n".join(texts(at.markdown) + texts(at.warning) + texts(at.info)))
    return shown, plain("\n".join(texts(at.caption)))


def _expander_text(at, label: str) -> str:
    return "\n".join(plain("\n".join(texts(e.caption) + texts(e.markdown))) for e in at.expander if e.label == label)


def test_a_reply_stopped_before_its_check_shows_a_draft_then_the_checked_answer(app):
    checked = Answer(text=BACKED, mode="model", incomplete=True, notice=f"{NOTICE_STOPPED} {NOTICE_LEFT_OUT_ONE}",
                     question=QUESTION,
                     extra={"details": f"Left out (not backed by your documents): {INVENTED}"})
    stream = SlowCheck(f"{BACKED} {INVENTED}", checked)
    live = LiveAnswer(stream)
    while live.poll(0.05) and not live.text:  # the draft has streamed in
        pass
    at = new_app()
    turns = [{"id": "q1", "role": "user", "text": QUESTION},
             {"id": "a1", "role": "assistant", "text": live.text, "answer": None, "error": None, "pending": True,
              "live": live}]
    at.session_state["chat_turns"] = turns
    at.run()  # the run that answered was abandoned (Stop): this one settles the reply; its check is not done yet
    assert not at.exception
    turn = at.session_state["chat_turns"][1]
    assert turn["answer"] is None and not turn["pending"] and turn["stopped"]
    shown, greyed = _page(at)
    assert INVENTED not in shown  # the unchecked text is never shown as the answer ...
    assert DRAFT_STOPPED_NOTE in greyed and INVENTED in greyed  # ... only greyed, as a draft being checked

    stream.checked.set()
    assert live.wait(5)
    at.run()  # the page follows the check (a fragment reruns it when it ends)
    assert not at.exception
    turn = at.session_state["chat_turns"][1]
    assert turn["answer"] is checked and turn["text"] == BACKED
    shown, greyed = _page(at)
    assert "Brussels **[1]**" in shown and NOTICE_STOPPED in shown
    assert INVENTED not in shown and DRAFT_STOPPED_NOTE not in greyed
    assert INVENTED in _expander_text(at, "Details")  # what was left out, folded away


def test_a_reloaded_reply_that_was_never_checked_shows_one_sentence_and_the_draft_under_details(app):
    at = new_app()
    at.session_state["chat_turns"] = [
        {"id": "q1", "role": "user", "text": QUESTION},
        {"id": "a1", "role": "assistant", "text": f"{BACKED} {INVENTED}", "answer": None, "error": None,
         "pending": False, "stopped": True}]
    at.run()
    assert not at.exception
    shown, greyed = _page(at)
    assert UNCHECKED_NOTE in shown and INVENTED not in shown and DRAFT_STOPPED_NOTE not in greyed
    assert INVENTED in _expander_text(at, "Details")  # the draft, said to be unchecked, folded away
    assert all(plain(c).startswith("What the model wrote (not checked") for c in texts(at.caption) if INVENTED in c)


def test_the_draft_is_greyed_under_a_line_that_says_it_is_one():
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        from ui.sources import show_draft

        show_draft("The capital of Belgium is Brussels \\[1\\]\\.")

    at = AppTest.from_function(page).run()
    assert not at.exception and not at.markdown
    note, body = (plain(c.value) for c in at.caption)
    assert DRAFT_NOTE in note and body == "The capital of Belgium is Brussels [1]."
