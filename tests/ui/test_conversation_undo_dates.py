"""The sidebar's conversations (AppTest on the real app): a deleted conversation can be put back with Undo, as it was;
conversations with the same title are told apart by when each was last used."""
from __future__ import annotations

import json
import time

from ui_helpers import button, new_app, plain, texts

from rag_core.service.conversation_data import when_label
from rag_core.service.conversations import Conversation, FileConversations

TITLE = "What is the capital of Finland?"
DAY = 86400.0


def _store(app) -> FileConversations:
    (app.data_dir / "conversations").mkdir(parents=True, exist_ok=True)
    return FileConversations(app.data_dir / "conversations")


def _saved(app, conv_id: str, updated: float) -> Conversation:
    conv = Conversation(id=conv_id, title=TITLE, updated=updated)
    conv.turns += [{"id": "u1", "role": "user", "text": TITLE},
                   {"id": "a1", "role": "assistant", "text": "Helsinki.", "answer": None, "error": None}]
    store = _store(app)
    store.save(conv)  # then given this time of last use (save() makes it now)
    path = store.folder / f"{conv_id}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "updated": updated}))
    conv.updated = updated
    return conv


def test_a_deleted_conversation_comes_back_with_undo(app):
    kept = _saved(app, "00000000000000a1", time.time() - 3 * DAY)
    at = new_app()
    at.sidebar.button(key="conv_00000000000000a1").click().run()
    button(at, "Delete this conversation").click().run()
    assert not at.exception and _store(app).list() == [] and at.session_state["chat_turns"] == []
    assert any(f"Deleted “{TITLE}”" in plain(c) for c in texts(at.sidebar.caption))

    button(at, "Undo").click().run()
    assert not at.exception
    [back] = _store(app).list()
    assert (back.id, back.title, back.updated) == (kept.id, TITLE, kept.updated)  # as it was, in its place
    assert [t["text"] for t in at.session_state["chat_turns"]] == [TITLE, "Helsinki."]  # and open again
    assert "Undo" not in [b.label for b in at.button]
    assert not any("Deleted" in plain(c) for c in texts(at.sidebar.caption))


def test_conversations_with_the_same_title_show_when_they_were_used(app):
    now = time.time()
    ages = {"00000000000000b1": 60.0, "00000000000000b2": 3 * DAY, "00000000000000b3": 40 * DAY}
    for conv_id, age in ages.items():
        _saved(app, conv_id, now - age)
    at = new_app()
    labels = {conv_id: plain(at.sidebar.button(key=f"conv_{conv_id}").label) for conv_id in ages}
    assert len(set(labels.values())) == 3, labels
    for conv_id, age in ages.items():
        when = when_label(now - age, now)
        assert labels[conv_id].startswith(TITLE) and labels[conv_id].endswith(f"[{when}]"), labels
    assert ":" in labels["00000000000000b1"].rsplit("[", 1)[1]  # today: the time, e.g. "14:05"
