"""A question's history is a sequence of frozen ChatTurn(role, text) values, not (role, text) tuples; the roles are
the strings conversation files hold ("user", "assistant")."""
from __future__ import annotations

import dataclasses

import pytest

from rag_core.answer.generation.prompt import bound_history, heuristic_standalone
from rag_core.core.models import ChatTurn, Role


def test_a_turn_is_frozen_and_its_role_an_enum():
    turn = ChatTurn("user", "Which aphorisms does the text list?")  # type: ignore[arg-type] - a saved turn's role
    assert turn.role is Role.USER and turn.role == "user" and turn == ChatTurn(Role.USER, turn.text)
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValueError):
        ChatTurn("system", "ignored")  # type: ignore[arg-type]
    assert [r.value for r in Role] == ["user", "assistant"]


def test_history_helpers_read_turns():
    history = [ChatTurn(Role.USER, "Which is better, flat or nested?"), ChatTurn(Role.ASSISTANT, "Flat."),
               ChatTurn(Role.USER, "")]
    assert bound_history(history, 1000) == history[:2]
    trimmed = bound_history([ChatTurn(Role.ASSISTANT, "x" * 3000)], 100)
    assert trimmed[0].role is Role.ASSISTANT and trimmed[0].text.startswith("…")
    assert heuristic_standalone("and why?", history) == "Which is better, flat or nested? and why?"
