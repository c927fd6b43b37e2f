"""Chat page: ask questions about your documents; each reply streams in, with its sources beside it."""
from __future__ import annotations

import uuid

import streamlit as st

from rag_core import render
from rag_core.errors import DocChatError, LimitReached
from rag_core.workspace import Workspace
from ui import state
from ui.navigation import require_app_entry
from ui.sources import escaped_stream, show_assistant_turn, show_message, show_reply, show_sources

HISTORY_TURNS = 12  # most recent messages handed to rag_core (it trims further to its token budget)
SCOPE_ALL, SCOPE_PICK = "all", "pick"
INTERRUPTED = "The answer was stopped before it finished."

require_app_entry()
st.title("Chat with your documents")  # painted before the slow parts below (model and library load)
prefs = state.prefs()
turns: list[dict] = st.session_state.setdefault(state.TURNS, [])
ws = state.workspace()  # this browser session's view: which documents it may read, its limits


@st.cache_data(ttl=20, show_spinner=False)
def _model_line(_ws: Workspace, settings_key: tuple, use_llm: bool) -> tuple[str, str] | None:
    """Who writes the answers, in one calm sentence; cached for 20 s per Ollama address, key and model."""
    return _ws.model_line(use_llm)


def _busy_banner() -> bool:
    """Say that files are still being added (and poll until they are); True while busy."""
    active = ws.active_jobs()
    if not active:
        return False
    names = ", ".join(f"“{j.label}”" for j in active[:3]) + (f" and {len(active) - 3} more" if len(active) > 3 else "")
    show_message(f"Adding {names} to your library. You can ask questions as soon as this is finished.", "info")
    st.progress(sum(j.fraction for j in active) / len(active))
    return True


@st.fragment(run_every=1.0)
def _wait_for_ingest() -> None:
    """While files are being added, check every second; rerun the page once they are done."""
    if not _busy_banner():
        st.rerun()


def _welcome() -> None:
    st.markdown("### Welcome to DocChat")
    st.markdown("Ask questions in plain language and get answers taken from **your own documents**, "
                "with the exact passages shown beside each reply.")
    with st.container(border=True):
        st.markdown("**Your library is empty.** To get started:")
        st.markdown("1. Open the **Library** page and drop in PDF, Word, text or Markdown files "
                    "(or import an article from Wikipedia).\n"
                    "2. Come back here and ask a question.")
        st.page_link("pages/library.py", label="Go to the Library", icon=":material/library_books:")


def _scope(docs) -> tuple[list[str] | None, bool]:
    """Sidebar scope control: (doc_ids or None for all, ready-to-ask)."""
    titles = {d.doc_id: d.title or d.file_name for d in docs}
    with st.sidebar:
        st.markdown("**Answer from**")
        mode = st.radio("Answer from", [SCOPE_ALL, SCOPE_PICK], key="scope_mode", persist_state="session",
                        index=0 if prefs["scope_default"] == SCOPE_ALL else 1, label_visibility="collapsed",
                        format_func={SCOPE_ALL: "All documents", SCOPE_PICK: "Only the documents I pick"}.get)
        if mode == SCOPE_ALL:
            return None, True
        chosen = st.multiselect("Documents", list(titles), key="scope_docs", persist_state="session",
                                format_func=lambda d: titles.get(d, "(deleted)"), placeholder="Pick documents")
        chosen = [d for d in chosen if d in titles]
        return chosen, bool(chosen)


def _history() -> list[tuple[str, str]]:
    out = [(t["role"], t["text"]) for t in turns if t.get("text") and not t.get("error") and not t.get("pending")]
    return out[-HISTORY_TURNS:]


def _replay() -> None:
    for turn in turns:
        with st.chat_message(turn["role"]):
            if turn["role"] == "user":
                st.markdown(render.escape_markdown(turn["text"], keep_newlines=True))
            elif turn.get("pending"):  # still being written by an interrupted run
                st.markdown(render.reply_markdown(turn["text"]))
                show_message(INTERRUPTED, "warning")
            else:
                show_assistant_turn(turn.get("answer"), turn.get("error"), turn["id"], ws,
                                    turn.get("error_kind", "error"))


