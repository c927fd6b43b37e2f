"""When a past conversation was last used, as the sidebar says it; and putting a deleted conversation back."""
from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from rag_core.service.conversation_data import ConversationInfo, full_when, when_label
from rag_core.service.conversations import Conversation, FileConversations, MemoryConversations

HELSINKI = "Europe/Helsinki"
NOW = datetime(2026, 12, 2, 9, 30, tzinfo=ZoneInfo(HELSINKI)).timestamp()  # a Wednesday morning


def _at(*args: int) -> float:
    return datetime(*args, tzinfo=ZoneInfo(HELSINKI)).timestamp()


def test_today_the_time_this_week_the_weekday_earlier_the_date() -> None:
    assert when_label(_at(2026, 12, 2, 0, 5), NOW, HELSINKI) == "00:05"
    assert when_label(_at(2026, 12, 1, 23, 59), NOW, HELSINKI) == "Yesterday"
    assert when_label(_at(2026, 11, 29, 12, 0), NOW, HELSINKI) == "Sunday"
    assert when_label(_at(2026, 11, 26, 12, 0), NOW, HELSINKI) == "Thursday"  # six days before
    assert when_label(_at(2026, 11, 25, 12, 0), NOW, HELSINKI) == "25 Nov"  # a week before: the date
    assert when_label(_at(2025, 12, 24, 12, 0), NOW, HELSINKI) == "24 Dec 2025"  # another year: with it
    assert when_label(0.0, NOW, HELSINKI) == ""  # saved before times were kept
    assert full_when(_at(2026, 11, 29, 12, 0), HELSINKI) == "Sunday 29 Nov 2026, 12:00"


def test_the_browsers_time_zone_decides_the_day() -> None:
    late = _at(2026, 12, 2, 0, 30)  # today in Helsinki, but 22:30 the evening before in London
    assert when_label(late, NOW, HELSINKI) == "00:30"
    assert when_label(late, NOW, "Europe/London") == "Yesterday"
    assert when_label(late, NOW, "No/Such_Zone") == when_label(late, NOW)  # unknown: this computer's time


def test_info_lines_with_the_same_title_differ_by_when() -> None:
    infos = [ConversationInfo(f"{i:016x}", "Same question?", NOW - age, 1) for i, age in enumerate((60, 86400 * 3))]
    assert len({i.when(NOW, HELSINKI) for i in infos}) == 2


def test_restore_puts_a_deleted_conversation_back_as_it_was_and_never_overwrites(tmp_path) -> None:
    for store in (FileConversations(tmp_path), MemoryConversations()):
        conv = Conversation(title="Kept")
        conv.turns.append({"id": "u1", "role": "user", "text": "Kept?"})
        store.save(conv)
        old = conv.updated - 3600
        conv.updated = old
        store.delete(conv.id)
        assert store.list() == []
        assert store.restore(conv) is True
        [back] = store.list()
        assert (back.id, back.title, back.updated) == (conv.id, "Kept", old)
        other = Conversation(id=conv.id, title="Other")
        other.turns.append({"id": "u2", "role": "user", "text": "Other?"})
        assert store.restore(other) is False and store.list()[0].title == "Kept"
