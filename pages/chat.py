"""Chat page: ask questions about your documents; each reply streams in, with its sources beside it."""
from __future__ import annotations

import uuid

import streamlit as st

import ui_state
from rag_core import render
from rag_core.errors import DocChatError, LimitReached
from ui_sources import escaped_stream, show_assistant_turn, show_message, show_reply, show_sources

HISTORY_TURNS = 12  # most recent messages handed to rag_core (it trims further to its token budget)
SCOPE_ALL, SCOPE_PICK = "all", "pick"
INTERRUPTED = "The answer was stopped before it finished."

ui_state.require_app_entry()
st.title("Chat with your documents")  # painted before the slow parts below (model and library load)
settings = ui_state.get_settings()
prefs = ui_state.prefs()
turns: list[dict] = st.session_state.setdefault(ui_state.TURNS, [])
library = ui_state.get_library()
queue = ui_state.get_queue()
session = ui_state.session_library()  # hosted demo: this tab's private library + the shared samples; else None
owners = ui_state.visible_owners()
me = ui_state.owner()


@st.cache_data(ttl=20, show_spinner=False)
def _llm_line(host: str, model: str, use_llm: bool) -> tuple[str, str]:
    """One calm sentence about who writes the answers, and its kind ("ok" / "warn")."""
    from rag_core.llm import ollama_status

    if not use_llm:
        return "ok", "Answers quote your documents directly (the language model is switched off in Settings)."
    status = ollama_status(settings)
    if not status.reachable:
        return "warn", ("The language model (Ollama) is not running, so answers quote your documents directly. "
                        "See Settings to set it up.")
    if not status.has_model(model):
        return "warn", (f"The model “{model}” is not installed in Ollama yet, so answers quote your documents "
                        "directly. You can download it in Settings.")
    return "ok", f"Answers are written by {model} from your documents, with sources beside each reply."


def _busy_banner() -> bool:
    """Say that files are still being added (and poll until they are); True while busy."""
    active = queue.active(me)
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
                show_assistant_turn(turn.get("answer"), turn.get("error"), turn["id"], settings, session,
                                    turn.get("error_kind", "error"))


def _ask(question: str, doc_ids: list[str] | None) -> None:
    from rag_core.generation import start_answer

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
                    with st.spinner("Looking through your documents…"):
                        if session is not None:  # the demo: the server's settings, own + shared documents only
                            stream = session.start_answer(question, history=history, doc_ids=doc_ids,
                                                          k=settings.top_k, use_llm=prefs["use_llm"])
                        else:
                            stream = start_answer(library, question, settings, history=history, doc_ids=doc_ids,
                                                  owners=owners, use_llm=prefs["use_llm"], k=settings.top_k)
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
                    show_sources(answer, turn["id"], settings, session)
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
    """Store the stream's answer (tidied, cited sentences located) or an error sentence in the turn."""
    turn["pending"] = False
    answer = getattr(stream, "answer", None)
    if answer is None:
        turn["error"] = turn["error"] or "Something went wrong while answering. Please ask again."
        return None
    answer = render.with_evidence(_tidy(answer))
    turn["answer"], turn["text"] = answer, answer.text
    return answer


def _tidy(answer):
    """Drop the extractive label line: the page shows its own badge for quoted answers."""
    from dataclasses import replace

    from rag_core.generation import EXTRACTIVE_LABEL

    if answer.mode == "extractive" and answer.text.startswith(EXTRACTIVE_LABEL):
        return replace(answer, text=answer.text[len(EXTRACTIVE_LABEL):].lstrip())
    return answer


# -- the page ---------------------------------------------------------------------
docs = session.documents() if session is not None else library.documents(owners)
busy = queue.busy(me)

if session is not None:
    from rag_core.sessions import demo_banner

    show_message(demo_banner(session.settings), "info")  # privacy, retention, and who writes the answers
if busy:
    _wait_for_ingest()
elif session is not None:
    if not turns:
        st.caption(":material/lightbulb: Everyone can try the shared sample documents, for example: "
                   "“What does the Zen of Python say about errors?” Add your own files on the Library page.")
elif docs:
    kind, line = _llm_line(settings.ollama_host, settings.ollama_model, prefs["use_llm"])
    st.caption((":material/check_circle: " if kind == "ok" else ":material/info: ") + render.message_markdown(line))

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
