"""ServerAnswers (rag_core/service/workspace.py): what the model servers said, kept by key for the Settings page's
visit; asked again for a new key, once too old, and after forget()."""
from __future__ import annotations

from rag_core.service.workspace import ServerAnswers


def test_an_answer_is_kept_by_key_until_it_is_too_old_or_forgotten():
    now = [0.0]
    asked: list[str] = []
    answers = ServerAnswers(max_age_s=30.0, clock=lambda: now[0])

    def ask(key: str):
        return lambda: asked.append(key) or f"answer from {key}"

    assert answers.get(("status", "a"), ask("a")) == "answer from a"
    now[0] = 29.0
    assert answers.get(("status", "a"), ask("a")) == "answer from a" and asked == ["a"]
    assert answers.get(("status", "b"), ask("b")) == "answer from b" and asked == ["a", "b"]  # another address
    now[0] = 30.0
    answers.get(("status", "a"), ask("a"))
    assert asked == ["a", "b", "a"]  # too old: asked again
    answers.forget()
    answers.get(("status", "b"), ask("b"))
    assert asked == ["a", "b", "a", "b"]


def test_a_failure_is_not_kept():
    answers = ServerAnswers()
    calls = []

    def fail() -> str:
        calls.append(1)
        raise RuntimeError("down")

    for _ in range(2):
        try:
            answers.get(("status",), fail)
        except RuntimeError:
            pass
    assert len(calls) == 2
