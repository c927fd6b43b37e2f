"""The "Summarize" action: on a Library row and beside the chat's scope picker, it opens the chat scoped to that one
document with the question "Summarize “<title>”" (rag_core answers it from the whole document)."""
from __future__ import annotations

import streamlit as st

from rag_core.core.models import DocumentInfo

# The chat page's session keys (pages/chat.py): its scope picker and the question it asks on its next run.
SCOPE_MODE, SCOPE_PICK, SCOPE_DOCS = "scope_mode", "pick", "scope_docs"
ASK = "suggested_question"
CONVERSATION_KEYS = ("chat_conversation", "chat_turns")  # the open conversation (a Library click starts a new one)
QUESTION = "Summarize “{title}”"
ICON = ":material/summarize:"
HELP = "Open the chat with a summary of this document, read from all of it, with its sources."


def title_of(doc: DocumentInfo) -> str:
    """How a document is named in the question."""
    return " ".join((doc.title or doc.file_name or "this document").split())


def ask_for_summary(doc: DocumentInfo) -> None:
    """Scope the chat to `doc` and queue the question (for an on_click callback, before the widgets are drawn)."""
    st.session_state[SCOPE_MODE] = SCOPE_PICK
    st.session_state[SCOPE_DOCS] = [doc.doc_id]
    st.session_state[ASK] = QUESTION.format(title=title_of(doc))


def library_button(doc: DocumentInfo) -> None:
    """The Library row's "Summarize": a new conversation in the chat, scoped to this document, asking for it."""
    if st.button("Summarize", key=f"summarize_{doc.doc_id}", icon=ICON, type="tertiary", help=HELP):
        for key in CONVERSATION_KEYS:
            st.session_state.pop(key, None)
        st.query_params.pop("c", None)
        ask_for_summary(doc)
        st.switch_page("pages/chat.py")


def scope_buttons(docs: list[DocumentInfo], limit: int = 5) -> None:
    """Under the chat's scope picker: "Summarize “title”" for each document in scope (the first `limit`)."""
    for doc in docs[:limit]:
        st.button(f"Summarize “{title_of(doc)}”", key=f"scope_summarize_{doc.doc_id}", icon=ICON, type="tertiary",
                  help=HELP, on_click=ask_for_summary, args=(doc,))
