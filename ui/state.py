"""Streamlit glue for the pages: settings, the process-wide runtime, this session's workspace, notices.

Nothing here knows demo from local: `rag_core.service.workspace` decides that. The pages call `workspace()` and show what it
says.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

import streamlit as st

from rag_core.adapters.runtime import OVERRIDABLE, client_address, load_embedder, runtime_key
from rag_core.core.config import Settings, load_settings
from rag_core.core.errors import DocChatError, SettingsError
from rag_core.service import render
from ui.navigation import page_run

if TYPE_CHECKING:  # imported lazily: loading them takes seconds, and the page paints first
    from rag_core.adapters.runtime import Embedder, Runtime
    from rag_core.service.workspace import ServerAnswers, Workspace

log = logging.getLogger(__name__)

# Session-state keys shared by the pages.
TURNS = "chat_turns"  # list[dict]: {"id", "role", "text", "answer": Answer | None, "error": str | None}
OVERRIDES = "settings_overrides"  # dict of Settings fields changed on the Settings page (this session only)
PREFS = "prefs"  # dict of UI choices: "use_llm", "scope_default"
UPLOAD_JOBS = "upload_jobs"  # list of ingest job ids submitted by this session
SESSION_KEY = "session_key"  # this browser session's id (the hosted demo keys its private library by it)
CHOICES_LOADED = "saved_choices_loaded"  # True once this session has taken the saved Settings-page choices
NOTICES = "page_notices"  # list of (kind, sentence) shown on the Library page until dismissed or replaced
SERVER_ANSWERS = "server_answers"  # (page run, ServerAnswers): what the model servers said during this visit

STARTUP_FAILED = ("DocChat could not open your document library. Restart DocChat; if this keeps happening, the "
                  "reason is in the window or log where DocChat runs.")

DEFAULT_PREFS: dict[str, Any] = {"use_llm": True, "scope_default": "all"}
PREPARE_WAIT_S = 300.0  # the longest a page waits for the demo's samples before it shows what is ready


def _secrets() -> dict | None:
    try:
        return dict(st.secrets) if st.secrets else None
    except FileNotFoundError:  # no secrets.toml: the normal local case
        return None
    except Exception as e:  # noqa: BLE001 - a malformed secrets.toml must not stop the app; env settings still apply
        log.warning("Ignoring unreadable Streamlit secrets: %s", type(e).__name__)
        return None


def base_settings() -> Settings:
    """Settings from the environment (and st.secrets), without this session's changes; an invalid value stops the
    page with one sentence naming the variable and the allowed range."""
    try:
        return load_settings(secrets=_secrets())
    except SettingsError as e:
        st.error(str(e), icon=":material/error:")
        st.stop()
        raise  # unreachable: st.stop() ends the run


def set_override(name: str, value: Any) -> None:
    """Change one setting for this session (None restores the default)."""
    if name not in OVERRIDABLE:
        raise KeyError(name)
    overrides = dict(st.session_state.get(OVERRIDES, {}))
    if value is None:
        overrides.pop(name, None)
    else:
        overrides[name] = value
    st.session_state[OVERRIDES] = overrides
    save_choices()


def prefs() -> dict[str, Any]:
    """This session's UI choices (answer with the LLM, default scope)."""
    return {**DEFAULT_PREFS, **st.session_state.get(PREFS, {})}


def set_pref(name: str, value: Any) -> None:
    """Remember one UI choice for this session."""
    st.session_state[PREFS] = {**st.session_state.get(PREFS, {}), name: value}
    save_choices()


def save_choices() -> None:
    """Save this session's Settings-page choices where the workspace keeps them (local: the data dir)."""
    choices = {**st.session_state.get(OVERRIDES, {}), **st.session_state.get(PREFS, {})}
    try:
        workspace().preferences().save(choices)
    except OSError as e:
        add_notice(f"Your settings could not be saved ({e.strerror or 'disk error'}); they apply until you close "
                   "this tab.")


def _restore_choices(ws: Workspace) -> bool:
    """Once per browser session: take the saved Settings-page choices (True when there were any)."""
    if st.session_state.get(CHOICES_LOADED):
        return False
    st.session_state[CHOICES_LOADED] = True
    saved = ws.preferences().load()
    if not saved:
        return False
    st.session_state[OVERRIDES] = {k: v for k, v in saved.items() if k in OVERRIDABLE}
    st.session_state[PREFS] = {k: v for k, v in saved.items() if k in DEFAULT_PREFS}
    return True


@st.cache_resource(show_spinner=False)
def _embedder(model_name: str) -> Embedder | None:
    """The embedding model, loading on a background thread: the page paints and lists the library meanwhile."""
    return load_embedder(model_name)


