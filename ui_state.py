"""Process-wide resources and per-session state for the Streamlit pages: settings, the library, the ingest queue.

Streamlit-specific glue only; everything else lives in rag_core.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import streamlit as st

from rag_core.config import Settings, load_settings

if TYPE_CHECKING:  # imported lazily: loading them takes seconds, and the page paints first
    from rag_core.embeddings import Embedder
    from rag_core.jobs import IngestQueue
    from rag_core.library import Library
    from rag_core.sessions import DemoHub, SessionLibrary

log = logging.getLogger(__name__)

# Session-state keys shared by the pages.
TURNS = "chat_turns"  # list[dict]: {"id", "role", "text", "answer": Answer | None, "error": str | None}
OVERRIDES = "settings_overrides"  # dict of Settings fields changed on the Settings page (this session only)
PREFS = "prefs"  # dict of UI choices: "use_llm", "scope_default"
UPLOAD_JOBS = "upload_jobs"  # list of IngestQueue job ids submitted by this session
DEMO_SESSION = "demo_session_id"  # this browser session's private library id (hosted demo only)
NOTICES = "page_notices"  # list of (kind, sentence) shown on the Library page until dismissed or replaced

DEFAULT_PREFS: dict[str, Any] = {"use_llm": True, "scope_default": "all"}
OVERRIDABLE = ("ollama_host", "ollama_model", "top_k")
SERVER_ONLY = ("ollama_host", "ollama_model")  # in the hosted demo only the server decides these


def _secrets() -> dict | None:
    try:
        return dict(st.secrets) if st.secrets else None
    except FileNotFoundError:  # no secrets.toml: the normal local case
        return None
    except Exception as e:  # noqa: BLE001 - a malformed secrets.toml must not stop the app; env settings still apply
        log.warning("Ignoring unreadable Streamlit secrets: %s", type(e).__name__)
        return None


def base_settings() -> Settings:
    """Settings from the environment (and st.secrets when present), without this session's changes."""
    return load_settings(secrets=_secrets())


def get_settings() -> Settings:
    """Settings for this session: the base settings plus what the person changed on the Settings page.

    In the hosted demo a visitor's Ollama host and model are ignored: the server must never call a host a visitor
    chose."""
    base = base_settings()
    allowed = [k for k in OVERRIDABLE if not (is_demo(base) and k in SERVER_ONLY)]
    overrides = {k: v for k, v in st.session_state.get(OVERRIDES, {}).items() if k in allowed}
    return base.with_overrides(**overrides)


def is_demo(settings: Settings | None = None) -> bool:
    """True when this server runs as the hosted demo (DOCCHAT_MODE=demo)."""
    return (settings or base_settings()).mode == "demo"


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


def prefs() -> dict[str, Any]:
    """This session's UI choices (answer with the LLM, default scope)."""
    return {**DEFAULT_PREFS, **st.session_state.get(PREFS, {})}


def set_pref(name: str, value: Any) -> None:
    """Remember one UI choice for this session."""
    st.session_state[PREFS] = {**st.session_state.get(PREFS, {}), name: value}


@st.cache_resource(show_spinner="Loading the language understanding model…")
def _embedder(model_name: str) -> "Embedder":
    from rag_core.embeddings import Embedder

    return Embedder(model_name)


def _store_key(settings: Settings) -> tuple:
    """What identifies a library: where it is stored and how it is embedded (not the LLM or UI settings)."""
    return (str(settings.data_dir.resolve()), settings.qdrant_url, settings.collection, settings.embedding_model)


@st.cache_resource(show_spinner="Opening your document library…")
def _library(key: tuple, _settings: Settings) -> "Library":
    from rag_core.library import Library

    return Library(_settings, embedder=_embedder(_settings.embedding_model))


@st.cache_resource(show_spinner=False)
def _queue(key: tuple, _settings: Settings) -> "IngestQueue":
    from rag_core.jobs import IngestQueue

    return IngestQueue(_library(key, _settings))


def get_library() -> "Library":
    """The shared Library for this server process (one per storage location, whatever the session changes)."""
    settings = base_settings()
    return _library(_store_key(settings), settings)


def get_queue() -> "IngestQueue":
    """The process-wide background ingest queue bound to the library."""
    settings = base_settings()
    return _queue(_store_key(settings), settings)


@st.cache_resource(show_spinner="Preparing the demo and its sample documents…")
def _hub(key: tuple, _settings: Settings) -> "DemoHub":
    from rag_core.sessions import DemoHub

    hub = DemoHub(_library(key, _settings), _settings)
    hub.load_samples()
    hub.start_janitor()
    return hub


def get_hub() -> "DemoHub | None":
    """The process-wide demo hub (sessions, limits, samples, idle cleanup); None outside the hosted demo."""
    settings = base_settings()
    if not is_demo(settings):
        return None
    return _hub(_store_key(settings), settings)


def session_library() -> "SessionLibrary | None":
    """This browser session's private library in the hosted demo (its own documents + the shared samples);
    None in local mode. The session id lives in st.session_state, so each browser tab gets its own."""
    hub = get_hub()
    if hub is None:
        return None
    from rag_core.sessions import new_session_id

    sid = st.session_state.setdefault(DEMO_SESSION, new_session_id())
    return hub.session(sid)


def owner() -> str | None:
    """Who new documents belong to: None in local mode (one shared library), the session id in the demo."""
    sl = session_library()
    return None if sl is None else sl.session_id


def visible_owners() -> list[str | None] | None:
    """Whose documents this session may see and search: None (everything) in local mode; in the demo its own
    and the shared samples."""
    sl = session_library()
    return None if sl is None else list(sl.owners)


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


# -- entry through app.py ------------------------------------------------------------
# Streamlit treats a folder named pages/ next to the entry script as an old-style (v1) multipage app until
# the first st.navigation call in the process. If the very first visitor opens e.g. /library, that page script
# runs on its own, without app.py (no page config, old-style navigation). Each page checks that app.py ran
# first in this run and otherwise switches Streamlit to st.navigation mode and reruns through app.py.
_entry = threading.local()


def mark_app_entry() -> None:
    """Called by app.py at the start of every run."""
    _entry.via_app = True


def require_app_entry() -> None:
    """Called at the top of each page script: rerun through app.py if the page was started on its own.

    Only a session's first run is redirected (it has no widget events to lose); later runs never start
    without app.py in a real server, since Streamlit leaves pages/ folder mode for good after one rerun.
    """
    if getattr(_entry, "via_app", False):
        _entry.via_app = False
        st.session_state["_entered_via_app"] = True
        return
    if st.session_state.get("_entered_via_app"):
        return
    from streamlit.runtime.pages_manager import PagesManager

    log.info("A page was started without app.py (Streamlit's pages/ folder mode); rerunning through app.py")
    PagesManager.uses_pages_directory = False
    st.rerun()
