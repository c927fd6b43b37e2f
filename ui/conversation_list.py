"""The Chat page's sidebar list of past conversations: each title shown as the text it is (never as Markdown), left-
aligned, with when it was last used (the same question asked twice is told apart); the saved conversations that could
not be read named in one sentence, so nobody wonders where they went; and Undo for the last one deleted."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from rag_core.service import render
from rag_core.service.workspace import Conversation, Listing
from ui import state
from ui.safe import label

PAST_SHOWN = 30  # past conversations listed
DELETED = "chat_deleted_conversation"  # session key: the conversation deleted last (Undo puts it back)
LIST_KEY = "past_conversations"  # the list's container (its CSS class is st-key-past_conversations)
# Streamlit centres a full-width button's label: the list's titles start at the left, the icon beside the first line,
# and when it was last used goes on a small grey line under the title.
LIST_STYLE = f"""<style>
.st-key-{LIST_KEY} button {{ justify-content: flex-start; text-align: left; }}
.st-key-{LIST_KEY} button > div {{ justify-content: flex-start; align-items: flex-start; width: 100%; }}
.st-key-{LIST_KEY} button > div > span {{ align-items: flex-start; }}
.st-key-{LIST_KEY} button p {{ text-align: left; }}
.st-key-{LIST_KEY} button p .stMarkdownColoredText {{ display: block; font-size: 0.8rem; }}
</style>"""


def unreadable_line(names: tuple[str, ...], folder: str) -> str:
    """One sentence naming the conversation files that could not be read (the first three, and how many more)."""
    shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    where = f" in `{folder}`" if folder else ""
    if len(names) == 1:
        return (f"1 saved conversation could not be opened: its file {shown}{where} is damaged, too large or not a "
                "conversation file. It is left as it is; move or delete it to hide this note.")
    return (f"{len(names)} saved conversations could not be opened: their files {shown}{where} are damaged, too large "
            "or not conversation files. They are left as they are; move or delete them to hide this note.")


def _browser_zone() -> str | None:
    """The visitor's time zone as the browser reports it (None before it has, or in tests)."""
    try:
        zone = st.context.timezone
    except (AttributeError, RuntimeError):
        return None
    return zone if isinstance(zone, str) else None


def show_past_conversations(listing: Listing, current_id: str, on_switch: Callable[[str], None]) -> None:
    """The most recent conversations other than the open one, as buttons that open them, each with when it was last
    used (today: the time; this week: the weekday; earlier: the date); then the unreadable ones."""
    past = [c for c in listing.items if c.id != current_id]
    if past:
        st.markdown("**Past conversations**")
        st.html(LIST_STYLE)
        zone = _browser_zone()
        with st.container(key=LIST_KEY, gap="small"):
            for info in past[:PAST_SHOWN]:
                when = info.when(tz_name=zone)
                st.button(label(info.title) + (f" :gray[{when}]" if when else ""), key=f"conv_{info.id}",
                          on_click=on_switch, args=(info.id,), icon=":material/chat_bubble_outline:",
                          width="stretch", type="tertiary",
                          help=f"Last used {info.when_in_full(zone)}" if when else None)
        if len(past) > PAST_SHOWN or listing.left_out:
            st.caption(f"The {PAST_SHOWN} most recent are listed; older ones stay saved.")
    if listing.unreadable:
        st.caption(":material/warning: " + render.message_markdown(unreadable_line(listing.unreadable,
                                                                                  listing.folder)))


def remember_deleted(conv: Conversation) -> None:
    """Keep a just-deleted conversation for this session, so that Undo can put it back (the last one only)."""
    st.session_state[DELETED] = conv


def show_undo(store: Any, on_restored: Callable[[Conversation], None]) -> None:
    """After a conversation was deleted: one line naming it, and Undo, which writes it back into `store` (a
    Conversations) as it was and hands it to `on_restored` (the page opens it)."""
    deleted = st.session_state.get(DELETED)
    if deleted is None:
        return

    def undo() -> None:
        conv = st.session_state.pop(DELETED, None)
        if conv is None:
            return
        try:
            store.restore(conv)  # False: one of its id is back already (another tab): that one is opened
        except OSError as e:
            st.session_state[DELETED] = conv
            state.add_notice(f"The conversation could not be put back ({e.strerror or 'disk error'}); free some "
                             "disk space and press Undo again.")
            return
        on_restored(store.open(conv.id) or conv)

    st.caption(f":material/delete: Deleted “{render.escape_markdown(deleted.title)}”.")
    st.button("Undo", key="undo_delete_conversation", icon=":material/undo:", on_click=undo, type="secondary",
              help="Put the deleted conversation back, as it was")
