"""The Chat page's sidebar list of past conversations: each title shown as the text it is (never as Markdown), and
the saved conversations that could not be read named in one sentence, so nobody wonders where they went."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from rag_core.service import render
from rag_core.service.workspace import Listing
from ui.safe import label

PAST_SHOWN = 30  # past conversations listed


def unreadable_line(names: tuple[str, ...], folder: str) -> str:
    """One sentence naming the conversation files that could not be read (the first three, and how many more)."""
    shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    where = f" in `{folder}`" if folder else ""
    if len(names) == 1:
        return (f"1 saved conversation could not be opened: its file {shown}{where} is damaged, too large or not a "
                "conversation file. It is left as it is; move or delete it to hide this note.")
    return (f"{len(names)} saved conversations could not be opened: their files {shown}{where} are damaged, too large "
            "or not conversation files. They are left as they are; move or delete them to hide this note.")


def show_past_conversations(listing: Listing, current_id: str, on_switch: Callable[[str], None]) -> None:
    """The most recent conversations other than the open one, as buttons that open them; then the unreadable ones."""
    past = [c for c in listing.items if c.id != current_id]
    if past:
        st.markdown("**Past conversations**")
        for info in past[:PAST_SHOWN]:
            st.button(label(info.title), key=f"conv_{info.id}", on_click=on_switch, args=(info.id,),
                      icon=":material/chat_bubble_outline:", width="stretch", type="tertiary")
        if len(past) > PAST_SHOWN or listing.left_out:
            st.caption(f"The {PAST_SHOWN} most recent are listed; older ones stay saved.")
    if listing.unreadable:
        st.caption(":material/warning: " + render.message_markdown(unreadable_line(listing.unreadable,
                                                                                  listing.folder)))