def _ask(question: str, doc_ids: list[str] | None) -> None:
    history = _history()
    # Both turns go into the history first: a new question may start the next run while this one is still
    # streaming (Streamlit then abandons this run), and that run must already see this reply, as far as it got.
    turn = {"id": uuid.uuid4().hex[:12], "role": "assistant", "text": "", "answer": None, "error": None,
            "pending": True}
    turns.extend([{"id": uuid.uuid4().hex[:12], "role": "user", "text": question}, turn])
    with st.chat_message("user"):
        st.markdown(render.escape_markdown(question, keep_newlines=True))
    stream = None
    try:
        with st.chat_message("assistant"):
            left, right = st.columns([1, 1], gap="large")
            with left:
                reply = st.empty()
                try:
                    with st.spinner("Looking through your documents…" if ws.search_ready()
                                    else "Getting the language understanding model ready (first question only)…"):
                        stream = ws.ask(question, history=history, doc_ids=doc_ids, use_llm=prefs["use_llm"])
                    with reply.container():
                        st.write_stream(escaped_stream(_recording(stream, turn)))
                except LimitReached as e:  # a demo limit: a calm warning that says what to do
                    turn["error"], turn["error_kind"] = str(e), "warning"
                except DocChatError as e:
                    turn["error"] = str(e)
                answer = _keep(turn, stream)
                with reply.container():
                    if answer is None:
                        show_message(turn["error"], turn.get("error_kind", "error"))
                    else:
                        show_reply(answer)
            if answer is not None:
                with right:
                    show_sources(answer, turn["id"], ws)
    finally:
        if turn["pending"]:  # interrupted: keep what was answered so far
            if stream is not None and stream.answer is None:
                stream.close()  # ends the HTTP stream; the answer so far is kept, marked incomplete
            _keep(turn, stream)


def _recording(stream, turn: dict):
    """Pass the reply's pieces through, keeping the text so far in the turn."""
    for delta in stream:
        turn["text"] += delta
        yield delta


def _keep(turn: dict, stream) -> object:
    """Store the stream's answer (exactly as rag_core verified it) or an error sentence in the turn."""
    turn["pending"] = False
    answer = getattr(stream, "answer", None)
    if answer is None:
        turn["error"] = turn["error"] or "Something went wrong while answering. Please ask again."
        return None
    turn["answer"], turn["text"] = answer, answer.text
    return answer


# -- the page ---------------------------------------------------------------------
docs = ws.documents()
busy = bool(ws.active_jobs())

if ws.banner:
    show_message(ws.banner, "info")  # privacy, retention, and who writes the answers
if busy:
    _wait_for_ingest()
elif ws.hint and not turns:
    st.caption(":material/lightbulb: " + render.message_markdown(ws.hint))
elif docs:
    cfg = ws.settings
    line = _model_line(ws, (cfg.ollama_host, cfg.ollama_model, cfg.ollama_api_key, ws.model_choice), prefs["use_llm"])
    if line is not None:
        kind, text = line
        st.caption((":material/check_circle: " if kind == "ok" else ":material/info: ")
                   + render.message_markdown(text))

if not docs and not turns:
    if not busy:
        _welcome()
    st.chat_input("Add documents on the Library page first", disabled=True)
    st.stop()

doc_ids, ready = _scope(docs)
with st.sidebar:
    if turns and st.button("New conversation", icon=":material/add_comment:"):
        turns.clear()
        st.rerun()

_replay()

if busy:
    placeholder = "Please wait until your files have been added…"
elif not ready:
    placeholder = "Pick at least one document in the sidebar, then ask"
else:
    placeholder = "Ask a question about your documents"
question = st.chat_input(placeholder, disabled=busy or not ready, max_chars=2000)
if question and question.strip() and not busy and ready:
    _ask(question.strip(), doc_ids)
