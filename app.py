"""DocChat: the Streamlit entry point. Thin: navigation, widgets and session state; logic lives in rag_core."""
import os

# Everything runs offline: the embedding model ships as a Python package, never from the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import streamlit as st  # noqa: E402

import ui_state  # noqa: E402

ui_state.mark_app_entry()
st.set_page_config(page_title="DocChat", page_icon="💬", layout="wide")

pages = [
    st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/library.py", title="Library", icon=":material/library_books:"),
    st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
]
st.navigation(pages).run()
