"""Settings page: the language model (Ollama, or another OpenAI-compatible model server) and how answers are found,
and a retrieval test (which passages a question finds, and why, without a model). Changes last for this session."""
from __future__ import annotations

import streamlit as st

from rag_core.core.config import Provider
from rag_core.core.errors import DocChatError
from rag_core.service import render
from rag_core.service.workspace import OllamaStatus
from ui import state as ui_state
from ui.embedding_model import show_embedding_section
from ui.navigation import require_app_entry
from ui.retrieval_test import show_retrieval_test
from ui.safe import guarded, show_message
from ui.sources import show_details

require_app_entry()
st.title("Settings")
ws = ui_state.workspace()
settings = ws.settings
base = ui_state.base_settings()
prefs = ui_state.prefs()
answers = ui_state.server_answers()  # the model servers are asked once per visit of this page, and on "Check again"

st.caption(f"Changes here last {ws.settings_lifetime}.")


def _set_host() -> None:
    value = (st.session_state.get("set_host") or "").strip()
    ui_state.set_override("ollama_host", value if value and value != base.llm.ollama_host else None)


PROVIDERS = {Provider.OLLAMA: "Ollama", Provider.OPENAI: "Another model server (OpenAI-compatible)"}
SERVER_EXAMPLES = "LM Studio: http://localhost:1234/v1, llama.cpp: http://localhost:8080/v1, vLLM: http://localhost:8000/v1"


def _choose(provider: Provider, model: str) -> None:
    """Make `provider`'s `model` write the answers (no change kept when it is the default)."""
    default = (base.chat_provider, base.chat_model_name)
    if provider == Provider.OLLAMA and base.chat_provider == Provider.OLLAMA:  # kept as DOCCHAT_OLLAMA_MODEL's override
        ui_state.set_override("chat_model", None)
        ui_state.set_override("ollama_model", None if model == base.chat_model_name else model)
        return
    ui_state.set_override("ollama_model", None)
    ui_state.set_override("chat_model", None if (provider, model) == default else f"{provider}:{model}")


def _set_model() -> None:
    value = st.session_state.get("set_model")
    if value:
        _choose(Provider.OLLAMA, value)


def _set_server_model() -> None:
    value = st.session_state.get("set_server_model")
    if value:
        _choose(Provider.OPENAI, value)


def _set_provider() -> None:
    provider = Provider(st.session_state.get("set_provider") or Provider.OLLAMA)
    if provider == base.chat_provider:
        _choose(provider, base.chat_model_name)
    elif provider == Provider.OLLAMA:
        _choose(Provider.OLLAMA, settings.llm.ollama_model)
    else:
        _choose(Provider.OPENAI, "")  # the person picks one of the server's models next
    for key in ("set_model", "set_server_model"):
        st.session_state.pop(key, None)


def _base_ollama_model() -> str:
    """The Ollama model the settings name (DOCCHAT_CHAT_MODEL=ollama:…, else DOCCHAT_OLLAMA_MODEL)."""
    return base.chat_model_name if base.chat_provider == Provider.OLLAMA else base.llm.ollama_model


def _set_base_url() -> None:
    value = (st.session_state.get("set_base_url") or "").strip().rstrip("/")
    ui_state.set_override("openai_base_url", value if value and value != base.llm.openai_base_url else None)


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
    """Which model server (Ollama or an OpenAI-compatible one), then its own section."""
    st.subheader("Language model")
    st.markdown("DocChat can use an AI language model on your computer (or a server you choose) to write answers. "
                "Without it, DocChat still works: it answers by quoting the most relevant sentences from your "
                "documents.")
    _use_llm_toggle("Write answers with the language model when it is available")
    st.radio("Where the model runs", list(PROVIDERS), format_func=PROVIDERS.get, key="set_provider",
             index=list(PROVIDERS).index(settings.chat_provider), on_change=_set_provider, horizontal=True,
             help="Ollama is a free app that runs models on your computer. LM Studio, llama.cpp's server, vLLM and "
                  "hosted services speak the OpenAI way: choose “Another model server” for them.")
    if settings.chat_provider == Provider.OPENAI:
        _server_section()
    else:
        _ollama_section()


def _server_section() -> None:
    """An OpenAI-compatible server: address, reachability, and the choice among its models."""
    st.text_input("Server address", value=settings.llm.openai_base_url or "", key="set_base_url",
                  on_change=_set_base_url, placeholder="http://localhost:1234/v1",
                  help=f"The address of the server's OpenAI-compatible API, usually ending in /v1 ({SERVER_EXAMPLES}). "
                       "Empty: OpenAI's own service.")
    with st.spinner("Checking the model server…"):
        status = ws.model_status(settings, answers)
    if not status.reachable:
        show_message(status.error or "DocChat cannot reach the model server.", "warning")
        with st.container(border=True):
            st.markdown("**How to turn on written answers**")
            st.markdown("1. Start the model server (in LM Studio: start its local server).\n"
                        "2. Enter its address above; it usually ends in /v1.\n"
                        "3. Press **Check again**, then pick one of its models.")
            st.caption("Until then, DocChat answers by quoting your documents.")
        show_details(" ".join(filter(None, [status.details, f"Usual addresses: {SERVER_EXAMPLES}. A server that "
                                            "needs a key gets it from OPENAI_API_KEY, set before DocChat starts."])))
    else:
        count = len(status.models)
        st.success(f"The model server is running, with {count} model{'' if count == 1 else 's'}.",
                   icon=":material/check_circle:")
        model = settings.chat_model_name
        chosen = model if model in status.models else None
        if "set_server_model" not in st.session_state or st.session_state["set_server_model"] != chosen:
            st.session_state["set_server_model"] = chosen  # (through the state: the browser's selector follows)
        st.selectbox("Model", status.models, key="set_server_model", on_change=_set_server_model,
                     placeholder="Pick the model that writes the answers")
        if model and chosen is None:
            show_message(f"The model server has no model called “{model}”. Pick one of its models.", "info")
        elif not model:
            show_message("Pick one of the server's models to get written answers.", "info")
    _check_again_button()


