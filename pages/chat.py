"""Chat page: ask questions about your documents; each reply shows what it is doing, streams in with its sources
beside it, can be stopped, and the conversation is kept (sidebar: past conversations, rename, delete, export)."""
from __future__ import annotations

import re
import uuid

import streamlit as st

from rag_core.core.errors import ConversationUnreadable, DocChatError, LimitReached
from rag_core.core.formats import accepted_kinds
from rag_core.core.models import ChatTurn, Role, Step
from rag_core.service import render
from rag_core.service.workspace import Conversation, LiveAnswer, Workspace
from ui import state
from ui.conversation_list import remember_deleted, show_past_conversations, show_undo
from ui.navigation import require_app_entry
from ui.safe import guarded
from ui.sources import (
    DRAFT_STOPPED_NOTE,
    TURN_FAILED,
    show_assistant_turn,
    show_draft,
    show_found_passages,
    show_message,
    show_reply,
    show_sources,
    show_unchecked,
)
from ui.summarize import scope_buttons as summarize_buttons

HISTORY_TURNS = 12  # most recent messages handed to rag_core (it trims further to its token budget)
SCOPE_ALL, SCOPE_PICK = "all", "pick"
STOPPED = "The answer was stopped before it finished."  # the same words as a stopped answer's notice
LIVE = "chat_live_answer"  # session key: the reply being written (so Stop can reach it)
CONV = "chat_conversation"  # session key: the open Conversation
POLL_S = 0.25  # how often a reply in progress is redrawn (and a Stop click is noticed)
SETTLE_S = 1.5  # how long a stopped reply may take to be checked before the page goes on (then it follows it)

require_app_entry()
st.title("Chat with your documents")  # painted before the slow parts below (model and library load)
ws = state.workspace()  # this browser session's view: which documents it may read, its limits
prefs = state.prefs()  # after workspace(): a new session takes the saved choices there
store = ws.conversations


def _open(conv: Conversation) -> None:
    st.session_state[CONV] = conv
    st.session_state[state.TURNS] = conv.turns
    st.query_params["c"] = conv.id


def _current() -> Conversation:
    """The open conversation: this session's, else the one in the address (a reload keeps it), else a new one."""
    conv = st.session_state.get(CONV)
    if conv is None and st.session_state.get(state.TURNS):  # turns this session already holds
        conv = Conversation(turns=st.session_state[state.TURNS])
        _open(conv)
    if conv is None:
        wanted = st.query_params.get("c") or ""
        valid = bool(re.fullmatch(r"[0-9a-f]{16}", wanted))
        try:
            conv = store.open(wanted) if valid else None
        except ConversationUnreadable as e:  # its file is damaged: say so, and leave it as it is (a new id)
            state.add_notice(str(e))
            conv, valid = None, False
        if conv is None and valid:
            conv = Conversation(id=wanted)  # a new, still empty conversation survives a reload as empty
        if conv is None:
            conv = Conversation()  # a fresh visit starts a new conversation; past ones are in the sidebar
        _open(conv)
    return conv


def _save(conv: Conversation) -> None:
    """Keep the conversation as it is now (a full disk is said once, never a traceback)."""
    trouble = ws.save_conversation(conv)
    if trouble:
        state.add_notice(trouble)


conv = _current()
conv.turns = turns = st.session_state.setdefault(state.TURNS, conv.turns)  # the session's list is the one shown


@st.cache_data(ttl=20, show_spinner=False)
def _model_line(_ws: Workspace, settings_key: tuple, use_llm: bool) -> tuple[str, str] | None:
    """Who writes the answers, in one calm sentence; cached for 20 s per model server, key and model."""
    return _ws.model_line(use_llm)


def _adding_note() -> bool:
    """One line naming the files still being added (answers use what is already in the library); True while any."""
    active = ws.active_jobs()
    if not active:
        return False
    names = ", ".join(f"“{j.label}”" for j in active[:3]) + (f" and {len(active) - 3} more" if len(active) > 3 else "")
    st.caption(":material/hourglass_top: " + render.message_markdown(
        f"Still adding {names}; answers use the documents already in your library."))
    return True


@st.fragment(run_every=1.0)
def _follow_ingest() -> None:
    """While files are being added, check every second; refresh the page once they are done (never mid-reply)."""
    if not _adding_note():
        live = st.session_state.get(LIVE)
        if live is None or live.finished:
            st.rerun()