def _release(rt: Runtime) -> None:
    rt.close()


@st.cache_resource(show_spinner="Opening your document library… (the first time after an update, DocChat also "
                                "upgrades it to its new search engine: about a second per 1,000 passages)",
                   on_release=_release)
def _runtime(key: tuple, _settings: Settings) -> Runtime:
    from rag_core.adapters.runtime import Runtime, first_start_model

    # The model the library opens with loads at once (a new library: "Many languages" where it runs). The demo's
    # samples are added on a thread: the first visitor's page says so instead of waiting silently.
    model = first_start_model(_settings)
    return Runtime(_settings, embedder=_embedder(model), samples_in_background=True)


def runtime() -> Runtime:
    """The runtime shared by every session of this server process (library, ingest queue, demo hub), once what
    every visitor needs is ready (meanwhile the page says what is being prepared); a library that cannot be opened
    stops the page with its one sentence (e.g. another DocChat already has it open)."""
    settings = base_settings()
    try:
        rt = _runtime(runtime_key(settings), settings)
    except DocChatError as e:
        _stop_with(str(e), e.details)
    except Exception:  # logged with its traceback; the page says one sentence
        log.exception("Could not open the document library")
        _stop_with(STARTUP_FAILED)
    preparing = rt.preparing()
    if preparing:
        with st.spinner(preparing, show_time=True):
            rt.wait_prepared(PREPARE_WAIT_S)  # then the page goes on with what is ready
    return rt


def _stop_with(sentence: str, details: str = "") -> NoReturn:
    """End this page run with one sentence (and its technical part folded away under "Details")."""
    st.error(render.message_markdown(sentence), icon=":material/error:")
    if details:
        with st.expander("Details", icon=":material/build:"):
            st.caption(render.message_markdown(details))
    st.stop()


def reset_runtime() -> None:
    """Close the shared runtime and forget it; the next page run opens a new one with the current settings."""
    _runtime.clear()


def visitor_address(settings: Settings, context: Any = None) -> str | None:
    """This browser session's client address (its connection's, or X-Forwarded-For's last entry when the settings
    trust the proxy in front), for the per-address limits of the hosted demo; None on a local connection.
    `context`: st.context (default), or an object with the same `ip_address` and `headers.get_all`."""
    ctx = st.context if context is None else context
    remote = ctx.ip_address
    forwarded = ",".join(v for v in ctx.headers.get_all("X-Forwarded-For") if isinstance(v, str))
    return client_address(remote if isinstance(remote, str) else None, forwarded,
                          trust_proxy=settings.demo.trust_proxy)


def workspace() -> Workspace:
    """This browser session's workspace: what it may see, add, delete and ask."""
    rt = runtime()
    key = st.session_state.get(SESSION_KEY)
    if key is None:
        key = st.session_state[SESSION_KEY] = rt.new_session_key()
    base = base_settings()
    ws = rt.workspace(key, st.session_state.get(OVERRIDES, {}), base=base, client=visitor_address(base))
    if _restore_choices(ws):  # a new session (a reload, a restart): the choices saved last time apply
        ws = rt.workspace(key, st.session_state.get(OVERRIDES, {}), base=base, client=visitor_address(base))
    return ws


def server_answers() -> ServerAnswers:
    """What the model servers said during this visit of the page (the Settings page asks them once per visit, not on
    every rerun); a new visit (another page ran in between) starts afresh. Called once per run of the page."""
    from rag_core.service.workspace import ServerAnswers

    run = page_run()
    kept = st.session_state.get(SERVER_ANSWERS)
    answers = kept[1] if kept is not None and kept[0] in (run, run - 1) else ServerAnswers()
    st.session_state[SERVER_ANSWERS] = (run, answers)
    return answers


def forget_server_answers() -> None:
    """Ask the model servers again on the next run ("Check again")."""
    kept = st.session_state.get(SERVER_ANSWERS)
    if kept is not None:
        kept[1].forget()


def add_notice(text: str, kind: str = "warning") -> None:
    """Keep a sentence to show until it is dismissed or the person does something new (for messages raised in a
    callback or just before st.rerun, which a plain st.warning would not survive)."""
    st.session_state[NOTICES] = st.session_state.get(NOTICES, []) + [(kind, text)]


def notices() -> list[tuple[str, str]]:
    """The kept sentences, oldest first."""
    return list(st.session_state.get(NOTICES, []))


def clear_notices() -> None:
    """Forget the kept sentences (a new action starts, or the person dismissed them)."""
    st.session_state.pop(NOTICES, None)


def remember_job(job_id: str) -> None:
    """Keep a job id so the Library page follows its progress."""
    st.session_state[UPLOAD_JOBS] = st.session_state.get(UPLOAD_JOBS, []) + [job_id]
