"""The Settings page's retrieval test: type a question, see the passages DocChat would read for it, ranked, with their
scores and why each was chosen, without asking a model (Workspace.test_retrieval)."""
from __future__ import annotations

import math

import streamlit as st

from rag_core.core.errors import LimitReached
from rag_core.core.models import Passage, RetrievalTest
from rag_core.service import render
from rag_core.service.workspace import Workspace
from ui.relevance import show_match
from ui.safe import show_message

RESULT = "retrieval_test_result"  # session key: the last test, shown again on the page's next runs
INTRO = ("Type a question to see which passages DocChat would read for it, best first, and why each was chosen. "
         "No AI model is asked, so you can check quickly whether your documents hold the answer.")


def _score(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cosine(value: float | None) -> str:
    """A cosine cut (not rounded) to two decimals: 0.4996 reads 0.49, as its level says (high from 0.50)."""
    return "—" if value is None else f"{math.floor(value * 100 + 1e-6) / 100:.2f}"


def _legend(test: RetrievalTest) -> str:
    return ("**Rank score**: the mix of meaning and words that puts the passages in order (higher comes first).  \n"
            "**Meaning**: how close the passage is to your question in meaning, from 0 (unrelated) to 1 (the same); "
            f"high relevance from {test.high_from:.2f}, low below {test.low_below:.2f}.  \n"
            "**Words**: the score of the search by words (BM25), which also counts small words such as “the”; — "
            "when that search did not list the passage.")


def _row(n: int, p: Passage) -> None:
    """One ranked passage: where it is, why it was chosen, its scores and its text."""
    chunk = p.chunk
    title = render.escape_markdown(chunk.source.title or chunk.source.file_name or "Untitled")
    where = render.location_label(chunk)
    with st.container(border=True, key=f"retrieval_row_{n}"):
        st.markdown(f"**{n}\\.** **{title}**" + (f"  \n{render.escape_markdown(where)}" if where else ""))
        show_match(p.match)
        m = p.match
        st.caption(f"Rank score {_score(p.score)} · Meaning {_cosine(m.cosine if m else None)} · "
                   f"Words {_score(m.lexical if m else None, 1)}")
        st.markdown("> " + render.highlight_markdown(chunk.text, None, None, context=160))


def show_retrieval_test(ws: Workspace) -> None:
    """The question box, then the last test's ranked passages (or its one sentence)."""
    st.subheader("Retrieval test")
    st.caption(INTRO)
    with st.form("retrieval_test", border=False, enter_to_submit=True):
        question = st.text_input("Question to test", key="retrieval_question", max_chars=2000,
                                 placeholder="For example: when is the boiler serviced?")
        run = st.form_submit_button("Test retrieval", icon=":material/manage_search:")
    if run:
        try:
            st.session_state[RESULT] = ws.test_retrieval(question)
        except LimitReached as e:  # the demo counts a test as a question
            st.session_state.pop(RESULT, None)
            show_message(str(e), "warning")
            return
    test: RetrievalTest | None = st.session_state.get(RESULT)
    if test is None:
        return
    if test.message:
        show_message(test.message, "info")
        return
    count = len(test.passages)
    st.markdown(f"**{render.plural(count, 'passage')}** for “{render.escape_markdown(test.question)}”, best first "
                "(as many as *Passages to read for each question* above):")
    st.caption(_legend(test))
    for n, p in enumerate(test.passages, 1):
        _row(n, p)