def _welcome() -> None:
    st.markdown("### Welcome to DocChat")
    st.markdown("Ask questions in plain language and get answers taken from **your own documents**, "
                "with the exact passages shown beside each reply.")
    with st.container(border=True):
        st.markdown("**Your library is empty.** To get started:")
        st.markdown(f"1. Open the **Library** page and drop in {accepted_kinds()} files "
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
            summarize_buttons(docs if len(docs) == 1 else [])  # the only document: it can be summarized at once
            return None, True
        chosen = st.multiselect("Documents", list(titles), key="scope_docs", persist_state="session",
                                format_func=lambda d: titles.get(d, "(deleted)"), placeholder="Pick documents")
        chosen = [d for d in chosen if d in titles]
        summarize_buttons([d for d in docs if d.doc_id in chosen])  # each scoped document: "Summarize “title”"
        return chosen, bool(chosen)


# -- the sidebar's conversations ---------------------------------------------------------------------------------
def _new_conversation() -> None:
    _stop_live()
    _open(Conversation())


def _switch(conv_id: str) -> None:
    _stop_live()
    try:
        loaded = store.open(conv_id)
    except ConversationUnreadable as e:
        state.add_notice(str(e))
        return
    if loaded is None:
        state.add_notice("That conversation could not be opened; it may have been deleted.")
        return
    _open(loaded)


def _rename() -> None:
    title = st.session_state.get("conv_title", "").strip()
    if title:
        store.rename(conv.id, title)
        conv.title, conv.titled_by_user = " ".join(title.split())[:80], True


def _delete_current() -> None:
    _stop_live()
    store.delete(conv.id)
    remember_deleted(conv)  # for this session: the sidebar's Undo writes it back as it was
    _open(Conversation())


def _conversations_sidebar() -> None:
    with st.sidebar:
        st.button("New conversation", icon=":material/add_comment:", on_click=_new_conversation,
                  disabled=not turns, width="stretch")
        show_undo(store, lambda restored: (_stop_live(), _open(restored)))
        if turns:
            with guarded("this conversation's menu"), st.popover("This conversation", icon=":material/more_horiz:",
                                                                  width="stretch"):
                st.text_input("Name", value=conv.title, key="conv_title", on_change=_rename, max_chars=80)
                markdown, file_name = ws.export_conversation(conv)
                st.download_button("Export as Markdown", data=markdown, file_name=file_name,
                                   mime="text/markdown", icon=":material/download:", on_click="ignore")
                st.button("Delete this conversation", icon=":material/delete:", on_click=_delete_current,
                          type="secondary")
        with guarded("the list of past conversations"):
            show_past_conversations(store.listing(), conv.id, _switch)  # a bounded read: the newest files' heads


# -- asking ----------------------------------------------------------------------------------------------------
def _history() -> list[ChatTurn]:
    out = [t for t in turns if t.get("text") and not t.get("error") and not t.get("pending")][-HISTORY_TURNS:]
    return [ChatTurn(t["role"], t["text"]) for t in out if t["role"] in tuple(Role)]


def _replay() -> None:
    """Redraw the conversation; a turn that fails to draw is one sentence (each run), and the page goes on."""
    for i, turn in enumerate(turns):
        role = turn.get("role") if turn.get("role") in ("user", "assistant") else "assistant"
        with st.chat_message(role), guarded(f"turn {i} of the conversation", TURN_FAILED):
            if turn.get("pending"):  # its run was abandoned (Stop, a new question): settle it here
                _settle(turn)
            if role == "user":
                st.markdown(render.escape_markdown(turn["text"], keep_newlines=True))
            elif turn.get("answer") is None and turn.get("text"):  # stopped before its answer was checked
                _unchecked(turn, turn.get("id") or f"turn{i}")
            else:
                show_assistant_turn(turn.get("answer"), turn.get("error"), turn.get("id") or f"turn{i}", ws,
                                    turn.get("error_kind", "error"))


def _unchecked(turn: dict, key: str) -> None:
    """A stopped reply whose check had not ended when its run did: its checked answer once it is there; its draft,
    visibly one, while the check goes on; once the check is gone (a reload), one sentence and the draft in Details."""
    live = turn.get("live")
    if live is not None and live.finished and _keep(turn, live) is not None:
        _save(conv)
        show_assistant_turn(turn["answer"], None, key, ws)
    elif live is not None and not live.finished:
        show_draft(render.escape_stream(turn["text"]), DRAFT_STOPPED_NOTE)
        _follow_check(live)
    else:
        show_unchecked(turn["text"])


@st.fragment(run_every=2 * POLL_S)
def _follow_check(live: LiveAnswer) -> None:
    """While a stopped reply is still being checked, look twice a second; redraw the page once it is done."""
    if live.finished:
        st.rerun()


def _stop_live() -> None:
    live = st.session_state.get(LIVE)
    if live is not None and not live.finished:
        live.stop()


def _stage_line(live: LiveAnswer) -> str:
    stage = live.stage()
    if stage.name == Step.SEARCHING and not ws.search_ready():
        return "Getting the language understanding model ready (first question only)…"
    return stage.line()


def _ask(question: str, doc_ids: list[str] | None) -> None:
    history = _history()
    # Both turns go into the conversation first: a new question may start the next run while this one is still
    # streaming (Streamlit then abandons this run), and that run must already see this reply, as far as it got.
    turn: dict = {"id": uuid.uuid4().hex[:12], "role": "assistant", "text": "", "answer": None, "error": None,
                  "pending": True}
    turns.extend([{"id": uuid.uuid4().hex[:12], "role": "user", "text": question}, turn])
    _save(conv)
    with st.chat_message("user"):
        st.markdown(render.escape_markdown(question, keep_newlines=True))
    live: LiveAnswer | None = None
    try:
        with st.chat_message("assistant"):
            left, right = st.columns([1, 1], gap="large")
            with left:
                status, reply, stop_slot = st.empty(), st.empty(), st.empty()
            with right:
                sources = st.empty()
            status.caption(":material/search: Searching your documents…")
            try:
                live = st.session_state[LIVE] = turn["live"] = ws.ask(question, history=history, doc_ids=doc_ids,
                                                                      use_llm=prefs["use_llm"])
            except LimitReached as e:  # a demo limit: a calm warning that says what to do
                turn["error"], turn["error_kind"] = str(e), "warning"
            except DocChatError as e:
                turn["error"] = str(e)
            if live is not None:
                stop_slot.button("Stop", icon=":material/stop_circle:", key=f"stop_{turn['id']}", on_click=_stop_live)
                escaper, shown, found = render.StreamEscaper(), 0, False
                escaped = ""
                while live.poll(POLL_S):
                    status.caption(":material/progress_activity: " + render.message_markdown(_stage_line(live)))
                    if len(live.text) > shown:
                        escaped += escaper.feed(live.text[shown:])
                        shown = len(live.text)
                        with reply.container():
                            show_draft(escaped)  # greyed until checked: the checked answer replaces it
                        turn["text"] = live.text
                    if not found and live.passages:
                        found = True
                        with sources.container():
                            show_found_passages(live.passages)
                live.wait(1.0)
                turn["text"] = live.text
            status.empty()
            stop_slot.empty()
            answer = _keep(turn, live)
            with reply.container(), guarded("a new reply", TURN_FAILED):
                if answer is None:
                    show_message(turn["error"], turn.get("error_kind", "error"))
                else:
                    show_reply(answer)
            if answer is not None:
                with sources.container(), guarded("the sources of a new reply"):
                    show_sources(answer, turn["id"], ws)
    finally:
        if turn["pending"]:  # interrupted (Stop, a new question, leaving the page): keep what was answered so far
            _settle(turn)
        _save(conv)


def _settle(turn: dict) -> None:
    """Finish a reply whose run was interrupted: stop it, keep the text so far (and the checked partial answer when
    it is ready within SETTLE_S; else the page follows the check, see _unchecked), marked stopped. Streamlit may already be running the next run
    while the interrupted one unwinds, so whichever gets here first does it (the steps are idempotent)."""
    live = turn.get("live")
    if live is not None:
        live.stop()
        live.wait(SETTLE_S)
        turn["text"] = live.text
    turn["stopped"] = True
    _keep(turn, live)
    _save(conv)


def _keep(turn: dict, live: LiveAnswer | None) -> object:
    """Store the answer (exactly as rag_core checked it), the text so far, or an error sentence in the turn."""
    turn["pending"] = False
    answer = live.answer if live is not None else None
    if answer is None:
        if not turn.get("text"):
            if turn.get("stopped") and not turn["error"]:
                turn["error"], turn["error_kind"] = STOPPED, "warning"
            turn["error"] = turn["error"] or "Something went wrong while answering. Please ask again."
        return None
    turn["answer"], turn["text"] = answer, answer.text
    return answer


# -- the page ---------------------------------------------------------------------
docs = ws.documents()
adding = bool(ws.active_jobs())

for kind, text in state.notices():
    show_message(text, kind)
state.clear_notices()
if ws.banner:
    show_message(ws.banner, "info")  # privacy, retention, and who writes the answers
if adding:
    _follow_ingest()
if ws.hint and not turns:
    st.caption(":material/lightbulb: " + render.message_markdown(ws.hint))
    for i, suggestion in enumerate(ws.suggestions):
        if st.button(suggestion, key=f"suggestion-{i}", icon=":material/help:"):
            st.session_state["suggested_question"] = suggestion
elif docs:
    with guarded("the model status line"):
        cfg = ws.settings
        line = _model_line(ws, (cfg.chat_provider, cfg.chat_host, cfg.chat_model_name, cfg.llm.ollama_api_key,
                                cfg.llm.openai_api_key, ws.model_choice), prefs["use_llm"])
        if line is not None:
            kind, text = line
            st.caption((":material/check_circle: " if kind == "ok" else ":material/info: ")
                       + render.message_markdown(text))

_conversations_sidebar()
if not docs and not turns:
    if not adding:
        _welcome()
    st.chat_input("Add documents on the Library page first", disabled=True)
    st.stop()

doc_ids, ready = _scope(docs)
_replay()

if not ready:
    placeholder = "Pick at least one document in the sidebar, then ask"
else:
    placeholder = "Ask a question about your documents"
question = st.chat_input(placeholder, disabled=not ready, max_chars=2000)
question = question or st.session_state.pop("suggested_question", None)
if question and question.strip() and ready:
    _ask(question.strip(), doc_ids)
    st.rerun()  # redraw the sidebar (this conversation's menu, the list) now that the conversation has a question
