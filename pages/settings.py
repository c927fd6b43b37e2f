"""Settings page: the language model (Ollama) and how answers are found. Changes last for this browser session."""
from __future__ import annotations

import streamlit as st

from rag_core.core.errors import DocChatError
from rag_core.service import render
from rag_core.service.workspace import OllamaStatus
from ui import state as ui_state
from ui.navigation import require_app_entry
from ui.safe import guarded, show_message
from ui.sources import show_details

require_app_entry()
st.title("Settings")
ws = ui_state.workspace()
settings = ws.settings
base = ui_state.base_settings()
prefs = ui_state.prefs()

st.caption(f"Changes here last {ws.settings_lifetime}.")


def _set_host() -> None:
    value = (st.session_state.get("set_host") or "").strip()
    ui_state.set_override("ollama_host", value if value and value != base.ollama_host else None)


def _set_model() -> None:
    value = st.session_state.get("set_model")
    ui_state.set_override("ollama_model", value if value and value != base.ollama_model else None)


def _set_use_llm() -> None:
    ui_state.set_pref("use_llm", bool(st.session_state.get("set_use_llm")))


def _use_llm_toggle(label: str) -> None:
    st.toggle(label, value=prefs["use_llm"], key="set_use_llm", on_change=_set_use_llm)


def _fixed_model_section() -> None:
    """The model is set up by whoever runs this server; a visitor only sees which mode is active."""
    st.subheader("Answers")
    if ws.banner:
        show_message(ws.banner, "info")
    if ws.model_toggle():
        _use_llm_toggle("Write answers with the AI model (off: quote the documents directly)")
    st.caption("The language model here is set up by whoever runs it. To use your own model and keep your files "
               "on your own computer, install DocChat locally.")


def _local_model_section() -> None:
    """Ollama: address, reachability, model choice and download."""
    st.subheader("Language model (Ollama)")
    st.markdown("DocChat can use a language model running in **Ollama** to write answers. Without it, DocChat "
                "still works: it answers by quoting the most relevant sentences from your documents.")
    _use_llm_toggle("Write answers with the language model when it is available")
    st.text_input("Ollama address", value=settings.ollama_host, key="set_host", on_change=_set_host,
                  help="Where Ollama runs. The usual address on your own computer is http://localhost:11434.")

    with st.spinner("Checking Ollama…"):
        status = ws.model_status(settings)
    if not status.reachable:
        _how_to_start(status)
        if st.button("Check again", icon=":material/refresh:"):
            st.rerun()
        return

    head = st.container()  # the status line and the model choice: drawn after a download, so they include it
    if st.button("Check again", icon=":material/refresh:"):
        st.rerun()
    with st.form("pull", border=True):
        st.markdown("**Download a model**")
        name = st.text_input("Model name", value=settings.ollama_model, key="pull_name",
                             help="A name from ollama.com/library, for example llama3.2:3b or qwen2.5:1.5b.")
        pull = st.form_submit_button("Download", icon=":material/download:")
    current = settings
    if pull and name.strip() and _pull(name.strip()):
        current = ui_state.workspace().settings  # the downloaded model is now the chosen one
        status = ws.model_status(current)
    with head:
        _model_choice(status, current.ollama_model)


def _how_to_start(status: OllamaStatus) -> None:
    """Ollama is not running (or refuses): what to do, in plain steps; commands and addresses under "Details"."""
    show_message(status.error or "The language model (Ollama) is not running.", "warning")
    with st.container(border=True):
        st.markdown("**How to turn on written answers**")
        st.markdown("1. Install Ollama from ollama.com and open it.\n"
                    "2. Come back here and press **Check again**.\n"
                    f"3. Download a model with the **Download** button that then appears (for example "
                    f"{render.escape_markdown(base.ollama_model)}).")
        st.caption("Until then, DocChat answers by quoting your documents.")
    show_details(" ".join(filter(None, [status.details, "To download a model from a terminal: "
                                        f"`ollama pull {base.ollama_model}`."])))


def _model_choice(status: OllamaStatus, model: str) -> None:
    """How many models Ollama has, and which one writes the answers."""
    count = len(status.models)
    st.success(f"Ollama is running, with {count} model{'' if count == 1 else 's'} installed.",
               icon=":material/check_circle:")
    chosen = status.installed_name(model) or model
    models = list(status.models) + ([] if chosen in status.models else [chosen])
    if st.session_state.get("set_model") != chosen:  # first visit, just downloaded, or restored: show the choice
        st.session_state["set_model"] = chosen  # (set through the state, so the browser's selector follows too)
    st.selectbox("Model", models, key="set_model", on_change=_set_model,
                 format_func=lambda m: m if m in status.models else f"{m} (not installed yet)")
    if chosen not in status.models:
        show_message(f"The model “{model}” is not installed yet. Download it below, or pick an installed model.",
                     "info")


def _pull(name: str) -> bool:
    """Download `name` with one progress bar for the whole download; True when it is installed (and chosen)."""
    bar = st.progress(0.0, text=f"Starting the download of “{render.escape_markdown(name)}”…")
    try:
        for part in ws.pull_model(name, settings):
            bar.progress(part.overall, text=render.escape_markdown(part.label))
    except DocChatError as e:
        bar.empty()
        show_message(str(e), "error")
        if e.details:
            show_details(e.details)
        return False
    st.success(f"“{render.escape_markdown(name)}” is ready and now writes the answers.",
               icon=":material/check_circle:")
    ui_state.set_override("ollama_model", None if name == base.ollama_model else name)
    st.session_state.pop("set_model", None)  # the model choice below then shows the new model
    return True


# -- language model ----------------------------------------------------------------
with guarded("the language model settings"):  # a failure here still leaves the answer settings below
    if ws.model_choice:
        _local_model_section()
    else:
        _fixed_model_section()

# -- answers -----------------------------------------------------------------------
st.subheader("Answers")


def _set_k() -> None:
    value = int(st.session_state.get("set_k") or base.top_k)
    ui_state.set_override("top_k", None if value == base.top_k else value)


def _set_scope() -> None:
    ui_state.set_pref("scope_default", st.session_state.get("set_scope") or "all")
    st.session_state.pop("scope_mode", None)  # the Chat page picks up the new default


with guarded("the answer settings"):
    st.slider("Passages to read for each question", min_value=1, max_value=15, value=settings.top_k, key="set_k",
              on_change=_set_k, help="More passages give the model more to work with, but answers take longer.")
    st.radio("By default, answer from", ["all", "pick"], index=0 if prefs["scope_default"] == "all" else 1,
             key="set_scope", on_change=_set_scope, horizontal=True,
             format_func={"all": "All documents", "pick": "Only the documents I pick"}.get)

if st.button("Restore defaults", icon=":material/restart_alt:", type="tertiary"):
    st.session_state.pop(ui_state.OVERRIDES, None)
    st.session_state.pop(ui_state.PREFS, None)
    for key in ("set_host", "set_model", "set_use_llm", "set_k", "set_scope", "scope_mode"):
        st.session_state.pop(key, None)
    ui_state.save_choices()  # the saved choices go back to the defaults too (local: data/preferences.json)
    st.rerun()
