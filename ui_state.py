"""Process-wide resources for the Streamlit pages: settings and the library, created once."""
from __future__ import annotations

import streamlit as st

from rag_core.config import Settings, load_settings
from rag_core.library import Library


@st.cache_resource(show_spinner="Loading the document library…")
def _library(settings: Settings) -> Library:
    return Library(settings)


def get_settings() -> Settings:
    """Settings from the environment (and st.secrets when present)."""
    try:
        secrets = dict(st.secrets) if st.secrets else None
    except Exception:  # noqa: BLE001 - no secrets.toml is the normal local case
        secrets = None
    return load_settings(secrets=secrets)


def get_library() -> Library:
    """The shared Library for this server process."""
    return _library(get_settings())
