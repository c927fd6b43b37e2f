"""The Settings page's "Search model" section (issue 46): which embedding model the library is searched with, as a
plain choice ("Standard (English)", "Many languages", the model server's embedding models), the re-embedding a new
choice starts (progress and Stop; searches keep the old vectors until the switch), and one sentence for what cannot
be offered here."""
from __future__ import annotations

import streamlit as st

from rag_core.core.errors import DocChatError
from rag_core.service.workspace import EmbeddingChoices, ReembedState, ReembedStatus, ServerAnswers, Workspace
from ui import state as ui_state
from ui.safe import label, show_message

KEY = "set_embedding_model"
ERROR = "embedding_model_error"  # the sentence of a choice that could not start (set in the callback)
REFRESH_S = 2.0  # how often the progress is redrawn while the re-embedding runs


def _choose() -> None:
    model = st.session_state.get(KEY)
    if not model:
        return
    try:
        ui_state.workspace().choose_embedding_model(model)
    except DocChatError as e:
        st.session_state[ERROR] = str(e)
        st.session_state.pop(KEY, None)  # the selector goes back to the library's model
    else:
        st.session_state.pop(ERROR, None)


def _stop() -> None:
    ui_state.workspace().stop_embedding_switch()
    st.session_state.pop(KEY, None)


def _chosen(choices: EmbeddingChoices) -> str:
    """The model shown as chosen: the one being switched to, else the library's."""
    status = choices.switching
    return status.model if status is not None and status.state is ReembedState.RUNNING else choices.current


def _progress(status: ReembedStatus, choices: EmbeddingChoices) -> None:
    """The re-embedding's progress bar and Stop button, or how it ended."""
    name = label(choices.label(status.model))
    if status.state is ReembedState.RUNNING:
        share = status.done / status.total if status.total else 0.0
        st.progress(share, text=f"Re-reading your library with “{name}”: {status.done} of {status.total} documents. "
                                f"Searches use “{label(choices.label(choices.current))}” until it is done.")
        st.button("Stop", icon=":material/stop_circle:", key="stop_embedding_switch", on_click=_stop,
                  help="Keep the current model; what was re-read so far is removed.")
    elif status.state is ReembedState.DONE and status.model == choices.current:
        st.success(f"Your library is now searched with “{name}”.", icon=":material/check_circle:")
    elif status.state is ReembedState.FAILED:
        show_message(status.error or "Re-reading the library stopped; it keeps its current model.", "warning")


def show_embedding_section(ws: Workspace, answers: ServerAnswers | None = None) -> None:
    """The section, where the person chooses the model (nothing in the hosted demo); `answers`: the model servers'
    lists kept for this visit of the page (None: ask them now)."""
    with st.spinner("Asking the model server which search models it has…"):  # (shown only past half a second)
        choices = ws.embedding_choices(answers)
    if choices is None:
        return
    st.subheader("Search model")
    models = [o.model for o in choices.options]
    chosen = _chosen(choices)
    if st.session_state.get(KEY) != chosen:  # (set through the state, so the browser's selector follows too)
        st.session_state[KEY] = chosen
    st.selectbox("Model that finds passages", models, key=KEY, on_change=_choose, format_func=choices.label,
                 help="“Many languages” finds passages across languages (a question in French about an English "
                      "document). Changing the model re-reads every document in the background.")
    error = st.session_state.get(ERROR)
    if error:
        show_message(error, "warning")
    for note in choices.notes:
        st.caption(note)
    status = choices.switching
    if status is not None and status.state is ReembedState.RUNNING:
        _live_progress(ws, choices)
    elif status is not None:
        _progress(status, choices)


@st.fragment(run_every=REFRESH_S)
def _live_progress(ws: Workspace, choices: EmbeddingChoices) -> None:
    """The progress, redrawn every few seconds while the re-embedding runs; the whole page once it has ended."""
    status = ws.embedding_switch()
    if status is None or status.state is not ReembedState.RUNNING:
        st.rerun()
    else:
        _progress(status, choices)