def _check_again_button() -> None:
    """Ask the model servers again (their status and models are otherwise kept for this visit of the page)."""
    st.button("Check again", icon=":material/refresh:", on_click=ui_state.forget_server_answers)


def _ollama_section() -> None:
    """Ollama: address, reachability, model choice and download."""
    st.text_input("Ollama address", value=settings.llm.ollama_host, key="set_host", on_change=_set_host,
                  help="Where Ollama runs. The usual address on your own computer is http://localhost:11434.")

    with st.spinner("Checking Ollama…"):
        status = ws.model_status(settings, answers)
    if not status.reachable:
        _how_to_start(status)
        _check_again_button()
        return

    head = st.container()  # the status line and the model choice: drawn after a download, so they include it
    _check_again_button()
    with st.form("pull", border=True):
        st.markdown("**Download a model**")
        name = st.text_input("Model name", value=settings.chat_model_name, key="pull_name",
                             help="A name from ollama.com/library, for example llama3.2:3b or qwen2.5:1.5b.")
        pull = st.form_submit_button("Download", icon=":material/download:")
    current = settings
    if pull and name.strip() and _pull(name.strip()):
        current = ui_state.workspace().settings  # the downloaded model is now the chosen one
        answers.forget()  # Ollama has one more model (perhaps one that embeds, for the section below)
        status = ws.model_status(current, answers)
    with head:
        _model_choice(status, current.chat_model_name)


def _how_to_start(status: OllamaStatus) -> None:
    """Ollama is not running (or refuses): what to do, in plain steps; commands and addresses under "Details"."""
    show_message(status.error or "The language model (Ollama) is not running.", "warning")
    with st.container(border=True):
        st.markdown("**How to turn on written answers**")
        st.markdown("1. Install Ollama from ollama.com and open it.\n"
                    "2. Come back here and press **Check again**.\n"
                    f"3. Download a model with the **Download** button that then appears (for example "
                    f"{render.escape_markdown(_base_ollama_model())}).")
        st.caption("Until then, DocChat answers by quoting your documents.")
    show_details(" ".join(filter(None, [status.details, "To download a model from a terminal: "
                                        f"`ollama pull {_base_ollama_model()}`."])))


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
    _choose(Provider.OLLAMA, name)
    st.session_state.pop("set_model", None)  # the model choice below then shows the new model
    return True


# -- language model ----------------------------------------------------------------
with guarded("the language model settings"):  # a failure here still leaves the answer settings below
    if ws.model_choice:
        _local_model_section()
    else:
        _fixed_model_section()

# -- the model that finds passages (issue 46) ------------------------------------------
with guarded("the search model settings"):
    show_embedding_section(ws, answers)

# -- answers -----------------------------------------------------------------------
st.subheader("Answers")


def _set_k() -> None:
    value = int(st.session_state.get("set_k") or base.retrieval.top_k)
    ui_state.set_override("top_k", None if value == base.retrieval.top_k else value)


def _set_scope() -> None:
    ui_state.set_pref("scope_default", st.session_state.get("set_scope") or "all")
    st.session_state.pop("scope_mode", None)  # the Chat page picks up the new default


with guarded("the answer settings"):
    st.slider("Passages to read for each question", min_value=1, max_value=15, value=settings.retrieval.top_k, key="set_k",
              on_change=_set_k, help="More passages give the model more to work with, but answers take longer.")
    st.radio("By default, answer from", ["all", "pick"], index=0 if prefs["scope_default"] == "all" else 1,
             key="set_scope", on_change=_set_scope, horizontal=True,
             format_func={"all": "All documents", "pick": "Only the documents I pick"}.get)

if st.button("Restore defaults", icon=":material/restart_alt:", type="tertiary"):
    st.session_state.pop(ui_state.OVERRIDES, None)
    st.session_state.pop(ui_state.PREFS, None)
    for key in ("set_host", "set_model", "set_use_llm", "set_k", "set_scope", "scope_mode", "set_provider",
                "set_base_url", "set_server_model", "set_embedding_model"):
        st.session_state.pop(key, None)
    ui_state.save_choices()  # the saved choices go back to the defaults too (local: data/preferences.json)
    st.rerun()

# -- retrieval test ------------------------------------------------------------------
st.divider()
with guarded("the retrieval test"):
    show_retrieval_test(ws)
